#!/usr/bin/env bash
# Checks Lull's Windows build, with Debian's rustc-web and rust-web-src (Rust with the
# standard library's source: -Zbuild-std builds `std` for the target), mingw-w64 (its
# dlltool for `std`, its gcc for ring's C and as the linker), wine64 (8.0) and nsis:
# 1. builds `lull.exe` (debug; which compiles lull-core, lull-protocol, agent-core and the
#    coordinator for x86_64-pc-windows-gnu), lints those crates and the tray app with
#    Debian's clippy (rust-web-clippy, -D warnings), and runs lull.exe under Wine: `--help`, `status` with no agent
#    (one line, exit 1), a wrong value (one line, exit 2), then `lull.exe agent` in the
#    foreground answering `status`, `pause 1h`, `resume` and `limits` (which writes its
#    config) over its named pipe, its log free of write errors, with its input backends
#    (the low-level hooks, windows-hooks, and GetLastInputInfo's poll beside them,
#    windows-last-input) named in `status --json` and seeing input: with no display Wine
#    has no input until a program calls SendInput (scripts/wine/send_input.c, one mouse
#    move of (0, 0), which Wine passes to the hooks and which moves its last-input tick,
#    0 until then); the agent's `input_timings` must stay empty until then and hold the
#    input within a few seconds after. The tick's 49.7-day wrap is unit-tested on the
#    host (input/last_input.rs): Wine's tick is the host's uptime;
# 2. a guest job in a Job Object (scripts/wine/counter.c, a counter appended to a file
#    every 100 ms): `lull run --now` runs it, `lull status` names the runtime (and says
#    what is not contained: under Wine the restricted token and low integrity level are
#    stubs, and the AppContainer is missing: its failed call must be named), `lull
#    pause` evicts it (a pause directs Evict: TerminateJobObject; counter stopped, no
#    guest process, exit 75); then `lull run --mode pm --activity-fifo FILE`
#    (a byte appended = owner input) shows the freeze (every thread of its job suspended:
#    the counter stands still) and the thaw; then, $LULL_WINE_SENDINPUT_ROUNDS times (3),
#    send_input.exe's one event reaches the agent's input thread within
#    $LULL_WINE_INPUT_MS (250) ms of its SendInput call and freezes the guest within
#    $LULL_WINE_FREEZE_MS (1000) ms (the agent's fast path, timed by its `input_timings`
#    on the performance counter send_input.exe prints: GetLastInputInfo's 1-s poll alone
#    takes up to 1000 ms to see it, 500 on average, so 3 rounds pass by chance 1 time in
#    64; the freeze's own part, SuspendThread over the job's threads, took up to 610 ms
#    under Wine on a loaded machine) and it thaws; killing lull.exe kills the guest (kill
#    on close); that guest (`counter.exe probe`) reports what its job's limits let
#    through (its priority class, a 256 MiB commit under a 64 MiB cap, 10 children under
#    pids_max = 8); `lull status` lists no gap for the memory-pressure guard (its
#    low-memory notification, CreateMemoryResourceNotification, created and read with
#    QueryMemoryResourceNotification: Wine 8.0 answers "not low" and never signals it, so
#    the freeze it drives is not seen here; a call Wine refuses is printed as "wine: ...");
#    then, with an agent of [guests] output_mib = 1, disk_mib = 16 and [eviction]
#    kill_grace_s = 5: a guest writing 3 MiB to its stdout is stopped (`lull run` exit 126), its job failing
#    "output limit" and its stdout.log cut to 1 MiB; one writing 40 MiB to its work
#    directory is stopped, failing "disk limit" (Wine 8.0 refuses the job's I/O
#    accounting, ERROR_INVALID_FUNCTION: the work directory is walked every 2 s); a
#    checkpointable one (`counter.exe break`) evicted by `lull pause` gets CTRL_BREAK_EVENT
#    from `lull.exe __ctrl-break` within the grace, or `lull status` names the call that
#    failed (Wine 8.0: GenerateConsoleCtrlEvent, ERROR_INVALID_HANDLE on the guest's
#    headless console) and the guest is killed at once.
#    Calls Wine accepts but does not carry out are printed as "wine: ...";
# 3. reads back, with dacl.exe (scripts/wine/dacl.c, GetNamedSecurityInfoW), the access
#    control lists of the directories and files the agent made private (data, logs and
#    config directories; ledger, today's record, lock, config file) and checks they name
#    the owner and SYSTEM alone (agent-core/src/sys/windows/fs.rs). Wine 8.0 keeps no
#    access control list: it maps the one set to Unix mode bits and reads back owner,
#    SYSTEM and Everyone from them, so the list's protected flag and what Windows'
#    inheritance gives files a library creates (SQLite's -wal, the daily log) go unchecked;
# 4. runs lull-core's unit tests under Wine;
# 5. builds the Windows installer from lull.exe, lull-tray.exe and lull-window.exe (with
#    WebView2Loader.dll; 6., run first) (packaging/windows/build-installer.sh:
#    Debian's nsis, makensis 3), installs it silently (/S) under Wine, runs the installed
#    lull.exe --help and lull-window.exe --help, checks its install.log says the WebView2
#    Runtime is missing (Wine has none; the installer downloads nothing) and, installed
#    again with the runtime's per-user registry value set, that it is found; reads back its
#    Apps & features entry (HKCU ...\Uninstall\Lull),
#    checks its uninstaller refuses (exit 2, nothing removed, nothing stopped) while the
#    installed lull.exe runs, then uninstalls silently: files, Start-menu folder and entry
#    gone, a file in Lull's data directory (%APPDATA%\Lull\lull\data) kept.
# Wine 8.0 lacks two calls Lull's build makes; scripts/wine/ has stand-ins, put beside the
# .exe files for Wine only: bcryptprimitives.dll (ProcessPrng, which Rust's std imports)
# and pdh.dll (PdhEnumObjectsW, which sysinfo calls: with the stand-in the agent sees 0 %
# CPU under Wine); send_input.exe, counter.exe and dacl.exe (below) are built the same way.
# Run by scripts/test.sh (CI); LULL_PLATFORMS=0 skips it there. The target directory
# (and the Wine prefix inside it) is kept between runs on the same machine:
# ${XDG_CACHE_HOME:-$HOME/.cache}/lull/platforms-target (or $LULL_PLATFORMS_TARGET),
# apart from the host build's (another rustc, other flags). Warm (nothing changed but
# Lull's crates): under a minute on 2 cores (38 s after a change to agent-core). Cold:
# not measured as a whole; its parts were about 10 min for lull.exe and 3.5 min for the
# tests' build (std and the dependencies each time); a run with the macOS part cold (369 s)
# and lull.exe's crates rebuilt (207 s), the rest warm, took 788 s under load 5-6. The
# installer's part (5.) took 28-35 s alone when it shipped lull.exe only (makensis with
# zlib 15-19 s of it; the installer 25 MB); with the debug lull-tray.exe and
# lull-window.exe too, 50-97 s (makensis 35-67 s, load 5-6; the installer 67 MB).
# lull-window.exe adds no dependency to lull-tray.exe's build (one package): linking it
# adds about 8 s to 6. after a change to src-tauri, and its two runs under Wine 1 s.
# 0. (first) type-checks and lints (Debian's clippy, -D warnings) the crates that ship
#    on macOS (lull-core, lull-protocol, agent-core, the lull CLI and agent, and the tray
#    app: lull-tray in AppKit's loop and lull-window, Tauri on WKWebView) for
#    aarch64-apple-darwin: built, never run (no Mac here). Only Rust is compiled for it:
#    TLS and SQLite are the system's there (native-tls, libsqlite3); the Objective-C two
#    of the tray's dependencies compile in build scripts is not (scripts/typecheck-only-cc
#    stands in for Apple's clang: a type-check never links).
# 6. builds lull-tray.exe (debug: the agent in-process, its tray icon and menu in a Win32
#    message loop) and runs it under Wine on a private Xvfb: `--help`; started, its agent
#    answers `lull.exe status` over the pipe, its log says Shell_NotifyIconW took the
#    icon and the icon follows the agent's state; builds lull-window.exe (the status and
#    settings windows: Tauri, WebView2) and runs its --help; Wine 8.0 has no WebView2
#    runtime, so the windows are not shown here: lull-window.exe must refuse in one line
#    naming the Microsoft Edge WebView2 Runtime and where to get it (exit 1); a second
#    start of lull-tray.exe reaches the running one over its own owner-only pipe, which
#    starts lull-window.exe for the status window and logs its refusal (its notice, a
#    WinRT toast, fails under Wine: logged). The installer (5.) then ships both.
# Not yet here (issue 30): macOS run at all; on Windows
# lull-window.exe's windows (no WebView2 under Wine), the tray menu's clicks and
# notifications; sensors; the low-level
# hooks' blind spots (elevated windows, other sessions): Wine has neither. Under Wine 8.0
# the guests' job limits (memory, process
# count, idle priority) are accepted but not in effect, and the restricted token and low
# integrity level are stubs: the check prints each ("wine: ...") and goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
want=(rustc-web cargo-web rust-web-src rust-web-clippy mingw-w64 wine64 nsis)
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
# `cargo_for TARGET clippy …` runs Debian's clippy (rust-web-clippy, built for the same
# rustc): called by its path, as cargo would otherwise find rustup's cargo-clippy proxy
# in ~/.cargo/bin first.
cargo_for() {
  local triple=$1 what=$2
  shift 2
  local run=(/usr/bin/cargo "$what")
  [ "$what" = clippy ] && run=(/usr/bin/cargo-clippy clippy)
  env PATH=/usr/bin:/bin CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$target" \
    CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
    "${run[@]}" --quiet -Zbuild-std --target "$triple" "$@"
}
# For Windows every build is also clippy's (-D warnings): clippy-driver as the workspace's
# rustc wrapper lints Lull's crates while it compiles them, as `cargo clippy` does for a
# check, so the Windows build is not compiled a second time in check mode for clippy
# (about 5 min cold on 2 cores). CLIPPY_ARGS is how cargo-clippy hands clippy-driver
# its lint flags (separated by __CLIPPY_HACKERY__).
cargo_windows() {
  RUSTC_WORKSPACE_WRAPPER=/usr/bin/clippy-driver CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" \
    cargo_for x86_64-pc-windows-gnu "$@"
}
# The same rustc for macOS: a type-check (and clippy) only, into the same target directory;
# build scripts' Objective-C gets empty objects (scripts/typecheck-only-cc).
cargo_macos() { CC_aarch64_apple_darwin="$PWD/scripts/typecheck-only-cc" AR_aarch64_apple_darwin=ar cargo_for aarch64-apple-darwin "$@"; }
# The tray app embeds the built windows (ui/dist) on both platforms: scripts/test.sh
# builds them first; run alone, this does.
[ -f ui/dist/index.html ] || (cd ui && npm install --no-audit --no-fund --loglevel=error && npm run build) >/dev/null
t0=$(date +%s)
cargo_macos clippy -p lull-core -p lull-protocol -p agent-core -p lull -p lull-tray -- -D warnings
echo "macOS: lull-core, lull-protocol, agent-core, lull, lull-tray and lull-window type-check and pass clippy -D warnings for aarch64-apple-darwin ($(($(date +%s) - t0)) s; built, not run; build scripts' Objective-C not compiled)"

# lull.exe and the tray app (lull-tray: the agent, its tray icon and menu in the
# notification area in a Win32 message loop; lull-window: the Tauri webview windows),
# linted as they build.
t0=$(date +%s)
cargo_windows build -p lull --bin lull -p lull-tray --bin lull-tray --bin lull-window
out="$target/x86_64-pc-windows-gnu/debug"
mkdir -p "$out/deps"
for dll in bcryptprimitives pdh; do
  x86_64-w64-mingw32-gcc -O2 -shared -Wall -o "$out/$dll.dll" "scripts/wine/$dll.c" -ladvapi32 -Wl,--kill-at
  cp "$out/$dll.dll" "$out/deps/"
done
x86_64-w64-mingw32-gcc -O2 -Wall -municode -o "$out/dacl.exe" scripts/wine/dacl.c -ladvapi32
# The guest job the agent runs under Wine: a counter appended to a file every 100 ms.
x86_64-w64-mingw32-gcc -O2 -Wall -o "$out/counter.exe" scripts/wine/counter.c
# One SendInput mouse move of (0, 0): the owner's input, where Wine has no display.
x86_64-w64-mingw32-gcc -O2 -Wall -o "$out/send_input.exe" scripts/wine/send_input.c -luser32
echo "lull.exe, lull-tray.exe and lull-window.exe build for x86_64-pc-windows-gnu, their crates (lull-core, lull-protocol, agent-core, lull, lull-tray) passing clippy -D warnings as they build ($(($(date +%s) - t0)) s)"

# Wine, in a prefix of its own: its processes are ours to stop (wineserver -k).
wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
export WINEPREFIX="$target/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="pdh=n,b;bcryptprimitives=n,b"
# Debian puts wineserver outside PATH.
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
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
WINEDEBUG=-all,fixme+all "$wine" "$out/lull.exe" agent >"$data/agent.out" 2>&1 &
agent=$!
answered=""
for _ in $(seq 60); do
  r=$(lull_result status)
  if [[ "$r" == "0|Lull agent "* ]]; then answered=1 && break; fi
  sleep 1
done
[ -n "$answered" ] || fail "lull.exe agent under Wine never answered status: $r; its output: $(cat "$data/agent.out")"
echo "lull.exe under Wine: --help, status and a wrong value without an agent; an agent answering status over its named pipe ($(($(date +%s) - t0)) s)"

# A guest job in a Job Object: `lull run --now` hands it to the agent; it runs (its
# counter grows), `lull pause` evicts it (a pause directs Evict: TerminateJobObject; the
# counter stops, no guest process is left, `lull run` ends with 75), `lull resume`.
t0=$(date +%s)
win_path() { printf 'Z:%s' "${1//\//\\}"; }
guest_exe=$(win_path "$out/counter.exe")
# A counter.exe of this Wine prefix is running.
guests_alive() {
  local p
  for p in $(pgrep -x counter.exe); do
    { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "WINEPREFIX=$WINEPREFIX" && return 0
  done
  return 1
}
# The newest guest's counter file, and its line count.
counter_file() { find "$data" -name counter.txt -newer "$1" 2>/dev/null | head -1; }
count() { if [ -n "$1" ]; then wc -l <"$1"; else echo 0; fi; }
# Waits up to $2 s for the counter in file $1 to grow.
grows_within() {
  local before after
  before=$(count "$1")
  for _ in $(seq $(($2 * 5))); do
    sleep 0.2
    after=$(count "$1")
    [ "$after" -gt "$before" ] && return 0
  done
  return 1
}
# True when the counter in file $1 does not move for 2.5 s.
stands_still() {
  local before
  before=$(count "$1")
  sleep 2.5
  [ "$(count "$1")" -eq "$before" ]
}
! guests_alive || fail "a counter.exe was running before the guest test: stop it first"
mark="$data/mark.A" && touch "$mark"
"$wine" "$out/lull.exe" run --now -- "$guest_exe" >"$data/run-A.out" 2>&1 &
run=$!
counter=""
for _ in $(seq 60); do counter=$(counter_file "$mark") && [ -n "$counter" ] && break; sleep 0.5; done
[ -n "$counter" ] || fail "the guest under lull run --now never wrote its counter: $(cat "$data/run-A.out"; tail -20 "$data/agent.out")"
grows_within "$counter" 5 || fail "the guest's counter does not grow: it does not run"
status=$(lull status) || fail "lull.exe status with a guest: $status"
grep -q "^Guest runtime: *windows: Job Object per guest" <<<"$status" || fail "lull.exe status does not name the Job Object runtime: $status"
grep "^Guest runtime:" <<<"$status" | sed 's/^/  /'
lull status --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["containment"]
print("  containment:", c["summary"])
for m in c["missing"]:
    call = m.split(":")[0]
    wine = call.startswith(("CreateRestrictedToken", "SetTokenInformation", "GetTokenInformation", "SetInformationJobObject", "SetNamedSecurityInfoW", "OpenProcessToken", "the agent", "CreateAppContainerProfile", "DeriveAppContainerSidFromAppContainerName", "UpdateProcThreadAttribute", "CreateProcess", "the AppContainer", "CreateMemoryResourceNotification", "QueryMemoryResourceNotification", "QueryInformationJobObject", "GenerateConsoleCtrlEvent", "AttachConsole"))
    print(("  wine: not in effect: " if wine else "  not contained: ") + m)
'
# The AppContainer: in effect (read back), or the call that failed is named.
lull status --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["containment"]
named = [m for m in c["missing"] if "AppContainer" in m]
sys.exit(0 if "AppContainer" in c["summary"] or named else 1)
' || fail "lull.exe status neither has the guests in their AppContainer nor names the call that failed"
# The memory-pressure guard: its low-memory notification created and read, so status
# lists no gap for it; were Wine to refuse a call, the gap must name it (printed above as
# "wine: ...").
guard=$(lull status --json | python3 -c '
import json, sys
print("\n".join(m for m in json.load(sys.stdin)["containment"]["missing"] if "memory-pressure guard" in m))
')
if [ -z "$guard" ]; then
  echo "  memory-pressure guard: the low-memory notification created and read (status lists no gap for it)"
else
  grep -qE "^(CreateMemoryResourceNotification|QueryMemoryResourceNotification)" <<<"$guard" ||
    fail "lull.exe status lists no memory-pressure guard without naming the call that failed: $guard"
fi
lull pause 1h | grep -q "^State: *paused for another" || fail "lull.exe pause 1h over the pipe did not pause"
stands_still "$counter" || fail "the guest's counter still grows after lull pause"
code=0 && wait "$run" || code=$?
[ "$code" = 75 ] || fail "lull run --now ended with $code after the pause evicted its guest, not 75: $(cat "$data/run-A.out")"
! guests_alive || fail "a guest process is left after the pause evicted its job"
lull resume >/dev/null || fail "lull.exe resume over the pipe failed"
r=$(lull_result limits --interruptions 4)
[[ "$r" == "0|"*"at most 4 a day"* ]] || fail "lull.exe limits --interruptions 4 over the pipe (which writes the config): $r"
# The input backends: named in the status, blind until SendInput sends an event.
input_field() { lull status --json | python3 -c "import json, sys; print(json.dumps(json.load(sys.stdin).get('$1')))"; }
r=$(input_field input_backends)
[[ "$r" == '["windows-hooks (cannot see: '*'", "windows-last-input (cannot see: '* ]] ||
  fail "lull.exe status --json does not name the windows-hooks and windows-last-input backends: $r"
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
sent_ns=$(sed -n 's/.*sent_ns \([0-9]*\).*/\1/p' "$data/send_input.out")
seen_ms=$(python3 -c 'import json, sys; print("%.1f" % ((json.loads(sys.argv[1])[0]["received_ns"] - int(sys.argv[2])) / 1e6))' "$r" "$sent_ns")
echo "lull.exe agent under Wine: its input backends windows-hooks and windows-last-input named in status, seeing SendInput's input ($seen_ms ms from SendInput to the agent)"
kill "$agent" 2>/dev/null || true
wait "$agent" 2>/dev/null || true
stopped=""
for _ in $(seq 20); do [[ "$(lull_result status)" == 1\|* ]] && stopped=1 && break; sleep 0.5; done
[ -n "$stopped" ] || fail "lull.exe agent still answers after SIGTERM"
echo "a guest job under Wine: runs in its Job Object, status names the runtime, lull pause evicts it (TerminateJobObject: counter stopped, no process left, lull run exit 75), lull resume ($(($(date +%s) - t0)) s)"
stop_wine
! grep -E "could not be written|Access denied" "$data"/lull/logs/*.log || fail "the agent under Wine failed to write a file (its log above)"
echo "lull.exe agent under Wine: limits over its named pipe (which writes its config), its log free of write errors"

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
echo "Lull's files under Wine: ${#private[@]} files and directories grant their owner and SYSTEM alone"

# An agent enrolled with a coordinator refuses to start unless its guests' AppContainer
# read back in effect (guest/windows/appcontainer.rs): Wine 8.0's userenv.dll has no
# CreateAppContainerProfile, so the pool's guests never run here.
mkdir -p "$data/enrolled"
printf '{"url":"http://127.0.0.1:9","agent_id":"a1","secret":"s"}\n' >"$data/enrolled/coordinator.json"
r=$(LULL_DATA_DIR="$dz\\enrolled" lull_result agent)
[[ "$r" == "1|"*"cannot run the pool's guests safely here: Windows guests run "*"Remove the enrolment"* ]] ||
  fail "an enrolled lull.exe agent did not refuse the pool's guests: $r"
# Said once (the lines before it are the runtime's warnings of what Wine lacks).
[ "$(grep -c "^lull: " <<<"${r#*|}")" = 1 ] || fail "the enrolled agent's refusal is not said once: $r"
echo "an enrolled lull.exe agent refuses to start, saying why: the pool's guests could read the owner's files"

# Freezing and thawing through the policy: `lull run --mode pm` with its own agent and a
# diagnostic input file (a byte appended = one owner input event): the owner's input
# freezes the guest (every thread of its job suspended), 4 s without input thaw it
# (resumed); killing lull.exe then closes the job's handle, which kills the guest.
t0=$(date +%s)
printf '[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\nrecruitment_threshold_s = 4\n[eviction]\npause_s = 120\n[guests]\npids_max = 8\n[budget]\ninterruptions_per_day = 20\n' >"$data/config/config.toml"
input="$data/input.txt" && : >"$input"
mark="$data/mark.B" && touch "$mark"
WINEDEBUG=-all,fixme+all "$wine" "$out/lull.exe" run --mode pm --mem-cap-mib 64 --activity-fifo "$(win_path "$input")" -- "$guest_exe" probe >"$data/run-B.out" 2>&1 &
run=$!
counter=""
for _ in $(seq 60); do counter=$(counter_file "$mark") && [ -n "$counter" ] && break; sleep 0.5; done
[ -n "$counter" ] || fail "the guest under lull run --mode pm never wrote its counter: $(cat "$data/run-B.out")"
grows_within "$counter" 5 || fail "the second guest's counter does not grow"
# What its job's limits let through (the guest's probe.txt, written before its counter).
probe="$(dirname "$counter")/probe.txt"
[ -s "$probe" ] || fail "the probing guest wrote no probe.txt"
limit_line() {
  local key=$1 ok=$2 held=$3 broken=$4 value
  value=$(sed -n "s/^$key //p" "$probe" | tr -d "\r")
  if eval "$ok"; then echo "  job limit in effect: $held ($key $value)"; else echo "  wine: $broken ($key $value)"; fi
}
limit_line priority '[ "$value" = 0x40 ]' "IDLE_PRIORITY_CLASS" "IDLE_PRIORITY_CLASS / JOB_OBJECT_LIMIT_PRIORITY_CLASS not in effect"
limit_line alloc256 '[ "$value" = refused ]' "JOB_OBJECT_LIMIT_JOB_MEMORY: 256 MiB refused under --mem-cap-mib 64" \
  "JOB_OBJECT_LIMIT_JOB_MEMORY accepted but not enforced: 256 MiB committed under --mem-cap-mib 64"
limit_line children '[ "$value" -le 7 ]' "JOB_OBJECT_LIMIT_ACTIVE_PROCESS: at most 7 of 10 children beside the guest under pids_max = 8" \
  "JOB_OBJECT_LIMIT_ACTIVE_PROCESS accepted but not enforced: more than 7 of 10 children started beside the guest under pids_max = 8"
printf x >>"$input"
sleep 0.5
stands_still "$counter" || fail "the guest's counter still grows after owner input (no freeze)"
grows_within "$counter" 20 || fail "the guest's counter does not grow again after the owner left (no thaw)"
# One SendInput event freezes the guest through the hooks at once: the time from the
# SendInput call to the agent's input thread and to its fast path's freeze, on the
# performance counter (send_input.exe's sent_ns, the agent's input_timings).
input_limit_ms=${LULL_WINE_INPUT_MS:-250} freeze_limit_ms=${LULL_WINE_FREEZE_MS:-1000}
# "RECEIVED_MS FROZE_MS" after SendInput at $1 ns, from the agent's input timings; empty if none froze yet.
sendinput_freeze() {
  lull status --json | python3 -c '
import json, sys
sent = int(sys.argv[1])
for t in json.load(sys.stdin).get("input_timings") or []:
    if t["received_ns"] >= sent and t.get("froze_ns"):
        print("%.1f %.1f" % ((t["received_ns"] - sent) / 1e6, (t["froze_ns"] - sent) / 1e6))
        break
' "$1"
}
# Each round is an interruption: [budget] above allows 20 a day (the fifo's and up to 19 rounds).
received_all=() froze_all=()
for round in $(seq "${LULL_WINE_SENDINPUT_ROUNDS:-3}"); do
  "$wine" "$out/send_input.exe" >"$data/send_input.out" 2>&1 || fail "send_input.exe under Wine: $(cat "$data/send_input.out")"
  sent_ns=$(sed -n 's/.*sent_ns \([0-9]*\).*/\1/p' "$data/send_input.out")
  times=""
  for _ in $(seq 10); do
    times=$(sendinput_freeze "$sent_ns")
    [ -n "$times" ] && break
    sleep 0.5
  done
  [ -n "$times" ] || fail "SendInput round $round froze no guest: $(cat "$data/send_input.out"); $(lull status --json)"
  read -r received_ms froze_ms <<<"$times"
  echo "  SendInput round $round: $received_ms ms to the agent's input thread, $froze_ms ms to the guest frozen"
  below() { python3 -c 'import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]))' "$1" "$2"; }
  below "$received_ms" "$input_limit_ms" ||
    fail "SendInput round $round: the agent saw the input $received_ms ms after SendInput, not within $input_limit_ms ms (the 1-s poll's pace, not the hooks')"
  below "$froze_ms" "$freeze_limit_ms" || fail "SendInput round $round: the guest froze $froze_ms ms after SendInput, not within $freeze_limit_ms ms"
  received_all+=("$received_ms") froze_all+=("$froze_ms")
  # The freeze itself: froze_ns is stamped once the fast path suspended the job's
  # threads (the fifo's freeze above watches the counter stand still; here the status
  # calls under Wine can outlast the 4 s before the thaw).
  grows_within "$counter" 20 || fail "the guest's counter does not grow again after SendInput round $round (no thaw)"
done
median() { printf '%s\n' "$@" | python3 -c 'import statistics, sys; print("%.1f" % statistics.median(float(l) for l in sys.stdin))'; }
echo "a guest job under Wine: frozen ${#froze_all[@]} times by one SendInput event each, thawed after each; from SendInput, median $(median "${received_all[@]}") ms to the agent's input thread (all: ${received_all[*]}), $(median "${froze_all[@]}") ms to the guest frozen (all: ${froze_all[*]})"
kill -KILL "$run" 2>/dev/null || true
wait "$run" 2>/dev/null || true
closed="killed with the job handle of its killed lull.exe (kill on close)"
for _ in $(seq 25); do guests_alive || break; sleep 0.2; done
if guests_alive; then
  closed="NOT killed on close under Wine"
  echo "  wine: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE not honoured: the guest outlived its killed agent (wineserver -k ends it)"
fi
echo "a guest job under Wine: frozen on owner input (SuspendThread on every thread of its job: counter still >= 2.5 s), thawed after 4 s without input (ResumeThread: grows again), $closed ($(($(date +%s) - t0)) s)"
# Calls Wine accepted without doing them (its fixme lines), from the agent's output.
grep -ihE "fixme:.*(job|token|integrity|restricted|securityinfo|suspend|label)" "$data/agent.out" "$data/run-B.out" 2>/dev/null |
  sed 's/^[0-9a-f]*:fixme:/  wine: stub: /' | sort -u || true
stop_wine

# The caps and the checkpoint signal (guest/windows/mod.rs, ctrl_break.rs), with an agent
# of [guests] output_mib = 1, disk_mib = 16 and [eviction] kill_grace_s = 5: a guest
# writing 3 MiB to its stdout is stopped, its job failing "output limit" and its
# stdout.log cut to 1 MiB; one writing 40 MiB to its work directory is stopped, failing
# "disk limit" (Wine 8.0 refuses the job's I/O accounting: the 2-s walk holds the cap);
# a checkpointable one (`counter.exe break`) evicted by `lull pause` gets CTRL_BREAK_EVENT
# (it writes break.txt) within the grace, or the agent names the call that failed.
t0=$(date +%s)
printf '[eviction]\nkill_grace_s = 5\n[guests]\ndisk_mib = 16\noutput_mib = 1\n' >"$data/config/config.toml"
"$wine" "$out/lull.exe" agent >"$data/agent-caps.out" 2>&1 &
agent=$!
# lull.exe's output to files here, not pipes: a run once hung on a pipe Wine's server
# held open after lull.exe ended.
status_json() { lull status --json >"$data/status.json" 2>&1 </dev/null && cat "$data/status.json"; }
answered=""
for _ in $(seq 60); do lull status >"$data/status.out" 2>&1 </dev/null && grep -q "^Lull agent" "$data/status.out" && answered=1 && break; sleep 1; done
[ -n "$answered" ] || fail "the caps' lull.exe agent never answered status: $(cat "$data/agent-caps.out")"
lull resume >/dev/null || true
mark="$data/mark.C" && touch "$mark"
code=0 && lull run --now -- "$guest_exe" spew 3 >"$data/run-C.out" 2>&1 || code=$?
[ "$code" = 126 ] || fail "lull run of the guest stopped at its output cap ended with $code, not 126"
grep -aq "output limit: its stdout was cut at \[guests\] output_mib = 1" "$data/run-C.out" ||
  fail "a guest writing 3 MiB to its stdout under output_mib = 1 did not fail with output limit: $(grep -a "^lull:" "$data/run-C.out")"
log=$(find "$data" -name stdout.log -newer "$mark" | head -1)
[ "$(stat -c %s "$log")" = 1048576 ] || fail "the cut stdout.log holds $(stat -c %s "$log") bytes, not 1048576"
echo "  output cap: a guest writing 3 MiB to its stdout stopped, its job failed \"output limit\" (lull run exit 126), its stdout.log cut to $(stat -c %s "$log") bytes"
code=0 && lull run --now -- "$guest_exe" fill 40 >"$data/run-D.out" 2>&1 || code=$?
[ "$code" = 126 ] || fail "lull run of the guest stopped at its disk cap ended with $code, not 126"
disk=$(grep -ao "disk limit: [^:]*" "$data/run-D.out") || fail "a guest writing 40 MiB under disk_mib = 16 was not stopped for its disk: $(cat "$data/run-D.out")"
echo "  disk cap: a guest writing 40 MiB to its work directory stopped: $disk"
status_json >/dev/null
io=$(python3 -c '
import json, sys
print("\n".join(m for m in json.load(sys.stdin)["containment"]["missing"] if m.startswith("QueryInformationJobObject")))
' <"$data/status.json")
[ -z "$io" ] || echo "  wine: $io"
mark="$data/mark.D" && touch "$mark"
"$wine" "$out/lull.exe" run --now --checkpoint -- "$guest_exe" break >"$data/run-E.out" 2>&1 &
run=$!
counter=""
for _ in $(seq 60); do counter=$(counter_file "$mark") && [ -n "$counter" ] && break; sleep 0.5; done
[ -n "$counter" ] || fail "the checkpointable guest never wrote its counter: $(cat "$data/run-E.out")"
grows_within "$counter" 5 || fail "the checkpointable guest's counter does not grow"
paused=$(date +%s%N)
lull pause 1h >/dev/null || fail "lull.exe pause 1h (the checkpointable guest) failed"
code=0 && wait "$run" || code=$?
ended_ms=$((($(date +%s%N) - paused) / 1000000))
[ "$code" = 75 ] || fail "lull run --checkpoint ended with $code after the pause evicted its guest, not 75: $(cat "$data/run-E.out")"
brk="$(dirname "$counter")/break.txt"
if grep -q "^CTRL_BREAK_EVENT" "$brk" 2>/dev/null; then
  echo "  checkpoint signal: the evicted guest got CTRL_BREAK_EVENT (break.txt) and ended within the 5-s grace ($ended_ms ms after lull pause)"
else
  status_json >/dev/null
  why=$(python3 -c '
import json, sys
print("\n".join(m for m in json.load(sys.stdin)["containment"]["missing"] if "no checkpoint signal" in m))
' <"$data/status.json")
  grep -qE "^(AttachConsole|SetConsoleCtrlHandler|GenerateConsoleCtrlEvent)\(" <<<"$why" ||
    fail "the evicted checkpointable guest got no CTRL_BREAK_EVENT and status names no failed call: $why; $(tail -5 "$data/agent-caps.out")"
  echo "  wine: ${why%%: no checkpoint signal*}: no checkpoint signal (the guest killed at once, $ended_ms ms after lull pause)"
fi
! guests_alive || fail "a guest process is left after the checkpointable guest's eviction"
kill "$agent" 2>/dev/null || true
wait "$agent" 2>/dev/null || true
echo "a guest's caps and checkpoint signal under Wine: output and disk caps stop it, the checkpoint signal sent or its failed call named ($(($(date +%s) - t0)) s)"
stop_wine
rm -rf "$data"
unset LULL_DATA_DIR LULL_CONFIG

t0=$(date +%s)
report=$(CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$wine" cargo_windows test -p lull-core --lib 2>&1) || fail "lull-core's unit tests under Wine: $report"
stop_wine
echo "lull-core's unit tests under Wine: $(grep -E '^test result' <<<"$report" | tail -1) ($(($(date +%s) - t0)) s)"

# lull-tray.exe under Wine with a display (a private Xvfb): its tray icon in Wine's
# notification area, its in-process agent answering lull.exe, a second start heard on its
# pipe. Built here, after lull-core's tests, so that the installer below ships it.
t0=$(date +%s)
# tauri-build put WebView2Loader.dll (Microsoft's WebView2 loader, which lull-window.exe
# imports) in $out.
[ -f "$out/WebView2Loader.dll" ] || fail "no WebView2Loader.dll beside lull-window.exe in $out"
r=$("$wine" "$out/lull-tray.exe" --help 2>&1) || fail "lull-tray.exe --help under Wine: $r"
grep -q "^usage: lull-tray " <<<"$r" || fail "lull-tray.exe --help printed no usage: $r"
r=$("$wine" "$out/lull-window.exe" --help 2>&1) || fail "lull-window.exe --help under Wine: $r"
grep -q "^usage: lull-window " <<<"$r" || fail "lull-window.exe --help printed no usage: $r"
tray_data=$(mktemp -d "$target/wine-tray.XXXXXX")
# Wine 8.0 has no WebView2 runtime, so Lull's windows are never shown here: lull-window.exe
# must say so in one line (found before Tauri starts) and exit 1.
no_webview2="Lull's windows need the Microsoft Edge WebView2 Runtime, which is not installed: get it from https://developer.microsoft.com/microsoft-edge/webview2/"
code=0 && r=$(env LULL_DATA_DIR="$(win_path "$tray_data")\\window" "$wine" "$out/lull-window.exe" --open status 2>&1) || code=$?
[ "$code|$r" = "1|lull-window: $no_webview2" ] || fail "lull-window.exe --open status without WebView2 under Wine: exit $code: $r"
Xvfb -displayfd 1 -screen 0 1024x768x24 -nolisten tcp >"$tray_data/display" 2>/dev/null &
xvfb=$!
for _ in $(seq 50); do [ -s "$tray_data/display" ] && break; sleep 0.1; done
[ -s "$tray_data/display" ] || fail "Xvfb did not start for lull-tray.exe"
tz=$(win_path "$tray_data")
tray_env=(env DISPLAY=":$(head -1 "$tray_data/display")" LULL_DATA_DIR="$tz\\lull" LULL_CONFIG="$tz\\config\\config.toml")
stop_tray() {
  kill "$tray" 2>/dev/null || true
  wait "$tray" 2>/dev/null || true
  stop_wine
  kill "$xvfb" 2>/dev/null || true
  wait "$xvfb" 2>/dev/null || true
}
"${tray_env[@]}" "$wine" "$out/lull-tray.exe" >"$tray_data/tray.out" 2>&1 &
tray=$!
answered=""
for _ in $(seq 90); do
  "${tray_env[@]}" "$wine" "$out/lull.exe" status >"$tray_data/status.out" 2>&1 && grep -q "^Lull agent " "$tray_data/status.out" && answered=1 && break
  kill -0 "$tray" 2>/dev/null || break
  sleep 1
done
[ -n "$answered" ] || { stop_tray; fail "lull-tray.exe's agent never answered lull.exe status: $(cat "$tray_data/tray.out" "$tray_data/status.out")"; }
tray_log() { cat "$tray_data"/lull/logs/tray.*.log 2>/dev/null; }
shown=""
for _ in $(seq 20); do tray_log | grep -q "tray shows state" && tray_log | grep -q "tray icon created: Shell_NotifyIconW accepted it" && shown=1 && break; sleep 0.5; done
[ -n "$shown" ] || { stop_tray; fail "lull-tray.exe's log does not say Shell_NotifyIconW took its icon and the icon shows the agent's state: $(tray_log | tail -20)"; }
# A second start asks the running one (over its pipe) to show the status window: the
# running one starts lull-window.exe, which (no WebView2 under Wine) tells it why it
# cannot, and the tray logs that (and tries a notice).
code=0 && r=$("${tray_env[@]}" "$wine" "$out/lull-tray.exe" 2>&1) || code=$?
[ "$code|$r" = "0|lull-tray: Lull is already running: showing its status window" ] ||
  { stop_tray; fail "a second lull-tray.exe did not reach the running one over its pipe: exit $code: $r"; }
tray_log | grep -q "asked by another start of Lull to show the status window" ||
  { stop_tray; fail "the running lull-tray.exe did not hear the second start: $(tray_log | tail -20)"; }
refused=""
for _ in $(seq 40); do tray_log | grep -qF "the window process cannot open a window: $no_webview2" && tray_log | grep -q "window process ended (exit code: 1)" && refused=1 && break; sleep 0.5; done
[ -n "$refused" ] || { stop_tray; fail "the running lull-tray.exe's log does not say lull-window.exe failed for want of WebView2: $(tray_log | tail -20)"; }
kill -0 "$tray" 2>/dev/null || { stop_tray; fail "lull-tray.exe ended after its window failed to open: $(cat "$tray_data/tray.out")"; }
stop_tray
rm -rf "$tray_data"
echo "lull-tray.exe and lull-window.exe under Wine on Xvfb: --help of both, lull-window.exe refusing in one line (Wine has no WebView2 runtime: the windows themselves are not shown here), lull-tray.exe's agent answering lull.exe status, its icon taken by Shell_NotifyIconW and following the agent's state, a second start heard over its pipe, the tray starting lull-window.exe and logging its refusal ($(($(date +%s) - t0)) s)"

# The Windows installer (packaging/windows/lull.nsi, makensis): built from this lull.exe,
# installed silently for the current user, its lull.exe run from the install directory,
# its Apps & features entry read back; then uninstalled silently: the files, Start-menu
# folder and entry gone, a file in Lull's data directory (%APPDATA%\Lull\lull\data, where
# the agent keeps its ledger) still there.
t0=$(date +%s)
# What ships: lull.exe, lull-tray.exe, lull-window.exe and the WebView2 loader it imports.
stage="$target/installer-stage" && rm -rf "$stage" && mkdir -p "$stage" &&
  cp "$out/lull.exe" "$out/lull-tray.exe" "$out/lull-window.exe" "$out/WebView2Loader.dll" "$stage/"
setup=$(packaging/windows/build-installer.sh "$stage" "$target/installer/" 2>"$target/installer.log" | tail -1) ||
  fail "build-installer.sh: $(cat "$target/installer.log")"
built="$(tail -1 "$target/installer.log" | sed 's/^build-installer: //')"
uninst_key='HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Lull'
# A Windows path as Wine's shell expands it ("%APPDATA%"), and its Unix path.
win_expand() { "$wine" cmd /c echo "$1" | tr -d '\r'; }
unix_path() { "$wine" winepath -u "$1" | tr -d '\r'; }
inst_win="$(win_expand '%LOCALAPPDATA%')\\Programs\\Lull"
inst=$(unix_path "$inst_win")
lull_data=$(unix_path "$(win_expand '%APPDATA%')\\Lull\\lull\\data")
"$wine" "$setup" /S || fail "the installer under Wine (/S) failed"
stop_wine
[ -f "$inst/lull.exe" ] && [ -f "$inst/uninstall.exe" ] || fail "the installer put no lull.exe and uninstall.exe in $inst_win: $(ls "$inst" 2>&1)"
[ -n "$(find "$(unix_path "$(win_expand '%APPDATA%')\\Microsoft\\Windows\\Start Menu\\Programs\\Lull")" -name '*.lnk' 2>/dev/null)" ] ||
  fail "the installer made no Start-menu shortcut"
[ "$(LC_ALL=C ls "$inst" | tr '\n' ' ')" = "WebView2Loader.dll install.log lull-tray.exe lull-window.exe lull.exe uninstall.exe " ] ||
  fail "the installer put other than WebView2Loader.dll, install.log, lull-tray.exe, lull-window.exe, lull.exe and uninstall.exe in $inst_win: $(ls "$inst")"
# Wine has no WebView2 runtime: the installer found none, said so and downloaded nothing.
[ "$(tr -d '\r' <"$inst/install.log")" = "Lull's windows (status, settings) need the Microsoft Edge WebView2 Runtime, which is not installed: get it from https://developer.microsoft.com/microsoft-edge/webview2/ (the tray icon and the agent run without it)." ] ||
  fail "the installer's install.log does not say the WebView2 Runtime is missing: $(cat "$inst/install.log")"
# With the runtime's registry value (as its installer writes it for one user), installing
# again over this install finds it.
webview2_key='HKCU\Software\Microsoft\EdgeUpdate\Clients\{F3017226-FE2A-4295-8BDF-00C3A9A7E4C5}'
"$wine" reg add "$webview2_key" /v pv /d 131.0.2903.70 /f >/dev/null 2>&1 || fail "reg add $webview2_key under Wine"
"$wine" "$setup" /S || fail "the installer under Wine (/S), again, failed"
"$wine" reg delete "$webview2_key" /f >/dev/null 2>&1 || fail "reg delete $webview2_key under Wine"
[ "$(tr -d '\r' <"$inst/install.log")" = "Microsoft Edge WebView2 Runtime 131.0.2903.70 found: Lull's windows can open." ] ||
  fail "the installer did not find the WebView2 Runtime's registry value: $(cat "$inst/install.log")"
# The installed lull.exe runs with Wine's stand-in DLLs (above) beside it, as in $out
# (on Wine's PATH, pdh.dll would lose to Wine's own); removed before the uninstall.
standins=("$inst/bcryptprimitives.dll" "$inst/pdh.dll")
cp "$out/bcryptprimitives.dll" "$out/pdh.dll" "$inst/"
r=$("$wine" "$inst/lull.exe" --help 2>&1) || fail "the installed lull.exe --help under Wine: $r"
grep -q "^Usage: lull.exe <COMMAND>" <<<"$r" || fail "the installed lull.exe --help printed no usage: $r"
# It loads (its WebView2Loader.dll is beside it) and runs.
r=$("$wine" "$inst/lull-window.exe" --help 2>&1) || fail "the installed lull-window.exe --help under Wine: $r"
grep -q "^usage: lull-window " <<<"$r" || fail "the installed lull-window.exe --help printed no usage: $r"
key=$("$wine" reg query "$uninst_key" 2>&1 | tr -d '\r') || fail "no $uninst_key after the install: $key"
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["package"]["version"])')
for want in "DisplayName    REG_SZ    Lull" "DisplayVersion    REG_SZ    $version" "InstallLocation    REG_SZ    $inst_win" \
  "UninstallString    REG_SZ    \"$inst_win\\uninstall.exe\"" "QuietUninstallString    REG_SZ    \"$inst_win\\uninstall.exe\" /S" \
  "NoModify    REG_DWORD    0x1" "NoRepair    REG_DWORD    0x1" "Publisher    REG_SZ    " "EstimatedSize    REG_DWORD    0x"; do
  grep -qF "$want" <<<"$key" || fail "$uninst_key lacks \"$want\": $key"
done
stop_wine
# While the installed lull.exe runs (an agent), the uninstaller removes nothing and stops
# nothing: it fails (exit 2). Run in place (_?=) so that its exit code is its own.
agent_data=$(mktemp -d "$target/wine-installed.XXXXXX")
installed=(env LULL_DATA_DIR="$(win_path "$agent_data")" LULL_CONFIG="$(win_path "$agent_data")\\config.toml" "$wine" "$inst/lull.exe")
"${installed[@]}" agent >"$agent_data/agent.out" 2>&1 &
agent=$!
started=""
# Into a file: a wineserver this call starts would hold a $(...)'s pipe open.
for _ in $(seq 60); do
  "${installed[@]}" status >"$agent_data/status.out" 2>&1 && grep -q "^Lull agent " "$agent_data/status.out" && started=1 && break
  kill -0 "$agent" 2>/dev/null || break
  sleep 1
done
[ -n "$started" ] || fail "the installed lull.exe agent did not answer: $(cat "$agent_data/agent.out")"
code=0 && "$wine" "$inst/uninstall.exe" /S "_?=$inst_win" || code=$?
[ "$code" = 2 ] || fail "the uninstaller ended with $code while the installed lull.exe ran, not 2 (in use: nothing removed)"
[ -f "$inst/lull.exe" ] && "$wine" reg query "$uninst_key" >/dev/null 2>&1 ||
  fail "the uninstaller removed lull.exe or its entry while lull.exe ran"
kill -0 "$agent" 2>/dev/null || fail "the uninstaller stopped the running lull.exe"
kill "$agent" 2>/dev/null || true
wait "$agent" 2>/dev/null || true
stop_wine
rm -rf "$agent_data" "${standins[@]}"
lull_home=$(dirname "$(dirname "$lull_data")")
made_home="" && [ -d "$lull_home" ] || made_home=1
mkdir -p "$lull_data"
kept=$(mktemp "$lull_data/uninstall-keeps-me.XXXXXX")
# The uninstaller copies itself out of the install directory and runs from there: wait
# for Wine's processes to end.
"$wine" "$inst/uninstall.exe" /S || fail "the uninstaller under Wine (/S) failed"
"$wineserver" -w
[ ! -e "$inst" ] || fail "the uninstaller left $inst_win: $(ls -A "$inst")"
! "$wine" reg query "$uninst_key" >/dev/null 2>&1 || fail "the uninstaller left $uninst_key"
[ -f "$kept" ] || fail "the uninstaller removed a file in Lull's data directory ($kept)"
rm -f "$kept"
[ -z "$made_home" ] || rmdir "$lull_data" "$(dirname "$lull_data")" "$lull_home"
stop_wine
echo "the Windows installer ($built) under Wine: installs silently in %LOCALAPPDATA%\\Programs\\Lull (lull.exe and lull-window.exe --help run from there, install.log says the WebView2 Runtime is missing, and found once its registry value is set, Apps & features entry and Start-menu shortcut made), refuses to uninstall while lull.exe runs (exit 2, nothing removed or stopped), uninstalls silently (files, shortcut and entry gone, Lull's data kept) ($(($(date +%s) - t0)) s)"
