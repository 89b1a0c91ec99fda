#!/usr/bin/env bash
# Checks Lull's Windows build, with Debian's rustc-web and rust-web-src (Rust with the
# standard library's source: -Zbuild-std builds `std` for the target), mingw-w64 (its
# dlltool for `std`, its gcc for ring's C and as the linker) and wine64 (8.0):
# 1. builds `lull.exe` (debug; which compiles lull-core, lull-protocol, agent-core and the
#    coordinator for x86_64-pc-windows-gnu: a separate type-check would only repeat it)
#    and runs it under Wine: `--help`, `status` with no agent
#    (one line, exit 1), a wrong value (one line, exit 2), then `lull.exe agent` in the
#    foreground answering `status`, `pause 1h`, `resume` and `limits` (which writes its
#    config) over its named pipe, its log free of write errors;
# 2. reads back, with dacl.exe (scripts/wine/dacl.c, GetNamedSecurityInfoW), the access
#    control lists of the directories and files the agent made private (data, logs and
#    config directories; ledger, today's record, lock, config file) and checks they name
#    the owner and SYSTEM alone (agent-core/src/sys/windows/fs.rs). Wine 8.0 keeps no
#    access control list: it maps the one set to Unix mode bits and reads back owner,
#    SYSTEM and Everyone from them, so the list's protected flag and what Windows'
#    inheritance gives files a library creates (SQLite's -wal, the daily log) go unchecked;
# 3. runs lull-core's unit tests under Wine.
# Wine 8.0 lacks two calls Lull's build makes; scripts/wine/ has stand-ins, put beside the
# .exe files for Wine only: bcryptprimitives.dll (ProcessPrng, which Rust's std imports)
# and pdh.dll (PdhEnumObjectsW, which sysinfo calls: with the stand-in the agent sees 0 %
# CPU under Wine).
# Run by scripts/test.sh (CI); LULL_PLATFORMS=0 skips it there. The target directory
# (and the Wine prefix inside it) is kept between runs on the same machine:
# ${XDG_CACHE_HOME:-$HOME/.cache}/lull/platforms-target (or $LULL_PLATFORMS_TARGET),
# apart from the host build's (another rustc, other flags). Warm (nothing changed but
# Lull's crates): under a minute on 2 cores (38 s after a change to agent-core). Cold:
# not measured as a whole; its parts were about 10 min for lull.exe and 3.5 min for the
# tests' build (std and the dependencies each time).
# Not yet here (issue 30): macOS (ring's C needs an Apple toolchain), the tray app, the
# Windows input, sensors and guest runtime (a Job Object).
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
x86_64-w64-mingw32-gcc -O2 -Wall -municode -o "$out/dacl.exe" scripts/wine/dacl.c -ladvapi32
echo "lull.exe builds for x86_64-pc-windows-gnu ($(($(date +%s) - t0)) s)"

# Wine, in a prefix of its own: its processes are ours to stop (wineserver -k).
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
export WINEPREFIX="$target/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="pdh=n,b;bcryptprimitives=n,b"
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)
# Stops the prefix's Wine and waits until its server is gone: a Wine process started while
# it is going down dies with it.
stop_wine() {
  "$wineserver" -k 2>/dev/null || true
  "$wineserver" -w 2>/dev/null || true
}
lull() { "$wine" "$out/lull.exe" "$@"; }
fail() {
  echo "check-platforms: $*" >&2
  stop_wine
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

# An agent with data of its own (directories it creates), answering over its named pipe.
data=$(mktemp -d "$target/wine-agent.XXXXXX")
dz="Z:${data//\//\\}"
export LULL_DATA_DIR="$dz\\lull" LULL_CONFIG="$dz\\config\\config.toml"
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
r=$(lull_result limits --interruptions 4)
[[ "$r" == "0|"*"at most 4 a day"* ]] || fail "lull.exe limits --interruptions 4 over the pipe (which writes the config): $r"
kill "$agent" 2>/dev/null || true
wait "$agent" 2>/dev/null || true
stop_wine
! grep -E "could not be written|Access denied" "$data"/lull/logs/*.log || fail "the agent under Wine failed to write a file (its log above)"
echo "lull.exe under Wine: --help, status and a wrong value without an agent; an agent answering status, pause, resume and limits over its named pipe, its log free of write errors ($(($(date +%s) - t0)) s)"

# Lull's files and directories grant their owner (and SYSTEM) alone: the access control
# lists read back by dacl.exe (GetNamedSecurityInfoW). Wine keeps no security descriptor:
# it turns the list Lull sets into Unix mode bits and reads back owner and SYSTEM, plus
# Everyone (WD) when others may read. So this shows that Lull set a list without Everyone
# on each file it makes private (one it left alone reads back with WD under a umask of
# 022), not the list's protected flag nor what Windows' inheritance gives the files SQLite
# and the log appender create (ledger.db-wal, the daily log): Wine does neither.
private=(lull lull\\logs lull\\ledger.db lull\\ledger.today lull\\agent.lock config config\\config.toml)
report=$("$wine" "$out/dacl.exe" "${private[@]/#/$dz\\}" 2>&1 | tr -d '\r') || fail "dacl.exe could not read the lists: $report"
stop_wine
user=$(sed -n 's/^user\t//p' <<<"$report")
[[ "$user" == S-1-5-* ]] || fail "dacl.exe named no user: $report"
while IFS=$'\t' read -r name sd; do
  [ "$name" = user ] && continue
  aces=${sd#"O:${user}D:"}
  [ "$aces" != "$sd" ] || fail "$name is not owned by $user: $sd"
  aces=${aces#"${aces%%(*}"}
  grep -qE "^(\(A;[A-Z]*;FA;;;($user|SY)\))+$" <<<"$aces" || fail "$name grants more than its owner and SYSTEM: $sd"
  grep -qF ";FA;;;$user)" <<<"$aces" || fail "$name does not grant its owner: $sd"
done <<<"$report"
rm -rf "$data"
unset LULL_DATA_DIR LULL_CONFIG
echo "Lull's files under Wine: ${#private[@]} files and directories grant their owner and SYSTEM alone"

t0=$(date +%s)
report=$(CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$wine" cargo_windows test -p lull-core --lib 2>&1) || fail "lull-core's unit tests under Wine: $report"
stop_wine
echo "lull-core's unit tests under Wine: $(grep -E '^test result' <<<"$report" | tail -1) ($(($(date +%s) - t0)) s)"
