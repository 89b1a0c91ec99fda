#!/bin/bash
# A guest attaches to the owner's program and to the agent with ptrace, and reads their
# memory through /proc/PID/mem.
# timeout: 120
. /run/lull-vm/src/guest/lib.sh
require_pool
run_hostile ptrace "$CANARY_PID" "$AGENT_PID"
check "the owner's program still runs, untraced" sh -c "kill -0 $CANARY_PID && grep -qx 'TracerPid:[[:space:]]*0' /proc/$CANARY_PID/status"
finish
