#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# `peat save verifiers --json`: the three verifiers on the same faults. None fires on the clean
# batch, fp32 recomputation misses no harmful flip, and each verifier catches flips on every op.
# usage: verifiers.py PEAT WEIGHTS
import json, subprocess, sys

peat, weights = sys.argv[1], sys.argv[2]
out = subprocess.run([peat, "save", "verifiers", "-m", "lenet", "-w", weights, "--flips", "150", "--json"],
                     check=True, capture_output=True, text=True).stdout
report = json.loads(out)
ops = report["ops"]
# every linear/conv op with type-2 elements in unreliable memory (the placement may hold a whole op
# in reliable memory: the cheapest to recompute go last, fc3 among them)
names = [o["node"] for o in ops]
assert len(names) >= 4 and set(names) <= {"conv1", "conv2", "fc1", "fc2", "fc3"}, ops
for o in ops:
    in_range = o["flips"] - o["out_of_range"]
    assert 0 < in_range <= o["flips"] == 150, o
    for name in ("recompute", "abft", "mixed"):
        v = o[name]
        assert v["false_positives"] == 0, (o["node"], name, v)
        assert 0 < v["detected"] <= in_range, (o["node"], name, v)
        assert v["seconds"] > 0, (o["node"], name, v)
    assert o["recompute"]["harmful_missed"] == 0, o
print("ok: %d ops, no false positives, recomputation misses no harmful flip" % len(ops))
