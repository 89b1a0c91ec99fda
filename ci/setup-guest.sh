#!/usr/bin/env bash
# Test setup for the guest runtime's unprivileged path (run as root by scripts/test.sh;
# does nothing otherwise). Creates the user `lullowner` — the "owner" of the desktop in
# the unprivileged test — and a cgroup subtree `lull-deleg` delegated (chowned) to it in
# every hierarchy the runtime uses: on a hybrid system the v1 memory, cpu and pids
# controllers plus the v2 unified hierarchy; on a pure v2 system the one hierarchy with
# the memory, cpu and pids controllers enabled for the subtree. This is what systemd's
# Delegate=yes does for a user service, and what a root-owned install step does elsewhere.
# A file only the owner may read goes in its home, for the sandbox test. And the account
# guests run as when the agent is root (`guests.run_as`), as the package's install makes it.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "setup-guest: not root, skipping (the unprivileged guest test will skip too)"; exit 0; }
user=lullowner
id -u lull-guest >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin lull-guest
base=lull-deleg
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
home=$(getent passwd "$user" | cut -d: -f6)
install -d -o "$user" -g "$user" -m 0700 "$home"
echo "the owner's secret" > "$home/secret.txt"
chown "$user:$user" "$home/secret.txt"
chmod 0600 "$home/secret.txt"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  for c in memory cpu pids; do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true; done
  dirs=(/sys/fs/cgroup/$base)
else
  dirs=()
  for h in unified memory cpu pids; do
    [ -d /sys/fs/cgroup/$h ] && dirs+=(/sys/fs/cgroup/$h/$base)
  done
fi
for d in "${dirs[@]}"; do
  mkdir -p "$d"
  # The directory and its control files (cgroup.procs, subtree_control, limits) go to the user.
  chown -R "$user:$user" "$d"
done
echo "setup-guest: user $user, delegated cgroup subtree $base in: ${dirs[*]}"
