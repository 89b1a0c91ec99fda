#!/usr/bin/env bash
# Measures the tray app's memory across all its processes: lull-tray and every descendant
# (the window process lull-window, and WebKit's web and network processes under it,
# bubblewrap, xdg-dbus-proxy…), summing PSS (each shared page split among the processes
# sharing it) and RSS from /proc/PID/smaps_rollup. Three moments: tray only (no window
# ever opened), status window open, and after that window was closed again. Runs under
# its own Xvfb with trayer as tray host. RUNS=n repeats the three moments n times.
# ENROL=1 first starts a coordinator (`lull coordinator serve`, loopback) and enrols the
# tray's machine to it, so the coordinator link (heartbeats, lease polling) runs as on an
# owner's desktop.
# Usage: scripts/bench-tray-memory.sh [path/to/lull-tray]   (default: release build;
# lull-window and lull must sit beside it, as `cargo build --release -p lull -p lull-tray`
# leaves them)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/lull-tray}
for b in "$bin" "$(dirname "$bin")/lull-window" "$(dirname "$bin")/lull"; do
  [ -x "$b" ] || { echo "no $b: build it with (cd ui && npm run build) && cargo build --release -p lull-tray" >&2; exit 1; }
done
runs=${RUNS:-1}
settle=${SETTLE:-10}
n=$((90 + $$ % 50)); dpy=":$n"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
Xvfb "$dpy" -screen 0 1280x960x24 -nolisten tcp -noreset >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 50); do [ -S /tmp/.X11-unix/X$n ] && break; sleep 0.1; done
# TRAYER_ARGS: the tray host's look. The XEmbed icon's size changes what GDK loads (see
# docs/BENCHMARKS.md), so both trayer's defaults and the tests' 32-px panel are measured.
# shellcheck disable=SC2086
DISPLAY=$dpy trayer ${TRAYER_ARGS:---edge top} >/dev/null 2>&1 & pids+=($!)
sleep 1
lull="$(dirname "$bin")/lull"
if [ "${ENROL:-0}" = 1 ]; then
  mkdir -p "$tmp/pool"
  LULL_DATA_DIR=$tmp/pool "$lull" coordinator serve --listen 127.0.0.1:0 >/dev/null 2>&1 & pids+=($!)
  for _ in $(seq 100); do [ -s "$tmp/pool/coordinator.url" ] && break; sleep 0.1; done
  token=$(LULL_DATA_DIR=$tmp/pool "$lull" coordinator token create)
  LULL_DATA_DIR=$tmp "$lull" enrol --url "$(cat "$tmp/pool/coordinator.url")" --token "$token" --owner bench --machine bench-tray >/dev/null
  echo "enrolled to $(cat "$tmp/pool/coordinator.url")"
fi

tree() { # the pid and all its descendants
  local all; all=$(ps -e -o pid=,ppid=)
  local want=" $1 " grew=1
  while [ $grew = 1 ]; do
    grew=0
    while read -r p pp; do
      case "$want" in *" $pp "*) case "$want" in *" $p "*) ;; *) want="$want$p "; grew=1 ;; esac ;; esac
    done <<< "$all"
  done
  echo $want
}
measure() { # label, root pid
  local pss=0 rss=0 names=""
  for p in $(tree "$2"); do
    [ -r /proc/$p/smaps_rollup ] || continue
    local kp kr
    kp=$(awk '/^Pss:/ {print $2}' /proc/$p/smaps_rollup); kr=$(awk '/^Rss:/ {print $2}' /proc/$p/smaps_rollup)
    pss=$((pss + ${kp:-0})); rss=$((rss + ${kr:-0}))
    names="$names $(cat /proc/$p/comm)=$((${kp:-0} / 1024))"
  done
  printf '%-28s PSS %6.1f MB   RSS %6.1f MB   processes (PSS MB):%s\n' "$1" "$(echo "$pss/1024" | bc -l)" "$(echo "$rss/1024" | bc -l)" "$names"
}
run_app() {
  env DISPLAY=$dpy LULL_CGROUP=lull-bench-tray-mem-$$ LULL_CONFIG=$tmp/config.toml LULL_DATA_DIR=$tmp LULL_SOCKET=$tmp/agent.sock \
    XDG_CONFIG_HOME=$tmp/xdg NO_AT_BRIDGE=1 WEBKIT_DISABLE_DMABUF_RENDERER=1 \
    DBUS_SESSION_BUS_ADDRESS=unix:path=$tmp/no-bus "$bin" "$@" >>"$tmp/out.txt" 2>&1 &
  app=$!; pids+=($app)
}

for _ in $(seq "$runs"); do
  run_app
  sleep "$settle"
  measure "tray only, no window" $app
  LULL_SOCKET=$tmp/agent.sock "$lull" status --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print("  agent in the tray: input", s["input_backends"], "· guests", s["guest_runtime"], "· coordinator", (s.get("coordinator") or {}).get("url"))' || true
  kill $app; wait $app 2>/dev/null || true

  run_app --open status
  sleep "$settle"
  measure "status window open" $app
  win=$(DISPLAY=$dpy xdotool search --onlyvisible --name '^Lull$' | tail -n1)
  DISPLAY=$dpy xdotool windowfocus --sync "$win" key Escape
  sleep "$settle"
  measure "after closing the window" $app
  kill $app; wait $app 2>/dev/null || true
done
