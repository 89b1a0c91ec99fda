#!/usr/bin/env bash
# Holds the agent's platform seam (agent-core/src/sys/): outside it and the platform
# backends (guest/<platform>/, input/<platform>/), agent-core's product code names no
# `libc::`, no `std::os::unix::fs` / `std::os::fd`, no `target_os` and no `/proc` or
# `/sys/` path (but in the readers listed in PROCFS_READERS, which fail soft elsewhere);
# the backends are chosen by the cfg lines of guest/mod.rs and input/mod.rs, and `sys/`
# imports nothing from the rest of the crate. Test modules (`#[cfg(test)] mod tests`, at a file's end) may use the
# platform directly. Fails naming the offending lines. Run by scripts/test.sh (CI), which
# also compiles agent-core against sys/other.rs (`--features other-sys`).
set -euo pipefail
cd "$(dirname "$0")/../agent-core/src"
fail=0
# Product code that reads /proc or /sys itself and gives nothing (not an error) where
# they do not exist: the start-up page release, the exclusive-programs scan, the sensors.
PROCFS_READERS="./footprint.rs ./programs.rs ./sensors.rs"
# Product code of a file, line numbers kept: all but its `#[cfg(test)] mod tests { … }`.
product() {
  awk '/^#\[cfg\(test\)\]$/ { held = NR; next }
       held && /^mod tests/ { skip = 1; held = 0; next }
       skip { if ($0 == "}") skip = 0; next }
       held { held = 0 }
       { print NR ":" $0 }' "$1"
}
while IFS= read -r f; do
  case "$f" in ./sys/* | ./guest/*/* | ./input/*/*) continue ;; esac
  pattern='libc::|std::os::unix::fs|std::os::fd|target_os|"/proc|"/sys/'
  case " $PROCFS_READERS " in *" $f "*) pattern='libc::|std::os::unix::fs|std::os::fd|target_os' ;; esac
  hits=$(product "$f" | grep -E "$pattern" || true)
  case "$f" in
    # The cfg lines choosing each platform's backend.
    ./guest/mod.rs | ./input/mod.rs) hits=$(grep -vE '^[0-9]+:\s*#\[cfg\(.*target_os = "[a-z]+".*\)\]$' <<<"$hits" || true) ;;
  esac
  if [ -n "$hits" ]; then
    sed "s|^|${f#./}:|" <<<"$hits" >&2
    fail=1
  fi
done < <(find . -name '*.rs' | sort)
if grep -rnE 'crate::[a-z_]+' sys | grep -vE 'crate::sys(::|\b)' >&2; then
  echo "agent-core/src/sys/ must import nothing from the rest of the crate (lines above)" >&2
  fail=1
fi
if [ "$fail" = 1 ]; then
  echo "platform calls outside agent-core/src/sys/ (lines above): add them to sys/linux/ and sys/other.rs" >&2
  exit 1
fi
echo "agent-core's platform seam holds: libc, std::os::unix::fs/fd, target_os and /proc, /sys paths only in sys/, the platform backends and $PROCFS_READERS"
