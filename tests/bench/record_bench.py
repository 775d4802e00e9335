#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What `peat record` costs a user's own training script, whole processes, all in one run:
  1. wall time of the unchanged script recorded at --every 10 and at every iteration, against the
     plain script (`python3 SCRIPT`), best of N interleaved runs (target <= 1.15x at --every 10);
  2. session bytes per recorded call against a full dump (every recorded call's tensors stored on
     their own, as a dump of each call's inputs and outputs would store them).
Each interpreter is a PyTorch: Debian's 1.13 (/usr/bin/python3) and the project venv's 2.x.
usage: tests/bench/record_bench.py BUILD_DIR [--python PY ...] [--repeats N] [--work DIR]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "python", "scripts")
ROOT = os.path.join(HERE, "..", "..")

# (name, script, arguments): the test suite's user-style scripts at bench sizes
CASES = [
    ("fortune_lm (TransformerEncoder LM, AdamW, width 128, context 64, batch 16, 50 steps)", "fortune_lm.py",
     ["--steps", "50", "--batch", "16", "--context", "64", "--width", "128"]),
    ("fashion_mlp (small CNN on Fashion-MNIST, shuffled DataLoader, SGD+StepLR, batch 64, 200 steps)", "fashion_mlp.py",
     ["--steps", "200", "--batch", "64"]),
]


def timed(cmd, env, remove=None):
    """Whole-process seconds. Then (untimed) the file written is removed and the page cache written
    back, so that one run's gigabytes of dirty pages do not slow the next run's."""
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit("bench: %s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    if remove and os.path.exists(remove):
        os.remove(remove)
    os.sync()
    return seconds


def session_bytes(py, env, path):
    code = ("import json, sys, os, peat._core as c\n"
            "s = c.summary(sys.argv[1]); r = s['runs'][0]\n"
            "size = {'float32': 4, 'float64': 8, 'float16': 2, 'bfloat16': 2, 'int64': 8, 'int32': 4, 'uint8': 1,"
            " 'int8': 1, 'bool': 1, 'int16': 2}\n"
            "calls = [c for it in r['iterations'] for c in it['calls']]\n"
            "full = 0\n"
            "for c in calls:\n"
            "    for name, dt, shape in c['tensors']:\n"
            "        n = 1\n"
            "        for d in shape: n *= d\n"
            "        full += n * size.get(dt, 4)\n"
            "print(json.dumps({'calls': len(calls), 'full': full, 'file': os.path.getsize(sys.argv[1])}))\n")
    out = subprocess.run([py, "-c", code, path], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--python", action="append", help="interpreters (default: Debian's and the venv's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", help="run only the case whose script name contains this")
    o = ap.parse_args()
    work = o.work or tempfile.mkdtemp(prefix="peat-record-bench-")
    os.makedirs(work, exist_ok=True)
    pys = o.python
    if not pys:
        venv = subprocess.run([os.path.join(ROOT, "tools", "venv-path.sh")], capture_output=True, text=True).stdout.strip()
        pys = ["/usr/bin/python3"] + ([os.path.join(venv, "bin", "python")] if venv and os.path.exists(venv) else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(o.build, "python"), os.environ.get("PYTHONPATH", "")]),
               PYTHONWARNINGS="ignore")
    print("| PyTorch | script | plain | --every 10 | ratio | every iteration | ratio | bytes per recorded call: session / full dump |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for py in pys:
        version = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                 text=True, env=env).stdout.strip()
        for name, script, args in CASES:
            if o.only and o.only not in script:
                continue
            path = os.path.join(SCRIPTS, script)
            rec = lambda every, out: [py, "-m", "peat", "record", "-o", out, "--force", "--every", str(every), "--",
                                      path] + args
            plain, e10, e1 = [], [], []
            e1_path = os.path.join(work, "e1.h5")
            for i in range(o.repeats):  # interleaved, so that drift in the machine's load hits all three
                plain.append(timed([py, path] + args, env))
                e10.append(timed(rec(10, os.path.join(work, "e10.h5")), env, remove=os.path.join(work, "e10.h5")))
                e1.append(timed(rec(1, e1_path), env))
                if i == 0:
                    b = session_bytes(py, env, e1_path)
                os.remove(e1_path)
                os.sync()
            p, a, c = min(plain), min(e10), min(e1)
            print("| %s | %s | %.2f s | %.2f s | **%.2fx** | %.2f s | %.2fx | %.0f KB / %.0f KB (%.2f; %d calls, %.0f MB) |"
                  % (version, name, p, a, a / p, c, c / p, b["file"] / b["calls"] / 1e3, b["full"] / b["calls"] / 1e3,
                     b["file"] / b["full"], b["calls"], b["file"] / 1e6), flush=True)


if __name__ == "__main__":
    main()
