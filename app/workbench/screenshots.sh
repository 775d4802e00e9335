#!/bin/sh
# SPDX-License-Identifier: MIT
# Renders every page of the workbench at 1366x768 and 1920x1080 under Xvfb into docs/images/
# (docs/workbench.md shows them): the demo session (made first, in a scratch data directory), the
# fixtures of a test run for the Numerics tab (build/tests/fixtures/numerics.h5) and a kernel that
# crashed (build/tests/fixtures/kernel-host/kept.h5, from ctest cli_kernel_host), and a SAVE run
# of a small classifier that python3 with torch exports here (tests/gui/save_run_models.py), and
# a GPT-style model file (tests/models/export_models.py) profiled with every op recorded, its
# softmax and layer norm calls replayed through op-specific candidates.
#   app/workbench/screenshots.sh [BUILD_DIR] [OUT_DIR]
set -eu
build=${1:-build}
out=${2:-docs/images}
workbench=${WORKBENCH:-$build/bin/peat-workbench}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export XDG_DATA_HOME="$scratch/data" XDG_CONFIG_HOME="$scratch/config"
mkdir -p "$out"
# the demo session: made on first use
xvfb-run -a -s "-screen 0 1366x768x24" "$workbench" --demo --screenshot "$scratch/first.png" >/dev/null 2>&1
demo="$XDG_DATA_HOME/PEAT/peat-workbench/demo.h5"  # --demo opens it on its telling call; --select needs the file
models="$scratch/save-run"
mkdir -p "$models"
"${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/../../tests/gui/save_run_models.py" "$models" >/dev/null
ops="$scratch/ops"
mkdir -p "$ops"
tests="$(dirname "$0")/../../tests"
"${PYTHON:-/usr/bin/python3}" "$tests/models/export_models.py" "$ops" --models gpt >/dev/null
"${PYTHON:-/usr/bin/python3}" -c "import sys; sys.path.insert(0, sys.argv[1]); from file_models_data import lm_tokens; lm_tokens(sys.argv[2])" \
  "$tests/models" "$ops/tokens.h5"
peat=${PEAT:-$build/bin/peat}
"$peat" profile --model "$ops/gpt.pt" --data "$ops/tokens.h5" --batch 4 -n 3 --record-every 1 --record-ops all \
  -o "$ops/gpt.h5" >/dev/null 2>&1
for kernel in softmax-online layernorm-onepass; do
  "$peat" playback -s "$ops/gpt.h5" -k $kernel --store-outputs --name ${kernel%%-*} >/dev/null 2>&1
  "$peat" analyze --session "$ops/gpt.h5" --run ${kernel%%-*} >/dev/null 2>&1
done
shot() {  # SIZE NAME ARGS...
  size=$1 name=$2
  shift 2
  xvfb-run -a -s "-screen 0 ${size}x24" "$workbench" --screenshot "$out/page-$name-$size.png" "$@"
  echo "$out/page-$name-$size.png"
}
fresh_shot() {  # as shot, with the first-run layout (no saved one): the session tree at its full width
  saved=$XDG_CONFIG_HOME
  XDG_CONFIG_HOME="$scratch/config-$2-$1"
  export XDG_CONFIG_HOME
  shot "$@"
  XDG_CONFIG_HOME=$saved
}
for size in 1366x768 1920x1080; do
  shot $size overview "$demo" --select bf16 --page Overview
  shot $size call --demo --page Call
  shot $size call-where --demo --page Call/Where
  shot $size training "$demo" --select golden --page Training
  shot $size numerics "$build/tests/fixtures/numerics.h5" --select golden --page Numerics
  shot $size save-bits "$demo" --select SAVE/lenet-symbolic --page "SAVE/Bit classes"
  shot $size save-tiles "$demo" --select SAVE/lenet-symbolic/conv1 --page SAVE/Tiles
  shot $size save-map "$demo" --select SAVE/lenet-symbolic/conv1 --page SAVE/Map
  shot $size save-campaign "$demo" --select save-campaign --page SAVE/Campaign
  shot $size save-run --save-run "-m $models/classifier.onnx -i $models/x.npy --expect $models/ref.npy --protect save --flips 20 --seed 3" \
    --page "SAVE/Run outputs"
  shot $size call-kernel-failure "$build/tests/fixtures/kernel-host/kept.h5" --select "kept/iteration 0/#4 fc3" --page Call
  fresh_shot $size call-softmax "$ops/gpt.h5" --select "softmax/iteration 0/#4 blocks.layers.0.self_attn.softmax" --page Call
  fresh_shot $size call-layernorm "$ops/gpt.h5" --select "layernorm/iteration 0/#1 blocks.layers.0.norm1" --page Call
  shot $size compare --demo --page Compare
  shot $size bitexplorer --demo --page "Bit Explorer:65504"
  shot $size tour --demo --page Tour:7
done
