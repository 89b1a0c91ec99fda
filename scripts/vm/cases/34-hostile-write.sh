#!/bin/bash
# A guest writes outside its work directory: the owner's home, config and data directory,
# the other jobs' directories, the owner's runtime directory, /tmp, /var/tmp, /dev/shm, the
# neighbour's shared directory. None of its files may appear; the owner's config file stays
# as it was; and it can write in its own work directory.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
require_pool
mark=lull-vm-guest-wrote-$RANDOM$RANDOM
targets=("$OWNER_HOME" "$OWNER_HOME/.config/lull" "$CONFIG" "$OWNER_HOME/.profile" "$DATA" "$DATA/jobs" "$RUNTIME" "$RUNTIME/lull"
  /tmp /var/tmp /dev/shm "$NEIGHBOUR_HOME/shared" /var/lib/lull /var/lib/lull/execute)
# The sandbox gives a guest its own /tmp, /var/tmp and /dev/shm (in its work directory): it
# may write there; the host's must stay untouched, which the search below judges.
PRIVATE_VIEWS="/tmp /var/tmp /dev/shm"
run_hostile write "$mark" "${targets[@]}"
check "it could write in its own work directory" grep -q '^OWN-WORKDIR-WRITE ok' <<<"$OUT"
found=$(find / -xdev -name "$mark" 2>/dev/null | grep -v "^${WORKDIR:-/nonexistent}/")
found="$found $(find /tmp /dev/shm "$RUNTIME" -name "$mark" 2>/dev/null)"
check "none of its files appeared outside its work directory" test -z "${found// /}"
note "found: ${found// /}"
check "no file of the owner was appended to" sh -c "! grep -rqs '$mark' $CONFIG $OWNER_HOME/.profile"
# Leave the machine as it was for the cases after this one.
for f in $found; do rm -f "$f"; done
sed -i "/$mark/d" "$CONFIG" "$OWNER_HOME/.profile" 2>/dev/null
finish
