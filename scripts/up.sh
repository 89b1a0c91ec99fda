#!/usr/bin/env bash
# Builds Lull (installing missing build packages) and runs its main job in the
# foreground: the agent, printing its state changes. Extra arguments go to `lull agent`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cargo build --release -q -p lull
exec target/release/lull agent "$@"
