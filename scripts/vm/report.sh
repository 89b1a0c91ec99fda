#!/usr/bin/env bash
# Prints the VM bench's per-case table from a results directory and judges it against
# scripts/vm/known-failures. Each case gets one line: PASS (how many checks), FAIL (its
# first failed check), XFAIL (a listed case that failed: the branch that fixes it and
# why), or XPASS (a listed case that passed: strike its line off). Exits non-zero on a
# FAIL, a case that never reported, a VM that did not power off by itself, and — with
# LULL_VM_STRICT=1 — on an XPASS; an XPASS alone is reported, not fatal, so that the
# branch fixing a case is not held up by this list (the next run says to strike it off).
# Usage: scripts/vm/report.sh OUT_DIR KNOWN_FAILURES [QEMU_EXIT_STATUS]
set -uo pipefail
out=$1 known=$2 qemu_rc=${3:-0}
here=$(cd "$(dirname "$0")" && pwd)
# known CASE: "BRANCH<TAB>REASON" from the known-failures line for CASE (empty if none).
known() { sed -e 's/#.*//' "$known" | awk -v n="$1" '$1 == n { b = $2; $1 = ""; $2 = ""; sub(/^ +/, ""); print b "\t" $0; exit }'; }
first_fail() { grep -m1 '^FAIL' "$out/cases/$1.log" 2>/dev/null | sed 's/^FAIL *//' | cut -c1-110; }
bad=0 n_pass=0 n_fail=0 n_xfail=0 n_xpass=0
printf '%-22s %-6s %5s  %s\n' case result time reason
while IFS=$'\t' read -r name verdict secs; do
  entry=$(known "$name")
  branch=${entry%%$'\t'*} why=${entry#*$'\t'}
  case "$verdict/${entry:+known}" in
    pass/)
      r=PASS n_pass=$((n_pass + 1))
      note="$(grep -c '^ok' "$out/cases/$name.log" 2>/dev/null) checks passed" ;;
    pass/known)
      r=XPASS n_xpass=$((n_xpass + 1))
      note="unexpected pass: strike it off scripts/vm/known-failures (was: $branch)"
      [ "${LULL_VM_STRICT:-0}" = 1 ] && bad=1 ;;
    fail/known)
      r=XFAIL n_xfail=$((n_xfail + 1))
      note="expected until $branch lands: $why" ;;
    *)
      r=FAIL n_fail=$((n_fail + 1)) bad=1
      note="$(first_fail "$name") (see $out/cases/$name.log)" ;;
  esac
  printf '%-22s %-6s %4ss  %s\n' "$name" "$r" "$secs" "$note"
  if [ "$r" = FAIL ] || { [ "$r" = XFAIL ] && [ "${LULL_VM_VERBOSE:-0}" = 1 ]; }; then
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
  # What the case that never reported last wrote, and the guest's console: the only
  # evidence left where this ran on a machine that is gone afterwards.
  last=$(ls -t "$out"/cases/*.log 2>/dev/null | head -n1)
  if [ -n "$last" ] && ! grep -qx "$(basename "$last" .log)" <<<"$ran"; then
    echo "vm: $(basename "$last" .log) had not ended; its log ended with:"
    tail -n 15 "$last" | sed 's/^/    /'
  fi
  echo "vm: the guest's console ended with:"
  tail -n 20 "$out/console.log" 2>/dev/null | sed 's/^/    /'
  bad=1
else
  for f in "$here"/cases/*.sh; do
    n=$(basename "$f" .sh)
    grep -qx "$n" <<<"$ran" || [ -n "${LULL_VM_CASES_FILTERED:-}" ] || { echo "vm: FAIL: case $n did not report"; bad=1; }
  done
fi
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  echo "vm: FAIL: the VM did not power itself off within LULL_VM_TIMEOUT=${LULL_VM_TIMEOUT:-?} s and was killed (the cases above are all that reported)"
  bad=1
fi
echo "vm: guest: set-up (dpkg -i) $(sed -n 's/.*dpkg -i took \([0-9]*\) s.*/\1/p' "$out/setup.log" 2>/dev/null) s, owner's session up at $(cat "$out/session-up" 2>/dev/null || echo '?') s of uptime"
echo "vm: $n_pass passed, $n_fail failed, $n_xfail expected failures (XFAIL), $n_xpass unexpected passes (XPASS); guest uptime $(cat "$out/uptime" 2>/dev/null || echo '?') s"
exit $bad
