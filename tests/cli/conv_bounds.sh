#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rounding bounds and format replay for recorded conv2d calls (issue 19): LeNet profiled for one
# iteration, its conv2d calls replayed through bf16, a reversed summation and MXFP4; the forward
# calls (whose operands the detector now rebuilds as im2col GEMMs) are named with the replay's
# confidence (0.98, or 0.9 from the reordering bound) and the right model; before, conv2d calls had
# output-only rules (bf16 0.75, MXFP4 index_error).
#                                                 usage: conv_bounds.sh PEAT PYTHON WORKDIR
set -u
peat=$1 python=$2 dir=$3/conv-bounds
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
"$peat" profile --model lenet --iterations 1 --record-every 1 --batch 8 -o s.h5 >/dev/null 2>&1 || { echo "profile failed"; exit 1; }
for k in bf16 reversed mxfp4; do
  "$peat" playback -s s.h5 -k $k --op conv2d --store-outputs --name c-$k >/dev/null 2>&1 || { echo "playback $k failed"; exit 1; }
  "$peat" detect -s s.h5 --run c-$k --json >$k.json 2>/dev/null || { echo "detect $k failed"; exit 1; }
done
"$python" - <<'PY' || exit 1
import json, h5py
want = {"bf16": ("precision_loss", 0.98, "format=bf16"), "reversed": ("accumulation_order", 0.9, "fp32 reordering"),
        "mxfp4": ("precision_loss", 0.98, "format=mxfp4")}
f = h5py.File("s.h5", "r")
for k, (model, conf, text) in want.items():
    calls = json.load(open(k + ".json"))["calls"]
    first = {}  # each layer's forward call comes before its backward ones
    for c in calls:
        if c["layer"] not in first or c["call_index"] < first[c["layer"]]["call_index"]:
            first[c["layer"]] = c
    forward = list(first.values())
    assert len(forward) == 2, (k, calls)
    for c in forward:
        assert c["verdict"] == model and abs(c["confidence"] - conf) < 1e-9, (k, c)
    run = json.load(open(k + ".json"))["stored_as"]
    evidence = [v["evidence"].decode() for v in f["runs"][run]["verdicts"][()] if v["call"].decode().endswith("calls/000000")]
    assert evidence and text in evidence[0], (k, evidence)
PY
echo "ok: conv2d forward calls get bounds and replay: bf16, reordering and mxfp4 named"
