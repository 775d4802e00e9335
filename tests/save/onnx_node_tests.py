#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ONNX's own backend node tests (the test data in PyPI's `onnx` package) through `peat save run`
(issue 42), run by the project virtual environment's Python:

    onnx_node_tests.py PEAT WORKDIR [--list]

Each case is a one-node model with its inputs and expected outputs. SAVE analyses models whose
weights are constants, so every input after the first becomes an initializer holding the case's
own value (Add(x, y) is tested as Add(x, const y)); the first input and every output must be
float32 (a case with several outputs gets one reference per output). A case is then refused by SAVE's importer (an operator, attribute or shape it
does not take: fine, it says so), or run and compared with ONNX's expected output. None may be
computed wrong, and of the cases SAVE takes at least 90% must match within 1e-4 relative to the
output's scale (the rest are the engine's known differences, listed).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

PEAT, WORK = sys.argv[1], sys.argv[2]
LIST = "--list" in sys.argv
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")

counts = {"not applicable": 0, "refused": 0, "matched": 0, "wrong": 0}
wrong, refusals = [], {}
for case in sorted(glob.glob(os.path.join(root, "test_*"))):
    name = os.path.basename(case)
    try:
        model = onnx.load(os.path.join(case, "model.onnx"))
        data = os.path.join(case, "test_data_set_0")
        inputs = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
        outputs = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    except Exception:  # noqa: BLE001 - sequences, optionals: not tensors SAVE could take
        counts["not applicable"] += 1
        continue
    graph_inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    if (not inputs or not outputs or len(graph_inputs) != len(inputs) or inputs[0].dtype != np.float32
            or len(outputs) != len(model.graph.output) or inputs[0].ndim == 0
            or any(o.dtype != np.float32 or o.size == 0 for o in outputs)):
        counts["not applicable"] += 1
        continue
    # inputs after the first as initializers with the case's own values
    for value_info, value in zip(graph_inputs[1:], inputs[1:]):
        model.graph.initializer.append(numpy_helper.from_array(value, value_info.name))
    del model.graph.input[:]
    model.graph.input.append(graph_inputs[0])
    if model.ir_version < 4:
        model.ir_version = 4
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    np.save(path + ".x.npy", inputs[0])
    expect = []
    for k, o in enumerate(outputs):  # one reference per output, in the model's order
        np.save(f"{path}.y{k}.npy", o)
        expect.append(f"{path}.y{k}.npy")
    r = subprocess.run([PEAT, "save", "run", "-m", path, "-i", path + ".x.npy", "--expect", *expect, "--json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        counts["refused"] += 1
        line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        if r.returncode not in (0, 1) or not line.startswith("peat: error: "):
            wrong.append(f"{name}: crashed or no error line (exit {r.returncode}): {line[:200]}")
            counts["wrong"] += 1
            counts["refused"] -= 1
        refusals[name] = line
        continue
    j = json.loads(r.stdout)
    cs = j.get("comparisons", [j.get("comparison", {})])
    scales = [max(1.0, float(np.abs(o).max()) if np.isfinite(o).all() else 1.0) for o in outputs]
    if len(cs) == len(outputs) and all(c.get("non_finite", 1) == 0 and c.get("max_abs", 1e9) <= 1e-4 * sc
                                       for c, sc in zip(cs, scales)):
        if len(outputs) > 1:
            counts["several outputs"] = counts.get("several outputs", 0) + 1
        counts["matched"] += 1
    else:
        counts["wrong"] += 1
        wrong.append(f"{name}: largest |difference| {[c.get('max_abs') for c in cs]}, non-finite "
                     f"{[c.get('non_finite') for c in cs]}")

several = counts.pop("several outputs", 0)
taken = counts["matched"] + counts["wrong"]
print(f"ONNX node tests ({onnx.__version__}): {sum(counts.values())} cases, {counts['not applicable']} not applicable "
      f"(a non-float32 first input or output, sequences), {counts['refused']} refused by SAVE with one line, "
      f"{taken} taken: {counts['matched']} match ({several} with several outputs), {counts['wrong']} computed wrong")
for w in wrong:
    print("WRONG", w)
if LIST:
    for k, v in sorted(refusals.items()):
        print("refused", k, v[:200])
ok = counts["wrong"] == 0 and taken > 0 and counts["matched"] >= 0.9 * taken
sys.exit(0 if ok else 1)
