#!/bin/bash
# A guest double-forks, calls setsid and ignores SIGTERM and SIGHUP, then its job ends: the
# daemon must not outlive the job (found by its command line, and its heartbeat stops).
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
require_pool
mark=lull-vm-daemon-$RANDOM$RANDOM
run_hostile daemon "$mark" 90
check "the daemon was started" grep -q "^DAEMON started" <<<"$OUT"
sleep 5
left=$(pids_of "$mark")
check "no process of the job outlives it" test -z "$left"
[ -n "$left" ] && ps -o pid,ppid,sid,user,cgroup:60,args -p "$(tr '\n' ',' <<<"$left" | sed 's/,$//')" | sed 's/^/      | /'
check "the job's work directory is found from the host (${WORKDIR:-not found})" test -d "$WORKDIR"
if [ -f "$WORKDIR/heartbeat" ]; then
  a=$(wc -l <"$WORKDIR/heartbeat"); sleep 3; b=$(wc -l <"$WORKDIR/heartbeat")
  check "the daemon's heartbeat has stopped ($a then $b lines)" test "$a" = "$b"
else
  note "no heartbeat file: the daemon was stopped before its first beat"
fi
[ -n "$left" ] && kill -9 $left
finish
