#!/usr/bin/env bash
# Builds Lull's Windows installer from packaging/windows/lull.nsi with makensis 3.x
# (Debian's `nsis`; Tauri's own NSIS target downloads nsis_tauri_utils at bundle time,
# which these build machines cannot, so the script is ours).
#   usage: build-installer.sh EXE_DIR OUT
# EXE_DIR holds lull.exe (and lull-tray.exe, lull-window.exe when built: shipped if there;
# lull-window.exe with WebView2Loader.dll, which it imports: tauri-build puts it beside it);
# OUT is the installer to write, or a directory to write lull-VERSION-x86_64-setup.exe in.
# The version is the workspace's (Cargo.toml). Prints the installer's path on the last line.
#
# Compressor: zlib by default, as CI builds this from the debug lull.exe (130 MB; 118 MB
# with its debug info stripped, so mostly unoptimised code) on 2 cores. Measured on that
# exe (makensis 3.08 under nice, a CI build running beside it, load 4.5-7; the silent
# install under Wine 8.0):
#   zlib          25.4 MB, makensis 14.5-18.9 s, install 1.1 s
#   bzip2         22.9 MB, makensis 15.9-18.6 s, install 5.5 s
#   lzma          16.0 MB, makensis 75.5 s,      install 2.7 s
#   /SOLID lzma   16.0 MB, makensis 82.6 s
# LULL_NSIS_COMPRESSOR picks another, e.g. LULL_NSIS_COMPRESSOR=lzma for a release.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 EXE_DIR OUT" >&2; exit 2; }
exe_dir=$(cd "$1" && pwd)
out=$2
here=$(cd "$(dirname "$0")" && pwd)
version=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["workspace"]["package"]["version"])' "$here/../../Cargo.toml")
if [ -d "$out" ] || [[ "$out" == */ ]]; then out="${out%/}/lull-$version-x86_64-setup.exe"; fi
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
[ -f "$exe_dir/lull.exe" ] || { echo "build-installer: no lull.exe in $exe_dir" >&2; exit 1; }
[ ! -f "$exe_dir/lull-window.exe" ] || [ -f "$exe_dir/WebView2Loader.dll" ] ||
  { echo "build-installer: lull-window.exe needs WebView2Loader.dll beside it in $exe_dir" >&2; exit 1; }
command -v makensis >/dev/null || { echo "build-installer: makensis not found (apt-get install nsis)" >&2; exit 1; }
# The programs ship without their symbols (debug info and symbol tables: the debug
# lull-window.exe 120 MB → 59 MB), stripped copies in a directory of their own, so the
# installer is smaller and makensis has half as much to compress.
# LULL_NSIS_KEEP_SYMBOLS=1 ships them as built.
t0=$(date +%s.%N)
if [ "${LULL_NSIS_KEEP_SYMBOLS:-0}" != 1 ]; then
  strip=x86_64-w64-mingw32-strip
  command -v "$strip" >/dev/null || { echo "build-installer: $strip not found (apt-get install binutils-mingw-w64-x86-64), or set LULL_NSIS_KEEP_SYMBOLS=1" >&2; exit 1; }
  staged=$(mktemp -d)
  trap 'rm -rf "$staged"' EXIT
  for f in lull.exe lull-tray.exe lull-window.exe WebView2Loader.dll; do
    [ -f "$exe_dir/$f" ] && cp "$exe_dir/$f" "$staged/"
  done
  for f in "$staged"/*.exe; do "$strip" --strip-all "$f"; done
  exe_dir=$staged
fi
makensis -V2 -INPUTCHARSET UTF8 -DVERSION="$version" -DEXE_DIR="$exe_dir" -DOUTFILE="$out" \
  -DCOMPRESSOR="${LULL_NSIS_COMPRESSOR:-zlib}" "$here/lull.nsi" >&2
echo "build-installer: $(basename "$out"), $(python3 -c "import os, sys; print('%.1f' % (os.path.getsize(sys.argv[1]) / 1e6))" "$out") MB, makensis $(python3 -c "import sys, time; print('%.1f' % (time.time() - float(sys.argv[1])))" "$t0") s" >&2
echo "$out"
