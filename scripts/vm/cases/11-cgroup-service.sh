#!/bin/bash
# Containment out of the box, systemd user service: the tray app quits, the owner enables
# the package's lull-agent.service (`systemctl --user start`), and its guests get a
# delegated cgroup v2 subtree too; then the service stops, leaving no agent running.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
unit=$(owner "systemctl --user list-units --no-legend --plain 'app-lull*autostart.service'" | awk '{ print $1; exit }')
note "the tray's unit: ${unit:-none}"
[ -n "$unit" ] && owner "systemctl --user stop '$unit'"
check "the tray app stopped" wait_for 30 sh -c "! pgrep -u $OWNER -x lull-tray >/dev/null"
check "lull-agent.service starts" owner 'systemctl --user start lull-agent.service'
check "the service's agent answers" wait_for 60 agent_answers
note "service cgroup: $(cat /proc/"$(pgrep -u "$OWNER" -f '^/usr/bin/lull agent' | head -n1)"/cgroup 2>/dev/null)"
check_containment "lull-agent.service"
owner 'systemctl --user stop lull-agent.service'
check "the service stopped" wait_for 30 sh -c "! pgrep -u $OWNER -f '^/usr/bin/lull agent' >/dev/null"
NO_AGENT_CHECK=1
finish
