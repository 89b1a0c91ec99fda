#!/usr/bin/env bash
# Checks Lull's Windows build, with Debian's rustc-web and rust-web-src (Rust with the
# standard library's source: -Zbuild-std builds `std` for the target), mingw-w64 (its
# dlltool for `std`, its gcc for ring's C and as the linker) and wine64 (8.0):
# 1. builds `lull.exe` (debug; which compiles lull-core, lull-protocol, agent-core and the
#    coordinator for x86_64-pc-windows-gnu: a separate type-check would only repeat it)
#    and runs it under Wine: `--help`, `status` with no agent
#    (one line, exit 1), a wrong value (one line, exit 2), then `lull.exe agent` in the
#    foreground answering `status`, `pause 1h` and `resume` over its named pipe, with
#    its input backend (GetLastInputInfo's poll, windows-last-input) named in `status
#    --json` and seeing input: with no display Wine's GetLastInputInfo says tick 0 (no
#    input since its server started) until a program calls SendInput, which moves it
#    (scripts/wine/send_input.c, one mouse move of (0, 0)); the agent's `input_timings`
#    must stay empty until then and hold the input within a few seconds after. The
#    tick's 49.7-day wrap is unit-tested on the host (input/last_input.rs): Wine's tick
#    is the host's uptime;
# 2. runs lull-core's unit tests under Wine.
# Wine 8.0 lacks two calls Lull's build makes; scripts/wine/ has stand-ins, put beside the
# .exe files for Wine only: bcryptprimitives.dll (ProcessPrng, which Rust's std imports)
# and pdh.dll (PdhEnumObjectsW, which sysinfo calls: with the stand-in the agent sees 0 %
# CPU under Wine); and send_input.exe (above) is built the same way.
# Run by scripts/test.sh (CI); LULL_PLATFORMS=0 skips it there. The target directory
# (and the Wine prefix inside it) is kept between runs on the same machine:
# ${XDG_CACHE_HOME:-$HOME/.cache}/lull/platforms-target (or $LULL_PLATFORMS_TARGET),
# apart from the host build's (another rustc, other flags). Warm (nothing changed but
# Lull's crates): under a minute on 2 cores. Cold: not measured as a whole; its parts were
# about 10 min for lull.exe and 3.5 min for the tests' build (std and the dependencies
# each time).
# Not yet here (issue 30): macOS (ring's C needs an Apple toolchain), the tray app, the
# Windows input seen event by event (raw input or hooks; GetLastInputInfo's 1-s poll is
# here), sensors and guest runtime (a Job Object).
set -euo pipefail
cd "$(dirname "$0")/.."
want=(rustc-web cargo-web rust-web-src mingw-w64 wine64)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
target="${LULL_PLATFORMS_TARGET:-${XDG_CACHE_HOME:-$HOME/.cache}/lull/platforms-target}"
mkdir -p "$target"
# Debian's cargo and rustc, not rustup's proxies (which would ask for rust-src).
cargo_windows() {
  local what=$1
  shift
  env PATH=/usr/bin:/bin RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target" \
    CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
    /usr/bin/cargo "$what" --quiet -Zbuild-std --target x86_64-pc-windows-gnu "$@"
}
t0=$(date +%s)
cargo_windows build -p lull --bin lull
out="$target/x86_64-pc-windows-gnu/debug"
mkdir -p "$out/deps"
for dll in bcryptprimitives pdh; do
  x86_64-w64-mingw32-gcc -O2 -shared -Wall -o "$out/$dll.dll" "scripts/wine/$dll.c" -ladvapi32 -Wl,--kill-at
  cp "$out/$dll.dll" "$out/deps/"
done
x86_64-w64-mingw32-gcc -O2 -Wall -o "$out/send_input.exe" scripts/wine/send_input.c -luser32
echo "lull.exe builds for x86_64-pc-windows-gnu ($(($(date +%s) - t0)) s)"

# Wine, in a prefix of its own: its processes are ours to stop (wineserver -k).
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
# Debian puts wineserver beside wine64, out of PATH (where `wineserver -k` stopped nothing).
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
export WINEPREFIX="$target/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="pdh=n,b;bcryptprimitives=n,b"
lull() { "$wine" "$out/lull.exe" "$@"; }
fail() {
  echo "check-platforms: $*" >&2
  "$wineserver" -k 2>/dev/null || true
  exit 1
}
# Runs lull.exe; "CODE|OUTPUT" (stdout and stderr).
lull_result() {
  local text code=0
  text=$(lull "$@" 2>&1) || code=$?
  printf '%s|%s' "$code" "$text"
}
t0=$(date +%s)
lull --help | grep -q "^Usage: lull.exe <COMMAND>" || fail "lull.exe --help under Wine printed no usage"
r=$(lull_result status)
[[ "$r" == "1|lull: no Lull agent is listening on "*"(start one with \`lull agent\`)" ]] || fail "lull.exe status with no agent: $r"
r=$(lull_result pause 3x)
[[ "$r" == "2|lull: invalid value '3x'"*"see \`lull pause --help\`" ]] || fail "lull.exe pause 3x: $r"

# An agent with data of its own, answering over its named pipe.
data=$(mktemp -d "$target/wine-agent.XXXXXX")
export LULL_DATA_DIR="Z:${data//\//\\}" LULL_CONFIG="Z:${data//\//\\}\\config.toml"
lull agent >"$data/agent.out" 2>&1 &
agent=$!
answered=""
for _ in $(seq 60); do
  r=$(lull_result status)
  if [[ "$r" == "0|Lull agent "* ]]; then answered=1 && break; fi
  sleep 1
done
[ -n "$answered" ] || fail "lull.exe agent under Wine never answered status: $r; its output: $(cat "$data/agent.out")"
lull pause 1h | grep -q "^State: *paused for another" || fail "lull.exe pause 1h over the pipe did not pause"
lull resume >/dev/null || fail "lull.exe resume over the pipe failed"
# The input backend: named in the status, blind until SendInput moves the last-input tick.
input_field() { lull status --json | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin).get('$1')))"; }
r=$(input_field input_backends)
[[ "$r" == '["windows-last-input (cannot see: '* ]] || fail "lull.exe status --json names no windows-last-input backend: $r"
sleep 2 # two polls with no input
r=$(input_field input_timings)
[ "$r" = null ] || fail "the agent saw input under Wine before any was sent: input_timings $r"
"$wine" "$out/send_input.exe" >"$data/send_input.out" 2>&1 || fail "send_input.exe under Wine: $(cat "$data/send_input.out")"
for _ in $(seq 10); do
  r=$(input_field input_timings)
  [ "$r" != null ] && break
  sleep 1
done
[[ "$r" == '[{"received_ns": '* ]] || fail "the agent did not see SendInput's input within 10 s: input_timings $r; $(cat "$data/send_input.out")"
kill "$agent" 2>/dev/null || true
wait "$agent" 2>/dev/null || true
"$wineserver" -k 2>/dev/null || true
rm -rf "$data"
unset LULL_DATA_DIR LULL_CONFIG
echo "lull.exe under Wine: --help, status and a wrong value without an agent; an agent answering status, pause and resume over its named pipe and seeing SendInput's input through GetLastInputInfo ($(($(date +%s) - t0)) s)"

t0=$(date +%s)
report=$(CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$wine" cargo_windows test -p lull-core --lib 2>&1) || fail "lull-core's unit tests under Wine: $report"
"$wineserver" -k 2>/dev/null || true
echo "lull-core's unit tests under Wine: $(grep -E '^test result' <<<"$report" | tail -1) ($(($(date +%s) - t0)) s)"
