#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sharded check-bits: three shards (--shard i/3, each in its own session) merged by `peat merge`
# give exactly the one-process result with the same seed (every count, per layer and per bit, and
# the false-robust list; not the seconds); the merged result is stored and reads back the same;
# a missing, duplicated or foreign shard is refused with one error line and nothing is written.
#                                                 usage: check_bits_shards.sh PEAT WEIGHTS PYTHON WORKDIR
set -u
source "$(dirname "$0")/expect_error.sh"
peat=$1 weights=$2 python=$3 dir=$4/check-bits-shards
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
args=(save check-bits -m lenet -w "$weights" --batch 16 --weight-flips 6000 --activation-flips 600 --threads 1)
"$peat" "${args[@]}" --json >whole.json 2>/dev/null || { echo "the whole campaign failed"; exit 1; }
for i in 0 1 2; do
  "$peat" "${args[@]}" --shard $i/3 -s s$i.h5 >/dev/null 2>&1 || { echo "shard $i failed"; exit 1; }
done
"$peat" "${args[@]}" --shard 2/3 --seed 9 -s foreign.h5 >/dev/null 2>&1 || { echo "the foreign shard failed"; exit 1; }
"$peat" merge s2.h5 s0.h5 s1.h5 -s merged.h5 --json >merged.json 2>merge.err || { echo "merge failed: $(cat merge.err)"; exit 1; }
grep -q "merged 3 check-bits shards" merge.err || { echo "no merge summary: $(cat merge.err)"; exit 1; }
"$python" - <<'PY' || exit 1
import json, h5py
whole, merged = json.load(open("whole.json")), json.load(open("merged.json"))
for d in (whole, merged):
    d.pop("seconds")
assert whole == merged, {k: (whole[k], merged.get(k)) for k in whole if whole[k] != merged.get(k)}
assert whole["flips"] == 6600, whole["flips"]
total = lambda c: sum(c.values())
assert sum(total(b["top1"]) for b in whole["weight_bits"]) == 6000
assert sum(total(b["promise"]) for b in whole["activation_bits"]) == 600
assert total(whole["weights_promise"]) == 6000 and whole["criterion"] == "value"
f = h5py.File("merged.h5", "r")
g = f["save/lenet-check-bits"]
assert g.attrs["shard"] in (b"merged 3", "merged 3"), g.attrs["shard"]
layers = g["layer_confusions"][()]
assert layers.shape == (5, 8) and layers[:, :4].sum() == 6000 and layers[:, 4:].sum() == 6000, layers
assert sum(l["top1"]["predicted_robust_actually_robust"] for l in whole["weight_layers"]) == layers[:, 0].sum()
acts = g["activation_layer_confusions"][()]
assert acts[:, :4].sum() == 600 and g["bit_confusions"].shape == (32, 16)
PY
absent=out.h5
expect_error "shard 1/3 is missing" merge s0.h5 s2.h5 -s out.h5
expect_error "appears twice" merge s0.h5 s1.h5 s1.h5 s2.h5 -s out.h5
expect_error "belongs to another campaign" merge s0.h5 s1.h5 foreign.h5 -s out.h5
expect_error "seed=9 vs seed=1" merge s0.h5 s1.h5 foreign.h5 -s out.h5
expect_error "no such file" merge s0.h5 gone.h5 -s out.h5
expect_error "holds no check-bits shard" merge s0.h5 "$weights" -s out.h5
echo "ok: three check-bits shards merge into the one-process result; bad shards refused"
