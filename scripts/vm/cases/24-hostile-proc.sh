#!/bin/bash
# A guest reads the command line and environment of the owner's program (the canary: a
# secret in both), of the agent, and of the owner's terminal, by pid and by scanning /proc.
# timeout: 120
. /run/lull-vm/src/guest/lib.sh
require_pool
# The agent running the guest, and lull up (the same in owner mode).
run_hostile proc "$(rev <<<"$CANARY_SECRET")" $(printf '%s\n' "$CANARY_PID" "$AGENT_PID" "$OWNER_AGENT_PID" "$TERM_PID" | sort -u)
finish
