#!/usr/bin/env bash
# Holds the agent's platform seam (agent-core/src/sys/): outside it and the two Linux
# backends (guest/linux/, input/linux/), agent-core's product code names no `libc::`, no
# `std::os::unix::fs` / `std::os::fd` and no `target_os`; the backends are chosen by
# one cfg pair each in guest/mod.rs and input/mod.rs, and `sys/` imports nothing from the
# rest of the crate. Test modules (`#[cfg(test)] mod tests`, at a file's end) may use the
# platform directly. Fails naming the offending lines. Run by scripts/test.sh (CI), which
# also compiles agent-core against sys/other.rs (`--features other-sys`).
set -euo pipefail
cd "$(dirname "$0")/../agent-core/src"
fail=0
# Product code of a file, line numbers kept: all but its `#[cfg(test)] mod tests { … }`.
product() {
  awk '/^#\[cfg\(test\)\]$/ { held = NR; next }
       held && /^mod tests/ { skip = 1; held = 0; next }
       skip { if ($0 == "}") skip = 0; next }
       held { held = 0 }
       { print NR ":" $0 }' "$1"
}
while IFS= read -r f; do
  case "$f" in ./sys/* | ./guest/linux/* | ./input/linux/*) continue ;; esac
  hits=$(product "$f" | grep -E 'libc::|std::os::unix::fs|std::os::fd|target_os' || true)
  case "$f" in
    # The one cfg pair choosing each backend.
    ./guest/mod.rs | ./input/mod.rs) hits=$(grep -vE '^[0-9]+:\s*#\[cfg\((not\()?target_os = "linux"\)?\)\]$' <<<"$hits" || true) ;;
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
echo "agent-core's platform seam holds: libc, std::os::unix::fs/fd and target_os only in sys/ and the Linux backends"
