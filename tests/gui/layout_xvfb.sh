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
for size in 1024x700 1366x768 1920x1080; do
  width=${size%x*} height=${size#*x}
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
  count=0
  for png in "$out"/page-*-"$size".png; do
    [ -f "$png" ] || continue
    count=$((count + 1))
    set -- $(identify -format "%w %h" "$png")
    if [ "$1" -gt "$width" ] || [ "$2" -gt "$height" ]; then
      echo "$png: $1 x $2, larger than the $size screen"
      status=1
    fi
  done
  if [ "$count" -ne 21 ]; then
    echo "at $size: $count pictures, not 21"
    status=1
  fi
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
count=0
for png in "$out"/page-*-"$size".png; do
  [ -f "$png" ] || continue
  count=$((count + 1))
  set -- $(identify -format "%w %h" "$png")
  if [ "$1" -gt 800 ] || [ "$2" -gt 600 ]; then
    echo "$png: $1 x $2, larger than the $size screen"
    status=1
  fi
done
[ "$count" -eq 3 ] || { echo "at $size: $count pictures, not 3"; status=1; }
echo "$size: $count pages rendered within the screen, and the workbench says it is small"
exit $status
