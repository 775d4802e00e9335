#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`peat save run`: SAVE's fp32 engine on the user's inputs against PyTorch's outputs, on models we
did not write (torchvision ResNet-18 and MobileNetV2, a torch.nn MLP with batch norm, LeNet with the
shipped weights), exported at test time by Debian's python3-torch 1.13:

    save_run.py PEAT WEIGHTS.h5

- plain runs: the engine's outputs equal PyTorch's within fp32 reordering (a bound relative to the
  outputs' scale), top-1 agrees on every sample, for one sample and for a batch; `--expect` says
  the same; `--max-diff` fails (exit 1, one line) when the reference differs;
- protected runs: `--protect save --flips 0` gives the plain outputs bit for bit; SAVE with faults
  on LeNet detects and recovers and keeps the fault-free prediction on most samples, where the
  unprotected run with the same faults does not;
- bad input: a wrong input shape, an input outside the analysed box under SAVE, a reference of
  another size, each one error line.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_onnx  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

PEAT, WEIGHTS = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="peat-save-run-")
H = Harness(PEAT)
check, peat, one_error, failures = H.check, H.run, H.one_error, H.failures


def export(net, shape, name, dynamic=False):
    path = os.path.join(WORK, name + ".onnx")
    kwargs = {"dynamic_axes": {"x": {0: "batch"}}} if dynamic else {}
    torch.onnx.export(net.eval(), torch.zeros(1, *shape), path, opset_version=17, input_names=["x"],
                      output_names=["y"], **kwargs)
    return path


def against_torch(net, shape, name, samples, norm=(), dynamic=True):
    """Exports `net`, runs it on `samples` random inputs in PyTorch and in SAVE's engine; returns the
    largest difference relative to the outputs' scale."""
    path = export(net, shape, name, dynamic)
    torch.manual_seed(1)
    x = torch.rand(samples, *shape)
    with torch.no_grad():
        ref = net.eval()(x).numpy()
    xp, rp, op = (os.path.join(WORK, f"{name}_{k}.npy") for k in ("x", "ref", "out"))
    np.save(xp, x.numpy())
    np.save(rp, ref)
    r = json.loads(peat("save", "run", "-m", path, "-i", xp, "-o", op, "--expect", rp, *norm, "--json").stdout)
    out = np.load(op)
    scale = float(np.abs(ref).max())
    diff = float(np.abs(out - ref).max())
    # fp32 sums in another order: a few thousand ulps of the outputs' scale at most on these depths
    tol = 1e-4 * scale
    check(out.shape == ref.shape and diff <= tol and r["comparison"]["max_abs"] == diff and
          r["comparison"]["top1_agree"] == samples,
          f"{name}: SAVE's engine equals PyTorch on {samples} inputs: largest |difference| {diff:.3g} (scale "
          f"{scale:.3g}, bound {tol:.3g}), top-1 agrees on {r['comparison']['top1_agree']}/{samples}, "
          f"{1000 * r['seconds']:.1f} ms")
    return path, xp, rp


try:
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(num_classes=10)
    r18, r18x, r18ref = against_torch(resnet, (3, 64, 64), "resnet18", 4)
    torch.manual_seed(0)
    mobilenet = torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25)
    against_torch(mobilenet, (3, 64, 64), "mobilenet_v2", 4)
    torch.manual_seed(0)
    against_torch(export_onnx.mlp_model(), (1, 28, 28), "mlp", 8)

    # one sample, given without a batch axis, to a model exported with batch 1
    torch.manual_seed(0)
    one = export(resnet, (3, 64, 64), "resnet18_b1")
    x1 = np.load(r18x)[:1][0]
    np.save(os.path.join(WORK, "one.npy"), x1)
    p = peat("save", "run", "-m", one, "-i", os.path.join(WORK, "one.npy"), "-o", os.path.join(WORK, "one_out.npy"))
    ref1 = np.load(r18ref)[:1]
    out1 = np.load(os.path.join(WORK, "one_out.npy"))
    check(out1.shape == (1, 10) and float(np.abs(out1 - ref1).max()) <= 1e-4 * max(float(np.abs(ref1).max()), 1.0)
          and "sample 0:" in p.stdout,
          f"one sample without a batch axis: outputs {out1.shape}, the text lists its top classes")

    # --max-diff: a reference that differs fails with one line
    bad_ref = np.load(r18ref) + 0.5
    np.save(os.path.join(WORK, "bad_ref.npy"), bad_ref)
    one_error(["save", "run", "-m", r18, "-i", r18x, "--expect", os.path.join(WORK, "bad_ref.npy"), "--max-diff",
               "0.01"], "differ", "--max-diff")

    # LeNet with its trained weights on real images: protected runs
    lenet = os.path.join(WORK, "lenet.onnx")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_onnx.py"), WORK,
                    WEIGHTS], check=True, capture_output=True)
    images, labels = export_onnx.fashion_mnist("t10k")
    xs = images[:64].numpy()
    lx = os.path.join(WORK, "lenet_x.npy")
    np.save(lx, xs)
    plain = json.loads(peat("save", "run", "-m", lenet, "-i", lx, "-o", os.path.join(WORK, "plain.npy"),
                            "--json").stdout)
    saved = json.loads(peat("save", "run", "-m", lenet, "-i", lx, "-o", os.path.join(WORK, "saved.npy"),
                            "--protect", "save", "--json").stdout)
    same = np.array_equal(np.load(os.path.join(WORK, "plain.npy")), np.load(os.path.join(WORK, "saved.npy")))
    check(same and saved["stats"]["detections"] == 0,
          "LeNet: SAVE without faults gives the plain engine's outputs bit for bit, with no detection")
    faulty = {}
    for scheme in ("none", "save"):
        faulty[scheme] = json.loads(peat("save", "run", "-m", lenet, "-i", lx, "--protect", scheme, "--flips", 512,
                                         "--seed", 3, "--json").stdout)
    keep = {s: sum(a == b for a, b in zip(faulty[s]["predictions"], plain["predictions"])) for s in faulty}
    check(faulty["save"]["stats"]["detections"] > 0 and keep["save"] >= keep["none"] and keep["save"] >= 60,
          f"LeNet, 512 random flips over a batch of 64: SAVE detects ({faulty['save']['stats']['detections']}) and "
          f"recovers ({faulty['save']['stats']['recoveries']}), keeping the fault-free prediction on {keep['save']}/64; "
          f"unprotected {keep['none']}/64")

    # where Ranger's bounds were profiled (here Fashion-MNIST's train split, LeNet's input shape): said, in JSON too
    ranger = json.loads(peat("save", "run", "-m", lenet, "-i", lx, "--protect", "ranger", "--json").stdout)
    check(ranger.get("note", "").startswith("Ranger's bounds profiled on fashion-mnist"), f"LeNet, --protect ranger --json: the note says where Ranger's "
          f"bounds come from ({ranger.get('note')!r})")

    # bad input
    np.save(os.path.join(WORK, "wrong.npy"), np.zeros((2, 3, 32, 32), np.float32))
    one_error(["save", "run", "-m", r18, "-i", os.path.join(WORK, "wrong.npy")], "[2,3,32,32]", "[3,64,64]")
    np.save(os.path.join(WORK, "bright.npy"), np.full((1, 1, 28, 28), 9.0, np.float32))
    one_error(["save", "run", "-m", lenet, "-i", os.path.join(WORK, "bright.npy"), "--protect", "save"],
              "outside the analysed input box")
    np.save(os.path.join(WORK, "short_ref.npy"), np.zeros((4, 9), np.float32))
    one_error(["save", "run", "-m", r18, "-i", r18x, "--expect", os.path.join(WORK, "short_ref.npy")],
              "[4,9]", "reference")
    one_error(["save", "run", "-m", r18, "-i", os.path.join(WORK, "no-such.npy")], "no-such.npy")
except SystemExit as e:
    failures.append(str(e))
    print(e)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
