#!/usr/bin/env bash
# Builds the tray app's .deb with the Tauri bundler (the npm package @tauri-apps/cli, pinned
# in ui/package-lock.json). The package holds lull-tray and its window process lull-window
# (the bundler takes every binary of the crate), the `lull` CLI, the systemd user
# unit for the headless agent, the autostart entry template and the icons.
#
# Only the deb target is built here: the AppImage target (kept in tauri.conf.json) downloads
# its tools (linuxdeploy and plugins) at bundle time, which these build machines cannot.
# Prints the .deb's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
# Honour a shared target directory (helpers and benches set one); the bundler does too.
target=${CARGO_TARGET_DIR:-$PWD/target}
[ -d ui/node_modules ] || (cd ui && npm install --no-audit --no-fund --loglevel=error)
(cd ui && npm run build)
cargo build --release -q -p lull
tauri=$PWD/ui/node_modules/.bin/tauri
(cd src-tauri && "$tauri" build --no-bundle --ci) >&2
# The release profile keeps line tables for backtraces; the package ships without them
# (127 MB → about 25 MB for lull-tray).
strip --strip-debug "$target"/release/lull-tray "$target"/release/lull-window "$target"/release/lull
(cd src-tauri && "$tauri" bundle --bundles deb --ci) >&2
ls -t "$target"/release/bundle/deb/*.deb | head -n1
