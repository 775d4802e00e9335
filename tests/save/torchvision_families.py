#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`peat save analyze --mode interval` on the torchvision families as users export them (issue 30, part 5):

    torchvision_families.py PEAT [FAMILY ...]

Each family is built from Debian's torchvision 0.14 constructors (small but real: the smallest
member, or the family's own class with fewer and narrower blocks; num_classes=10; random weights,
seed 0) and exported here with torch.onnx.export(model.eval(), torch.rand(1, 3, H, W), f,
opset_version=13 or 17), with a fixed batch of 1 and with a dynamic batch axis. For each export,
SAVE must analyse it in interval mode, PyTorch's outputs on 24 inputs of the box (uniform pixels
and black-and-white corners, ImageNet's normalisation) must lie inside the bounds SAVE reports,
SAVE's engine must predict PyTorch's class on all of them (a fault-free campaign labelled by
PyTorch) and `peat save run --expect` must find its outputs within 1e-4 of their scale of
PyTorch's. A family listed in KNOWN_REFUSALS must still be refused with that reason (one line); the
table printed at the end is the one in docs/save.md.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import h5py
import numpy as np
import torch
import torchvision
from torchvision.models import convnext, efficientnet, regnet, resnet, swin_transformer, vision_transformer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import finish  # noqa: E402

PEAT = sys.argv[1]
ONLY = set(sys.argv[2:])
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def resnext():  # ResNeXt's grouped bottleneck, one block per stage
    return resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], groups=8, width_per_group=4, num_classes=10)


def wide_resnet():  # Wide-ResNet's bottleneck (twice ResNet's inner width: width_per_group 128), one block per stage
    class Narrow(resnet.ResNet):  # torchvision's ResNet and blocks at an eighth of the planes
        def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
            return super()._make_layer(block, planes // 8, blocks, stride, dilate)
    model = Narrow(resnet.Bottleneck, [1, 1, 1, 1], width_per_group=128, num_classes=10)
    model.fc = torch.nn.Linear(512 // 8 * resnet.Bottleneck.expansion, 10)
    return model


def vgg():  # VGG-11's layers ("A": 8 convs, 5 max-pools) at an eighth of the widths; its classifier's layers narrower
    from torchvision.models import vgg as tv_vgg
    model = tv_vgg.VGG(tv_vgg.make_layers([8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"]), num_classes=10)
    model.classifier = torch.nn.Sequential(torch.nn.Linear(64 * 7 * 7, 64), torch.nn.ReLU(True), torch.nn.Dropout(),
                                           torch.nn.Linear(64, 64), torch.nn.ReLU(True), torch.nn.Dropout(),
                                           torch.nn.Linear(64, 10))
    return model


def alexnet():  # AlexNet's layers (11x11 stride-4 stem, overlapping 3x3 max-pools) at a quarter of the widths
    nn = torch.nn
    model = torchvision.models.AlexNet(num_classes=10)
    model.features = nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(16, 48, kernel_size=5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(48, 96, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(96, 64, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(64, 64, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(kernel_size=3, stride=2))
    model.classifier = nn.Sequential(nn.Dropout(), nn.Linear(64 * 6 * 6, 64), nn.ReLU(inplace=True), nn.Dropout(),
                                     nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 10))
    return model


def efficientnet_b0():
    return torchvision.models.efficientnet_b0(num_classes=10)


def regnet_y():  # RegNetY's block (squeeze-excitation, groups) at 400MF's widths, depth 4
    params = regnet.BlockParams.from_init_params(depth=4, w_0=48, w_a=27.89, w_m=2.09, group_width=8, se_ratio=0.25)
    return regnet.RegNet(params, num_classes=10)


def densenet():  # DenseNet's dense blocks and transitions, two layers per block
    return torchvision.models.densenet.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16,
                                                num_classes=10)


def convnext_small_config():
    cfg = convnext.CNBlockConfig
    return convnext.ConvNeXt([cfg(16, 32, 1), cfg(32, 64, 1), cfg(64, 128, 1), cfg(128, None, 1)], layer_scale=0.5,
                             num_classes=10)


def vit():
    return vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                                mlp_dim=64, num_classes=10)


def swin():  # two blocks per stage: the second shifts its windows (roll, the attention mask)
    return swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[1, 2],
                                            window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)


# family -> (constructor, input side)
FAMILIES = {
    "resnet18": (lambda: torchvision.models.resnet18(num_classes=10), 64),
    "resnext": (resnext, 64),
    "wide_resnet": (wide_resnet, 64),
    # 224: their adaptive average pools (7x7, 6x6) take the last feature map as it is at full size
    "vgg": (vgg, 224),
    "alexnet": (alexnet, 224),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25), 64),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(num_classes=10, width_mult=0.25), 64),
    "efficientnet_b0": (efficientnet_b0, 64),
    "regnet_y": (regnet_y, 64),
    "densenet": (densenet, 64),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(num_classes=10), 64),
    "shufflenet_v2_x0_5": (lambda: torchvision.models.shufflenet_v2_x0_5(num_classes=10), 64),
    "mnasnet0_5": (lambda: torchvision.models.mnasnet0_5(num_classes=10), 64),
    "googlenet": (lambda: torchvision.models.googlenet(num_classes=10, aux_logits=False, init_weights=True), 64),
    "convnext": (convnext_small_config, 64),
    "vit": (vit, 32),
    "swin": (swin, 32),
}

# (family, opset, batch) -> a phrase of the one-line refusal expected, for what SAVE cannot map yet
KNOWN_REFUSALS = {}

WORK = tempfile.mkdtemp(prefix="peat-families-")
failures, table = [], []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def randomised(model):
    """Fresh torchvision models compute almost nothing (batch norm at identity statistics, zero-initialised
    heads): random statistics and weights everywhere make every layer matter."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            elif isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and not m.weight.abs().sum():
                torch.nn.init.kaiming_uniform_(m.weight)
    return model


built = {}  # the family last built: its four exports share one model (VGG's constructor alone takes seconds)


def export(family, opset, dynamic):
    make, side = FAMILIES[family]
    if family not in built:
        built.clear()
        torch.manual_seed(0)
        built[family] = randomised(make()).eval()
    model = built[family]
    path = os.path.join(WORK, f"{family}-{opset}-{'dyn' if dynamic else '1'}.onnx")
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, torch.rand(1, 3, side, side), path, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes=axes)
    return model, side, path


def box_inputs(side, count=24):
    g = torch.Generator().manual_seed(1)
    raw = torch.rand(count, 3, side, side, generator=g)
    raw[count // 2:] = (raw[count // 2:] > 0.5).float()  # corners of the pixel box
    raw[0], raw[1] = 0, 1
    return raw


def box_outputs(model, raw):
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    with torch.no_grad():
        return model((raw - mean) / std)


def run(family, opset, dynamic):
    model, side, path = export(family, opset, dynamic)
    key = (family, opset, "dynamic" if dynamic else "1")
    t0 = time.time()
    p = subprocess.run([PEAT, "save", "analyze", "-m", path, "--mode", "interval", "--input-mean", ",".join(map(str, MEAN)),
                        "--input-std", ",".join(map(str, STD)), "--json"], capture_output=True, text=True, timeout=600)
    seconds = time.time() - t0
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        reason = lines[0] if lines else f"exit {p.returncode}"
        table.append((*key, "refused", reason))
        want = KNOWN_REFUSALS.get(key)
        check(want is not None and len(lines) == 1 and want in reason, f"{key}: refused: {reason[:400]}")
        return
    j = json.loads(p.stdout)
    lo, hi = j["output"]["lo"], j["output"]["hi"]
    raw = box_inputs(side)
    out = box_outputs(model, raw)
    inside = float(out.min()) >= lo and float(out.max()) <= hi
    # SAVE's engine computes what PyTorch computes: with PyTorch's classes as the labels, a fault-free
    # campaign on the same inputs scores 1.0 (a misread graph, say a concatenation in the wrong
    # order, would still lie inside bounds this wide)
    data = path + ".h5"
    with h5py.File(data, "w") as f:
        f["test/x"] = raw.numpy()
        f["test/y"] = out.argmax(1).numpy()
    c = subprocess.run([PEAT, "save", "campaign", "-m", path, "--mode", "interval", "--input-mean", ",".join(map(str, MEAN)),
                        "--input-std", ",".join(map(str, STD)), "--data", data, "--images", str(len(raw)), "--batch", str(len(raw)),
                        "--flips", "0", "--schemes", "none", "--json"], capture_output=True, text=True, timeout=600)
    agree = json.loads(c.stdout)["clean_accuracy"] if c.returncode == 0 else None
    # and its outputs are PyTorch's up to fp32 reordering: `peat save run --expect`
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    np.save(path + ".x.npy", ((raw - mean) / std).numpy())
    np.save(path + ".y.npy", out.numpy())
    e = subprocess.run([PEAT, "save", "run", "-m", path, "-i", path + ".x.npy", "--expect", path + ".y.npy", "--json"],
                       capture_output=True, text=True, timeout=600)
    diff = json.loads(e.stdout)["comparison"]["max_abs"] if e.returncode == 0 else None
    scale = max(1e-6, float(out.abs().max()))
    close = diff is not None and diff <= 1e-4 * scale  # summation orders differ; a misread graph is off by O(scale)
    table.append((*key, "analysed" if inside and agree == 1.0 and close else "BOUNDS MISSED" if not inside
                  else "ENGINE DIFFERS", f"{len(j['layers'])} layers, {seconds:.1f} s, output [{lo:.3g}, {hi:.3g}] holds "
                  f"PyTorch's [{float(out.min()):.3g}, {float(out.max()):.3g}]; engine's classes = PyTorch's on "
                  f"{len(raw)} inputs: {agree == 1.0}; largest |engine - PyTorch| {diff if diff is None else f'{diff:.2g}'}"))
    check(inside and key not in KNOWN_REFUSALS,
          f"{key}: {len(j['layers'])} layers in {seconds:.1f} s; PyTorch's outputs on 24 inputs of the box "
          f"[{float(out.min()):.4g}, {float(out.max()):.4g}] lie in SAVE's [{lo:.4g}, {hi:.4g}]")
    check(agree == 1.0, f"{key}: SAVE's engine predicts PyTorch's class on all {len(raw)} inputs "
                        f"({agree if agree is not None else c.stderr.strip()[:300]})")
    check(close, f"{key}: peat save run's outputs are PyTorch's within 1e-4 of their scale {scale:.3g} "
                 f"(largest difference {diff if diff is not None else e.stderr.strip()[:300]})")


try:
    start = time.time()
    for family in FAMILIES:
        if ONLY and family not in ONLY:
            continue
        for opset in (13, 17):
            for dynamic in (False, True):
                try:
                    run(family, opset, dynamic)
                except Exception as e:  # an export or a run that fails is a failure of that row, not of the rest
                    table.append((family, opset, "dynamic" if dynamic else "1", "error", str(e).splitlines()[0][:200]))
                    check(False, f"{family} opset {opset}: {e}")
    # a concatenation along the batch axis mixes samples: refused by name, never computed per sample
    class CatBatch(torch.nn.Module):
        def forward(self, x):
            return torch.cat([torch.relu(x), x * 2], 0).flatten(1)
    cat = os.path.join(WORK, "cat_batch.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(CatBatch(), torch.rand(1, 3, 4, 4), cat, opset_version=13, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    p = subprocess.run([PEAT, "save", "analyze", "-m", cat], capture_output=True, text=True, timeout=600)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 1 and len(lines) == 1 and "Concat" in lines[0] and "batch axis" in lines[0],
          f"a Concat along the batch axis is refused in one line: {lines[:2]}")
    print(f"\n| family | opset | batch | result |\n|---|---|---|---|")
    for family, opset, batch, result, detail in table:
        print(f"| {family} | {opset} | {batch} | {result}: {detail} |")
    print(f"\n{time.time() - start:.0f} s in all")
finally:
    shutil.rmtree(WORK, ignore_errors=True)

finish(failures)
