#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sessions whose structure lies (issue 34): h5py writes copies of a recorded MLP session in which
(a) a recorded call's output declares 4 TiB in chunks the file does not hold (with no chunk, and
with one real chunk), (b) it declares 1 GiB, less than the machine's memory but far more than the
file stores, (c) a group holds a hard link to an ancestor (the root, the run list, the iterations),
(d) a soft link to the root. `peat info --verify`, `peat info --calls`, `peat analyze --session`
and `peat playback` must each refuse every file with one line, exit 1, in under 5 s, with no
process of theirs above 1 GiB, and name the tensor or the link; likewise `peat analyze` and
`peat detect` for a tensor file (`--golden F.h5:/x`) that declares 1 GiB it does not hold.

    hdf5_hostile.py PEAT RECORDED_MLP_SESSION
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

PEAT, RECORDED = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="peat-h5-hostile-")
H = Harness(PEAT)
CALL = "runs/golden/iterations/000000/calls/000000"
ENV = dict(os.environ, PEAT_PROBE_CACHE="off")


def measured(args):
    """Runs peat ARGS; (exit code, stderr lines, seconds, largest RSS of it and its helpers in MiB)."""
    err = open(os.path.join(WORK, "stderr"), "w+")
    start = time.time()
    p = subprocess.Popen([PEAT, *args], stdout=subprocess.DEVNULL, stderr=err, env=ENV)
    killer = threading.Timer(60, p.kill)
    killer.start()
    _, status, usage = os.wait4(p.pid, 0)
    killer.cancel()
    seconds = time.time() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    lines = [l.rstrip("\n") for l in err if l.strip()]
    return p.returncode, lines, seconds, usage.ru_maxrss / 1024


def variant(name, change):
    path = os.path.join(WORK, name + ".h5")
    shutil.copy(RECORDED, path)
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def declaring(shape, write_one_chunk):
    def change(f):
        attrs = dict(f[CALL + "/output"].attrs)
        del f[CALL + "/output"]
        ds = f.create_dataset(CALL + "/output", shape=shape, dtype=np.float32, chunks=(1024, 1024),
                              compression="gzip")
        if write_one_chunk:
            ds[0:1024, 0:1024] = 0
        for k, v in attrs.items():
            ds.attrs[k] = v
    return change


def hard_link(parent, target):
    def change(f):
        f[parent + "/loop"] = f[target]
    return change


def soft_link(f):
    f["provenance/loop"] = h5py.SoftLink("/")


cases = [
    ("declares-4tib", declaring((1 << 20, 1 << 20), False), ["is refused: tensor '/" + CALL + "/output' declares ["]),
    ("declares-4tib-one-chunk", declaring((1 << 20, 1 << 20), True), ["is refused: tensor '/" + CALL + "/output'"]),
    ("declares-1gib", declaring((1 << 15, 1 << 13), False),
     ["is refused: tensor '/" + CALL + "/output' declares [32768x8192] elements of 4 bytes: 1.0 GiB (1073741824 "
      "bytes), but the file stores 0 bytes of it"]),
]
# each walk (verify, the summary's, the playback's) must refuse or never enter the cycle
cycles = [
    ("cycle-root", hard_link("provenance", "/"), "'/provenance/loop' links back to its ancestor group '/'"),
    ("cycle-runs", hard_link("runs/golden", "runs"), "'/runs/golden/loop' links back to its ancestor group '/runs'"),
    ("cycle-iterations", hard_link(CALL, "runs/golden/iterations"), "links back to its ancestor group"),
    ("cycle-soft", soft_link, "'/provenance/loop' links back to its ancestor group '/'"),
]

for name, change, needles in cases:
    path = variant(name, change)
    for args in (["info", "--verify", path], ["info", "--calls", path],
                 ["analyze", "--session", path, "--run", "edge"],
                 ["playback", "-s", path, "-k", "bf16", "--out", os.path.join(WORK, name + "-replay.h5")]):
        rc, lines, seconds, rss = measured(args)
        ok = (rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ") and
              all(n in lines[0] for n in needles) and seconds < 5 and rss < 1024)
        H.check(ok, f"{name}: peat {args[0]} {args[1]}: exit {rc} in {seconds:.2f} s, largest process {rss:.0f} MiB: "
                    f"{lines[:2]}")

for name, change, needle in cycles:
    path = variant(name, change)
    # --verify walks every group: it must refuse the cycle; the other readers walk fixed paths and
    # must not be led into it (they refuse what is not a dataset where a call's tensors are)
    for args, must in ((["info", "--verify", path], needle), (["info", "--calls", path], None),
                       (["playback", "-s", path, "-k", "bf16", "--out", os.path.join(WORK, name + "-replay.h5")],
                        None)):
        rc, lines, seconds, rss = measured(args)
        errors = [l for l in lines if l.startswith("peat: error: ")]
        if must:
            ok = rc == 1 and len(lines) == 1 and len(errors) == 1 and must in errors[0]
        else:  # it reads past the link (exit 0) or refuses it in one line (exit 1), never anything else
            ok = rc == 0 or (rc == 1 and len(lines) == 1 and len(errors) == 1)
        ok = ok and seconds < 5 and rss < 1024
        H.check(ok, f"{name}: peat {args[0]} {args[1]}: exit {rc} in {seconds:.2f} s, largest process {rss:.0f} MiB: "
                    f"{lines[:2]}")

# a tensor file from someone else, as --golden names it
tensor = os.path.join(WORK, "tensor.h5")
with h5py.File(tensor, "w") as f:
    f.create_dataset("x", shape=(1 << 15, 1 << 13), dtype=np.float32, chunks=(256, 256), compression="gzip")
np.save(os.path.join(WORK, "c.npy"), np.zeros(64, np.float32))
for command in ("analyze", "detect"):
    rc, lines, seconds, rss = measured([command, "--golden", tensor + ":/x", "--candidate", os.path.join(WORK, "c.npy")])
    H.check(rc == 1 and lines == [f"peat: error: '{tensor}:/x' is refused: it declares [32768x8192] elements of 4 bytes: "
                                  "1.0 GiB (1073741824 bytes), but the file stores 0 bytes of it"] and
            seconds < 5 and rss < 1024,
            f"tensor file: peat {command}: exit {rc} in {seconds:.2f} s, largest process {rss:.0f} MiB: {lines[:2]}")

shutil.rmtree(WORK, ignore_errors=True)
H.exit()
