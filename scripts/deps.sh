#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test Lull, skipping what is
# already there. Usage: scripts/deps.sh build|test
set -euo pipefail
# libwebkit2gtk-4.1-dev: the tray app (Tauri v2) compiles against WebKitGTK and GTK 3.
want=(pkg-config libx11-dev libxtst-dev libxi-dev libdbus-1-dev libwayland-dev libwebkit2gtk-4.1-dev)
if [ "${1:-build}" = test ]; then
  # Guests' sandbox: bubblewrap (namespaces) and slirp4netns (network = "outbound").
  want+=(bubblewrap slirp4netns)
  want+=(xvfb xdotool x11-utils faketime dbus dbus-x11 sway wtype strace procps python3 util-linux passwd)
  # The tray app's tests: the AppIndicator library (loaded at run time), trayer as tray
  # host under Xvfb, ImageMagick for screenshots, dunst as notification daemon.
  want+=(libayatana-appindicator3-1 trayer imagemagick dunst)
  # The coordinator dashboard's browser test: Debian's Chromium, driven by playwright-core
  # (an npm devDependency of ui/).
  want+=(chromium)
  # The VM bench (scripts/vm/run.sh): debootstrap builds the guest image, zstd keeps it,
  # mkfs.ext4 -d (e2fsprogs) makes its disk, qemu-img (qemu-utils) the guest's overlay on
  # it; QEMU is installed below.
  want+=(debootstrap zstd e2fsprogs qemu-utils)
  for f in ci/packages-*.txt; do
    [ -f "$f" ] || continue
    while read -r line; do
      case "$line" in apt:*) want+=("${line#apt:}") ;; esac
    done < "$f"
  done
fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${1:-build}" = test ] && ! command -v qemu-system-x86_64 >/dev/null; then
  # QEMU for the VM bench. Where qemu-utils came from bookworm-backports (as on these build
  # machines), bookworm's QEMU 7.2 conflicts with it: take qemu-system-x86 from backports
  # too, through a private source list on the same mirror, leaving /etc/apt as it is.
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  apt_opts=()
  if dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null | grep -q bpo; then
    src=$(mktemp -d)
    cp /etc/apt/sources.list.d/*.sources "$src"/ 2>/dev/null || true
    [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$src/base.list"
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$(scripts/vm/mirror.sh bookworm)" >"$src/lull-backports.sources"
    apt_opts=(-o "Dir::Etc::SourceParts=$src" -o Dir::Etc::SourceList=/dev/null -o APT::Get::List-Cleanup=0)
    $SUDO apt-get "${apt_opts[@]}" update -qq
    apt_opts+=(-t bookworm-backports)
  fi
  echo "installing: qemu-system-x86 ${apt_opts[*]:+(bookworm-backports)}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
fi
command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs" >&2; exit 1; }
# The tray app's windows are built with Vite 7, which needs Node.js 20.19 or later.
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' 2>/dev/null; then
  echo "Node.js >= 20.19 with npm is required to build the tray app's windows (ui/): https://nodejs.org" >&2
  exit 1
fi
