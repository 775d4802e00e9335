#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Numbers a session records are checked values (issue 44): a copy of a recorded MLP session whose
golden run says threads="999999", threads="64", batch="lots", batch="2000000", context="-1",
seed="x" or learning_rate="nan". `peat playback` (with --resume, which rebuilds the trainer from
them) either runs (threads within range: capped at this machine's cores) or refuses in one
`peat: error:` line naming the attribute, in seconds and under 1 GiB. And strings from a session
reach the terminal escaped (issue 44 item 5): `peat info`, `peat info --verify` and an error naming
a run print no ESC, BEL or other control byte for a session whose run name, creation date, host and
table names hold escape sequences; a conv2d call whose recorded padding does not fit its recorded
shapes is refused before its kernel runs.

    recorded_attributes.py PEAT RECORDED_MLP_SESSION
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import peattest  # noqa: E402
from peattest import Harness  # noqa: E402

PEAT, RECORDED = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="peat-attributes-")
H = Harness(PEAT)
ENV = dict(os.environ, PEAT_PROBE_CACHE="off")


def measured(args):
    """peat ARGS: (exit code, stdout bytes, stderr lines, seconds, largest RSS in MiB); killed after 120 s."""
    m = peattest.measured(PEAT, args, ENV, timeout=120)
    return m.rc, m.stdout, m.lines, m.seconds, m.rss


def variant(name, change):
    path = os.path.join(WORK, name + ".h5")
    shutil.copy(RECORDED, path)
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def variant_of(source, name, change):
    path = os.path.join(WORK, name + ".h5")
    shutil.copy(source, path)
    with h5py.File(path, "r+") as f:
        change(f)
    return path


def golden_says(key, value):
    def change(f):
        f["runs/golden"].attrs[key] = value
    return change


cases = [  # attribute, value, whether playback runs (else: one line naming the attribute)
    ("threads", "999999", False),
    ("threads", "64", True),
    ("threads", "0", False),
    ("batch", "lots", False),
    ("batch", "2000000", False),
    ("batch", "16 ", False),
    ("context", "-1", False),
    ("seed", "x", False),
    ("learning_rate", "nan", False),
    ("eval_batches", "1e9", False),
    ("eval_batches", "999999", False),  # within the attribute's range, but far more than the test set holds
]
for key, value, runs in cases:
    path = variant(f"{key}-{value.strip()}", golden_says(key, value))
    rc, _, lines, seconds, rss = measured(["playback", "-s", path, "-k", "bf16", "--resume", "1"])
    if runs:
        ok = rc == 0
    else:
        ok = rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ") and f"{key}" in lines[0]
    H.check(ok and seconds < 60 and rss < 1024,
            f"{key}={value!r}: playback --resume exit {rc} in {seconds:.1f} s, largest process {rss:.0f} MiB: {lines[:2]}")


def escapes(f):
    f.attrs["created"] = "\x1b[2J\x1b]0;retitled\x07"
    f["provenance"].attrs["hostname"] = "host\x1b[31mred\x9b"
    f["runs/golden/tables"].move("curve", "cur\x07ve")
    f["runs"].move("golden", "gol\x1b[2Jden")


path = variant("escapes", escapes)
CONTROL = set(range(0x20)) - {0x0a} | {0x7f}
for args in (["info", path], ["info", "--calls", path], ["info", "--verify", path],
             ["analyze", "--session", path, "--run", "gol\x1b[2Jden"]):
    rc, out, lines, seconds, _ = measured(args)
    text = out + "\n".join(lines).encode()
    bad = sorted({b for b in text if b in CONTROL}) + (["C1 CSI"] if b"\xc2\x9b" in text else [])
    H.check(not bad and rc in (0, 1) and (rc == 0 or len(lines) == 1),
            f"peat {' '.join(a for a in args[:2] if a.startswith('-') or a == args[0])}: exit {rc}, "
            f"control bytes printed: {bad}")
    if args == ["info", path]:
        H.check(b"\\x1b[2J" in out, "the run name's escape is shown as text (\\x1b)")

# raw bytes that are not UTF-8 (audit of 2026-12-08): a lone 0x9b is CSI to a terminal that takes
# 8-bit controls, 0xff makes `--json` invalid; printed as \xNN, replaced in JSON, never raw
def raw_bytes(f):
    f["provenance"].attrs["hostname"] = np.bytes_(b"host\x9b2J\x8d")
    f["runs/golden"].attrs["description"] = np.bytes_(b"C1 CSI:\x9b31m red\xff\xfe\xc3(")
    runs, root = f["runs"], f["/"]  # kept open while the link is made
    runs.id.links.create_hard(b"gol\x9b7m\xffden", root.id, b"/runs/golden")
    del f["runs/golden"]


path = variant("raw-bytes", raw_bytes)
for args in (["info", path], ["info", "--calls", path], ["info", "--json", path]):
    rc, out, lines, seconds, _ = measured(args)
    try:
        c1 = [hex(ord(ch)) for ch in out.decode("utf-8") if 0x80 <= ord(ch) <= 0x9f]
        utf8 = True
    except UnicodeDecodeError:
        utf8, c1 = False, []
    H.check(rc == 0 and utf8 and not c1,
            f"peat {' '.join(args[:-1])} on raw bytes: exit {rc}, well-formed UTF-8: {utf8}, C1 controls: {c1}")
    if args[1] == "--json":
        try:
            json.loads(out)
            parsed = True
        except ValueError:
            parsed = False
        H.check(parsed, "peat info --json on raw bytes gives valid JSON")
    else:
        H.check(b"host\\x9b2J\\x8d" in out or args[1] == "--calls", f"peat {' '.join(args[:-1])}: the raw bytes shown as \\xNN")

# analyze's per-call table prints layer names from the session: escaped too
path = variant("layer-escapes", lambda f: None)
subprocess.run([PEAT, "playback", "-s", path, "-k", "fp16", "--store-outputs", "--name", "fresh"], env=ENV, check=True,
               stdout=subprocess.DEVNULL)
with h5py.File(path, "r+") as f:
    for run in ("golden", "fresh"):
        f[f"runs/{run}/iterations/000000/calls/000000"].attrs["layer"] = "fc\x1b]0;retitled\x07\x1b[2J"
rc, out, lines, _, _ = measured(["analyze", "--session", path, "--run", "fresh"])
bad = sorted({b for b in out + "\n".join(lines).encode() if b in CONTROL})
H.check(rc == 0 and not bad and b"fc\\x1b]0;retitled" in out,
        f"peat analyze --session: exit {rc}, control bytes printed: {bad}: {lines[:1]}")

# a recorded conv2d padding that does not fit the recorded shapes (audit of 2026-12-08: padding 700
# beside a 28 x 28 input made playback compute a 1424 x 1424 output, 6 GB, and then blame the
# kernel): refused before the kernel runs, for the forward call and both gradients, naming the call;
# the session as recorded replays (the check passes every call of a real LeNet)
LENET = os.path.join(WORK, "lenet.h5")
subprocess.run([PEAT, "profile", "--model", "lenet", "--iterations", "1", "-o", LENET], env=ENV, check=True,
               stdout=subprocess.DEVNULL)
rc, _, lines, _, _ = measured(["playback", "-s", variant_of(LENET, "lenet-as-recorded", lambda f: None), "-k", "bf16"])
H.check(rc == 0, f"LeNet as recorded replays with its conv shapes checked: exit {rc} {lines[:1]}")
for call, what in (("000000", "forward"), ("000022", "grad_input"), ("000023", "grad_weight")):
    def padded(f, call=call):
        f[f"runs/golden/iterations/000000/calls/{call}"].attrs["param.padding"] = np.int64(700)
    rc, _, lines, seconds, rss = measured(["playback", "-s", variant_of(LENET, "pad-" + what, padded), "-k", "bf16"])
    H.check(rc == 1 and len(lines) == 1 and lines[0].startswith(f"peat: error: recorded call iterations/000000/calls/{call} "
                                                                 "is inconsistent: a conv2d of a ") and
            "padding 700x700" in lines[0] and seconds < 20 and rss < 1024,
            f"conv2d {what} recorded with padding 700: exit {rc} in {seconds:.1f} s, {rss:.0f} MiB: {lines[:1]}")

shutil.rmtree(WORK, ignore_errors=True)
H.exit()
