#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SAVE on the model families users export (issue 42's table), a measurement, not a test:

    $(tools/venv-path.sh)/bin/python tests/bench/save_families.py build/bin/peat WORKDIR [--analyse-timeout S]

Each family is exported five ways as users do: Debian's PyTorch 1.13 (/usr/bin/python3) at a fixed
batch of 2 with opsets 13 and 17 and with a dynamic batch at 17; PyTorch 2.x's dynamo exporter (this
venv) at opset 18 with a fixed batch of 2 and with a dynamic batch. Each export is run by `peat save
run` on 2 samples against onnxruntime (run: the largest difference; or SAVE's refusal), and the
opset-17 fixed-batch export is analysed (`save analyze --mode interval`, inputs in [0, 1]) under a
time limit. Small configurations, random weights: this says what SAVE takes and computes right, not
how tight its bounds are. Prints a Markdown table.
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

warnings.filterwarnings("ignore")
PEAT, WORK = sys.argv[1], sys.argv[2]
TIMEOUT = int(sys.argv[sys.argv.index("--analyse-timeout") + 1]) if "--analyse-timeout" in sys.argv else 60
os.makedirs(WORK, exist_ok=True)

# the families, built the same way under both PyTorch versions (torchvision 0.14 and 0.26)
FAMILIES = r'''
import collections, torch, torchvision
from torchvision.models import segmentation
nn = torch.nn
class Out(nn.Module):
    def __init__(self, m):
        super().__init__(); self.m = m
    def forward(self, x):
        return self.m(x)["out"]
class FPN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, 2, 1), nn.Conv2d(8, 16, 3, 2, 1)
        self.fpn = torchvision.ops.FeaturePyramidNetwork([8, 16], 8)
    def forward(self, x):
        a = torch.relu(self.c1(x)); b = torch.relu(self.c2(a))
        return self.fpn(collections.OrderedDict([("a", a), ("b", b)]))["a"]
class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__(); self.gru = nn.GRU(6, 8, batch_first=True); self.fc = nn.Linear(8, 3)
    def forward(self, x):
        return self.fc(self.gru(x)[1][-1])
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), 2)
        self.head = nn.Linear(16, 4)
    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))
class TokenModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), 1)
        self.head = nn.Linear(16, 4)
    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))
none = dict(weights=None, weights_backbone=None, num_classes=5)
def families():
    V = torchvision.models
    return {
        "ResNet-18": (lambda: V.resnet18(num_classes=10), (3, 64, 64)),
        "MNASNet": (lambda: V.mnasnet0_5(num_classes=10), (3, 64, 64)),
        "DenseNet-121": (lambda: V.densenet121(num_classes=10), (3, 64, 64)),
        "RegNetY-400MF": (lambda: V.regnet_y_400mf(num_classes=10), (3, 64, 64)),
        "ConvNeXt-Tiny": (lambda: V.convnext_tiny(num_classes=10), (3, 64, 64)),
        "Swin-T": (lambda: V.swin_t(num_classes=10), (3, 64, 64)),
        "ViT (1 layer)": (lambda: V.VisionTransformer(64, 16, 1, 2, 32, 64, num_classes=10), (3, 64, 64)),
        "Inception-v3": (lambda: V.inception_v3(num_classes=10, aux_logits=False, init_weights=False), (3, 80, 80)),
        "R3D-18 (video)": (lambda: V.video.r3d_18(num_classes=10), (3, 4, 32, 32)),
        "FCN-ResNet50": (lambda: Out(segmentation.fcn_resnet50(aux_loss=False, **none)), (3, 64, 64)),
        "DeepLabV3-MobileNetV3": (lambda: Out(segmentation.deeplabv3_mobilenet_v3_large(aux_loss=False, **none)), (3, 64, 64)),
        "LRASPP-MobileNetV3": (lambda: Out(segmentation.lraspp_mobilenet_v3_large(**none)), (3, 64, 64)),
        "FeaturePyramidNetwork": (FPN, (3, 32, 32)),
        "GRU classifier": (GRUClassifier, (9, 6)),
        "nn.TransformerEncoder": (Encoder, (6, 8)),
        "token model (int64 ids)": (TokenModel, (6,)),
    }
def example(name, shape, batch):
    if name.startswith("token"):
        return torch.randint(0, 100, (batch,) + shape)
    return torch.rand((batch,) + shape)
'''

EXPORT_1_13 = FAMILIES + r'''
import sys, warnings, json
warnings.filterwarnings("ignore")
out = sys.argv[1]
done = {}
for name, (make, shape) in families().items():
    torch.manual_seed(0)
    m = make().eval()
    stem = "".join(c if c.isalnum() else "_" for c in name)
    for tag, opset, dynamic in (("t113-fixed2-op13", 13, False), ("t113-fixed2-op17", 17, False), ("t113-dynamic-op17", 17, True)):
        path = f"{out}/{stem}-{tag}.onnx"
        try:
            kw = {"dynamic_axes": {"x": {0: "batch"}}} if dynamic else {}
            torch.onnx.export(m, example(name, shape, 2), path, opset_version=opset, input_names=["x"], **kw)
            done[path] = "ok"
        except Exception as e:
            done[path] = "export failed: " + str(e).splitlines()[0][:120]
print(json.dumps(done))
'''

results = {}
p = subprocess.run(["/usr/bin/python3", "-c", EXPORT_1_13, WORK], capture_output=True, text=True, timeout=3600)
exports = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
if p.returncode != 0:
    print("PyTorch 1.13 exports failed:", p.stderr[-500:])

namespace = {}
exec(FAMILIES, namespace)  # noqa: S102 - our own source, shared with the 1.13 export
for name, (make, shape) in namespace["families"]().items():
    torch.manual_seed(0)
    m = make().eval()
    stem = "".join(c if c.isalnum() else "_" for c in name)
    for tag, dynamic in (("t2-fixed2-op18", False), ("t2-dynamic-op18", True)):
        path = f"{WORK}/{stem}-{tag}.onnx"
        try:
            kw = {"dynamic_shapes": {"x": {0: torch.export.Dim("batch", min=1, max=64)}}} if dynamic else {}
            torch.onnx.export(m, (namespace["example"](name, shape, 2),), path, dynamo=True, opset_version=18,
                              input_names=["x"], **kw)
            exports[path] = "ok"
        except Exception as e:  # noqa: BLE001 - the exporter's failure is a finding
            exports[path] = "export failed: " + str(e).splitlines()[0][:120]


def run(path):
    if exports.get(path) != "ok":
        return exports.get(path, "not exported")
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    if "int" in i.type:
        x = np.random.default_rng(0).integers(0, 100, [2 if not isinstance(d, int) else d for d in i.shape]).astype(np.int64)
    else:
        x = np.random.default_rng(0).random([2 if not isinstance(d, int) else d for d in i.shape], dtype=np.float32)
    ref = s.run(None, {i.name: x})[0]
    np.save(path + ".x.npy", x)
    np.save(path + ".ref.npy", ref)
    r = subprocess.run([PEAT, "save", "run", "-m", path, "-i", path + ".x.npy", "--expect", path + ".ref.npy", "--json"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        return "refused: " + line.replace("peat: error: ", "").split(": ", 1)[-1][:140]
    j = json.loads(r.stdout)
    c = j["comparison"]
    reading = j.get("batch_reading", "")  # "..., not read as a batch (...)" holds "read as a batch" too
    batch = "one sample" if "not read as a batch" in reading else "batch" if "read as a batch" in reading else "-"
    return f"run, {c['max_abs']:.1e} ({batch})"


def analyse(path):
    if exports.get(path) != "ok":
        return "-"
    t0 = time.time()
    try:
        pixels = [] if "token" in path else ["--input-range", "0,1", "--input-mean", "0", "--input-std", "1"]
        r = subprocess.run([PEAT, "save", "analyze", "-m", path, "--mode", "interval", *pixels, "--json"],
                           capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"over {TIMEOUT} s"
    if r.returncode != 0:
        line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        return "refused: " + line.replace("peat: error: ", "").split(": ", 1)[-1][:140]
    return f"analysed ({time.time() - t0:.0f} s)"


tags = ["t113-fixed2-op13", "t113-fixed2-op17", "t113-dynamic-op17", "t2-fixed2-op18", "t2-dynamic-op18"]
print(f"| family | 1.13 fixed 2, op 13 | 1.13 fixed 2, op 17 | 1.13 dynamic, op 17 | {torch.__version__.split('+')[0]} dynamo fixed 2, op 18 | "
      f"{torch.__version__.split('+')[0]} dynamo dynamic, op 18 | analysis (1.13 fixed 2, op 17) |")
print("|---|---|---|---|---|---|---|")
for name in namespace["families"]():
    stem = "".join(c if c.isalnum() else "_" for c in name)
    cells = [run(f"{WORK}/{stem}-{t}.onnx") for t in tags]
    cells.append(analyse(f"{WORK}/{stem}-t113-fixed2-op17.onnx"))
    print(f"| {name} | " + " | ".join(c.replace("|", "/") for c in cells) + " |", flush=True)
