#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SAVE's fp32 engine against the runtimes users would pick instead (issue 42, item 7), a benchmark:

    $(tools/venv-path.sh)/bin/python tests/bench/save_engine.py build/bin/peat WORKDIR [--threads 2] [--runs 5]
        [--models resnet18,resnet50,mobilenet_v2,vit_b_16] [--batches 1,8] [--protect]

torchvision's models (PyPI's torchvision, random weights, seed 0) at 3x224x224 exported with a
dynamic batch (opset 17). Each is run at each batch on the same random inputs by
- `peat save run --repeat RUNS --threads T` (one process per model and batch; the engine's first
  inference and the median of the warm ones, as `save run` reports them, import excluded);
- onnxruntime (intra-op threads T, one inter-op thread, graph optimisations on) and PyTorch (this
  venv's, `torch.set_num_threads(T)`), in this process: the first inference and the warm median.
SAVE's outputs are checked against onnxruntime's (largest |difference| over the largest |output|).
With --protect, `save run --protect save --mode interval` (SAVE's checks with ranges for inputs in
[0, 1]) is timed as well. Prints a Markdown table of milliseconds per batch.
"""
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import onnxruntime as ort
import torch
import torchvision

warnings.filterwarnings("ignore")
PEAT, WORK = sys.argv[1], sys.argv[2]


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


THREADS = int(arg("--threads", "2"))
RUNS = int(arg("--runs", "5"))
MODELS = arg("--models", "resnet18,resnet50,mobilenet_v2,vit_b_16").split(",")
BATCHES = [int(b) for b in arg("--batches", "1,8").split(",")]
PROTECT = "--protect" in sys.argv
os.makedirs(WORK, exist_ok=True)
torch.set_num_threads(THREADS)


def timed(f, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return out, times[0], float(np.median(times[1:])) if runs > 1 else times[0]


def save_run(path, xfile, extra=()):
    cmd = [PEAT, "save", "run", "--model", path, "--input", xfile, "--repeat", str(RUNS), "--threads", str(THREADS),
           "--json", "-o", xfile.replace(".npy", ".save.npy")] + list(extra)
    if os.path.exists(cmd[cmd.index("-o") + 1]):
        os.remove(cmd[cmd.index("-o") + 1])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    return json.loads(p.stdout), None


rows = []
for name in MODELS:
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().eval()
    if hasattr(model, "heads"):  # ViT's head starts at zero: every output would be 0 and any engine "match"
        for p in model.heads.parameters():
            torch.nn.init.normal_(p, std=0.02)
    path = os.path.join(WORK, f"{name}.onnx")
    if not os.path.exists(path):
        torch.onnx.export(model, (torch.rand(1, 3, 224, 224),), path, opset_version=17, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, dynamo=False)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    for batch in BATCHES:
        x = np.random.default_rng(batch).random((batch, 3, 224, 224), dtype=np.float32)
        xfile = os.path.join(WORK, f"{name}-{batch}.npy")
        np.save(xfile, x)
        ref, ort_first, ort_warm = timed(lambda: sess.run(None, {"x": x})[0], RUNS)
        with torch.no_grad():
            _, pt_first, pt_warm = timed(lambda: model(torch.from_numpy(x)), RUNS)
        res, err = save_run(path, xfile)
        row = {"model": name, "batch": batch, "ort": (ort_first, ort_warm), "torch": (pt_first, pt_warm)}
        if res:
            ours = np.load(xfile.replace(".npy", ".save.npy"))
            row["save"] = (res["seconds"], res.get("warm_seconds", res["seconds"]))
            row["diff"] = float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30))
        else:
            row["error"] = err
        if PROTECT:
            res, err = save_run(path, xfile, ["--protect", "save", "--mode", "interval", "--input-range", "0,1"])
            row["protected"] = (res["seconds"], res.get("warm_seconds", res["seconds"])) if res else err
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

ms = lambda t: f"{1000 * t[0]:.0f} / {1000 * t[1]:.0f}"
print(f"| model | batch | `save run` first / warm | onnxruntime | PyTorch {torch.__version__.split('+')[0]} | "
      f"`save run` / onnxruntime (warm) |" + (" protected first / warm | protected / onnxruntime |" if PROTECT else "")
      + " largest difference |")
print("|---|---|---|---|---|---|" + ("---|---|" if PROTECT else "") + "---|")
for r in rows:
    if "error" in r:
        print(f"| {r['model']} | {r['batch']} | refused: {r['error']} | {ms(r['ort'])} | {ms(r['torch'])} | |"
              + (" | |" if PROTECT else "") + " |")
        continue
    line = (f"| {r['model']} | {r['batch']} | {ms(r['save'])} | {ms(r['ort'])} | {ms(r['torch'])} | "
            f"{r['save'][1] / r['ort'][1]:.2f}x |")
    if PROTECT:
        p = r["protected"]
        line += f" {ms(p)} | {p[1] / r['ort'][1]:.2f}x |" if isinstance(p, tuple) else f" {p} | |"
    print(line + f" {r['diff']:.1e} |")
print(f"\n{THREADS} thread(s) each; milliseconds per batch, first inference / warm median of {RUNS - 1}.")
