#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# `peat analyze` on large tensors: p50/p99/p999 of |c - g| are the exact nearest-rank order
# statistics over the mismatched finite pairs, as numpy's full sort gives them (issue 19: a
# 16 M-element pair once gave a median off by 3e-8; the brute-force unit test uses small shapes
# only). 6 M elements: several threads, many histogram buckets, ties.
# usage: large_quantiles.py PEAT WORKDIR
import json, math, os, subprocess, sys

import numpy as np

peat, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(19)
g = rng.standard_normal(6_000_000).astype(np.float32)
cases = {
    "fp16": g.astype(np.float16).astype(np.float32),  # every element slightly off: many ties
    "sparse": np.where(rng.random(g.size) < 0.01, g * np.float32(1.5), g).astype(np.float32),  # 1% off
}
np.save(os.path.join(work, "g.npy"), g)
for name, c in cases.items():
    path = os.path.join(work, name + ".npy")
    np.save(path, c)
    out = subprocess.run([peat, "analyze", "-g", os.path.join(work, "g.npy"), "-c", path, "--json"], check=True,
                         capture_output=True, text=True).stdout
    report = json.loads(out)
    e = np.abs(c - g)
    s = np.sort(e[(c != g) & np.isfinite(c) & np.isfinite(g)])
    n = len(s)
    assert report["mismatched"] == n, (name, report["mismatched"], n)
    for q, key in ((0.5, "p50_abs"), (0.99, "p99_abs"), (0.999, "p999_abs")):
        want = float(s[min(n - 1, math.ceil(q * n) - 1)])
        assert report[key] == want, (name, key, report[key], want)
for name in ["g", *cases]:
    os.remove(os.path.join(work, name + ".npy"))
print("ok: exact order statistics on %d-element pairs (%s)" % (g.size, ", ".join(cases)))
