#!/bin/bash
# The VM bench's set-up, as root before anyone logs in (lull-vm-setup.service): installs
# the .deb the host built with dpkg (its postinst runs, as on an owner's machine), the
# bench's own session, terminal and guest programs, the files of the second user, and an
# address of this machine outside loopback for the "outward" connection.
set -uo pipefail
src=/run/lull-vm/src
out=/run/lull-vm/out
lib=/usr/local/lib/lull-vm
exec > >(tee -a "$out/setup.log") 2>&1
echo "setup: $(date -u +%FT%TZ) kernel $(uname -r)"
install -d -m 0755 "$lib"
install -m 0755 "$src"/guest/session.sh "$src"/guest/terminal.py "$src"/guest/canary.py "$lib"/
install -m 0644 "$src"/guest/hostile.py "$src"/guest/pool.py "$lib"/
install -m 0644 "$src"/guest/user/* /etc/systemd/user/
# The package, by its own install step.
start=$(date +%s)
cp "$src/lull.deb" /tmp/lull.deb
# --force-unsafe-io: no fsync per file (the disk is a throw-away snapshot); the same install.
dpkg --force-unsafe-io -i /tmp/lull.deb >"$out/install.log" 2>&1
echo $? >"$out/install.rc"
echo "setup: dpkg -i took $(($(date +%s) - start)) s, exit $(cat "$out/install.rc")"
# The owner ticked "Start Lull when I log in": the entry the settings window writes.
if [ -f /usr/share/lull-tray/lull-tray-autostart.desktop ]; then
  install -d -o owner -g owner /home/owner/.config /home/owner/.config/autostart
  sed 's|^Exec=.*|Exec="/usr/bin/lull-tray"|' /usr/share/lull-tray/lull-tray-autostart.desktop >/home/owner/.config/autostart/lull-tray.desktop
  chown owner:owner /home/owner/.config/autostart/lull-tray.desktop
fi
# The second user's own files: a private one, and one they share with other local users.
setpriv --reuid neighbour --regid neighbour --init-groups sh -c '
  umask 022; cd /home/neighbour
  echo "the neighbour'"'"'s diary" > diary.txt; chmod 0600 diary.txt
  mkdir -p shared && echo "the neighbour'"'"'s notes for colleagues" > shared/notes.txt'
# The owner's own files: a private one, and ordinary ones.
setpriv --reuid owner --regid owner --init-groups sh -c '
  umask 022; cd /home/owner
  echo "the owner'"'"'s secret" > secret.txt; chmod 0600 secret.txt
  mkdir -p Documents && echo "a letter" > Documents/letter.txt
  mkdir -p .ssh && chmod 0700 .ssh && echo "-----BEGIN OPENSSH PRIVATE KEY-----" > .ssh/id_ed25519 && chmod 0600 .ssh/id_ed25519'
# "Outward": a non-loopback address of this machine (no packet leaves the VM: it has no NIC).
modprobe dummy 2>/dev/null
ip link add lullout type dummy && ip addr add 192.0.2.1/24 dev lullout && ip link set lullout up
ip route add default dev lullout 2>/dev/null
setsid python3 -c '
import socket
s = socket.create_server(("0.0.0.0", 8080))
while True:
    c, _ = s.accept(); c.sendall(b"outward listener\n"); c.close()' </dev/null >/dev/null 2>&1 &
echo "setup: done in $SECONDS s"
