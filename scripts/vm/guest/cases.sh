#!/bin/bash
# Runs the VM bench's cases in order once the owner's session is up (lull-vm-cases.service,
# as root). Each case's output goes to out/cases/NAME.log, its verdict to out/results.tsv
# (NAME, pass|fail, seconds); the journal and the kernel log follow. Then this unit ends
# and the machine powers off (SuccessAction/FailureAction).
set -uo pipefail
src=/run/lull-vm/src
out=/run/lull-vm/out
# shellcheck source=lib.sh
. "$src/guest/lib.sh"
mkdir -p "$out/cases"
: >"$out/results.tsv"
only=$(sed -n 's/.*lull.cases=\([^ ]*\).*/\1/p' /proc/cmdline)
echo "cases: waiting for the owner's session (terminal at $TERMINAL)"
if ! wait_for 240 test -S "$TERMINAL"; then
  echo "cases: the owner's session never came up" | tee "$out/session-missing"
fi
cut -d' ' -f1 /proc/uptime >"$out/session-up"
echo "cases: session up after $(cat "$out/session-up") s of uptime"
{ systemd-analyze; systemd-analyze blame | head -n 15; } >"$out/boot.txt" 2>&1
for f in "$src"/cases/*.sh; do
  name=$(basename "$f" .sh)
  if [ -n "$only" ] && ! grep -qE "^($only)$" <<<"$name"; then continue; fi
  limit=$(sed -n 's/^# timeout: *\([0-9]*\).*/\1/p' "$f" | head -n1)
  start=$(date +%s)
  echo "cases: $name (timeout ${limit:-240} s)"
  timeout --kill-after=10 "${limit:-240}" bash "$f" >"$out/cases/$name.log" 2>&1
  rc=$?
  [ "$rc" = 124 ] && echo "FAIL  the case did not finish within ${limit:-240} s" >>"$out/cases/$name.log"
  verdict=fail
  [ "$rc" = 0 ] && verdict=pass
  printf '%s\t%s\t%s\n' "$name" "$verdict" "$(($(date +%s) - start))" >>"$out/results.tsv"
  echo "cases: $name $verdict in $(($(date +%s) - start)) s"
done
journalctl -b --no-pager -o short-monotonic >"$out/journal.log" 2>&1
cp "$RUNTIME/lull-vm-session.log" "$out/" 2>/dev/null
cp "$OWNER_HOME/lull-up.log" "$out/" 2>/dev/null
dmesg >"$out/dmesg.log" 2>&1
cp -r "$DATA/logs" "$out/lull-logs" 2>/dev/null
cut -d' ' -f1 /proc/uptime >"$out/uptime"
echo "cases: all done after $(cat "$out/uptime") s of uptime"
