#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 43: the workbench fits the screen. Every page (the Graph page too), the bit explorer and each tour step are
# rendered in a real X server (Xvfb) at 1024x700, 1366x768 and 1920x1080, one process per size
# with no saved layout; the workbench itself fails a page whose window outgrew the screen, and
# each picture's size is checked here again. The pictures stay in OUT (docs/images copies them).
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
  echo "$size: $count pages rendered within the screen"
done
exit $status
