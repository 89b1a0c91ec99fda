#!/bin/bash
# The owner's memory: an owner program reads its 256-MiB working set (a mapped file) once
# a second. Its major page faults are counted for 40 s without a guest, then for 40 s
# while a memory-hungry guest allocates 3 GiB and keeps touching it (all this 4-GiB
# machine can give). The owner's program must survive, and with the guest it may fault at
# most 5 % of its working set's pages more than without. The figures are printed (TCG:
# no latency is taken from them).
# timeout: 420
. /run/lull-vm/src/guest/lib.sh
require_pool
owner "nohup python3 $LIB/canary.py workset ~/workset.bin 256 ~/workset-rounds.log >/dev/null 2>&1 &"
ws=$(pgrep -u "$OWNER" -f 'canary.py workset' | head -n1)
faults() { tail -n1 "$OWNER_HOME/workset-rounds.log" | awk '{ print $2 }'; }
rounds() { [ "$(cat "$OWNER_HOME/workset-rounds.log" 2>/dev/null | wc -l)" -ge 3 ]; }
if ! check "the owner's program made and read its working set (3 rounds)" wait_for 180 rounds; then
  pkill -u "$OWNER" -f 'canary.py workset'
  finish
  exit 1
fi
a=$(faults); sleep 40; b=$(faults)
without=$((b - a))
JOB_TIMEOUT=200
start_hostile memory 3072 alloc.log 40 || { finish; exit 1; }
wait_for 60 pgrep -f '^python3 .*hostile.py memory' >/dev/null
c=$(faults); sleep 40; d=$(faults)
with=$((d - c))
finish_hostile
pages=$((256 * 256))
echo "FIGURE owner-major-faults without-guest=$without with-guest=$with (over 40 s each; working set $pages pages)"
note "the owner's protection as status shows it:"
owner 'lull status' | grep -iE 'memory|protect' | sed 's/^/      | /'
check "the owner's program survived" kill -0 "$ws"
check "with the guest, the owner's major faults rose by at most 5 % of its pages ($without → $with)" test "$with" -le $((without + pages / 20))
pkill -u "$OWNER" -f 'canary.py workset'
rm -f "$OWNER_HOME/workset.bin"
finish
