#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rounding bounds and format replay for grouped and depthwise conv2d calls (issue 19): torchvision's
# MobileNetV2 (exported at test time by Debian's PyTorch; width 0.25) profiled for one iteration, its
# conv2d calls replayed through bf16 and a reversed summation. Each forward call, the depthwise ones
# included, is rebuilt as one GEMM per group (a batched bound) and named by replay
# (precision_loss 0.98, format=bf16) or by the fp32 reordering bound (accumulation_order 0.9), and so
# is each grad_weight call (dW_g = dY_g im2col(x_g)^T per group) and each grad_input call (a direct
# convolution over dY, one GEMM per group, whose K = Cout/G kh kw covers the kernel's GEMM and its
# col2im); before, grouped convs and conv backward calls had output-only rules. Every bf16 call names
# bf16 first: at K = N Ho Wo = 4096 tf32's and fp16's replays fall within the reordering slack of a
# bf16 candidate too, and the closest replay decides.
#                                          usage: grouped_conv_bounds.sh PEAT PYTHON SOURCE_DIR WORKDIR
set -u
peat=$1 python=$2 src=$3 dir=$4/grouped-conv-bounds
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
"$python" "$src/tests/models/export_models.py" . --models mobilenet_v2 >/dev/null 2>&1 || { echo "export failed"; exit 1; }
"$peat" profile --model mobilenet_v2.pt --data fashion-mnist:3x64x64 --batch 4 -n 1 --record-every 1 -o s.h5 >/dev/null 2>&1 ||
  { echo "profile failed"; exit 1; }
for k in bf16 reversed; do
  "$peat" playback -s s.h5 -k $k --op conv2d --store-outputs --name c-$k >/dev/null 2>&1 || { echo "playback $k failed"; exit 1; }
  "$peat" detect -s s.h5 --run c-$k --json >$k.json 2>/dev/null || { echo "detect $k failed"; exit 1; }
done
"$python" - <<'PY' || exit 1
import json
want = {"bf16": ("precision_loss", 0.98), "reversed": ("accumulation_order", 0.9)}
for k, (model, conf) in want.items():
    calls = json.load(open(k + ".json"))["calls"]
    first = {}
    for c in calls:  # each layer's forward call comes before its backward ones
        if c["layer"] not in first or c["call_index"] < first[c["layer"]]["call_index"]:
            first[c["layer"]] = c
    forward = list(first.values())
    assert len(forward) == 52, (k, len(forward))  # MobileNetV2's 52 convolutions
    for c in forward:
        assert c["verdict"] == model and abs(c["confidence"] - conf) < 1e-9, (k, c)
        if k == "bf16":
            assert c["parameters"].get("format") == "bf16", c
    # every call is right, by replay or bound: 52 forward, 52 grad_weight, 51 grad_input (the first
    # conv has none)
    assert all(c["verdict"] == model for c in calls), (k, [c for c in calls if c["verdict"] != model])
    bounded = sum(abs(c["confidence"] - conf) < 1e-9 for c in calls)
    assert bounded == 155, (k, bounded)
    if k == "bf16":
        assert all(c["parameters"].get("format") == "bf16" for c in calls), [c for c in calls if c["parameters"].get("format") != "bf16"]
PY
echo "ok: MobileNetV2's 52 forward, 52 grad_weight and 51 grad_input conv2d calls (depthwise and grouped included) get bounds and replay"
