#!/usr/bin/env bash
# Prints the VM bench's per-case table from a results directory and judges it against
# the known failures: a failing case listed there (with its reason) is an expected
# failure; any other failure, a listed case that passes (strike it off the list), a case
# that never reported, or a VM that did not power off by itself fails the bench.
# Usage: scripts/vm/report.sh OUT_DIR KNOWN_FAILURES [QEMU_EXIT_STATUS]
set -uo pipefail
out=$1 known=$2 qemu_rc=${3:-0}
here=$(cd "$(dirname "$0")" && pwd)
reason() { sed -e 's/#.*//' "$known" | awk -v n="$1" '$1 == n { $1 = ""; sub(/^ +/, ""); print; exit }'; }
bad=0
n_pass=0 n_fail=0 n_xfail=0 n_xpass=0
printf '%-28s %-7s %5s  %s\n' case result time note
while IFS=$'\t' read -r name verdict secs; do
  why=$(reason "$name")
  case "$verdict/${why:+known}" in
    pass/) r=pass note="" n_pass=$((n_pass + 1)) ;;
    pass/known) r=XPASS note="passes now: remove it from scripts/vm/known-failures" n_xpass=$((n_xpass + 1)) bad=1 ;;
    fail/known) r=xfail note="known: $why" n_xfail=$((n_xfail + 1)) ;;
    *) r=FAIL note="see $out/cases/$name.log" n_fail=$((n_fail + 1)) bad=1 ;;
  esac
  printf '%-28s %-7s %4ss  %s\n' "$name" "$r" "$secs" "$note"
  if [ "$r" = FAIL ] || [ "$r" = xfail ]; then
    grep '^FAIL' "$out/cases/$name.log" 2>/dev/null | head -n 6 | sed 's/^/        /'
  fi
done <"$out/results.tsv"
ran=$(cut -f1 "$out/results.tsv" 2>/dev/null)
if [ -z "$ran" ]; then
  echo "vm: FAIL: no case reported (see $out/console.log and $out/setup.log)"
  tail -n 30 "$out/console.log" 2>/dev/null | sed 's/^/    /'
  bad=1
elif [ ! -f "$out/uptime" ]; then
  echo "vm: FAIL: the guest stopped before the last case ended (see $out/console.log)"
  bad=1
else
  for f in "$here"/cases/*.sh; do
    n=$(basename "$f" .sh)
    grep -qx "$n" <<<"$ran" || [ -n "${LULL_VM_CASES_FILTERED:-}" ] || { echo "vm: FAIL: case $n did not report"; bad=1; }
  done
fi
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  echo "vm: FAIL: the VM did not power itself off in time (killed)"
  bad=1
fi
echo "vm: $n_pass passed, $n_fail failed, $n_xfail expected failures, $n_xpass unexpectedly passing; guest uptime $(cat "$out/uptime" 2>/dev/null || echo '?') s"
exit $bad
