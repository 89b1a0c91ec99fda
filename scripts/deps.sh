#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test Lull, skipping what is
# already there. Usage: scripts/deps.sh build|test
set -euo pipefail
want=(pkg-config libx11-dev libxtst-dev libxi-dev libdbus-1-dev libwayland-dev)
if [ "${1:-build}" = test ]; then
  want+=(xvfb xdotool x11-utils faketime dbus dbus-x11 sway wtype strace procps python3 util-linux passwd)
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
command -v cargo >/dev/null || { echo "Rust (cargo) is required: https://rustup.rs" >&2; exit 1; }
