#!/bin/bash
# The owner's desktop as an owner has it: logged in on seat0 (autologin on tty1, a logind
# session), their user manager delegating cpu, memory and pids, an X display with an auth
# cookie and a tray host (trayer), and Lull's tray app started by its XDG autostart entry.
# timeout: 180
. /run/lull-vm/src/guest/lib.sh
NO_AGENT_CHECK=1
sid=$(loginctl list-sessions --no-legend | awk -v u="$OWNER" '$3 == u { print $1; exit }')
note "session: $(loginctl show-session "$sid" -p Seat -p TTY -p Type -p Active -p Class 2>/dev/null | tr '\n' ' ')"
check "the owner has a logind session on seat0" sh -c "loginctl show-session '$sid' -p Seat --value | grep -qx seat0"
check "the session is active" sh -c "loginctl show-session '$sid' -p Active --value | grep -qx yes"
um=/sys/fs/cgroup/user.slice/user-$OWNER_UID.slice/user@$OWNER_UID.service
note "user@$OWNER_UID.service controllers: $(cat "$um/cgroup.controllers" 2>/dev/null)"
for c in cpu memory pids; do
  check "the user manager is delegated the $c controller" grep -qw "$c" "$um/cgroup.controllers"
done
terminal_is_owners() { [ "$(owner 'id -u; command -v lull' | tr '\n' ' ')" = "$OWNER_UID /usr/bin/lull " ]; }
check "the owner's terminal runs as the owner (uid $OWNER_UID) and finds the installed lull" terminal_is_owners
check "the owner's terminal runs in their login session's scope" sh -c "grep -q 'session-$sid.scope' /proc/\$(pgrep -u $OWNER -f 'terminal.py serve' | head -n1)/cgroup"
check "the owner's X display answers (DISPLAY=:0 with the session's cookie)" owner 'xdpyinfo >/dev/null'
check "the display refuses a client without the cookie" sh -c "! env DISPLAY=:0 XAUTHORITY=/nonexistent xdpyinfo >/dev/null 2>&1"
check "the tray host (trayer) runs" pgrep -u "$OWNER" -x trayer
check "lull-tray was started (by its autostart entry)" wait_for 60 pgrep -u "$OWNER" -x lull-tray
tray=$(pgrep -u "$OWNER" -x lull-tray | head -n1)
note "lull-tray pid ${tray:-none}, cgroup $(cat "/proc/$tray/cgroup" 2>/dev/null)"
check "lull-tray runs in the unit systemd made from the XDG autostart entry" grep -q 'app-lull.*autostart.service' "/proc/$tray/cgroup"
check "the tray app's agent answers lull status" wait_for 60 agent_answers
owner 'lull status' | sed 's/^/      | /'
note "the tray app's log:"
journalctl --no-pager -q _UID="$OWNER_UID" _COMM=lull-tray 2>/dev/null | tail -n 15 | sed 's/^/      | /'
if [ -n "$tray" ]; then
  check "the tray app did not fall back (no tray host or no display)" sh -c "! journalctl -q _UID=$OWNER_UID _COMM=lull-tray | grep -qiE 'headless|no tray|status window instead'"
fi
note "the owner's user units:"
owner 'systemctl --user list-units --no-pager --all "app-*" "lull-vm-*" "*.target"' | sed 's/^/      | /'
note "XDG autostart units generated:"
ls /run/user/$OWNER_UID/systemd/generator.late/ 2>&1 | sed 's/^/      | /'
finish
