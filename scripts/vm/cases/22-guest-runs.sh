#!/bin/bash
# Jobs from the pool run as guests of the owner's agent (`lull up`): a job submitted with
# a secret in its environment (`--env API_TOKEN=…`, as jobs carry them) completes; its
# guest runs as the owner (the agent is the owner's), in a cgroup of its own. The token is
# kept for 90-neighbour-reads, which looks for it in every file Lull wrote. With a guest
# run, `lull up` still holds SQLite's locks on its databases (the owner's file cache is
# recorded without opening `lull up`'s own files: doing so dropped its locks, and a
# `lull coordinator` command then truncated a -shm it had mapped, SIGBUS), and lives on
# through such a command.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
require_pool
token=lull-vm-token-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
echo "API_TOKEN=$token" >"$STATE/job-token"
JOB=$(owner "lull submit --json --env API_TOKEN=$token -- sh -c 'id -u; cat /proc/self/cgroup; echo token-length \${#API_TOKEN}'" | json id)
check "the job was queued" test -n "$JOB"
st=$(wait_job "$JOB" 120)
out=$(job_output "$JOB")
sed 's/^/      | /' <<<"$out"
check "the job completed (state $st)" test "$st" = completed
check "its guest ran as the owner (uid $OWNER_UID)" grep -qx "$OWNER_UID" <<<"$out"
check "its guest had the job's environment" grep -qx "token-length ${#token}" <<<"$out"
in_own_cgroup() { grep '^0::' <<<"$out" | grep -qv 'session-[0-9]*\.scope'; }
check "its guest ran in a cgroup of its own (not lull up's session scope)" in_own_cgroup
# A POSIX lock of lull up's on FILE (/proc/locks: N: POSIX ADVISORY MODE PID MAJ:MIN:INODE …).
holds_lock() {
  local ino
  ino=$(stat -c %i "$1") || return 1
  awk -v pid="$OWNER_AGENT_PID" -v ino="$ino" '$2 == "POSIX" && $5 == pid && $6 ~ (":" ino "$") { found = 1 } END { exit !found }' /proc/locks
}
for db in coordinator.db ledger.db; do
  check "lull up (pid $OWNER_AGENT_PID) still holds SQLite's lock on $db-shm after a guest ran" holds_lock "$DATA/$db-shm"
done
owner "lull coordinator token create --uses 1 >/dev/null" >/dev/null
check "lull up lives on through a lull coordinator command" kill -0 "$OWNER_AGENT_PID"
finish
