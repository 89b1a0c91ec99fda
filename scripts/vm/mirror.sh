#!/usr/bin/env bash
# Prints the Debian mirror apt already uses for SUITE (default bookworm), read from
# /etc/apt/sources.list and sources.list.d (one-line and deb822 formats); LULL_VM_MIRROR
# overrides. Used by scripts/vm/rootfs.sh (debootstrap) and scripts/deps.sh (backports).
set -euo pipefail
suite=${1:-bookworm}
if [ -n "${LULL_VM_MIRROR:-}" ]; then echo "$LULL_VM_MIRROR"; exit 0; fi
{
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$suite" '$1 == "deb" { sub(/\[[^]]*\] */, ""); if ($3 == s) print $2 }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { uri = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { split($i, u, " "); uri = u[2] }
          if ($i ~ /^Suites:/) { n = split($i, w, " "); for (j = 2; j <= n; j++) if (w[j] == s) ok = 1 }
        }
        if (ok && uri != "") print uri }' "$f"
  done
} | head -n1 | grep . || { echo "no $suite mirror in /etc/apt/sources.list*; set LULL_VM_MIRROR" >&2; exit 1; }
