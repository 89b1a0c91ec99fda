#!/usr/bin/env bash
# Guest start time, A/B side by side on the real binary: two `lull agent`s (as root, each
# in a directory and cgroup base of its own), one with the bubblewrap sandbox (default),
# one with the Landlock fallback (LULL_GUEST_SANDBOX=landlock). Each round hands
# `lull run --now -- true` to each agent in turn (order alternating) and times it from
# the client's start to its exit: connect, start the guest in its sandbox, its exit
# reported back. Prints p50/p90/p99/max per sandbox, in ms.
# Usage: scripts/bench-guest-start.sh [LULL_BINARY] [ROUNDS]
set -euo pipefail
lull=$(realpath "${1:-target/release/lull}")
rounds=${2:-100}
dir=$(mktemp -d)
chmod 711 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for b in bwrap landlock; do
    find "/sys/fs/cgroup/unified/lull-bench-start-$b-$$" -depth -type d -exec rmdir {} + 2>/dev/null || true
    for h in /sys/fs/cgroup/*/lull-bench-start-$b-$$; do find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
  done
  rm -rf "$dir"
}
trap cleanup EXIT
cfg='[sampling]
interval_ms = 100
[availability]
owner_cpu_max = 1.0
memory_growth_max = 1.0
recruitment_threshold_s = 0
'
env_for() { # NAME → the agent's environment
  echo "LULL_CONFIG=$dir/$1/config.toml LULL_DATA_DIR=$dir/$1/data LULL_SOCKET=$dir/$1/agent.sock LULL_CGROUP=lull-bench-start-$1-$$ LULL_WORK_DIR=$dir/$1/work"
}
for s in bwrap landlock; do
  mkdir -p "$dir/$s" && chmod 711 "$dir/$s" && printf '%s' "$cfg" > "$dir/$s/config.toml"
  extra=""; [ $s = landlock ] && extra="LULL_GUEST_SANDBOX=landlock"
  env $(env_for $s) $extra "$lull" agent > "$dir/$s/agent.log" 2>&1 &
  pids+=($!)
done
for s in bwrap landlock; do
  for _ in $(seq 100); do env $(env_for $s) "$lull" status > /dev/null 2>&1 && break; sleep 0.2; done
  grep -m1 -o 'sandbox: [^·]*' "$dir/$s/agent.log" | sed "s/^/$s /" || true
done
time_one() { # NAME → ms of one `lull run --now -- true`
  local t0 t1
  t0=$(date +%s%N)
  env $(env_for $1) "$lull" run --now -- true > /dev/null 2>> "$dir/$1/run.err" || { echo "lull run failed ($1): $(tail -3 "$dir/$1/run.err")" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000 ))
}
for i in $(seq "$rounds"); do
  if (( i % 2 )); then order="bwrap landlock"; else order="landlock bwrap"; fi
  for s in $order; do time_one $s >> "$dir/$s.us"; done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
pct() { # P → the P-th percentile (nearest rank) of sorted numbers on stdin, µs → ms
  awk -v p="$1" '{v[NR]=$1} END {r=int(NR*p/100); if (r<NR*p/100) r++; if (r<1) r=1; printf "%.1f", v[r]/1000}'
}
for s in bwrap landlock; do
  f="$dir/$s.us"
  echo "$s: n=$(wc -l < "$f")  p50 $(sort -n "$f" | pct 50) ms  p90 $(sort -n "$f" | pct 90) ms  p99 $(sort -n "$f" | pct 99) ms  max $(sort -n "$f" | pct 100) ms"
done
