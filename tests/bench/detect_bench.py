#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`peat detect` against `peat analyze` on the same 16 M-element fp32 pair, whole processes, in one
run: analyze and detect alternate, RUNS times each, so that both see the same load. Two pairs: the
golden [4096, 4096] standard normal values rounded to fp16 (every element but the representable
ones differs), and rounded to bf16 with one exponent bit flipped (R13's outlier path). Prints each
run's times and the ratio detect / analyze of the medians (and of the best runs).
usage: detect_bench.py BUILD_DIR [WORKDIR] [--runs N] [--cpus LIST]   (--cpus 0: under taskset -c 0)"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

argv = sys.argv[1:]
runs, cpus = 5, None
if "--runs" in argv:
    i = argv.index("--runs")
    runs = int(argv[i + 1])
    del argv[i:i + 2]
if "--cpus" in argv:
    i = argv.index("--cpus")
    cpus = argv[i + 1]
    del argv[i:i + 2]
build = argv[0]
work = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="peat-detect-")
os.makedirs(work, exist_ok=True)
peat = os.path.join(build, "bin", "peat")
g_path = os.path.join(work, "golden.npy")
pairs = {"fp16": os.path.join(work, "fp16.npy"), "bf16 + one flipped bit": os.path.join(work, "bf16_flip.npy")}
if not all(os.path.exists(p) for p in pairs.values()):
    g = np.random.default_rng(20261203).standard_normal((4096, 4096), dtype=np.float32)
    np.save(g_path, g)
    np.save(pairs["fp16"], g.astype(np.float16).astype(np.float32))
    u = g.view(np.uint32)
    c = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    c[1234, 567] ^= np.uint32(1 << 28)
    np.save(pairs["bf16 + one flipped bit"], c.view(np.float32))

prefix = ["taskset", "-c", cpus] if cpus else []


def timed(args):
    start = time.perf_counter()
    out = subprocess.run(prefix + args, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, out


subprocess.run(["cat", g_path] + list(pairs.values()), stdout=subprocess.DEVNULL, check=True)  # page cache
print(f"16M-element fp32 pairs, {os.cpu_count()} cores{', taskset -c ' + cpus if cpus else ''}, {runs} runs each:")
for name, c_path in pairs.items():
    analyze, detect, verdict = [], [], ""
    for _ in range(runs):
        analyze.append(timed([peat, "analyze", "-g", g_path, "-c", c_path, "--json"])[0])
        t, out = timed([peat, "detect", "-g", g_path, "-c", c_path])
        detect.append(t)
        verdict = out.splitlines()[0]
    ratios = [d / a for a, d in zip(analyze, detect)]
    print(f"  {name}: {verdict}")
    print("    analyze  " + " ".join(f"{t:.3f}" for t in analyze) + f"  (median {statistics.median(analyze):.3f})")
    print("    detect   " + " ".join(f"{t:.3f}" for t in detect) + f"  (median {statistics.median(detect):.3f})")
    print(f"    detect / analyze: median {statistics.median(detect) / statistics.median(analyze):.2f}x, "
          f"best {min(detect) / min(analyze):.2f}x, per run {min(ratios):.2f}-{max(ratios):.2f}x")
