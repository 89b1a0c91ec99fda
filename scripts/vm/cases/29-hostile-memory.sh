#!/bin/bash
# A guest allocates and touches memory without end (the bench stops it at 6 GiB in this
# 4-GiB machine). It must be stopped inside its own cgroup (memory.max: an OOM kill there,
# never the kernel's global OOM killer choosing among the owner's programs), at no more
# than the default guest cap (memory_cap_mib = 2048), and the owner's programs survive.
# timeout: 240
. /run/lull-vm/src/guest/lib.sh
require_pool
JOB_TIMEOUT=180
global_before=$(dmesg | grep -c 'Out of memory: Killed process')
start_hostile memory 6144 alloc.log 0 || { finish; exit 1; }
if wait_for 60 pgrep -f '^python3 .*hostile.py memory' >/dev/null; then
  pid=$(pgrep -f '^python3 .*hostile.py memory' | tail -n1)
  cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$pid/cgroup" 2>/dev/null)
  note "the guest (pid $pid) is in ${cg#/sys/fs/cgroup}: memory.max $(cat "$cg/memory.max" 2>/dev/null || echo none), memory.high $(cat "$cg/memory.high" 2>/dev/null || echo none), memory.swap.max $(cat "$cg/memory.swap.max" 2>/dev/null || echo none)"
  if ! check "the guest's cgroup has a memory.max" sh -c "[ -e $cg/memory.max ] && ! grep -qx max $cg/memory.max"; then
    # Nothing contains it: the case has failed, and a guest left to take the whole machine
    # (emulated: minutes) would only delay the next cases. It is stopped here.
    note "no memory.max: the guest is stopped now"
    stop_hostile
  fi
  peak=0
  while kill -0 "$pid" 2>/dev/null; do
    p=$(cat "$cg/memory.peak" 2>/dev/null || cat "$cg/memory.current" 2>/dev/null || echo 0)
    [ "$p" -gt "$peak" ] && peak=$p
    sleep 1
  done
  note "the guest's cgroup's memory peak seen: $((peak >> 20)) MiB; events: $(tr '\n' ' ' <"$cg/memory.events" 2>/dev/null)"
else
  fail "the memory guest started"
fi
finish_hostile
sed 's/^/      | /' <<<"$OUT" | head -n 20
got=0
[ -n "$WORKDIR" ] && got=$(tail -n1 "$WORKDIR/alloc.log" 2>/dev/null || echo 0)
note "the guest had allocated $got MiB when it was stopped ($STATE_END)"
check "the guest got no more than the default cap, 2048 MiB (it got $got)" test "${got:-0}" -le 2048
check "the guest did not reach its 6-GiB bound" lacks 'PROBE allocate REACHED' "$OUT"
check "the kernel's global OOM killer did not run" test "$(dmesg | grep -c 'Out of memory: Killed process')" = "$global_before"
check "the owner's program survived" kill -0 "$CANARY_PID"
check "the owner's terminal survived" kill -0 "$TERM_PID"
check "lull up survived" kill -0 "$OWNER_AGENT_PID"
finish
