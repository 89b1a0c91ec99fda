#!/usr/bin/env bash
# Holds the line around the pure core (`core/`, lull-core): it must depend on nothing
# that can reach the clock, the OS, files or the network, and its source must not do so
# itself. Fails naming the offending crate or line. Run by scripts/test.sh (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
# Normal (non-dev) dependencies as built for lull-core alone.
tree=$(cargo tree -p lull-core -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
for bad in tokio sqlx rusqlite reqwest sysinfo zbus x11rb libc landlock mio hyper axum wayland-client iana-time-zone; do
  if grep -qx "$bad" <<<"$tree"; then
    echo "lull-core depends on $bad (cargo tree -p lull-core -e normal -i $bad shows how)" >&2
    fail=1
  fi
done
# Source: no clock, files, network, environment, threads or processes.
if grep -rnE 'std::(fs|net|env|thread|process)\b|Instant::now|SystemTime::now|Utc::now|Local::now|\bunsafe\b' core/src; then
  echo "lull-core's source reaches the world (lines above): move it to a driver" >&2
  fail=1
fi
[ "$fail" = 0 ] && echo "lull-core is pure: $(wc -l <<<"$tree") crates, none of them IO, no clock/fs/net in its source"
exit "$fail"
