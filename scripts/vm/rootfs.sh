#!/usr/bin/env bash
# Builds the VM bench's Debian 12 root filesystem with debootstrap from the mirror apt
# already uses (read from /etc/apt/sources.list*; LULL_VM_MIRROR overrides), installs
# scripts/vm/packages plus the .deb's own dependencies with apt inside it, and keeps the
# result as a tarball under the cache directory, keyed by a hash of the package list, the
# .deb's Depends and this script. A kept tarball is reused; a changed input rebuilds it.
# Usage: scripts/vm/rootfs.sh DEB   (as root) — prints the tarball's path on the last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deb=$1
cache=${LULL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lull-vm}
suite=bookworm

packages() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages"; }

# The .deb's Depends, as apt package names (alternatives: the first; versions dropped).
deb_depends() {
  dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' | sed '/^$/d'
}

url=$("$here/mirror.sh" "$suite")
want=$( (packages; deb_depends) | sort -u)
key=$( (echo "$url"; echo "$want"; cat "$0") | sha256sum | cut -c1-16)
tarball=$cache/rootfs-$key.tar.zst
if [ -s "$tarball" ]; then
  echo "rootfs: reusing $tarball" >&2
  echo "$tarball"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "rootfs: building the image needs root (debootstrap); none is cached at $tarball" >&2; exit 1; }
mkdir -p "$cache"
root=$(mktemp -d "$cache/rootfs-build.XXXXXX")
chmod 0755 "$root" # the root directory of the system to be (mktemp makes it 0700)
cleanup() {
  for m in dev/pts dev proc sys; do mountpoint -q "$root/$m" && umount -l "$root/$m"; done
  rm -rf "$root"
}
trap cleanup EXIT
start=$(date +%s)
echo "rootfs: debootstrap $suite from $url (key $key)" >&2
debootstrap --variant=minbase --include=apt,ca-certificates "$suite" "$root" "$url" >&2
mount --bind /dev "$root/dev"; mount --bind /dev/pts "$root/dev/pts"
mount -t proc proc "$root/proc"; mount -t sysfs sys "$root/sys"
# No service starts inside the chroot (postgresql's postinst would try).
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"; chmod 0755 "$root/usr/sbin/policy-rc.d"
echo "deb $url $suite main" > "$root/etc/apt/sources.list"
chroot "$root" apt-get update -qq >&2
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends $want >&2
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root/usr/sbin/policy-rc.d"
for m in dev/pts dev proc sys; do umount -l "$root/$m"; done
tar --numeric-owner --xattrs -C "$root" --zstd -cf "$tarball.tmp" .
mv "$tarball.tmp" "$tarball"
# Older tarballs (another key) are no longer used.
find "$cache" -maxdepth 1 -name 'rootfs-*.tar.zst' ! -name "rootfs-$key.tar.zst" -delete
echo "rootfs: built in $(($(date +%s) - start)) s, $(du -h "$tarball" | cut -f1)" >&2
echo "$tarball"
