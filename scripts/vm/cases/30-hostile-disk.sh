#!/bin/bash
# A guest fills its work directory as fast as it can (128-MiB files, preallocated while
# allowed, else written) towards 6 GiB, past `[guests] disk_mib` (default 4096). Its
# writes must stop at the limit: after the job, its directory holds no more than
# disk_mib (+64 MiB) and no less than disk_mib - 256 MiB (it did fill up to it, not
# stop early), and the disk has room.
# timeout: 300
. /run/lull-vm/src/guest/lib.sh
require_pool
limit=$(sed -n 's/^ *disk_mib *= *\([0-9]*\).*/\1/p' "$CONFIG" 2>/dev/null | tail -n1)
limit=${limit:-4096}
JOB_TIMEOUT=240
REQUIRE_DONE=0
run_hostile disk 6144
used=0
# The job's directory: its work directory and, beside it, its capped output.
if check "the job's work directory is kept, found from the host (${WORKDIR:-not found})" test -d "$WORKDIR"; then
  used=$(du -sm "$(dirname "$WORKDIR")" | cut -f1)
  check "the job's directory holds at most disk_mib + 64 MiB ($used of $limit MiB)" test "$used" -le $((limit + 64))
  check "the guest filled it up to its limit, not stopped early ($used of $limit MiB)" test "$used" -ge $((limit - 256))
  rm -f "$WORKDIR"/fill-*
fi
note "disk: $(df -m --output=used,avail / | tail -n1 | awk '{ print $1 " MiB used, " $2 " MiB free" }')"
check "the guest was stopped before its 6-GiB bound" lacks 'PROBE fill REACHED' "$OUT"
finish
