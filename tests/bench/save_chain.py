#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`peat save analyze` against node count (issue 44 item 7): ONNX chains of N ReLUs on a [1, 16]
input (python3-onnx makes them), analysed with and without storing the result in a session; whole-
process wall seconds and peak RSS per N. A benchmark, not a test: docs/benchmarks.md has its table.

    save_chain.py PEAT WORKDIR [N ...]   (default N: 2000 4000 8000 16000 100000)
"""
import os
import resource
import subprocess
import sys
import time

import onnx
from onnx import TensorProto as T
from onnx import helper as h

PEAT, WORK = sys.argv[1], sys.argv[2]
SIZES = [int(a) for a in sys.argv[3:]] or [2000, 4000, 8000, 16000, 100000]
os.makedirs(WORK, exist_ok=True)


def chain(n):
    path = os.path.join(WORK, f"chain{n}.onnx")
    if not os.path.exists(path):
        nodes, prev = [], "x"
        for i in range(n):
            nodes.append(h.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
        nodes.append(h.make_node("Identity", [prev], ["y"]))
        g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 16])])
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), path)
    return path


def timed(args):
    start = time.time()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(args)}: {p.stderr.read().decode()[-400:]}")
    return time.time() - start, usage.ru_maxrss / 1024


print("| ReLU nodes | save analyze (s) | peak MiB | with -s SESSION (s) | peak MiB |")
print("|---|---|---|---|---|")
for n in SIZES:
    model = chain(n)
    plain, plain_rss = timed([PEAT, "save", "analyze", "-m", model, "--input-range", "0,1"])
    session = os.path.join(WORK, f"chain{n}.h5")
    if os.path.exists(session):
        os.remove(session)
    stored, stored_rss = timed([PEAT, "save", "analyze", "-m", model, "--input-range", "0,1", "-s", session])
    print(f"| {n} | {plain:.2f} | {plain_rss:.0f} | {stored:.2f} | {stored_rss:.0f} |", flush=True)
