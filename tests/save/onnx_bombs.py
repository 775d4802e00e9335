#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ONNX folding under a budget (issue 44 item 4): models of a few hundred bytes whose constant folding
or element moves would make 2^40 (Range), 2^30 (ConstantOfShape), an overflowing 2^96 (ConstantOfShape)
or 2^42 (Expand) elements, or 40 Concats would double a constant to 2^40 elements. `peat save inspect`, `save analyze` and `save run` must each refuse them in
one `peat: error:` line naming the node, in under a second of CPU and under 300 MiB (the process and
its helpers); a fold at the limit (a 2048x2048 ConstantOfShape, a mask's size) is still made.

    onnx_bombs.py PEAT
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import peattest  # noqa: E402
from peattest import Harness  # noqa: E402

PEAT = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="peat-onnx-bombs-")
H = Harness(PEAT)
ENV = dict(os.environ, PEAT_PROBE_CACHE="off")


def model(name, nodes, inits, out_shape):
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, out_shape)
    m = h.make_model(h.make_graph(nodes, name, [x], [y], initializer=inits),
                     opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(m, path)
    return path


def ints(name, v):
    return nh.from_array(np.array(v, dtype=np.int64), name)


ONE = nh.from_array(np.array([1.0], np.float32))
bombs = [
    ("range-2^40", [h.make_node("Range", ["s", "l", "d"], ["r"]), h.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
                    h.make_node("Add", ["x", "rf"], ["y"])], [ints("s", 0), ints("l", 1 << 40), ints("d", 1)],
     [1, 4], "Range 'r'"),
    ("constantofshape-2^30", [h.make_node("ConstantOfShape", ["shp"], ["z"], value=ONE), h.make_node("Add", ["x", "z"], ["y"])],
     [ints("shp", [1 << 15, 1 << 15])], [1, 4], "ConstantOfShape 'z'"),
    ("constantofshape-overflow", [h.make_node("ConstantOfShape", ["shp"], ["z"], value=ONE),
                                  h.make_node("Add", ["x", "z"], ["y"])],
     [ints("shp", [1 << 32, 1 << 32, 1 << 32])], [1, 4], "ConstantOfShape 'z'"),
    ("expand-2^42", [h.make_node("Expand", ["x", "shp"], ["y"])], [ints("shp", [1 << 20, 1 << 20, 4])],
     [1 << 20, 1 << 20, 4], "Expand"),
    # each fold under the per-node limits, 40 of them doubling a 1-element constant (audit of
    # 2026-12-08: 2.1 GB before the 27th was refused): the constants folded in all are bounded
    ("concat-doubling", [h.make_node("Concat", [f"k{i}", f"k{i}"], [f"k{i + 1}"], axis=0, name=f"cat{i}") for i in range(40)] +
     [h.make_node("ReduceSum", ["k40"], ["ks"], keepdims=0), h.make_node("Add", ["x", "ks"], ["y"])],
     [nh.from_array(np.ones(1, np.float32), "k0")], [1, 4], "elements folded already"),
]
x = os.path.join(WORK, "x.npy")
np.save(x, np.ones((1, 4), np.float32))
for name, nodes, inits, out_shape, needle in bombs:
    path = model(name, nodes, inits, out_shape)
    for args in (["save", "inspect", "-m", path], ["save", "analyze", "-m", path, "--input-range", "0,1"],
                 ["save", "run", "-m", path, "-i", x]):
        rc, _, lines, seconds, cpu, rss = peattest.measured(PEAT, args, ENV)
        ok = rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ") and needle in lines[0]
        H.check(ok and cpu < 1.0 and rss < 300,
                f"{name}: peat {args[0]} {args[1]}: exit {rc} in {seconds:.2f} s ({cpu:.2f} s CPU), largest process "
                f"{rss:.0f} MiB: {lines[:2]}")

# indices past their bounds (audit of 2026-12-08: the library's bare "vector::_M_range_check" line,
# naming neither the model nor the node): the node named
for name, nodes, inits, needle in (
        ("slice-axis-99", [h.make_node("Slice", ["x", "st", "en", "ax"], ["y"], name="sl")],
         [ints("st", [0]), ints("en", [2]), ints("ax", [99])], "Slice 'sl': has an axis, permutation or size out of range"),
        ("transpose-perm-5-5", [h.make_node("Transpose", ["x"], ["y"], perm=[5, 5], name="tr")], [],
         "Transpose 'tr': has an axis, permutation or size out of range")):
    path = model(name, nodes, inits, [1, 4])
    rc, _, lines, seconds, cpu, rss = peattest.measured(PEAT, ["save", "inspect", "-m", path], ENV)
    H.check(rc == 1 and len(lines) == 1 and lines[0].startswith("peat: error: ONNX model ") and needle in lines[0],
            f"{name}: peat save inspect: exit {rc}: {lines[:2]}")

# at the limit: a 2048x2048 constant is folded (then refused for its shape, not for its size)
path = model("constantofshape-2^22", [h.make_node("ConstantOfShape", ["shp"], ["z"], value=ONE),
                                      h.make_node("Add", ["x", "z"], ["y"])], [ints("shp", [2048, 2048])], [2048, 2048],)
p = subprocess.run([PEAT, "save", "inspect", "-m", path], capture_output=True, text=True, env=ENV)
H.check("the most SAVE makes at import" not in p.stderr, f"a 2048x2048 ConstantOfShape is folded: {p.stderr.strip()[:200]}")

shutil.rmtree(WORK, ignore_errors=True)
H.exit()
