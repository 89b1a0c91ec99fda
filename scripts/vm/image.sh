#!/usr/bin/env bash
# Turns the cached root filesystem tarball (scripts/vm/rootfs.sh) into the VM bench's
# boot files: a sparse ext4 disk image made with `mkfs.ext4 -d`, and the kernel and
# initrd of the image's own linux-image-amd64. The tree is configured first: the owner
# (uid 1000) logged in on tty1 by autologin, a second local user, and the two units that
# run the bench when the kernel command line says lull.test=1. Kept under the cache
# directory, keyed by the tarball and the files that configure it.
# Usage: scripts/vm/image.sh DEB   (as root, unless cached) — prints the directory holding
# disk.ext4, vmlinuz and initrd.img on the last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deb=$1
cache=${LULL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lull-vm}
tarball=$("$here/rootfs.sh" "$deb" | tail -n1)
[ -s "$tarball" ] || { echo "image: no root file system tarball" >&2; exit 1; }
key=$( (basename "$tarball"; cat "$0" "$here"/image/*) | sha256sum | cut -c1-16)
dir=$cache/image-$key
if [ -s "$dir/disk.ext4" ] && [ -s "$dir/vmlinuz" ] && [ -s "$dir/initrd.img" ]; then
  echo "image: reusing $dir" >&2
  echo "$dir"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "image: making the disk image needs root (file owners); none is cached at $dir" >&2; exit 1; }
start=$(date +%s)
root=$(mktemp -d "$cache/image-build.XXXXXX")
chmod 0755 "$root" # it becomes the file system's root directory
trap 'rm -rf "$root" "$dir.tmp"' EXIT
tar --numeric-owner --xattrs -C "$root" --zstd -xf "$tarball"

configure() {
  local r=$1
  echo lull-vm > "$r/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 lull-vm\n::1 localhost\n' > "$r/etc/hosts"
  # The owner and a second ordinary local user. Their homes are 0755, as on many
  # desktops (Debian before 12, upgraded systems): only Lull's own file modes and the
  # guests' sandbox can then keep other users and guests out, which is what is tested.
  chroot "$r" useradd --create-home --uid 1000 --user-group --shell /bin/bash --comment "Desktop owner" owner
  chroot "$r" useradd --create-home --uid 1001 --user-group --shell /bin/bash --comment "Another local user" neighbour
  chmod 0755 "$r/home/owner" "$r/home/neighbour"
  cat "$here/image/profile-hook" >> "$r/home/owner/.profile"
  install -d "$r/etc/systemd/system/getty@tty1.service.d"
  install -m 0644 "$here/image/autologin.conf" "$r/etc/systemd/system/getty@tty1.service.d/autologin.conf"
  install -m 0755 "$here/image/lull-vm-mount" "$r/usr/local/sbin/lull-vm-mount"
  for u in lull-vm-setup lull-vm-cases; do
    install -m 0644 "$here/image/$u.service" "$r/etc/systemd/system/$u.service"
    ln -sf "/etc/systemd/system/$u.service" "$r/etc/systemd/system/multi-user.target.wants/$u.service"
  done
  # Nothing periodic may start in the middle of a case; PostgreSQL starts only in the
  # case that needs it.
  for t in apt-daily apt-daily-upgrade man-db e2scrub_all fstrim logrotate dpkg-db-backup; do
    ln -sf /dev/null "$r/etc/systemd/system/$t.timer"
  done
  chroot "$r" systemctl disable postgresql.service >/dev/null 2>&1 || true
  # Its cluster was made in the chroot, where the host's own PostgreSQL may hold 5432
  # (pg_createcluster then picks 5433): the guest's listens on the usual port.
  sed -i 's/^port = [0-9]*/port = 5432/' "$r"/etc/postgresql/*/main/postgresql.conf
  # The image boots from /dev/vda with no boot loader; fsck is pointless on a snapshot.
  echo "/dev/vda / ext4 rw,relatime 0 0" > "$r/etc/fstab"
}
configure "$root"
mkdir -p "$dir.tmp"
cp "$(ls -v "$root"/boot/vmlinuz-* | tail -n1)" "$dir.tmp/vmlinuz"
cp "$(ls -v "$root"/boot/initrd.img-* | tail -n1)" "$dir.tmp/initrd.img"
# Sparse: 12 GiB of room (the disk-filling guest must find the limit, not a full disk),
# a fraction of that on the host's disk.
truncate -s 12G "$dir.tmp/disk.ext4"
mkfs.ext4 -q -F -L lullroot -d "$root" "$dir.tmp/disk.ext4"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
find "$cache" -maxdepth 1 -name 'image-*' ! -name "image-$key" -exec rm -rf {} +
echo "image: made in $(($(date +%s) - start)) s: $(du -h "$dir/disk.ext4" | cut -f1) on disk" >&2
echo "$dir"
