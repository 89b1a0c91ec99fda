#!/usr/bin/env bash
# Draws Lull's icons with ImageMagick (a developer tool only: the PNGs are committed).
# One tray icon per state, each with its own colour *and* shape so it reads without
# colour too, plus the application icon set for the bundle.
# Usage: packaging/icons/make-icons.sh   (writes src-tauri/icons/)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=src-tauri/icons
mkdir -p "$out"
s=64
disc() { printf '%s\n' -fill "$1" -stroke none -draw 'circle 32,32 32,3'; }
draw() { # name, ImageMagick drawing arguments
  local name=$1; shift
  convert -size ${s}x${s} xc:none "$@" -strip "PNG32:$out/state-$name.png"
}
mapfile -t green < <(disc '#1f9d55')
mapfile -t blue < <(disc '#2d6cdf')
mapfile -t amber < <(disc '#e08a00')
mapfile -t red < <(disc '#d43a3a')
mapfile -t slate < <(disc '#4b5058')
# idle: a grey ring (nothing happening, waiting)
draw idle -fill none -stroke '#8a8f98' -strokewidth 8 -draw 'circle 32,32 32,7'
# donating: a full green disc with a white upward chevron (giving)
draw donating "${green[@]}" -fill none -stroke white -strokewidth 7 -draw 'polyline 18,38 32,24 46,38'
# lingering: green ring, lower half filled (running, quietly)
draw lingering -fill none -stroke '#1f9d55' -strokewidth 7 -draw 'circle 32,32 32,6' -fill '#1f9d55' -stroke none -draw 'path "M 8,32 A 24,24 0 0,0 56,32 Z"'
# owner active: blue disc with a white dot (you are here)
draw owner_active "${blue[@]}" -fill white -draw 'circle 32,32 32,21'
# paused: amber disc with two white bars
draw paused "${amber[@]}" -fill white -draw 'rectangle 21,18 28,46' -draw 'rectangle 36,18 43,46'
# out of budget: red disc with a white bar (no entry)
draw out_of_budget "${red[@]}" -fill white -draw 'rectangle 15,28 49,36'
# not allowed now: dark grey disc with a white diagonal slash
draw not_allowed "${slate[@]}" -stroke white -strokewidth 7 -draw 'line 19,45 45,19'
# Application icon: a deep teal disc with a white crescent (a lull).
app() {
  local size=$1 file=$2
  convert -size 256x256 xc:none -fill '#146c6c' -draw 'circle 128,128 128,8' \
    -fill white -draw 'circle 116,128 116,52' -fill '#146c6c' -draw 'circle 148,110 148,42' \
    -resize ${size}x${size} -strip "PNG32:$file"
}
app 32 "$out/32x32.png"
app 128 "$out/128x128.png"
app 256 "$out/128x128@2x.png"
app 512 "$out/icon.png"
mkdir -p packaging/icons/hicolor
for sz in 32 48 64 128 256; do
  mkdir -p "packaging/icons/hicolor/${sz}x${sz}/apps"
  app "$sz" "packaging/icons/hicolor/${sz}x${sz}/apps/lull-tray.png"
done
echo "icons written to $out and packaging/icons/hicolor"
