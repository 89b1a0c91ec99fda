#!/bin/bash
# The owner's graphical session on tty1 (run from ~/.profile by the autologin shell): an
# Xvfb display with an auth cookie as a display manager would make, the user manager told
# about it, trayer as the tray host and the XDG autostart entries (Lull's tray app among
# them) started through graphical-session.target; then the owner's terminal.
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/run/user/$(id -u)}
export DISPLAY=:0 XAUTHORITY=$XDG_RUNTIME_DIR/lull-vm.xauth
log=$XDG_RUNTIME_DIR/lull-vm-session.log
{
  xauth -q -f "$XAUTHORITY" add "$DISPLAY" . "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  systemctl --user set-environment DISPLAY="$DISPLAY" XAUTHORITY="$XAUTHORITY"
  systemctl --user start lull-vm-desktop.target
  systemctl --user list-units --no-pager 'app-*' 'lull-vm-*'
} >"$log" 2>&1
exec python3 /usr/local/lib/lull-vm/terminal.py serve "$XDG_RUNTIME_DIR/lull-vm-terminal.sock" >>"$log" 2>&1
