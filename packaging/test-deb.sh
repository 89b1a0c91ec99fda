#!/usr/bin/env bash
# Installs the .deb built by packaging/build-deb.sh and checks it: files in place, the
# installed lull-tray starts (headless, as there is no display here) and answers the
# installed `lull status`, the systemd unit parses. Removes the package afterwards.
# Usage: packaging/test-deb.sh PATH.deb   (as root, or with sudo)
set -euo pipefail
deb=$1
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
pass=0; fail=0
check() { # description, command...
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then pass=$((pass + 1)); echo "ok   $what"; else fail=$((fail + 1)); echo "FAIL $what"; fi
}
# The guests' account must come from the package's install step, not from test setup.
$SUDO userdel lull-guest >/dev/null 2>&1 || true
$SUDO dpkg -i "$deb" >/dev/null || { $SUDO apt-get install -y -qq -f >/dev/null; $SUDO dpkg -i "$deb" >/dev/null; }
trap '$SUDO dpkg -r lull >/dev/null 2>&1 || true' EXIT
check "package is installed" dpkg -s lull
for f in /usr/bin/lull-tray /usr/bin/lull-window /usr/bin/lull /usr/lib/systemd/user/lull-agent.service \
  /usr/share/lull-tray/lull-tray-autostart.desktop /usr/share/applications/Lull.desktop \
  /usr/share/icons/hicolor/128x128/apps/lull-tray.png /usr/share/icons/hicolor/48x48/apps/lull-tray.png; do
  check "installs $f" test -e "$f"
done
check "the install step made the guests' account lull-guest (not root)" sh -c 'u=$(id -u lull-guest) && [ "$u" != 0 ]'
check "lull-tray --version" /usr/bin/lull-tray --version
check "lull-window --version" /usr/bin/lull-window --version
check "the tray process links no WebKit" sh -c '! ldd /usr/bin/lull-tray | grep -q webkit'
if command -v systemd-analyze >/dev/null; then check "systemd unit verifies" systemd-analyze verify /usr/lib/systemd/user/lull-agent.service; fi
tmp=$(mktemp -d)
export LULL_CONFIG=$tmp/config.toml LULL_DATA_DIR=$tmp LULL_SOCKET=$tmp/agent.sock
env -u DISPLAY -u WAYLAND_DISPLAY /usr/bin/lull-tray >"$tmp/out.txt" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/agent.sock" ] && /usr/bin/lull status >/dev/null 2>&1 && break; sleep 0.2; done
check "installed lull-tray runs the headless agent without a display" /usr/bin/lull status
check "it said why it runs headless" grep -q "no display" "$tmp/out.txt"
kill -TERM $pid; wait $pid || true
check "socket removed after SIGTERM" test ! -e "$tmp/agent.sock"
rm -rf "$tmp"
echo "deb: $pass passed, $fail failed"
[ "$fail" = 0 ]
