#!/bin/bash
# A guest signals the owner's program (kill -0, TERM, USR1) and the agent (kill -0, CONT).
# The canary records every signal it gets: it must have got none, and still run.
# timeout: 120
. /run/lull-vm/src/guest/lib.sh
require_pool
: >"$OWNER_HOME/canary-signals.log"
# The canary (the owner's program) appends to it: the owner's file, not root's.
chown "$OWNER:$OWNER" "$OWNER_HOME/canary-signals.log"
run_hostile signal "$CANARY_PID" "$AGENT_PID"
check "the owner's program still runs" kill -0 "$CANARY_PID"
check "the owner's program got no signal" test ! -s "$OWNER_HOME/canary-signals.log"
sed 's/^/      | canary got: /' "$OWNER_HOME/canary-signals.log"
check "the agent still runs" kill -0 "$AGENT_PID"
finish
