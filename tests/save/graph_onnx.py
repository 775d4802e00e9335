#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The model graph (issue 43, item 6) of models as people export them, against the ONNX file itself
(read with PyPI's onnx, not with SAVE's importer), run by the project virtual environment's Python:

    graph_onnx.py PEAT WORKDIR

torchvision's ResNet-18 (residual adds, a downsampling branch) and SqueezeNet 1.0 (Fire modules:
two branches concatenated), exported by PyTorch 2.x's TorchScript-based exporter and by its dynamo
exporter. For each, `peat graph --model FILE --json` must hold as many convolutions as the file, and
its data flow must give every convolution the same depth (the most convolutions on a path from the
input to it, itself included) and the same number of distinct paths from the input to it as the
file's own graph gives it: a residual doubles the paths, a concatenation adds its branches', so a
skip, a branch or a concatenation missing or drawn to the wrong op changes a count. The layout keeps
every input in a row above its user."""
import collections
import json
import os
import subprocess
import sys
import warnings

import onnx
import torch
import torchvision

peat, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
warnings.filterwarnings("ignore")


def onnx_conv_counts(path):
    """(depth, paths from the data input) of each Conv node in the file's own graph."""
    graph = onnx.load(path).graph
    data = {i.name for i in graph.input} - {t.name for t in graph.initializer}
    producer = {}
    for node in graph.node:
        for out in node.output:
            producer[out] = node
    memo = {}

    def counts(name):  # of a value: the most convolutions on a path to it, and its paths from the input
        if name not in memo:
            node = producer.get(name)
            if node is None:
                memo[name] = (0, 1 if name in data else 0)
            else:
                ins = [counts(i) for i in node.input if i]
                memo[name] = (max((d for d, _ in ins), default=0) + (node.op_type == "Conv"), sum(p for _, p in ins))
        return memo[name]

    sys.setrecursionlimit(10000)
    return sorted(counts(n.output[0]) for n in graph.node if n.op_type == "Conv")


def peat_conv_counts(path):
    out = subprocess.run([peat, "graph", "--model", path, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("peat graph failed on %s: %s" % (path, out.stderr.strip()))
    g = json.loads(out.stdout)
    nodes = g["nodes"]
    assert g["structure"] == "data flow", g["structure"]
    counts = []
    for i, n in enumerate(nodes):
        for j in n["inputs"]:
            assert nodes[j]["rank"] < n["rank"], "input %s not above %s" % (nodes[j]["name"], n["name"])
        depth = max((counts[j][0] for j in n["inputs"]), default=0) + (n["op"] == "conv2d")
        paths = sum(counts[j][1] for j in n["inputs"]) if n["inputs"] else 1
        counts.append((depth, paths))
    return sorted(c for c, n in zip(counts, nodes) if n["op"] == "conv2d"), len(nodes)


failures = 0
models = {"resnet18": torchvision.models.resnet18, "squeezenet1_0": torchvision.models.squeezenet1_0}
for name, make in models.items():
    torch.manual_seed(0)
    model = make(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    for dynamo in (False, True):
        path = os.path.join(work, "%s-%s.onnx" % (name, "dynamo" if dynamo else "script"))
        if not os.path.exists(path):
            torch.onnx.export(model, (x,), path, dynamo=dynamo, opset_version=18 if dynamo else 17)
        want = onnx_conv_counts(path)
        got, count = peat_conv_counts(path)
        ok = got == want
        failures += not ok
        print("%s %s: %d convolutions in the file, %d in peat's graph of %d ops; depths and paths (up to %d) %s" %
              ("ok:" if ok else "FAIL:", os.path.basename(path), len(want), len(got), count, max(p for _, p in want),
               "agree" if ok else "differ: file %s, graph %s" % (collections.Counter(want), collections.Counter(got))))
sys.exit(1 if failures else 0)
