#!/bin/bash
# A guest forks without end (threads, then processes; the bench stops it at 4,608 tasks,
# past the default pids_max of 4,096, so that a machine with no limit stays usable). It
# must be refused by its cgroup's pids.max while the agent keeps serving and the owner can
# still start programs.
# timeout: 240
. /run/lull-vm/src/guest/lib.sh
require_pool
JOB_TIMEOUT=180
REQUIRE_DONE=0
start_hostile forkbomb 4608 15 || { finish; exit 1; }
if wait_for 90 pgrep -f '^python3 .*hostile.py forkbomb' >/dev/null; then
  bomb=$(pgrep -f '^python3 .*hostile.py forkbomb' | tail -n1)
  # Until its task count stops growing (it holds what it got for 15 s).
  last=-1 n=0
  for _ in $(seq 75); do
    [ -d "/proc/$bomb" ] || break
    n=$(ls "/proc/$bomb/task" 2>/dev/null | wc -l)
    # (Python's start-up is one task for a while: stable only counts once the bomb grew.)
    [ "$n" = "$last" ] && [ "$n" -gt 64 ] && break
    last=$n; sleep 2
  done
  cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$bomb/cgroup" 2>/dev/null)
  note "the bomb (pid $bomb) holds $n threads; its cgroup ${cg#/sys/fs/cgroup}: pids.max $(cat "$cg/pids.max" 2>/dev/null || echo none), pids.current $(cat "$cg/pids.current" 2>/dev/null || echo none), events: $(tr '\n' ' ' <"$cg/pids.events" 2>/dev/null)"
  check "the guest's cgroup has a pids.max" sh -c "[ -e $cg/pids.max ] && ! grep -qx max $cg/pids.max"
  check "the agent answers while the bomb holds its tasks" wait_for 30 agent_answers
  check "the owner can still start programs" owner 'sh -c "echo started" | grep -q started'
else
  fail "the fork bomb guest started"
fi
finish_hostile
note "guest ended: $STATE_END"
sed 's/^/      | /' <<<"$OUT" | head -n 20
judge_probes forkbomb "$OUT"
pkill -9 -f 'hostile.py forkbomb'
finish
