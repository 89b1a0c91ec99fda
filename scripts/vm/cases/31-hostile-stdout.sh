#!/bin/bash
# A guest writes 256 MiB to its standard output (four times the cap; 1 GiB took over 4
# minutes under emulation). What is kept of it must be capped (the owner's disk holds at
# most 64 MiB of it), and the agent keeps serving.
# timeout: 300
. /run/lull-vm/src/guest/lib.sh
require_pool
JOB_TIMEOUT=240
start_hostile stdout 256 || { finish; exit 1; }
finish_hostile
WORKDIR=$(job_workdir "$OUT")
note "guest ended: $STATE_END"
sed 's/^/      | /' <<<"$OUT" | grep -v '^      | xxxx' | head -n 20
# Whether the guest's writes failed past the cap or went on into nothing, or the agent
# stopped it, is the agent's choice; what must not happen is all of it on the owner's disk.
check "the hostile stdout guest ran" grep -q "^HOSTILE START stdout" <<<"$OUT"
# The job's directory: its work directory and, beside it, stdout.log and stderr.log.
if check "the job's work directory is kept, found from the host (${WORKDIR:-not found})" test -d "$WORKDIR"; then
  jobdir=$(dirname "$WORKDIR")
  used=$(du -sm "$jobdir" | cut -f1)
  ls -la "$jobdir" | sed 's/^/      | /'
  check "the job's directory holds at most 64 MiB of its output ($used MiB)" test "$used" -le 64
  find "$jobdir" -name 'stdout*' -size +64M -delete
fi
finish
