#!/bin/bash
# Containment out of the box, tray app: the tray app started by its autostart entry, with
# no configuration edited, gives its guests a delegated cgroup v2 subtree, and its status
# names what is missing.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
check "no configuration file was written by hand" test ! -e "$CONFIG.bench-edited"
pgrep -u "$OWNER" -x lull-tray >/dev/null || { fail "lull-tray is not running (see 01-session)"; finish; exit 1; }
check_containment "tray app (autostart)"
finish
