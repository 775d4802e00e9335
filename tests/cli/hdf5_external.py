#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sessions and tensor files that point outside themselves (issue 34): h5py writes, from a real
session, copies whose recorded output is (a) external raw storage on /etc/passwd, (b) external raw
storage on a FIFO, (c) an external link to another file, (d) a virtual dataset mapping another
file; and a tensor file x.h5:/ext whose dataset is external storage on /etc/passwd. Each must be
refused with one line, exit 1, within seconds (the FIFO never opened), and no byte of /etc/passwd
may reach the output.

    hdf5_external.py PEAT SAMPLE.h5
"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

PEAT, SAMPLE = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="peat-h5-external-")
CALL = "runs/golden/iterations/000000/calls/000000/output"
failures = []
secret = open("/etc/passwd", "rb").read().split(b"\n")[0].decode(errors="replace")  # "root:x:0:0:..."


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def refused(args, *needles):
    try:
        p = subprocess.run([PEAT, *args], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        check(False, f"{' '.join(args)}: did not finish within 20 s")
        return
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    ok = (p.returncode == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ") and
          all(n in lines[0] for n in needles) and secret not in p.stdout and secret not in p.stderr)
    check(ok, f"peat {' '.join(args[:2])} {os.path.basename(args[-1])}: exit {p.returncode}, one line with "
              f"{needles}, nothing of /etc/passwd: {lines[:2]}")


def variant(name, replace):
    path = os.path.join(WORK, name + ".h5")
    shutil.copy(SAMPLE, path)
    with h5py.File(path, "r+") as f:
        old = f[CALL]
        shape, attrs = old.shape, dict(old.attrs)
        del f[CALL]
        replace(f, shape)
        if isinstance(f.get(CALL, getlink=True), h5py.HardLink):
            for k, v in attrs.items():
                f[CALL].attrs[k] = v
    return path


fifo = os.path.join(WORK, "fifo")
os.mkfifo(fifo)
other = os.path.join(WORK, "other.h5")
with h5py.File(other, "w") as f:
    f["data"] = np.zeros(4096, np.float32)

cases = {
    "passwd": (lambda f, shape: f.create_dataset(CALL, shape, np.float32,
                                                 external=[("/etc/passwd", 0, h5py.h5f.UNLIMITED)]),
               "external raw storage"),
    "fifo": (lambda f, shape: f.create_dataset(CALL, shape, np.float32, external=[(fifo, 0, h5py.h5f.UNLIMITED)]),
             "external raw storage"),
    "link": (lambda f, shape: f.__setitem__(CALL, h5py.ExternalLink(other, "/data")), "is an external link"),
}


def virtual(f, shape):
    layout = h5py.VirtualLayout(shape=shape, dtype=np.float32)
    n = int(np.prod(shape))
    layout[...] = h5py.VirtualSource(other, "data", shape=shape)  # "data" in the other file, read as this shape
    f.create_virtual_dataset(CALL, layout)


cases["virtual"] = (virtual, "is a virtual dataset")

for name, (replace, needle) in cases.items():
    path = variant(name, replace)
    refused(["info", "--verify", path], "is refused", needle)
    refused(["info", "--calls", "--verify", path], "is refused", needle)

# a tensor file from someone else, as --golden names it
tensor = os.path.join(WORK, "tensor.h5")
with h5py.File(tensor, "w") as f:
    f.create_dataset("ext", (64,), np.float32, external=[("/etc/passwd", 0, h5py.h5f.UNLIMITED)])
np.save(os.path.join(WORK, "c.npy"), np.zeros(64, np.float32))
refused(["detect", "--golden", tensor + ":/ext", "--candidate", os.path.join(WORK, "c.npy")], "external raw storage")
refused(["analyze", "--golden", tensor + ":/ext", "--candidate", os.path.join(WORK, "c.npy")], "external raw storage")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
