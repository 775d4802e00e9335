#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Model files whose own code misbehaves (issue 34): scripted forwards that loop forever or
allocate 16 GB. Their first forward runs in the probe helper under a memory and a time limit, so
`peat models --inspect` and `peat profile` refuse each with one line, exit 1, in a few seconds,
and `peat` itself stays small. (A forward that crashes is refused the same way: the helper's crash
is what cli_model_probed checks with a crashing stand-in; no scripted op that crashes LibTorch 1.13
was found: its sparse and index ops check their indices.)

    hostile_models.py PEAT
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

PEAT = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="peat-hostile-")
H = Harness(PEAT)
check, failures = H.check, H.failures


class Forever(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        n = 0
        while n >= 0:
            n = n + 1
            if n > 1 << 62:
                n = 0
        return self.fc(x)


class Hungry(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        big = torch.ones(4 << 30)  # 16 GiB of float32
        return self.fc(x) + big[0]


data = os.path.join(WORK, "data.h5")
rng = np.random.default_rng(0)
with h5py.File(data, "w") as f:
    for split in ("train", "test"):
        f[f"{split}/x"] = rng.standard_normal((32, 4)).astype(np.float32)
        f[f"{split}/y"] = rng.integers(0, 2, 32).astype(np.int64)

env = dict(os.environ, PEAT_PROBE_TIMEOUT="3")
for name, module, needle in (("forever", Forever, "did not finish within 3 s"),
                             ("hungry", Hungry, "MiB (PEAT_MODEL_MEMORY_MIB)")):
    path = os.path.join(WORK, name + ".pt")
    torch.jit.script(module()).save(path)
    for args in (["models", "--inspect", path, "--input-shape", "2,4"],
                 ["profile", "--model", path, "--data", data, "-n", 1, "-o", os.path.join(WORK, name + ".h5")]):
        args = [str(a) for a in args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        p = subprocess.run([PEAT, *args], capture_output=True, text=True, timeout=120, env=env)
        seconds = time.time() - t0
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        errors = [l for l in lines if l.startswith("peat: error: ")]
        # ru_maxrss of the children so far: the largest of peat and its helpers, in KiB
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        check(p.returncode == 1 and len(errors) == 1 and needle in errors[0] and seconds < 30 and rss < 4500,
              f"{name}: peat {args[0]} refused in {seconds:.1f} s (largest process so far {rss:.0f} MiB), exit "
              f"{p.returncode}: {errors[:1] or lines[-1:]}")
        check(not os.path.exists(os.path.join(WORK, name + ".h5")), f"{name}: no session written")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
