#!/bin/bash
# A guest connects to the agent's control socket (and asks for the status, and raises the
# owner's daily interruption limit to 15, raw and with the `lull` CLI), to the owner's
# D-Bus session bus (whose systemd user manager would start anything as the owner) and to
# the owner's X display (every keystroke). Each must fail; the limit stays as it was.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
require_pool
before=$(limit_now)
run_hostile socket "$AGENT_SOCK" "$RUNTIME/bus" /tmp/.X11-unix/X0
[ "$MODE" = root ] && { start_hostile socket "$SOCK" "$RUNTIME/bus" /tmp/.X11-unix/X0; finish_hostile; judge_probes socket "$OUT"; }
check "the owner's daily interruption limit is unchanged ($before)" test "$(limit_now)" = "$before"
check "the owner's config file was not changed to 15" sh -c "! grep -qE 'interruptions_per_day *= *15' $CONFIG 2>/dev/null"
# The owner puts it back if a guest changed it, so that the next cases start as this one.
[ "$(limit_now)" = "$before" ] || owner "lull limits --interruptions $before >/dev/null"
finish
