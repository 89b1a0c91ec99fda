#!/bin/bash
# A guest reads every file of the owner's home (their data, Lull's databases, config and
# keys), of the second user's home (a private file and one shared with local users), of
# the owner's runtime directory, of root's agent (/var/lib/lull, /root), PostgreSQL's data
# and /etc/shadow. It must read none (its own work directory aside).
# timeout: 240
. /run/lull-vm/src/guest/lib.sh
require_pool
roots=("$OWNER_HOME" "$NEIGHBOUR_HOME" "$RUNTIME" /var/lib/lull /root /var/lib/postgresql /etc/shadow)
check "there are files to try: the owner's secret, the neighbour's shared notes, Lull's ledger" \
  test -f "$OWNER_HOME/secret.txt" -a -f "$NEIGHBOUR_HOME/shared/notes.txt" -a -f "$DATA/ledger.db"
run_hostile read "${roots[@]}"
finish
