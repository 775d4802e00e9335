#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sets up, builds and runs the demo: profiles real LeNet training into a session, replays it through
# a bf16 kernel and names the error, runs SAVE's selection and a short fault campaign into the same
# session, summarises it with `peat`, and opens it in peat-workbench. Without a display it renders
# the window under Xvfb to demo/workbench.png instead.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset default
cmake --build --preset default

mkdir -p demo
rm -f demo/lenet.h5
echo "== peat profile: 30 iterations of LeNet finetuning from data/, recording every 10th into a session"
build/bin/peat profile --model lenet --init data/lenet-fashion-mnist.h5 --iterations 30 --record-every 10 \
  --out demo/lenet.h5
echo "== peat playback: the recorded calls through the bf16 kernel; peat detect names the error model"
build/bin/peat playback -s demo/lenet.h5 -k bf16 --store-outputs --name bf16
build/bin/peat detect -s demo/lenet.h5 --run bf16
echo "== SAVE: sound ranges and bit classes, then accuracy against bit flips per protection scheme"
build/bin/peat save analyze -m lenet -w data/lenet-fashion-mnist.h5 -s demo/lenet.h5
build/bin/peat save campaign -m lenet -w data/lenet-fashion-mnist.h5 --images 200 --batch 50 \
  --flips 16,256,4096 -s demo/lenet.h5
echo "== peat info demo/lenet.h5"
build/bin/peat info demo/lenet.h5
echo "== peat env"
build/bin/peat env
if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  exec build/bin/peat-workbench demo/lenet.h5
fi
xvfb-run -a -s '-screen 0 1600x1000x24' build/bin/peat-workbench --screenshot demo/workbench.png demo/lenet.h5
echo "== no display: the workbench was rendered to demo/workbench.png"
