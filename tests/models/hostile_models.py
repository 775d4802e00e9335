#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Model files whose own code misbehaves (issue 34): scripted forwards that loop forever, allocate
16 GB or crash (`torch._sparse_coo_tensor_unsafe` with an index far out of bounds, then `to_dense`,
which writes there: signal 11 in any process that runs it). Their first forward runs in the probe
helper under a memory and a time limit, so `peat models --inspect` and `peat profile` refuse each
with one line, exit 1, in a few seconds, and `peat` itself stays small and gets no signal.

Archives that lie about their size, checked in the probe helper (peat-probe torchscript FILE, the
load-only probe every model file passes first): a 3.3 MB archive whose constant inflates to
3.2 GiB of zeros (a compressed bomb; LibTorch allocates and inflates it whole), and one whose zip
directory declares a 4 GiB record it does not hold. Each is refused by the helper in under 5 s and
under 1 GiB, before LibTorch reads it.

    hostile_models.py PEAT
"""
import io
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib

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


class Crashing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        far = torch.tensor([[1 << 40], [1 << 40]], dtype=torch.long)
        sparse = torch._sparse_coo_tensor_unsafe(far, torch.ones(1), [2, 2])
        return self.fc(x) + sparse.to_dense().sum()  # to_dense writes at element 2^40 * 3


class Constant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)
        self.big = torch.zeros(1000)

    def forward(self, x):
        return self.fc(x) + self.big[0]


def zip_entry(name, data, method=0, size=None, crc=None):
    """(name, crc, declared size, method, bytes as stored) for write_zip."""
    return name, zlib.crc32(data) if crc is None else crc, len(data) if size is None else size, method, data


def write_zip(path, entries):
    """A plain zip archive (no zip64) of entries, with the sizes and CRCs they declare."""
    with open(path, "wb") as out:
        central = b""
        for name, crc, size, method, payload in entries:
            offset, n = out.tell(), name.encode()
            out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(payload), size,
                                  len(n), 0) + n + payload)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(payload),
                                   size, len(n), 0, 0, 0, 0, 0, offset) + n
        start = out.tell()
        out.write(central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central),
                                        start, 0))


def zero_deflate(nbytes):
    """(crc32, raw deflate stream) of nbytes zero bytes: one 1 MiB block, fully flushed, repeated."""
    mib = 1 << 20
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(bytes(mib)) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(bytes(mib)) + c.flush(zlib.Z_FULL_FLUSH)
    stream = first + again * (nbytes // mib - 1) + c.flush(zlib.Z_FINISH)
    crc, block = 0, bytes(16 * mib)
    for _ in range(nbytes // len(block)):
        crc = zlib.crc32(block, crc)
    return crc, stream


def lying_archive(path, nbytes, deflated):
    """Constant's archive with its 1000 zeros grown to nbytes: deflated for real (a bomb), or only
    declared in the zip directory (the record stays 4000 bytes)."""
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Constant()), buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    prefix = src.namelist()[0].split("/")[0]
    entries = []
    for name in src.namelist():
        data = src.read(name)
        if name == prefix + "/data.pkl" and deflated:  # the storage's and the tensor's size: 1000 -> nbytes / 4
            data = data.replace(b"M\xe8\x03", b"J" + struct.pack("<i", nbytes // 4))
        if name == prefix + "/data/0" and deflated:
            crc, stream = zero_deflate(nbytes)
            entries.append(zip_entry(name, stream, 8, nbytes, crc))
        elif name == prefix + "/data/0":
            entries.append(zip_entry(name, data, 0, nbytes))
        else:
            entries.append(zip_entry(name, data))
    write_zip(path, entries)
    return path


data = os.path.join(WORK, "data.h5")
rng = np.random.default_rng(0)
with h5py.File(data, "w") as f:
    for split in ("train", "test"):
        f[f"{split}/x"] = rng.standard_normal((32, 4)).astype(np.float32)
        f[f"{split}/y"] = rng.integers(0, 2, 32).astype(np.int64)

env = dict(os.environ, PEAT_PROBE_TIMEOUT="3")
for name, module, needle in (("forever", Forever, "did not finish within 3 s"),
                             ("hungry", Hungry, "MiB (PEAT_MODEL_MEMORY_MIB)"),
                             ("crashing", Crashing, "crashed in the probe helper (signal 11, Segmentation fault)")):
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

# the load-only probe, as every model file meets it first
probe = os.path.join(os.environ["PEAT_MODULE_DIR"], "peat-probe")
bomb = lying_archive(os.path.join(WORK, "bomb.pt"), 3300 << 20, deflated=True)
declared = lying_archive(os.path.join(WORK, "declared.pt"), (1 << 32) - 16, deflated=False)
for path, limit, needle in ((bomb, "4096", "holds a compressed bomb: record 'archive/data/0' inflates from 3.3 MiB to "
                             "3.2 GiB (1011:1), and PyTorch stores tensor data uncompressed; it was not loaded"),
                            (declared, "1024", "declares 4.0 GiB of records (the largest, 'archive/data/0', 4.0 GiB), "
                             "more than the 1024 MiB its loading may take (PEAT_MODEL_MEMORY_MIB); it was not loaded")):
    t0 = time.time()
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen([probe, "torchscript", path], stdout=out, stderr=subprocess.DEVNULL,
                             env=dict(env, PEAT_MODEL_MEMORY_MIB=limit))
        _, status, usage = os.wait4(p.pid, 0)  # this helper alone: its largest size, its children's included
        seconds, rss, p.returncode = time.time() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)
        out.seek(0)
        p.stdout = out.read()
    check(p.returncode == 1 and p.stdout.startswith("error\tmodel file '" + path + "' ") and needle in p.stdout and
          seconds < 5 and rss < 1024 and os.path.getsize(path) < (4 << 20),
          f"{os.path.basename(path)} ({os.path.getsize(path) >> 10} KiB): peat-probe refused it in {seconds:.2f} s "
          f"(at most {rss:.0f} MiB), exit {p.returncode}: {p.stdout.strip()[:300]}")

    # the same files as users meet them: peat models --inspect and peat profile, end to end
    for args in (["models", "--inspect", path], ["profile", "--model", path, "--data", "fashion-mnist:3x32x32", "-n", "1",
                                                  "-o", os.path.join(WORK, "never.h5")]):
        t0 = time.time()
        with tempfile.TemporaryFile("w+") as err:
            q = subprocess.Popen([PEAT, *args], stdout=subprocess.DEVNULL, stderr=err,
                                 env=dict(env, PEAT_MODEL_MEMORY_MIB=limit))
            _, status, usage = os.wait4(q.pid, 0)  # peat and the helpers it waited for
            seconds, rss, code = time.time() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)
            err.seek(0)
            lines = [l for l in err.read().splitlines() if l.strip()]
        errors = [l for l in lines if l.startswith("peat: error: ")]
        check(code == 1 and len(errors) == 1 and needle in errors[0] and seconds < 5 and rss < 1024 and
              not os.path.exists(os.path.join(WORK, "never.h5")),
              f"{os.path.basename(path)}: peat {args[0]} refused it in {seconds:.2f} s (at most {rss:.0f} MiB), exit "
              f"{code}: {errors[:1] or lines[-1:]}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
