#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ONNX as current exporters write it, opsets 18 to 21 (Debian's libonnx checks up to 17; SAVE
lowers the newer ones, core/save/onnx_opset.cpp), built with Debian's python3-onnx helpers:

    onnx_opsets.py PEAT WEIGHTS.h5

- LeNet exported by torch at opset 17, relabelled as opsets 18-24 with their IR versions (its ops
  did not change): the same analysis, number for number;
- Gelu-20 (exact and tanh forms) and Split-18 with num_outputs, in small MLPs made here: SAVE's
  engine (`peat save run`) equals a NumPy reference written in this test;
- ReduceMean-18 with its axes as an input: the same analysis as the opset-17 attribute form;
- an operator new in 18-24 with no opset-17 form, and opset 25: one line each.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

PEAT, WEIGHTS = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
WORK = tempfile.mkdtemp(prefix="peat-opsets-")
IR = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 11, 25: 11}
H = Harness(PEAT)
check, peat, one_error, failures = H.check, H.run, H.one_error, H.failures


def save_model(graph, opset, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR[opset]
    path = os.path.join(WORK, name)
    onnx.save(model, path)
    return path


def relabel(path, opset, name):
    model = onnx.load(path)
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            op.version = opset
    model.ir_version = IR[opset]
    out = os.path.join(WORK, name)
    onnx.save(model, out)
    return out


def run_engine(path, x):
    xp, yp = os.path.join(WORK, "x.npy"), os.path.join(WORK, "y.npy")
    np.save(xp, x)
    peat("save", "run", "-m", path, "-i", xp, "-o", yp, "--force")
    return np.load(yp)


def erf(v):
    return np.vectorize(math.erf)(v.astype(np.float64))


try:
    subprocess.run([sys.executable, os.path.join(HERE, "export_onnx.py"), WORK, WEIGHTS], check=True,
                   capture_output=True)
    lenet = os.path.join(WORK, "lenet.onnx")
    base = json.loads(peat("save", "analyze", "-m", lenet, "--json").stdout)
    for opset in (18, 19, 20, 21, 22, 23, 24):
        r = json.loads(peat("save", "analyze", "-m", relabel(lenet, opset, f"lenet{opset}.onnx"), "--json").stdout)
        check(r["output"] == base["output"] and len(r["layers"]) == len(base["layers"]),
              f"LeNet at opset {opset} (IR {IR[opset]}) analyses as at 17 (output [{r['output']['lo']:.6g}, "
              f"{r['output']['hi']:.6g}])")

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 6)).astype(np.float32) * 0.5
    w2 = rng.standard_normal((6, 3)).astype(np.float32) * 0.5
    x = rng.uniform(0, 1, (5, 8)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    h = x @ w1
    for approximate in ("none", "tanh"):
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
                 helper.make_node("Gelu", ["h"], ["a"], name="gelu", approximate=approximate),
                 helper.make_node("MatMul", ["a", "w2"], ["y"], name="fc2")]
        path = save_model(helper.make_graph(nodes, "gelu", io[0], io[1], inits), 20, f"gelu_{approximate}.onnx")
        if approximate == "none":
            ref = (0.5 * h * (1 + erf(h / math.sqrt(2)))) @ w2
        else:
            ref = (0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))) @ w2
        p = subprocess.run([PEAT, "save", "run", "-m", path, "-i", os.path.join(WORK, "x.npy")], capture_output=True,
                           text=True)
        if approximate == "none" or p.returncode == 0:
            out = run_engine(path, x)
            diff = float(np.abs(out - ref).max())
            check(diff < 1e-5, f"Gelu-20 (approximate={approximate}) lowered: SAVE's engine equals NumPy's within "
                               f"{diff:.2g} on 5 inputs")
        else:  # the tanh form needs Pow, which SAVE may not map: then one line naming it
            lines = [l for l in p.stderr.splitlines() if l.strip()]
            check(len(lines) == 1 and "Pow" in lines[0], f"Gelu-20 (tanh) refused by the op it needs: {lines[:1]}")

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Split", ["h"], ["p", "q"], name="split", axis=1, num_outputs=2),
             helper.make_node("Add", ["p", "q"], ["y"], name="add")]
    path = save_model(helper.make_graph(nodes, "split", io[0], io[1], [inits[0]]), 18, "split18.onnx")
    out = run_engine(path, x)
    ref = h[:, :3] + h[:, 3:]
    check(float(np.abs(out - ref).max()) < 1e-5, f"Split-18 with num_outputs: SAVE's engine equals NumPy's "
                                                 f"({float(np.abs(out - ref).max()):.2g})")

    # ReduceMean: axes as an attribute (17) and as an input (18) give one analysis
    x3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8])
    y3 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    w3 = numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "w3")
    tail = [helper.make_node("MatMul", ["m", "w3"], ["y"], name="fc")]
    g17 = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["m"], name="mean", axes=[1], keepdims=0)] + tail,
                            "r17", [x3], [y3], [w3])
    g18 = helper.make_graph([helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="mean", keepdims=0)] + tail,
                            "r18", [x3], [y3], [w3, numpy_helper.from_array(np.array([1], np.int64), "axes")])
    p17 = subprocess.run([PEAT, "save", "analyze", "-m", save_model(g17, 17, "mean17.onnx"), "--json"],
                         capture_output=True, text=True)
    p18 = subprocess.run([PEAT, "save", "analyze", "-m", save_model(g18, 18, "mean18.onnx"), "--json"],
                         capture_output=True, text=True)
    if p17.returncode == 0:
        check(p18.returncode == 0 and json.loads(p18.stdout)["output"] == json.loads(p17.stdout)["output"],
              "ReduceMean-18 with its axes as an input analyses as ReduceMean-17 with the attribute")
    else:  # SAVE does not map this ReduceMean: the same refusal at 18 as at 17, about ReduceMean, not the opset
        check(p18.returncode == 1 and "ReduceMean" in p18.stderr and "opset" not in p18.stderr.split("ReduceMean")[0],
              f"ReduceMean-18 refused as ReduceMean-17 is: {p18.stderr.strip()[:160]}")

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("BitwiseNot", ["h"], ["y"], name="odd")]
    one_error(["save", "analyze", "-m", save_model(helper.make_graph(nodes, "new", io[0], io[1], [inits[0]]), 18,
                                                   "new18.onnx")], "BitwiseNot", "opset 18-24", "opset_version=17")
    one_error(["save", "analyze", "-m", relabel(lenet, 25, "lenet25.onnx")], "opset 25", "newer than SAVE reads (24)")
except SystemExit as e:
    failures.append(str(e))
    print(e)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
