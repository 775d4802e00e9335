#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`peat analyze` on two 16 M-element fp32 .npy files against the NumPy reference and against a single
read pass over the same bytes (`dd`), all whole processes, best of 3, in one run.
The candidate is the golden rounded to bf16: every element differs, the heaviest case.
usage: analyze_bench.py BUILD_DIR [WORKDIR]"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

build = sys.argv[1]
work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="peat-analyze-")
os.makedirs(work, exist_ok=True)
peat = os.path.join(build, "bin", "peat")
here = os.path.dirname(os.path.abspath(__file__))
gpath, cpath = os.path.join(work, "golden.npy"), os.path.join(work, "candidate.npy")
if not os.path.exists(cpath):
    rng = np.random.default_rng(20261130)
    g = rng.standard_normal((4096, 4096), dtype=np.float32)
    c = ((g.view(np.uint32) + 0x7FFF + ((g.view(np.uint32) >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    np.save(gpath, g)
    np.save(cpath, c)


def best(argv, repeats=3, capture=True):
    times, out = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        if capture:
            out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
        else:
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times), out


subprocess.run(["cat", gpath, cpath], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
# dd read()s every byte into its buffer (cat may splice straight to /dev/null without reading).
read, _ = best(["sh", "-c", f"dd if={gpath} of=/dev/null bs=4M status=none && dd if={cpath} of=/dev/null bs=4M status=none"],
               capture=False)
ours, out = best([peat, "analyze", "--golden", gpath, "--candidate", cpath, "--json"])
ref, ref_out = best([sys.executable, os.path.join(here, "analyze_reference.py"), gpath, cpath], repeats=1)
a, b = json.loads(out), json.loads(ref_out)
agree = all(a[k] == b[k] for k in ("mismatched", "bit_mismatch", "log2_ulp_hist", "runs", "longest_run", "max_abs_index"))
agree = agree and all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in ("max_abs", "mean_abs", "rms_abs"))
agree = agree and a["p50_abs"] == b["p50"] and a["p99_abs"] == b["p99"] and a["p999_abs"] == b["p999"]
print(f"16M-element fp32 pair ({os.path.getsize(gpath) * 2 / 2**20:.0f} MiB), {os.cpu_count()} cores:")
print(f"  single read pass (dd)    {read:.3f} s")
print(f"  peat analyze             {ours:.3f} s   ({ours / read:.1f}x the read pass)")
print(f"  NumPy reference          {ref:.3f} s   (peat analyze is {ref / ours:.1f}x faster)")
print(f"  reports agree: {agree}")
