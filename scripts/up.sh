#!/usr/bin/env bash
# Builds Lull (installing missing build packages) and runs its main job in the
# foreground: `lull up` — a coordinator on embedded SQLite plus this machine's agent
# enrolled to it, printing the dashboard address. Extra arguments go to `lull up`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
# The coordinator serves its dashboard from ui/dist-dashboard, compiled into the binary:
# build it first, or the coordinator comes up without one.
(cd ui && npm install --no-audit --no-fund --loglevel=error && npm run build >/dev/null)
cargo build --release -q -p lull
exec "${CARGO_TARGET_DIR:-target}/release/lull" up "$@"
