#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A correct half-precision user kernel (core/plugin/examples/hgemm_fp16acc.c: fp16 inputs, fp16 sums
# over K-blocks of 16) replayed over LeNet's recorded linear calls (3 iterations, forward and both
# backward GEMMs): every call is precision_loss with format fp16, none a fault (issue 19 found 20 of
# 270 calls of such a plugin named index_error). The forward calls, whose bias keeps their values
# off fp16's grid, are named by the fp16-accumulation rule (accumulation=fp16).
#   plugin_hgemm.sh PEAT PLUGIN WORKDIR
set -euo pipefail
peat=$1 plugin=$2 dir=$3/plugin-hgemm
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
"$peat" profile --model lenet --iterations 3 --record-every 1 --batch 32 -o s.h5 >/dev/null 2>&1 || { echo "profile failed"; exit 1; }
"$peat" playback -s s.h5 -k "plugin:path=$plugin" --op linear --store-outputs --name h >/dev/null 2>&1 || { echo "playback failed"; exit 1; }
"$peat" detect -s s.h5 --run h --json >h.json
python3 - <<'PY'
import json, collections
calls = json.load(open("h.json"))["calls"]
assert len(calls) == 27, len(calls)  # 3 iterations x 3 layers x (forward, grad_input, grad_weight)
wrong = [c for c in calls if c["verdict"] != "precision_loss" or c["parameters"].get("format") != "fp16"]
assert not wrong, wrong
first = {}
for c in calls:
    key = (c["iteration"], c["layer"])
    if key not in first or c["call_index"] < first[key]["call_index"]:
        first[key] = c
assert all(c["parameters"].get("accumulation") == "fp16" for c in first.values()), list(first.values())
print("named:", collections.Counter(c["parameters"].get("accumulation", "-") for c in calls))
PY
echo "ok: 27 of 27 calls of a correct fp16-accumulating plugin named precision_loss (fp16)"
