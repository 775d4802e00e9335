#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 43: the workbench fits the screen. Every page (the Graph page too), the bit explorer and each tour step are
# rendered in a real X server (Xvfb) at 1024x700, 1366x768 and 1920x1080, one process per size
# with no saved layout; the workbench itself fails a page whose window outgrew the screen, and
# each picture's size is checked here again; at 800x600 three pages must fit too and the workbench
# must say that the screen is smaller than it is laid out for. The pictures stay in OUT (docs/images
# copies them).
#   tests/gui/layout_xvfb.sh WORKBENCH DEMO_DATA_HOME OUT
set -eu
workbench=$1 data=$2 out=$3
demo="$data/PEAT/peat-workbench/demo.h5"
[ -f "$demo" ] || { echo "no demo session at $demo (made by gui_xvfb_demo)"; exit 1; }
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
# check_pictures SIZE COUNT: COUNT pictures taken at SIZE (WxH), none larger than the screen; sets count
check_pictures() {
  count=0
  for png in "$out"/page-*-"$1".png; do
    [ -f "$png" ] || continue
    count=$((count + 1))
    dims=$(identify -format "%w %h" "$png")
    if [ "${dims% *}" -gt "${1%x*}" ] || [ "${dims#* }" -gt "${1#*x}" ]; then
      echo "$png: ${dims% *} x ${dims#* }, larger than the $1 screen"
      status=1
    fi
  done
  if [ "$count" -ne "$2" ]; then
    echo "at $1: $count pictures, not $2"
    status=1
  fi
}
for size in 1024x700 1366x768 1920x1080; do
  rm -f "$out"/page-*-"$size".png
  # a fresh configuration: the first-start layout, not one saved by an earlier run
  if ! XDG_CONFIG_HOME="$scratch/config-$size" XDG_DATA_HOME="$data" \
    xvfb-run -a -s "-screen 0 ${size}x24" "$workbench" "$demo" --screenshot "$out/page-{page}-$size.png" \
      --page "Overview@bf16" --page "Call@bf16/iteration 0/#0 conv1" --page Call/Where --page Training@golden \
      --page Numerics --page "SAVE/Bit classes@SAVE/lenet-symbolic" --page "SAVE/Tiles@SAVE/lenet-symbolic/conv1" \
      --page SAVE/Map --page "SAVE/Campaign@save-campaign" --page "SAVE/Run outputs" --page Compare --page "Graph@analysis-bf16" \
      --page "Bit Explorer:65504" --page "Bit Explorer:0.1:large" \
      --page Tour:1 --page Tour:2 --page Tour:3 --page Tour:4 --page Tour:5 --page Tour:6 --page Tour:7 \
      >"$scratch/log-$size" 2>&1; then
    echo "at $size:"; grep -v XDG_RUNTIME "$scratch/log-$size" || true
    status=1
  fi
  check_pictures "$size" 21
  if grep -q "peat-workbench: note: The screen" "$scratch/log-$size"; then
    echo "at $size: the workbench calls the screen too small"
    status=1
  fi
  echo "$size: $count pages rendered within the screen"
done
# A screen smaller than the layout's least: the window still fits, the pages render, and the
# workbench says so (the status line and the empty overview carry the same words)
size=800x600
rm -f "$out"/page-*-"$size".png
if ! XDG_CONFIG_HOME="$scratch/config-$size" XDG_DATA_HOME="$data" \
  xvfb-run -a -s "-screen 0 ${size}x24" "$workbench" "$demo" --screenshot "$out/page-{page}-$size.png" \
    --page "Call@bf16/iteration 0/#0 conv1" --page "SAVE/Tiles@SAVE/lenet-symbolic/conv1" --page "Graph@analysis-bf16" \
    >"$scratch/log-$size" 2>&1; then
  echo "at $size:"; grep -v XDG_RUNTIME "$scratch/log-$size" || true
  status=1
fi
if ! grep -q "peat-workbench: note: The screen has [0-9]* x [0-9]* pixels for the workbench, less than the 1024 x 700" "$scratch/log-$size"; then
  echo "at $size: no word that the screen is smaller than the layout's least"
  status=1
fi
check_pictures "$size" 3
echo "$size: $count pages rendered within the screen, and the workbench says it is small"
exit $status
