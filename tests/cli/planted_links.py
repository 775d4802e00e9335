#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Nothing written through a link (issue 44): a symbolic link planted where peat writes, pointing at a
file of the user's, must never make peat write that file. Planted at the hidden names a new session is
staged under (`.NAME.partial-PID`, and its journal `.NAME.partial-PID-journal`: the link is made in
the child before exec, so it carries the pid peat runs under), at a session's journal
(`NAME-journal`), and at the output itself (`profile --out`, `save run -o`, `save analyze
--placement-problem`, with and without --force). Each writer either refuses in one `peat: error:`
line or goes on without touching the link's target; the target keeps its bytes, a session its runs.
`save run -o` and `--placement-problem` refuse an existing file without --force and replace it with it.

    planted_links.py PEAT RECORDED_MLP_SESSION LENET_WEIGHTS
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

PEAT, RECORDED, LENET = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix="peat-links-")
H = Harness(PEAT)
ENV = dict(os.environ, PEAT_PROBE_CACHE="off")
VICTIM_BYTES = b"the user's own file: peat must not write it\n"


def victim(name):
    path = os.path.join(WORK, name + ".victim")
    with open(path, "wb") as f:
        f.write(VICTIM_BYTES)
    return path


def intact(path):
    with open(path, "rb") as f:
        return f.read() == VICTIM_BYTES


def run(args, plant=None):
    """peat ARGS; PLANT(pid) runs in the child before exec, so names with peat's pid can be planted."""
    pre = (lambda: plant(os.getpid())) if plant else None
    p = subprocess.run([PEAT, *args], capture_output=True, text=True, env=ENV, preexec_fn=pre, timeout=600)
    errors = [l for l in p.stderr.splitlines() if l.strip()]
    return p.returncode, errors


def refused_or_untouched(what, rc, errors, target, needle=None):
    one_line = rc == 1 and len(errors) == 1 and errors[0].startswith("peat: error: ") and (not needle or needle in errors[0])
    H.check((rc == 0 or one_line) and intact(target), f"{what}: exit {rc}, the link's target intact: {intact(target)}: "
                                                      f"{errors[:2]}")


def refused(what, rc, errors, target, *needles):
    ok = rc == 1 and len(errors) == 1 and errors[0].startswith("peat: error: ") and all(n in errors[0] for n in needles)
    H.check(ok and (target is None or intact(target)), f"{what}: exit {rc}: {errors[:2]}")


PROFILE = ["profile", "--model", "mlp", "--iterations", "2", "--record-every", "2", "--batch", "8"]

# (1) the staging file of a new session, and its journal
for suffix in ("", "-journal"):
    out = os.path.join(WORK, f"new{suffix or '-staging'}.h5")
    target = victim(f"staging{suffix}")
    base = os.path.basename(out)
    plant = lambda pid, out=out, base=base, target=target, suffix=suffix: os.symlink(  # noqa: E731
        target, os.path.join(os.path.dirname(out), f".{base}.partial-{pid}{suffix}"))
    rc, errors = run(PROFILE + ["--out", out], plant)
    refused_or_untouched(f"profile with a link at .{base}.partial-PID{suffix}", rc, errors, target,
                         "is taken" if not suffix else None)
    if rc == 0:
        H.check(subprocess.run([PEAT, "info", "--verify", out], capture_output=True, env=ENV).returncode == 0,
                f"the session made beside the planted {suffix or 'staging'} link verifies")

# (2) an existing session's journal, as playback and analyze write to it
session = os.path.join(WORK, "session.h5")
shutil.copy(RECORDED, session)
target = victim("journal")
os.symlink(target, session + "-journal")
rc, errors = run(["playback", "-s", session, "-k", "bf16"])
refused_or_untouched("playback with a link at the session's journal", rc, errors, target)
v = subprocess.run([PEAT, "info", "--verify", session], capture_output=True, text=True, env=ENV)
H.check(v.returncode == 0, f"the session still verifies after the planted journal: {v.stderr.strip()[:200]}")

# (3) the output path itself is a link: refused with and without --force, the target untouched
target = victim("out")
link = os.path.join(WORK, "link.h5")
os.symlink(target, link)
for force in ([], ["--force"]):
    rc, errors = run(PROFILE + ["--out", link] + force)
    refused(f"profile --out LINK {' '.join(force)}", rc, errors, target, "symbolic link")

# (4) save run -o and save analyze --placement-problem
x = os.path.join(WORK, "x.npy")
np.save(x, np.random.default_rng(0).random((1, 1, 28, 28), dtype=np.float32))
existing = os.path.join(WORK, "existing.npy")
with open(existing, "wb") as f:
    f.write(VICTIM_BYTES)
SAVE_RUN = ["save", "run", "-m", "lenet", "-w", LENET, "-i", x]
rc, errors = run(SAVE_RUN + ["-o", existing])
refused("save run -o EXISTING without --force", rc, errors, existing, "already exists", "--force")
rc, errors = run(SAVE_RUN + ["-o", existing, "--force"])
H.check(rc == 0 and np.load(existing).shape == (1, 10), f"save run -o EXISTING --force replaces it: exit {rc} {errors[:1]}")
target = victim("npy")
npy_link = os.path.join(WORK, "out.npy")
os.symlink(target, npy_link)
for force in ([], ["--force"]):
    rc, errors = run(SAVE_RUN + ["-o", npy_link] + force)
    refused(f"save run -o LINK {' '.join(force)}", rc, errors, target, "symbolic link")

ANALYZE = ["save", "analyze", "-m", "lenet", "-w", LENET, "--mode", "interval"]
csv = os.path.join(WORK, "problem.csv")
with open(csv, "wb") as f:
    f.write(VICTIM_BYTES)
rc, errors = run(ANALYZE + ["--placement-problem", csv])
refused("save analyze --placement-problem EXISTING", rc, errors, csv, "already exists", "--force")
rc, errors = run(ANALYZE + ["--placement-problem", csv, "--force"])
H.check(rc == 0 and open(csv).readline().strip() != VICTIM_BYTES.decode().strip(),
        f"save analyze --placement-problem EXISTING --force replaces it: exit {rc} {errors[:1]}")
target = victim("csv")
csv_link = os.path.join(WORK, "problem-link.csv")
os.symlink(target, csv_link)
rc, errors = run(ANALYZE + ["--placement-problem", csv_link, "--force"])
refused("save analyze --placement-problem LINK --force", rc, errors, target, "symbolic link")

leftovers = [n for n in os.listdir(WORK) if ".tmp-" in n or (".partial-" in n and not os.path.islink(os.path.join(WORK, n)))]
H.check(not leftovers, f"no temporary file left behind: {leftovers}")
shutil.rmtree(WORK, ignore_errors=True)
H.exit()
