#!/usr/bin/env bash
# Runs CMD as the ordinary owner `lullowner` under a real `systemd --user` on a pure
# cgroup v2 view of this machine, for tests of what Lull asks of the owner's user manager
# (a delegated scope over D-Bus). Must run as root inside a private mount namespace:
#   unshare --mount --propagation private ci/systemd-user.sh CMD...
# There: the machine's cgroup2 hierarchy is mounted on /sys/fs/cgroup (so systemd and Lull
# see pure v2; a hybrid machine's v2 hierarchy has no controllers, a pure one has its
# own), /run/systemd/system exists (systemd refuses a user instance otherwise), and
# `/lull-sdtest-PID/user.slice/user-1001.slice/user@1001.service` holds the user manager
# (given to the owner, as Delegate=yes on user@.service does). CMD runs in cgroup $WHERE
# below `user-1001.slice` (default: an app scope inside the user manager, as a desktop
# launches the tray; `session-1.scope` stands for a login session outside it, root-owned).
# Exits with CMD's status; the manager is stopped and the test cgroups removed after.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "systemd-user: must run as root" >&2; exit 2; }
owner=lullowner
uid=$(id -u "$owner")
mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd; mount -t tmpfs tmpfs /run/systemd; }
mkdir -p /run/systemd/system
mount -t cgroup2 none /sys/fs/cgroup
mkdir -p /run/user && mount -t tmpfs tmpfs /run/user
install -d -o "$owner" -g "$owner" -m 0700 "/run/user/$uid"
top=/sys/fs/cgroup/lull-sdtest-$$
slice=$top/user.slice/user-$uid.slice
manager=$slice/user@$uid.service
mkdir -p "$manager" && chown -R "$owner:$owner" "$manager"
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
  for d in /sys/fs/cgroup "$top" "$top/user.slice" "$slice"; do echo "+$c" > "$d/cgroup.subtree_control" 2>/dev/null || true; done
done
log=${SYSTEMD_USER_LOG:-/dev/null}
( echo $BASHPID > "$manager/cgroup.procs"
  exec runuser -u "$owner" -- env -i HOME="$(getent passwd "$owner" | cut -d: -f6)" USER="$owner" XDG_RUNTIME_DIR="/run/user/$uid" \
    PATH=/usr/bin:/bin SYSTEMD_LOG_TARGET=console SYSTEMD_LOG_LEVEL=info /lib/systemd/systemd --user ) 2>"$log" &
sd=$!
cleanup() {
  kill "$sd" 2>/dev/null || true; wait "$sd" 2>/dev/null || true
  for d in $(find "$top" -depth -type d 2>/dev/null); do
    [ -f "$d/cgroup.kill" ] && echo 1 > "$d/cgroup.kill" 2>/dev/null || true
    for _ in $(seq 50); do rmdir "$d" 2>/dev/null && break; [ -d "$d" ] || break; sleep 0.05; done
  done
}
trap cleanup EXIT
for _ in $(seq 100); do [ -S "/run/user/$uid/systemd/private" ] && break; sleep 0.1; done
[ -S "/run/user/$uid/systemd/private" ] || { echo "systemd-user: the user manager did not start" >&2; exit 3; }
# Its private socket comes first; it answers on D-Bus once its start-up is done (a test
# that asked sooner was once refused, 2026-12-07).
state=$(timeout 20 runuser -u "$owner" -- env XDG_RUNTIME_DIR="/run/user/$uid" systemctl --user is-system-running --wait 2>&1) || true
case "$state" in running|degraded) ;; *) echo "systemd-user: the user manager is not up after 20 s: $state" >&2;; esac
where=$slice/${WHERE:-user@$uid.service/app.slice/app-lull-test.scope}
mkdir -p "$where"
case "$where" in "$manager"/*) chown -R "$owner:$owner" "$where";; esac
set +e
( echo $BASHPID > "$where/cgroup.procs"
  exec runuser -u "$owner" -- env XDG_RUNTIME_DIR="/run/user/$uid" HOME="$(getent passwd "$owner" | cut -d: -f6)" PATH="$PATH" "$@" )
