#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rounding bounds and format replay for recorded matmul calls (issue 19): the GPT-style zoo model
# profiled for one iteration, its attention matmuls (scores q k^T and values p v, forward and both
# backward GEMMs, batched over batch and heads) replayed through bf16 and a reversed summation. The
# detector rebuilds each as a batched GEMM from its recorded operands, so every call is named by
# replay (precision_loss 0.98, format=bf16) or by the fp32 reordering bound (accumulation_order
# 0.9); before, matmul calls had output-only rules.
#                                                 usage: matmul_bounds.sh PEAT PYTHON WORKDIR
set -u
peat=$1 python=$2 dir=$3/matmul-bounds
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
"$peat" profile --model chargpt --iterations 1 --record-every 1 --batch 4 -o s.h5 >/dev/null 2>&1 || { echo "profile failed"; exit 1; }
for k in bf16 reversed; do
  "$peat" playback -s s.h5 -k $k --op matmul --store-outputs --name m-$k >/dev/null 2>&1 || { echo "playback $k failed"; exit 1; }
  "$peat" detect -s s.h5 --run m-$k --json >$k.json 2>/dev/null || { echo "detect $k failed"; exit 1; }
done
"$python" - <<'PY' || exit 1
import json
want = {"bf16": ("precision_loss", 0.98, {"format": "bf16"}), "reversed": ("accumulation_order", 0.9, {})}
for k, (model, conf, params) in want.items():
    calls = json.load(open(k + ".json"))["calls"]
    assert len(calls) == 12, (k, len(calls))  # 2 blocks x (scores, values) x (forward, grad_input, grad_weight)
    for c in calls:
        assert c["op"] == "matmul", c
        assert c["verdict"] == model and abs(c["confidence"] - conf) < 1e-9, (k, c)
        for key, value in params.items():
            assert c["parameters"].get(key) == value, (k, c)
PY
echo "ok: 12 matmul calls each (forward and backward) get bounds and replay: bf16 and reordering named"
