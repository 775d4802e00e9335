#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""User kernels that allocate without bound on a later call (tests/plugins/late_plugins.c: HUNGRY
faults on the null pointer once refused, GREEDY returns an error), replayed through `peat playback`
in the kernel host under PEAT_KERNEL_MEMORY_MIB=256 (issue 34). For each: exit 0, the two fc3
forward calls with outcome out_of_memory and the 14 others ok, one warning line naming the refused
allocation and the limit, a session `peat info --verify` accepts, and no process above 1 GiB
(without the limit either would take all of the machine's memory). A malformed limit is one line.

    kernel_memory.py PEAT PLUGIN_DIR RECORDED_MLP_SESSION
"""
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

PEAT, PLUGINS, RECORDED = sys.argv[1:4]
WORK = tempfile.mkdtemp(prefix="peat-kernel-memory-")
H = Harness(PEAT, timeout=120)
ENV = dict(os.environ, PEAT_KERNEL_MEMORY_MIB="256")


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


for kind, then in (("hungry", "then it crashed (signal 11, Segmentation fault)"), ("greedy", "then it failed (code 12)")):
    out = os.path.join(WORK, kind + ".h5")
    start = time.time()
    p = subprocess.Popen([PEAT, "playback", "-s", RECORDED, "-k", f"plugin:path={PLUGINS}/libpeat_late_{kind}.so",
                          "--out", out, "--name", kind], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=ENV)
    stdout, stderr = p.communicate(timeout=120)
    seconds = time.time() - start
    lines = [l for l in stderr.splitlines() if l.strip()]
    H.check(p.returncode == 0 and len(lines) == 1 and lines[0].startswith(
        "peat: warning: the kernel failed 2 of 16 calls (out_of_memory 2) in its kernel host; first it 0 call ")
        and "ran out of memory in the kernel host: an allocation of 67108864 bytes failed under its limit of 256 MiB "
            "(PEAT_KERNEL_MEMORY_MIB), " + then in lines[0],
        f"{kind}: exit {p.returncode} in {seconds:.1f} s, one warning: {lines[:2]}")
    with h5py.File(out, "r") as f:
        rows = [(text(r["layer"]), text(r["variant"]), text(r["outcome"]), float(r["max_abs"]))
                for r in f[f"runs/{kind}/tables/call_errors"][()]]
    failed = [r for r in rows if r[2] != "ok"]
    H.check(len(rows) == 16 and len(failed) == 2 and
            all(r[0] == "fc3" and r[1] == "forward" and r[2] == "out_of_memory" and math.isnan(r[3]) for r in failed) and
            all(math.isfinite(r[3]) and r[3] < 1e-3 for r in rows if r[2] == "ok"),
            f"{kind}: 2 calls out_of_memory (fc3 forward), 14 ok: {[r[2] for r in rows]}")
    v = subprocess.run([PEAT, "info", "--verify", out], capture_output=True, text=True, timeout=120)
    H.check(v.returncode == 0, f"{kind}: peat info --verify accepts the session: {v.stderr.strip()[:200]}")
    # the detector gives the two calls a verdict of their own, with the outcome and the call's shapes
    # (a replay into a copy of the recording, with its outputs stored, as detect needs them)
    kept = os.path.join(WORK, kind + "-kept.h5")
    shutil.copy(RECORDED, kept)
    subprocess.run([PEAT, "playback", "-s", kept, "-k", f"plugin:path={PLUGINS}/libpeat_late_{kind}.so",
                    "--store-outputs", "--name", kind], capture_output=True, text=True, timeout=120, env=ENV)
    d = subprocess.run([PEAT, "detect", "-s", kept, "--run", kind, "--json"], capture_output=True, text=True, timeout=120)
    named = [c for c in json.loads(d.stdout).get("kernel_failures", []) if c.get("verdict") == "kernel_out_of_memory"] \
        if d.returncode == 0 else []
    H.check(len(named) == 2 and all(c["outcome"] == "out_of_memory" and "shapes input_0 [" in c["explanation"]
                                    for c in named),
            f"{kind}: peat detect names the 2 calls kernel_out_of_memory ({d.returncode}, {len(named)})")

# every process the replays started, peat and its kernel hosts: none above 1 GiB
largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
H.check(largest < 1024, f"the largest process of the replays took {largest:.0f} MiB (< 1024)")

for bad in ("12", "lots"):
    p = subprocess.run([PEAT, "playback", "-s", RECORDED, "-k", f"plugin:path={PLUGINS}/libpeat_late_hungry.so",
                        "--out", os.path.join(WORK, "never.h5")], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PEAT_KERNEL_MEMORY_MIB=bad))
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    H.check(p.returncode == 1 and len(lines) == 1 and lines[0] == f"peat: error: PEAT_KERNEL_MEMORY_MIB='{bad}' is not a "
            "number of MiB from 64 up, e.g. 4096 (the default)" and not os.path.exists(os.path.join(WORK, "never.h5")),
            f"PEAT_KERNEL_MEMORY_MIB={bad}: exit {p.returncode}, one line: {lines[:2]}")

shutil.rmtree(WORK, ignore_errors=True)
H.exit()
