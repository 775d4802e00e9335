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
import json
import os
import shutil
import subprocess
import sys
import tempfile

import zlib

import h5py
from h5py import h5d, h5p, h5s, h5t
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import peattest  # noqa: E402
from peattest import Harness  # noqa: E402

PEAT, RECORDED = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="peat-h5-hostile-")
H = Harness(PEAT)
CALL = "runs/golden/iterations/000000/calls/000000"
ENV = dict(os.environ, PEAT_PROBE_CACHE="off")
# a stored candidate run of this test's own, never analysed (so nothing is reused), for analyze and
# detect to read the crafted golden output against; every crafted file is a copy of it (it must not
# depend on runs other tests add to the shared fixture)
STORED = os.path.join(WORK, "stored.h5")
shutil.copy(RECORDED, STORED)
subprocess.run([PEAT, "playback", "-s", STORED, "-k", "fp16", "--store-outputs", "--name", "fresh"], env=ENV,
               check=True, stdout=subprocess.DEVNULL)
RECORDED = STORED


def measured(args):
    """Runs peat ARGS; (exit code, stderr lines, seconds, largest RSS of it and its helpers in MiB)."""
    m = peattest.measured(PEAT, args, ENV)
    return m.rc, m.lines, m.seconds, m.rss


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
                 ["analyze", "--session", path, "--run", "fresh"],
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


# filter pipelines (issue 44): a call's output re-stored through a filter peat does not write, with
# the bytes of one chunk written raw (a 7-byte chunk where 16 KiB are declared), or with the shuffle
# filter's element size patched in the file to 7 (libhdf5 sets it itself at creation). Each must be
# refused before its data is decoded, in one line naming the dataset and the filter; short raw chunks
# through the filters peat does write are read as damaged; Fletcher-32 (h5py's `fletcher32=True`)
# stays readable.
def restored(filters, raw=None):
    def change(f):
        old = f[CALL + "/output"]
        data, attrs = old[...], dict(old.attrs)
        del f[CALL + "/output"]
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk(data.shape)
        for code, values in filters:
            dcpl.set_filter(code, 0, values)
        dsid = h5d.create(f[CALL].id, b"output", h5t.IEEE_F32LE, h5s.create_simple(data.shape), dcpl=dcpl)
        ds = h5py.Dataset(dsid)
        if raw is None:
            ds[...] = data
        else:
            dsid.write_direct_chunk((0,) * data.ndim, raw, 0)
        for k, v in attrs.items():
            ds.attrs[k] = v
    return change


def patched_shuffle(path):
    data = bytearray(open(path, "rb").read())
    # a version-1 pipeline entry: id 2, name length 8, flags, one value, "shuffle\0", the element size
    entry = bytes.fromhex("0200080000000100") + b"shuffle\0" + (4).to_bytes(4, "little")  # mandatory: ours
    at = data.find(entry)
    H.check(at >= 0 and data.count(entry) == 1, "the crafted output's shuffle entry is found once to patch")
    data[at + len(entry) - 4:at + len(entry)] = (7).to_bytes(4, "little")
    open(path, "wb").write(bytes(data))


SHUFFLE, DEFLATE, FLETCHER, NBIT, SCALEOFFSET = 2, 1, 3, 5, 6
OUTPUT = "'/" + CALL + "/output'"
filtered = [
    ("nbit", restored([(NBIT, ())]), [OUTPUT, "HDF5 filter 5 (nbit)"], 1),
    ("nbit-raw-7", restored([(NBIT, ())], b"\x01" * 7), [OUTPUT, "HDF5 filter 5 (nbit)"], 1),
    ("scaleoffset", restored([(SCALEOFFSET, (0, 2))]), [OUTPUT, "HDF5 filter 6 (scaleoffset)"], 1),
    ("shuffle-size-7", restored([(SHUFFLE, ())], None), None, None),  # its element size is patched below
    ("shuffle-raw-7", restored([(SHUFFLE, ())], b"\x01" * 7), [OUTPUT, "damaged"], 1),
    ("plain-raw-7", restored([], b"\x01" * 7), [OUTPUT, "damaged"], 1),
    ("deflate-raw-7", restored([(SHUFFLE, ()), (DEFLATE, (4,))], zlib.compress(b"\x01" * 7)), [OUTPUT, "damaged"], 1),
    ("fletcher32", restored([(SHUFFLE, ()), (DEFLATE, (4,)), (FLETCHER, ())]), None, 0),
]
for name, change, needles, want in filtered:
    path = variant(name, change)
    if name == "shuffle-size-7":
        patched_shuffle(path)
        needles, want = ["HDF5 filter 2 (shuffle), declaring elements of 7 bytes where the data's are 4"], 1
    for args in (["info", "--verify", path], ["analyze", "--session", path, "--run", "fresh"],
                 ["detect", "--session", path, "--run", "fresh"],
                 ["playback", "-s", path, "-k", "bf16", "--out", os.path.join(WORK, name + "-replay.h5")]):
        rc, lines, seconds, rss = measured(args)
        if want == 0:
            ok = rc == 0 and not any(l.startswith("peat: error:") for l in lines)
        else:
            ok = (rc == want and len(lines) == 1 and lines[0].startswith("peat: error: ") and
                  all(n in lines[0] for n in needles))
        H.check(ok and seconds < 10 and rss < 1024,
                f"{name}: peat {args[0]} {args[1]}: exit {rc} in {seconds:.2f} s, largest process {rss:.0f} MiB: "
                f"{lines[:2]}")

# verify means verified (issue 44 item 6): a call's output stored as strings, compounds or enums is
# refused by --verify itself (not left for analyze), and a table whose chunk is garbage fails
# --verify naming the table (it used to pass, and the workbench showed an empty plot)
def output_as(kind):
    def change(f):
        attrs = dict(f[CALL + "/output"].attrs)
        del f[CALL + "/output"]
        if kind == "strings":
            ds = f.create_dataset(CALL + "/output", data=np.array([b"one", b"two"], dtype="S3"))
        elif kind == "compound":
            ds = f.create_dataset(CALL + "/output", data=np.zeros(4, dtype=[("a", "<f4"), ("b", "<i4")]))
        else:
            ds = f.create_dataset(CALL + "/output", data=np.zeros(4, np.int8), dtype=h5py.enum_dtype({"A": 0, "B": 1}, "i1"))
        for k, v in attrs.items():
            ds.attrs[k] = v
    return change


def garbage_table(f):
    rows = f["runs/golden/tables/curve"][...]
    del f["runs/golden/tables/curve"]
    ds = f.create_dataset("runs/golden/tables/curve", data=rows, chunks=(len(rows),), compression="gzip")
    ds.id.write_direct_chunk((0,), b"\x00garbage, not deflate" * 3, 0)


def huge_table(f):  # rows of 2^62 compound elements: their byte count overflows 64 bits
    f.create_dataset("runs/golden/tables/huge", shape=(1, 1 << 62), chunks=(1, 1),
                     dtype=[("a", "<f4"), ("b", "<i4")])


for name, change, needle in (("table-huge-rows", huge_table, "tables/huge"),
                             ("output-strings", output_as("strings"), "holds strings, not numbers"),
                             ("output-compound", output_as("compound"), "holds compound records, not numbers"),
                             ("output-enum", output_as("enum"), "holds enumerations, not numbers"),
                             ("table-garbage-chunk", garbage_table, "tables/curve")):
    path = variant(name, change)
    rc, lines, seconds, rss = measured(["info", "--verify", path])
    H.check(rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ") and needle in lines[0] and seconds < 10,
            f"{name}: peat info --verify: exit {rc} in {seconds:.2f} s: {lines[:2]}")


# a run left "running" by a writer that is gone (killed, or stopped by a full disk) shows as interrupted
def left_running(f):
    f["runs/golden"].attrs["status"] = "running"


path = variant("left-running", left_running)
p = subprocess.run([PEAT, "info", path], capture_output=True, text=True, env=ENV)
H.check(p.returncode == 0 and "golden: profile, kernel golden, interrupted;" in p.stdout,
        f"a run left running with no writer alive is shown as interrupted: {[l for l in p.stdout.splitlines() if 'golden:' in l]}")

# a deflate bomb (audit of 2026-12-08): a 1 MB stream that inflates to 1 GiB, in a chunk declaring
# 3,840 bytes; libhdf5's deflate grew its buffer to the stream's end (3.5 GB for 3 GiB), peat's
# stops at 64 MiB. And a dataset declaring filtered chunks of 128 MiB is refused when opened.
def deflate_bomb(f):
    attrs = dict(f[CALL + "/output"].attrs)
    shape = f[CALL + "/output"].shape
    del f[CALL + "/output"]
    ds = f.create_dataset(CALL + "/output", shape=shape, dtype="f4", chunks=(1,) * (len(shape) - 1) + (shape[-1],),
                          compression="gzip")
    z = zlib.compressobj(9)
    ds.id.write_direct_chunk((0,) * len(shape), b"".join(z.compress(b"\0" * (1 << 26)) for _ in range(16)) + z.flush())
    for k, v in attrs.items():
        ds.attrs[k] = v


def huge_chunks(f):
    f.create_dataset("runs/golden/tables/wide", shape=(1 << 26,), chunks=(1 << 25,), dtype="f4", compression="gzip")


for name, change, needle, commands in (
        ("deflate-bomb", deflate_bomb, "a deflated chunk inflates past 64 MiB", ("verify", "analyze", "playback")),
        ("huge-chunks", huge_chunks, "declares filtered chunks of 134217728 bytes", ("verify",))):
    path = variant(name, change)
    runs = {"verify": ["info", "--verify", path], "analyze": ["analyze", "--session", path, "--run", "fresh"],
            "playback": ["playback", "-s", path, "-k", "bf16", "--out", os.path.join(WORK, name + "-replay.h5")]}
    for command in commands:
        rc, lines, seconds, rss = measured(runs[command])
        H.check(rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ") and needle in lines[0] and
                seconds < 10 and rss < 512,
                f"{name}: peat {command}: exit {rc} in {seconds:.2f} s, largest process {rss:.0f} MiB: {lines[:2]}")

# what no checksum vouches for is named (audit of 2026-12-08: a tensor whose crc32 was deleted and
# whose data was changed passed as one of "1 have none", and tables were only counted)
def checksum_removed(f):
    ds = f[CALL + "/output"]
    del ds.attrs["crc32"]
    data = ds[...]
    data.flat[0] = 1e30
    ds[...] = data


path = variant("checksum-removed", checksum_removed)
p = subprocess.run([PEAT, "info", "--verify", path], capture_output=True, text=True, env=ENV)
named = [l for l in p.stdout.splitlines() if l.startswith("  without a checksum:")]
H.check(p.returncode == 0 and named == [f"  without a checksum: /{CALL}/output"] and
        any(l.startswith("  tables and text lists (no checksum): /runs/") for l in p.stdout.splitlines()),
        f"info --verify names the dataset without a checksum and the tables: {p.stdout.splitlines()[:3]}")
p = subprocess.run([PEAT, "info", "--verify", "--json", path], capture_output=True, text=True, env=ENV)
H.check(p.returncode == 0 and json.loads(p.stdout)["without_checksum_paths"] == [f"/{CALL}/output"] and
        "/runs/golden/tables/curve" in json.loads(p.stdout)["read_whole_paths"],
        f"info --verify --json lists them: {p.stdout[:300]}")

# a candidate run that names itself as its source: compared with itself it matched exactly
path = variant("source-itself", lambda f: f["runs/fresh"].attrs.__setitem__("source_run", "fresh"))
for command in ("analyze", "detect"):
    rc, lines, seconds, rss = measured([command, "--session", path, "--run", "fresh"])
    H.check(rc == 1 and lines == ["peat: error: run 'fresh' names itself as the run it replays (source_run)"],
            f"a run replaying itself: peat {command} --session: exit {rc}: {lines[:2]}")

# a candidate output that is not the golden one's tensor (audit of 2026-12-08: `analyze --session`
# and `detect --session` read past the golden buffer, or died of SIGSEGV): another call's output, a
# row more of the same rank, the golden output transposed; each refused naming both shapes
FRESH = "runs/fresh/iterations/000000/calls/000000/output"


def candidate_as(kind):
    def change(f):
        golden = f[CALL + "/output"][...]
        if kind == "other-call":
            data = np.concatenate([golden.ravel()] * 3)
        elif kind == "row-more":
            data = np.concatenate([golden.reshape(golden.shape[0], -1), golden.reshape(golden.shape[0], -1)[:, :1]], 1)
        else:
            data = np.ascontiguousarray(golden.reshape(golden.shape[0], -1).T)
        attrs = dict(f[FRESH].attrs)
        del f[FRESH]
        ds = f.create_dataset(FRESH, data=data.astype(np.float32))
        for k, v in attrs.items():
            ds.attrs[k] = v
        ds.attrs["crc32"] = np.uint32(zlib.crc32(data.astype(np.float32).tobytes()))
    return change


for kind in ("other-call", "row-more", "transposed"):
    path = variant("candidate-" + kind, candidate_as(kind))
    for command in ("analyze", "detect"):
        rc, lines, seconds, rss = measured([command, "--session", path, "--run", "fresh"])
        H.check(rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: call iterations/000000/calls/000000: "
                                                                    "run 'fresh' stores an output of shape [") and
                "run 'golden' one of [" in lines[0],
                f"candidate output {kind}: peat {command} --session: exit {rc} in {seconds:.2f} s: {lines[:2]}")

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
