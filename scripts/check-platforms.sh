#!/usr/bin/env bash
# Type-checks what is through agent-core's platform seam for Windows: lull-core,
# lull-protocol and agent-core for x86_64-pc-windows-gnu, with Debian's rustc-web and
# rust-web-src (Rust with the standard library's source: -Zbuild-std builds `std` for the
# target) and mingw-w64 (its dlltool for `std`, its gcc for ring's C). Run by
# scripts/test.sh (CI); LULL_PLATFORMS=0 skips it there. The target directory is
# target/platforms (or $LULL_PLATFORMS_TARGET), apart from the host build's (another
# rustc, other flags). Cold: about 4.5 min on 2 cores, most of it std and the dependencies.
# Not yet here (issue 30): macOS (ring's C needs an Apple toolchain), the CLI, the tray
# app and the coordinator, and running anything under Wine.
set -euo pipefail
cd "$(dirname "$0")/.."
want=(rustc-web cargo-web rust-web-src mingw-w64)
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
# Debian's cargo and rustc, not rustup's proxies (which would ask for rust-src).
t0=$(date +%s)
env PATH=/usr/bin:/bin RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="${LULL_PLATFORMS_TARGET:-$PWD/target/platforms}" \
  /usr/bin/cargo check --quiet -Zbuild-std --target x86_64-pc-windows-gnu -p lull-core -p lull-protocol -p agent-core --lib
echo "lull-core, lull-protocol and agent-core type-check for x86_64-pc-windows-gnu ($(($(date +%s) - t0)) s)"
