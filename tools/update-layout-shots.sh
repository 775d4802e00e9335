#!/bin/sh
# SPDX-License-Identifier: MIT
# Copies the pages ctest gui_xvfb_layout rendered (every page and tour step at 1024x700, 1366x768
# and 1920x1080, in Xvfb, each checked to fit its screen) into docs/images/layout, in 256 colours
# (ImageMagick's convert); the larger screens keep two tour steps.
#   ctest --test-dir build -R gui_xvfb_layout && tools/update-layout-shots.sh [BUILD_DIR]
set -eu
build=${1:-build}
from="$build/tests/output/layout" to="$(dirname "$0")/../docs/images/layout"
[ -d "$from" ] || { echo "no $from: run ctest -R gui_xvfb_layout first"; exit 1; }
mkdir -p "$to"
rm -f "$to"/page-*.png
for png in "$from"/page-*.png; do
  name=${png##*/}
  case "$name" in page-tour-[12357]-1366x768.png|page-tour-[12357]-1920x1080.png) continue ;; esac
  convert "$png" -colors 256 "PNG8:$to/$name"
done
echo "$(ls "$to" | wc -l) pictures in $to"
