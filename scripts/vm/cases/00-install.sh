#!/bin/bash
# The freshly built .deb installed by dpkg as on an owner's machine (set-up), its install
# step run: files in place, the guests' account made; and the machine is what owners run:
# pure cgroup v2 under systemd.
# timeout: 30
. /run/lull-vm/src/guest/lib.sh
NO_AGENT_CHECK=1
sed 's/^/      | /' /run/lull-vm/out/install.log | tail -n 20
check "dpkg -i of the freshly built .deb succeeded" test "$(cat /run/lull-vm/out/install.rc)" = 0
check "the package lull is installed" dpkg -s lull >/dev/null
for f in /usr/bin/lull /usr/bin/lull-tray /usr/bin/lull-window /usr/lib/systemd/user/lull-agent.service \
  /usr/share/lull-tray/lull-tray-autostart.desktop; do
  check "installs $f" test -e "$f"
done
want=$(dpkg-deb -f /run/lull-vm/src/lull.deb Version) got=$(dpkg-query -W -f='${Version}' lull 2>/dev/null)
check "the installed version is the shared .deb's ($got = $want)" test "$got" = "$want"
check "the installed files are the package's, unchanged (dpkg --verify lull)" sh -c '[ -z "$(dpkg --verify lull 2>&1)" ]'
check "its install step made the guests' account lull-guest (not root)" sh -c 'u=$(id -u lull-guest) && [ "$u" != 0 ]'
check "PID 1 is systemd" sh -c '[ "$(cat /proc/1/comm)" = systemd ]'
check "pure cgroup v2 (/sys/fs/cgroup is cgroup2)" sh -c '[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]'
note "kernel $(uname -r), $(systemctl --version | head -n1), Landlock: $(cat /sys/kernel/security/lsm 2>/dev/null)"
finish
