#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""SAVE takes models as people export them, onnxruntime the reference (issue 42), run by the project
virtual environment's Python (PyTorch 2.x, onnxruntime, onnx, onnxscript):

    exported_models.py PEAT WORKDIR

- torchvision families (ResNet-18, MNASNet, DenseNet-121, RegNetY-400MF, ConvNeXt-Tiny) exported by
  Debian's PyTorch 1.13 (/usr/bin/python3) as torch.onnx.export writes them by default: a fixed
  batch of 2, no dynamic_axes, opsets 13 and 17;
- a user's CNN (`x.view(x.size(0), -1)`, batch norm), MLP (`torch.flatten(x, 1)`) and GRU and
  torchvision's ResNet-18 (PyPI's torchvision) exported by PyTorch 2.x's exporter (`dynamo=True`, opsets 18 and 20) at batch 1, a fixed batch of 2 and a
  dynamic batch;
each run by `peat save run` on 4 samples and compared with onnxruntime on the same file (fed the
batch the file declares): the fixed first dimension is read as a batch where no node mixes samples,
and the output says so;
- Resize (issue 42): every mode (nearest with each nearest_mode, linear, cubic) and coordinate
  transformation ONNX defines, by scales and by sizes, up and down, each equal to onnxruntime;
  torchvision's FCN, DeepLabV3, LRASPP and FeaturePyramidNetwork and a user's F.interpolate model
  (PyTorch 1.13, opsets 13 and 17) equal to onnxruntime, and onnxruntime's outputs inside SAVE's bounds;
  DeepLabV3 and LRASPP exported at a fixed batch of 2 read as a batch (sizes computed from Shape), and
  a user's F.interpolate model from the dynamo exporter at a fixed batch (sizes constant [2, C, H, W]);
- torchvision's VisionTransformer at a fixed batch of 2 (1.13, opsets 13 and 17): read as a batch
  (its class token's expand(N, -1, -1) made batch-generic), equal to onnxruntime;
- convolutions beyond SAVE's Conv2d node (issue 42): Conv1d, Conv3d, 1x7 and 7x1 kernels, unequal
  strides and padding, dilations, ConvTranspose in 1-D, 2-D and 3-D with output_padding;
  torchvision's Inception-v3 and R3D-18 (a video net): equal to onnxruntime, and its outputs inside
  SAVE's bounds;
- recurrent layers (issue 42): a GRU classifier (batch_first), a 2-layer bidirectional LSTM over
  [seq, batch, feature] (its first dimension is the sequence: not read as a batch) and a ReLU RNN,
  unrolled: equal to onnxruntime, its outputs inside SAVE's bounds;
- token models (issue 42 item 2): nn.Embedding + nn.TransformerEncoder with int64 ids, exported by
  PyTorch 1.13 (fixed and dynamic batch) and by the dynamo exporter: equal to onnxruntime, ids
  counted from the end (negative) as ONNX's Gather does, onnxruntime's outputs inside SAVE's bounds
  for ids over the whole vocabulary, an id outside the table refused under --protect save, and an
  integer input read as anything but ids refused naming the node;
- several outputs (issue 42 item 2): a multi-task model (logits, a sigmoid box, a feature map), exported
  by PyTorch 2.x (dynamic batch) and 1.13 (fixed batch 2): every output run, named, written and
  compared with onnxruntime's (references by name or in order), each output's bounds holding
  onnxruntime's outputs, an unknown output name refused;
- several inputs (issue 42 item 2): an image and side features (PyTorch 1.13, fixed batch 2 and
  dynamic): run with inputs in order or by name, equal to onnxruntime; a box per input
  (`--input-range meta=-2:2`) holding onnxruntime's outputs and widening the bounds; under --protect
  save each input checked against its own box; an input left out, an unknown name, and inputs with
  different sample counts refused in one line;
- token ids beside an attention mask (issue 42 item 2): a user's masked self-attention classifier
  (int64 ids and an int64 mask added to the scores as (1 - mask) * -10000), exported by PyTorch 1.13
  (fixed batch 2 and dynamic) and the dynamo exporter: equal to onnxruntime with padded rows and
  negative ids, onnxruntime's outputs on 300 random ids and masks inside SAVE's bounds for ids
  0..49 and mask in [0, 1]; a mask without a range, a range for the ids, a non-integer mask under
  --protect save and a model computing on the mask as integers each refused in one line;
- a model that does mix its samples (it swaps axis 0 with the next; it multiplies by x.shape[0]; it
  sums a token expanded to the batch) is read as one sample of its
  declared shape and still equals onnxruntime; one that normalises over the batch is refused by name.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness  # noqa: E402

warnings.filterwarnings("ignore")
PEAT, WORK = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="peat-exported-")
shutil.rmtree(WORK, ignore_errors=True)  # a rerun starts clean
os.makedirs(WORK)
H = Harness(PEAT)
check, peat, one_error = H.check, H.run, H.one_error

# --- torchvision, exported by Debian's PyTorch 1.13 the default way (fixed batch 2, no dynamic_axes)
EXPORT_1_13 = r'''
import sys, warnings, torch, torchvision
warnings.filterwarnings("ignore")
torch.manual_seed(0)
out = sys.argv[1]
families = {"resnet18": torchvision.models.resnet18, "mnasnet": torchvision.models.mnasnet0_5,
            "densenet121": torchvision.models.densenet121, "regnety": torchvision.models.regnet_y_400mf,
            "convnext": torchvision.models.convnext_tiny}
for name, make in families.items():
    m = make(num_classes=10).eval()
    with torch.no_grad():  # batch-norm statistics that are not 0 and 1
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1); mod.running_var.uniform_(0.5, 1.5)
    for opset in (13, 17):
        torch.onnx.export(m, torch.rand(2, 3, 64, 64), f"{out}/{name}-fixed2-op{opset}.onnx", opset_version=opset)
'''
subprocess.run(["/usr/bin/python3", "-c", EXPORT_1_13, WORK], check=True, capture_output=True, timeout=900)


# --- models a user writes, exported by PyTorch 2.x's exporter
class UserCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(x.view(x.size(0), -1))


class UserMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(48, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))

    def forward(self, x):
        return self.net(torch.flatten(x, 1))


class UserGRU(torch.nn.Module):  # h0 zeros: traced at a fixed batch they become a [1, 2, 8] constant
    def __init__(self):
        super().__init__()
        self.gru, self.fc = torch.nn.GRU(6, 8, batch_first=True), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.gru(x)[1][-1])


torch.manual_seed(1)
import torchvision  # noqa: E402  (PyPI's, beside PyTorch 2.x)

users = {"usercnn": (UserCNN().eval(), (3, 16, 16)), "usermlp": (UserMLP().eval(), (3, 4, 4)),
         "resnet18": (torchvision.models.resnet18(num_classes=10).eval(), (3, 32, 32)),  # ReduceMean-18, noop_with_empty_axes
         "usergru": (UserGRU().eval(), (9, 6))}
with torch.no_grad():
    users["usercnn"][0].bn.running_var.uniform_(0.5, 1.5)
dynamo_ok = []
for name, (m, sample) in users.items():
    for opset in (18, 20):
        for batch, dynamic in ((1, False), (2, False), (2, True)):
            tag = f"{name}-{'dynamic' if dynamic else f'fixed{batch}'}-op{opset}"
            path = os.path.join(WORK, tag + ".onnx")
            try:
                kw = {"dynamic_shapes": {"x": {0: torch.export.Dim("batch")}}} if dynamic else {}
                torch.onnx.export(m, (torch.rand(batch, *sample),), path, dynamo=True, opset_version=opset,
                                  input_names=["x"], **kw)
                dynamo_ok.append(tag)
            except Exception as e:  # noqa: BLE001 - the exporter's own failure is the finding
                check(False, f"PyTorch {torch.__version__} exports {tag} with dynamo=True: {str(e)[:200]}")
check(len(dynamo_ok) == 24, f"PyTorch {torch.__version__}'s dynamo exporter wrote {len(dynamo_ok)} of 24 models")


def ort_reference(path, x):
    """onnxruntime's outputs for the samples x, fed the batch the file declares."""
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    fixed = i.shape[0] if isinstance(i.shape[0], int) else None
    if fixed is None:
        return s.run(None, {i.name: x})[0]
    return np.concatenate([s.run(None, {i.name: x[k:k + fixed]})[0] for k in range(0, len(x), fixed)])


def ort_inputs(path, feeds):
    """onnxruntime's first output for several inputs (name -> samples), fed the batch the file declares,
    also saved as PATH.ref.npy."""
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    count = len(next(iter(feeds.values())))
    fixed = s.get_inputs()[0].shape[0]
    step = fixed if isinstance(fixed, int) else count
    ref = np.concatenate([s.run(None, {k: v[i:i + step] for k, v in feeds.items()})[0] for i in range(0, count, step)])
    np.save(path + ".ref.npy", ref)  # the reference beside the model, for --expect
    return ref


def save_arrays(folder, **arrays):
    """Each array as folder/NAME.npy; their paths by name."""
    for name, a in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), a)
    return {name: os.path.join(folder, name + ".npy") for name in arrays}


def compare(path, samples=4, whole=False):
    """`peat save run` against onnxruntime on the same inputs; the run's JSON."""
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    shape = s.get_inputs()[0].shape
    rng = np.random.default_rng(7)
    x = rng.random(shape if whole else [samples] + [int(d) for d in shape[1:]], dtype=np.float32)
    xp, rp = path + ".x.npy", path + ".ref.npy"
    np.save(xp, x)
    ref = s.run(None, {s.get_inputs()[0].name: x})[0] if whole else ort_reference(path, x)
    np.save(rp, ref)
    r = peat("save", "run", "-m", path, "-i", xp, "--expect", rp, "--json")
    j = json.loads(r.stdout)
    c = j.get("comparison", {})
    tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
    name = os.path.basename(path)
    # top-1 of a flattened segmentation map picks among near-equal maxima: compared for logits only
    ok = c.get("max_abs", 1e9) <= tol and (ref.ndim > 2 or c.get("top1_agree") == j["samples"])
    check(ok, f"{name}: save run on {j['samples']} sample(s) equals onnxruntime (largest |difference| "
              f"{c.get('max_abs')}, top-1 {c.get('top1_agree')} of {j['samples']})")
    return j


# what every export script under PyTorch 1.13 starts with
PREAMBLE_113 = "import sys, warnings, torch, torchvision\nwarnings.filterwarnings('ignore')\ntorch.manual_seed(0)\nnn = torch.nn\n"


def read_as_batch(j, what):
    """The run's JSON says its fixed first dimension was read as a batch (not "not read as a batch")."""
    reading = j.get("batch_reading", "")
    check("read as a batch" in reading and "not read" not in reading, f"{what}: {reading[:140]}")


def export_113(script, folder):
    """Runs an export script under Debian's PyTorch 1.13 into WORK/folder; the folder."""
    out = os.path.join(WORK, folder)
    os.makedirs(out)
    subprocess.run(["/usr/bin/python3", "-c", PREAMBLE_113 + script, out], check=True, capture_output=True, timeout=600)
    return out


def inside_bounds(path, label):
    """onnxruntime's outputs on 50 inputs of [0, 1] must lie inside SAVE's interval bounds for that box."""
    bounds = json.loads(peat("save", "analyze", "-m", path, "--input-range", "0,1", "--input-mean", "0", "--input-std", "1",
                             "--json").stdout)["output"]
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    shape = [d if isinstance(d, int) else 1 for d in s.get_inputs()[0].shape]
    outs = np.stack([s.run(None, {"x": rng.random(shape, dtype=np.float32)})[0] for _ in range(50)])
    check(outs.min() >= bounds["lo"] and outs.max() <= bounds["hi"],
          f"{label}: onnxruntime's outputs on 50 inputs in [0, 1] lie in SAVE's bounds [{bounds['lo']:.4g}, "
          f"{bounds['hi']:.4g}] (seen [{outs.min():.4g}, {outs.max():.4g}])")


for f in sorted(os.listdir(WORK)):
    if not f.endswith(".onnx"):
        continue
    j = compare(os.path.join(WORK, f))
    if "fixed2" in f:
        read_as_batch(j, f"{f}: its fixed first dimension 2 read as a batch")
    else:
        check(j.get("batch_reading", "") == "", f"{f}: a batch of 1 or a dynamic batch needs no reading: "
                                                f"{j.get('batch_reading', '')[:80]}")

# a fixed-batch model through the whole SAVE analysis: the analysis says how it read the batch
a = peat("save", "analyze", "-m", os.path.join(WORK, "usercnn-fixed2-op18.onnx"), "--input-range", "0,1")
check("fixes its first dimension to 2: read as a batch" in a.stdout, "save analyze states the batch reading")


# torchvision's VisionTransformer at a fixed batch of 2 (PyTorch 1.13): its class token is
# expand(N, -1, -1) to a shape computed from constants traced at N, then joined with the samples;
# read as a batch (the expand's shape made the batch's own), its head given weights (torchvision
# initialises it to zeros, which would make any comparison trivial)
EXPORT_VIT = r'''
vit = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=1, num_heads=2, hidden_dim=32,
                                           mlp_dim=64, num_classes=5).eval()
with torch.no_grad():
    vit.heads.head.weight.normal_()
    vit.class_token.normal_()
for opset in (13, 17):
    torch.onnx.export(vit, torch.rand(2, 3, 32, 32), f"{sys.argv[1]}/vit-fixed2-op{opset}.onnx", opset_version=opset)
'''
vit = export_113(EXPORT_VIT, "vit")
for f in ("vit-fixed2-op13.onnx", "vit-fixed2-op17.onnx"):
    j = compare(os.path.join(vit, f))
    read_as_batch(j, f"{f}: the class token's expand traced at the fixed batch read as the batch's own")

# every node of a transformer stores in a session (two of its nodes once got one name, and the
# store failed after writing part of the analysis): nn.TransformerEncoder exported by PyTorch 1.13
EXPORT_ENCODER = r'''
import sys, warnings, torch
warnings.filterwarnings("ignore")
torch.manual_seed(0)
class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 2)
        self.head = torch.nn.Linear(16, 4)
    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))
torch.onnx.export(Encoder().eval(), torch.rand(1, 6, 8), sys.argv[1], opset_version=17, input_names=["x"],
                  dynamic_axes={"x": {0: "batch"}})
'''
encoder = os.path.join(WORK, "encoder.onnx.d")
os.makedirs(encoder, exist_ok=True)
encoder = os.path.join(encoder, "encoder.onnx")
subprocess.run(["/usr/bin/python3", "-c", EXPORT_ENCODER, encoder], check=True, capture_output=True, timeout=300)
session = os.path.join(WORK, "encoder.h5")
layers = json.loads(peat("save", "analyze", "-m", encoder, "--input-range", "0,1", "--json").stdout)["layers"]
peat("save", "analyze", "-m", encoder, "--input-range", "0,1", "--session", session)
# each layer's name as h5py reads the session: a record of its own, or a row of the packed record
READ_LAYERS = (
    "import h5py, sys\n"
    "text = lambda v: v.decode() if isinstance(v, bytes) else str(v)\n"
    "for g in h5py.File(sys.argv[1], 'r')['save'].values():\n"
    "    kind = text(g.attrs.get('kind', ''))\n"
    "    if kind == 'save_layer': print(text(g.attrs['node']))\n"
    "    if kind == 'save_layers': print(text(g.attrs['nodes']))\n")
stored = subprocess.run(["/usr/bin/python3", "-c", READ_LAYERS, session], check=True, capture_output=True, text=True)
names = stored.stdout.split()
check(sorted(names) == sorted(l["name"] for l in layers) and len(set(names)) == len(layers),
      f"nn.TransformerEncoder: all {len(layers)} layers stored under distinct names ({len(names)} read by h5py)")

# --- Resize: ONNX's modes one by one (onnx.helper models, [1, 3, 5, 7] in)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import onnx  # noqa: E402

rng = np.random.default_rng(3)
resize_dir = os.path.join(WORK, "resize")
os.makedirs(resize_dir)
matched, tried, refused_ambiguous, worst = 0, 0, 0, []
for mode in ("nearest", "linear", "cubic"):
    for transform in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"):
        for nearest in (("round_prefer_floor", "round_prefer_ceil", "floor", "ceil") if mode == "nearest"
                        else ("round_prefer_floor",)):
            for how, scales, sizes in (("up", [1, 1, 2.0, 3.0], None), ("down", [1, 1, 0.6, 0.5], None),
                                       ("sizes", None, [1, 3, 10, 14]), ("odd", None, [1, 3, 3, 11])):
                inits = [numpy_helper.from_array(np.array([0, 0, 0.1, 0.2, 1, 1, 0.9, 0.7] if transform ==
                                                          "tf_crop_and_resize" else [], np.float32), "roi"),
                         numpy_helper.from_array(np.array(scales or [], np.float32), "scales")]
                inputs = ["x", "roi", "scales"]
                if sizes:
                    inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
                    inputs.append("sizes")
                attrs = dict(mode=mode, coordinate_transformation_mode=transform, nearest_mode=nearest)
                if mode == "cubic":
                    attrs["exclude_outside"] = int(how == "sizes")
                graph = helper.make_graph(
                    [helper.make_node("Resize", inputs, ["r"], name="resize", **attrs), helper.make_node("Relu", ["r"], ["y"])],
                    "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "h", "w"])], inits)
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                model.ir_version = 8
                path = os.path.join(resize_dir, f"{mode}-{transform}-{nearest}-{how}.onnx")
                onnx.save(model, path)
                x = rng.random((1, 3, 5, 7), dtype=np.float32) * 4 - 1
                ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
                np.save(path + ".x.npy", x)
                np.save(path + ".ref.npy", ref)
                tried += 1
                r = subprocess.run([PEAT, "save", "run", "-m", path, "-i", path + ".x.npy", "--expect", path + ".ref.npy",
                                    "--max-diff", "1e-5"], capture_output=True, text=True, timeout=120)
                # align_corners and tf_crop_and_resize with a scale whose output length is not whole:
                # ONNX's reference (scale x length) and onnxruntime (the whole length) differ: refused
                ambiguous = transform in ("align_corners", "tf_crop_and_resize") and how == "down"
                if ambiguous:
                    refused_ambiguous += r.returncode == 1 and "give sizes instead of scales" in r.stderr
                else:
                    matched += r.returncode == 0
                    if r.returncode != 0:
                        worst.append(f"{os.path.basename(path)}: {(r.stdout + r.stderr).strip().splitlines()[-1][:160]}")
check(matched == tried - 12 and refused_ambiguous == 12,
      f"Resize: {matched} of {tried - 12} (mode, transformation, nearest mode, scales or sizes) equal onnxruntime "
      f"within 1e-5 {worst[:3]}; {refused_ambiguous} of 12 where ONNX and onnxruntime differ refused")

# torchvision's segmentation models and FPN, a user's F.interpolate (PyTorch 1.13, batch 1)
EXPORT_UPSAMPLING = r'''
import collections, sys, warnings, torch, torchvision
from torchvision.models import segmentation
from torchvision.ops import FeaturePyramidNetwork
warnings.filterwarnings("ignore")
torch.manual_seed(0)
class Out(torch.nn.Module):
    def __init__(self, m):
        super().__init__(); self.m = m
    def forward(self, x):
        return self.m(x)["out"]
class FPN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.Conv2d(8, 16, 3, 2, 1)
        self.fpn = FeaturePyramidNetwork([8, 16], 8)
    def forward(self, x):
        a = torch.relu(self.c1(x)); b = torch.relu(self.c2(a))
        return self.fpn(collections.OrderedDict([("a", a), ("b", b)]))["a"]
class Interpolating(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.c = torch.nn.Conv2d(3, 4, 3, padding=1)
    def forward(self, x):
        F = torch.nn.functional
        y = torch.relu(self.c(x))
        return (F.interpolate(y, scale_factor=2, mode="nearest") + F.interpolate(y, size=(32, 32), mode="bilinear") +
                F.interpolate(y, size=(32, 32), mode="bilinear", align_corners=True) +
                F.interpolate(y, scale_factor=2, mode="bicubic"))
none = dict(weights=None, weights_backbone=None, num_classes=5)
models = {"fcn": (Out(segmentation.fcn_resnet50(aux_loss=False, **none)), 64),
          "deeplabv3": (Out(segmentation.deeplabv3_mobilenet_v3_large(aux_loss=False, **none)), 64),
          "lraspp": (Out(segmentation.lraspp_mobilenet_v3_large(**none)), 64),
          "fpn": (FPN(), 32), "interpolate": (Interpolating(), 16)}
for name, (m, size) in models.items():
    for opset in (13, 17):
        torch.onnx.export(m.eval(), torch.rand(1, 3, size, size), f"{sys.argv[1]}/{name}-op{opset}.onnx",
                          opset_version=opset, input_names=["x"])
# at a fixed batch of 2 (the default export): the final Resize's sizes come from Shape through Slice
# and Concat, which SAVE's batch check evaluates itself
for name in ("deeplabv3", "lraspp"):
    torch.onnx.export(models[name][0].eval(), torch.rand(2, 3, 64, 64), f"{sys.argv[1]}/{name}-fixed2-op17.onnx",
                      opset_version=17, input_names=["x"])
'''
upsampling = export_113(EXPORT_UPSAMPLING, "upsampling")
for f in sorted(os.listdir(upsampling)):
    if f.endswith(".onnx"):
        j = compare(os.path.join(upsampling, f), samples=4 if "fixed2" in f else 1)
        if "fixed2" in f:
            read_as_batch(j, f"{f}: its fixed first dimension 2 read as a batch through the Resize's computed sizes")
for f in ("fpn-op17.onnx", "interpolate-op13.onnx"):
    inside_bounds(os.path.join(upsampling, f), f)


# the dynamo exporter writes F.interpolate at a fixed batch as a Resize to constant sizes [2, C, H, W]:
# read as a batch, the sizes' first entry being the batch's own
class UserUpsample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        y = torch.nn.functional.interpolate(torch.relu(self.a(x)), scale_factor=2, mode="bilinear", align_corners=False)
        return self.b(torch.nn.functional.interpolate(y, size=(13, 11), mode="nearest"))


up = os.path.join(WORK, "upsample-dynamo-fixed2-op18.onnx")
torch.onnx.export(UserUpsample().eval(), (torch.rand(2, 3, 6, 5),), up, dynamo=True, opset_version=18, input_names=["x"])
read_as_batch(compare(up), "upsample-dynamo-fixed2-op18: a Resize to sizes traced at the fixed batch read as a batch")

import onnx.numpy_helper  # noqa: E402

# torchvision's ConvNeXt from the dynamo exporter at a fixed batch: its head's as_strided is written
# as a Gather from the pooled features flattened ([N C]) by every index in order; read as the
# Reshape it is, the model reads as a batch (it was read as one sample, then refused)
torch.manual_seed(0)
cx = os.path.join(WORK, "convnext-dynamo-fixed2-op18.onnx")
torch.onnx.export(torchvision.models.convnext_tiny(num_classes=10).eval(), (torch.rand(2, 3, 32, 32),), cx, dynamo=True,
                  opset_version=18, input_names=["x"])
cx_model = onnx.load(cx)
check(any(n.op_type == "Gather" and "as_strided" in n.name for n in cx_model.graph.node),
      "the dynamo exporter writes ConvNeXt's as_strided as a Gather (what this check is about)")
read_as_batch(compare(cx), "convnext-dynamo-fixed2-op18: an identity Gather read as a Reshape")
# a Gather by indices that are not every element in order stays a Gather, computed as ONNX defines it
g_in = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 6])
g_out = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2, 3])
for tag, order in (("identity", list(range(6))), ("permuted", [0, 1, 2, 3, 5, 4])):
    idx = onnx.numpy_helper.from_array(np.array(order, dtype=np.int64).reshape(2, 3), "idx")
    shape = onnx.numpy_helper.from_array(np.array([-1], dtype=np.int64), "flat")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Reshape", ["x", "flat"], ["f"]),
                                    onnx.helper.make_node("Gather", ["f", "idx"], ["g"], axis=0),
                                    onnx.helper.make_node("Unsqueeze", ["g", "zero"], ["y"])],
                                   "gather", [g_in], [g_out], [idx, shape,
                                   onnx.numpy_helper.from_array(np.array([0], dtype=np.int64), "zero")])
    gm = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    gm.ir_version = 8
    gp = os.path.join(WORK, f"gather-{tag}.onnx")
    onnx.save(gm, gp)
    compare(gp, whole=True)

# --- convolutions as patches: 1-D, 3-D, non-square, transposed (PyTorch 1.13, dynamic batch)
EXPORT_CONVS = r'''
class Conv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv1d(3, 8, 5, stride=2, padding=2), nn.Conv1d(8, 4, 3, dilation=2)
        self.t = nn.ConvTranspose1d(4, 6, 4, stride=2, padding=1, output_padding=1)
    def forward(self, x):
        return self.t(torch.relu(self.b(torch.relu(self.a(x)))))
class Conv2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, (1, 7), padding=(0, 3)), nn.Conv2d(8, 8, (7, 1), padding=(3, 0))
        self.c = nn.Conv2d(8, 4, 3, stride=(2, 1), padding=(1, 2))
        self.t = nn.ConvTranspose2d(4, 5, 3, stride=2, padding=1, output_padding=1)
        self.u = nn.ConvTranspose2d(5, 3, (2, 3), stride=(2, 1), dilation=(1, 2))
    def forward(self, x):
        return self.u(torch.relu(self.t(torch.relu(self.c(torch.relu(self.b(torch.relu(self.a(x)))))))))
class Conv3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv3d(3, 4, 3, padding=1, stride=(1, 2, 2)), nn.Conv3d(4, 4, (3, 1, 1))
        self.t = nn.ConvTranspose3d(4, 2, 2, stride=2)
    def forward(self, x):
        return self.t(torch.relu(self.b(torch.relu(self.a(x)))))
out = sys.argv[1]
for name, m, shape in (("conv1d", Conv1d(), (1, 3, 20)), ("conv2d", Conv2d(), (1, 3, 12, 12)),
                       ("conv3d", Conv3d(), (1, 3, 6, 8, 8))):
    for opset in (13, 17):
        torch.onnx.export(m.eval(), torch.rand(*shape), f"{out}/{name}-op{opset}.onnx", opset_version=opset,
                          input_names=["x"], dynamic_axes={"x": {0: "batch"}})
inception = torchvision.models.inception_v3(num_classes=10, aux_logits=False, init_weights=False)
torch.onnx.export(inception.eval(), torch.rand(1, 3, 80, 80), f"{out}/inception_v3-op17.onnx", opset_version=17,
                  input_names=["x"])
torch.onnx.export(torchvision.models.video.r3d_18(num_classes=10).eval(), torch.rand(1, 3, 4, 32, 32),
                  f"{out}/r3d_18-op17.onnx", opset_version=17, input_names=["x"])
'''
convs = export_113(EXPORT_CONVS, "convs")
for f in sorted(os.listdir(convs)):
    if f.endswith(".onnx"):
        compare(os.path.join(convs, f), samples=2 if f.startswith("conv") else 1)
inside_bounds(os.path.join(convs, "conv2d-op17.onnx"), "non-square and transposed convolutions")

# --- recurrent layers, unrolled (PyTorch 1.13)
EXPORT_RECURRENT = r'''
import sys, warnings, torch
warnings.filterwarnings("ignore")
torch.manual_seed(0)
nn = torch.nn
class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__(); self.gru = nn.GRU(6, 8, batch_first=True); self.fc = nn.Linear(8, 3)
    def forward(self, x):
        y, h = self.gru(x)
        return self.fc(h[-1])
class BiLSTM(nn.Module):
    def __init__(self):
        super().__init__(); self.lstm = nn.LSTM(6, 5, num_layers=2, bidirectional=True); self.fc = nn.Linear(10, 2)
    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.fc(y)
class ReluRNN(nn.Module):
    def __init__(self):
        super().__init__(); self.rnn = nn.RNN(6, 7, nonlinearity="relu", batch_first=True); self.fc = nn.Linear(7, 2)
    def forward(self, x):
        y, h = self.rnn(x)
        return self.fc(y[:, -1])
for name, m, shape in (("gru", GRUClassifier(), (1, 9, 6)), ("bilstm", BiLSTM(), (9, 1, 6)), ("relu_rnn", ReluRNN(), (1, 9, 6))):
    for opset in (13, 17):
        torch.onnx.export(m.eval(), torch.rand(*shape), f"{sys.argv[1]}/{name}-op{opset}.onnx", opset_version=opset,
                          input_names=["x"])
'''
recurrent = export_113(EXPORT_RECURRENT, "recurrent")
for f in sorted(os.listdir(recurrent)):
    if not f.endswith(".onnx"):
        continue
    path = os.path.join(recurrent, f)
    j = compare(path, whole=True)
    if f.startswith("bilstm"):
        check("not read as a batch" in j.get("batch_reading", ""), f"{f}: the sequence axis is not read as a batch")
    if f.endswith("op17.onnx"):
        inside_bounds(path, f)

# --- token models: int64 ids looked up in an embedding table
EXPORT_TOKENS = r'''
class TokenModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), 1)
        self.head = nn.Linear(16, 4)
    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))
class IdsAsValues(nn.Module):  # reads the ids as numbers too: not a lookup alone
    def __init__(self):
        super().__init__(); self.embed = nn.Embedding(50, 4)
    def forward(self, x):
        return self.embed(x).sum(2) + x.float()
m = TokenModel().eval()
x = torch.randint(0, 50, (2, 7))
torch.onnx.export(m, x, sys.argv[1] + "/tokens-fixed2-op17.onnx", opset_version=17, input_names=["x"])
torch.onnx.export(m, x, sys.argv[1] + "/tokens-dynamic-op17.onnx", opset_version=17, input_names=["x"],
                  dynamic_axes={"x": {0: "batch"}})
torch.onnx.export(IdsAsValues().eval(), x, sys.argv[1] + "/ids_as_values.onnx", opset_version=17, input_names=["x"])
'''
tokens = export_113(EXPORT_TOKENS, "tokens")


class TokenModel(torch.nn.Module):  # the same module under PyTorch 2.x, for its dynamo exporter
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), 1)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))


torch.manual_seed(0)
tm = TokenModel().eval()
torch.onnx.export(tm, (torch.randint(0, 50, (1, 7)),), os.path.join(tokens, "tokens-dynamo1-op18.onnx"), dynamo=True,
                  opset_version=18, input_names=["x"])


def token_compare(path, ids):
    """`peat save run` on int64 ids against onnxruntime (fed the batch the file declares)."""
    xp, rp = path + ".x.npy", path + ".ref.npy"
    np.save(xp, ids)
    ref = ort_reference(path, ids)
    np.save(rp, ref)
    j = json.loads(peat("save", "run", "-m", path, "-i", xp, "--expect", rp, "--json").stdout)
    c = j.get("comparison", {})
    check(c.get("max_abs", 1e9) <= 1e-5 * max(1.0, float(np.abs(ref).max())) and j.get("token_ids") == 50,
          f"{os.path.basename(path)}: save run on token ids {ids.min()}..{ids.max()} equals onnxruntime (largest "
          f"|difference| {c.get('max_abs')}; token ids {j.get('token_ids')})")
    return j


rng = np.random.default_rng(11)
for f in ("tokens-fixed2-op17.onnx", "tokens-dynamic-op17.onnx", "tokens-dynamo1-op18.onnx"):
    j = token_compare(os.path.join(tokens, f), rng.integers(0, 50, (4, 7)).astype(np.int64))
    if "fixed2" in f:  # attention's view(T, N * heads, d) traced at N = 2: read back as B * heads
        read_as_batch(j, f"{f}: its fixed first dimension 2 read as a batch through attention's reshapes")
token_compare(os.path.join(tokens, "tokens-dynamic-op17.onnx"), rng.integers(-50, 50, (4, 7)).astype(np.int64))
# SAVE's bounds hold for ids anywhere in the vocabulary (whatever --input-range asks: ids are no pixels)
dyn = os.path.join(tokens, "tokens-dynamic-op17.onnx")
a = json.loads(peat("save", "analyze", "-m", dyn, "--input-range", "0,1", "--json").stdout)
s_tok = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"])
outs = s_tok.run(None, {"x": rng.integers(0, 50, (200, 7)).astype(np.int64)})[0]
check(a["pixel_lo"] == 0 and a["pixel_hi"] == 49 and outs.min() >= a["output"]["lo"] and outs.max() <= a["output"]["hi"],
      f"token model: onnxruntime's outputs on 200 id sequences lie in SAVE's bounds for ids 0..49 "
      f"[{a['output']['lo']:.4g}, {a['output']['hi']:.4g}] (seen [{outs.min():.4g}, {outs.max():.4g}]; box "
      f"[{a['pixel_lo']}, {a['pixel_hi']}])")
np.save(os.path.join(tokens, "far.npy"), np.full((1, 7), 50, dtype=np.int64))
one_error(["save", "run", "-m", dyn, "-i", os.path.join(tokens, "far.npy"), "--protect", "save", "--flips", "1"],
          "is not a token id in [0, 49]")
one_error(["save", "analyze", "-m", os.path.join(tokens, "ids_as_values.onnx")], "reads it otherwise", "Cast")

# --- several outputs: a multi-task model a user writes (class logits, a box, a feature map)
class MultiTask(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.cls, self.box = torch.nn.Linear(6 * 4 * 4, 5), torch.nn.Linear(6 * 4 * 4, 4)

    def forward(self, x):
        f = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        z = torch.flatten(f, 1)
        return self.cls(z), torch.sigmoid(self.box(z)), f


torch.manual_seed(3)
multi_model = MultiTask().eval()
multi = {}
for tag, kw in (("multi-dynamo-op18", {"dynamo": True, "opset_version": 18,
                                       "dynamic_shapes": {"x": {0: torch.export.Dim("batch")}}}),
                ("multi-fixed2-op17", {"dynamo": False, "opset_version": 17})):
    multi[tag] = os.path.join(WORK, tag + ".onnx")
    torch.onnx.export(multi_model, (torch.rand(2, 3, 8, 8),), multi[tag], input_names=["x"],
                      output_names=["logits", "box", "features"], **kw)
rng = np.random.default_rng(5)
x_multi = rng.random((4, 3, 8, 8), dtype=np.float32)
for tag, path in multi.items():
    s_multi = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    fixed = s_multi.get_inputs()[0].shape[0]
    step = fixed if isinstance(fixed, int) else len(x_multi)
    parts = [s_multi.run(None, {"x": x_multi[k:k + step]}) for k in range(0, len(x_multi), step)]
    refs = {o.name: np.concatenate([p[i] for p in parts]) for i, o in enumerate(s_multi.get_outputs())}
    xp = os.path.join(WORK, tag + ".x.npy")
    np.save(xp, x_multi)
    for name, ref in refs.items():
        np.save(os.path.join(WORK, f"{tag}.ref-{name}.npy"), ref)
    # named references, out of order; every output written to its own file
    named = [f"{n}={os.path.join(WORK, f'{tag}.ref-{n}.npy')}" for n in ("features", "logits", "box")]
    j = json.loads(peat("save", "run", "-m", path, "-i", xp, "--expect", *named, "-o",
                        os.path.join(WORK, tag + ".y.npy"), "--json").stdout)
    cs = {c["output"]: c for c in j.get("comparisons", [])}
    check([o["name"] for o in j.get("outputs", [])] == ["logits", "box", "features"] and
          all(cs.get(n, {}).get("max_abs", 1e9) <= 1e-5 * max(1.0, float(np.abs(r).max())) for n, r in refs.items()),
          f"{tag}: save run names its 3 outputs and each equals onnxruntime's "
          f"({ {n: c.get('max_abs') for n, c in cs.items()} })")
    written = {n: np.load(os.path.join(WORK, f"{tag}.y.{n}.npy")) for n in refs}
    check(all(written[n].shape == refs[n].shape and np.abs(written[n] - refs[n]).max() <= 1e-5 for n in refs),
          f"{tag}: -o y.npy writes y.NAME.npy per output in onnxruntime's shapes "
          f"{ {n: list(w.shape) for n, w in written.items()} }")
    # references in the model's output order, and one output compared alone
    j = json.loads(peat("save", "run", "-m", path, "-i", xp, "--expect",
                        *[os.path.join(WORK, f"{tag}.ref-{n}.npy") for n in ("logits", "box")], "--json").stdout)
    check([c["output"] for c in j.get("comparisons", [])] == ["logits", "box"] and
          j["comparison"]["max_abs"] <= 1e-5 * max(1.0, float(np.abs(refs["logits"]).max())),
          f"{tag}: references in output order go to the first outputs ({[c['output'] for c in j.get('comparisons', [])]})")
    if "fixed2" in tag:
        read_as_batch(j, f"{tag}: its fixed first dimension read as a batch")
# each output's bounds named, and onnxruntime's outputs inside them
path = multi["multi-dynamo-op18"]
a = json.loads(peat("save", "analyze", "-m", path, "--input-range", "0,1", "--input-mean", "0", "--input-std", "1",
                    "--json").stdout)
s_multi = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
seen = s_multi.run(None, {"x": rng.random((50, 3, 8, 8), dtype=np.float32)})
bounds = {o["name"]: o for o in a.get("outputs", [])}
check(list(bounds) == ["logits", "box", "features"] and
      all(seen[i].min() >= bounds[n]["lo"] and seen[i].max() <= bounds[n]["hi"]
          for i, n in enumerate(("logits", "box", "features"))) and bounds["box"]["lo"] >= 0 and bounds["box"]["hi"] <= 1,
      f"several outputs: onnxruntime's outputs on 50 inputs lie in SAVE's bounds per output "
      f"{ {n: (round(b['lo'], 4), round(b['hi'], 4)) for n, b in bounds.items()} }")
ref_logits = os.path.join(WORK, "multi-dynamo-op18.ref-logits.npy")
one_error(["save", "run", "-m", path, "-i", os.path.join(WORK, "multi-dynamo-op18.x.npy"), "--expect",
           "scores=" + ref_logits], "'scores'", "logits")
one_error(["save", "run", "-m", path, "-i", os.path.join(WORK, "multi-dynamo-op18.x.npy"), "--expect",
           "box=" + ref_logits], "box", "shape")

# --- several inputs: an image and a vector of side features (a user's two-branch model)
EXPORT_TWO = r"""
import sys, warnings, torch
warnings.filterwarnings("ignore")
class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.meta = torch.nn.Linear(5, 4)
        self.fc = torch.nn.Linear(4 * 4 * 4 + 4, 3)
    def forward(self, image, meta):
        f = torch.nn.functional.max_pool2d(torch.relu(self.conv(image)), 2)
        return self.fc(torch.cat([torch.flatten(f, 1), torch.tanh(self.meta(meta))], 1))
torch.manual_seed(0)
m = Two().eval()
names = {"input_names": ["image", "meta"]}
torch.onnx.export(m, (torch.rand(2, 3, 8, 8), torch.rand(2, 5)), sys.argv[1] + "/two-fixed2-op17.onnx", opset_version=17, **names)
torch.onnx.export(m, (torch.rand(1, 3, 8, 8), torch.rand(1, 5)), sys.argv[1] + "/two-dynamic-op13.onnx", opset_version=13,
                  dynamic_axes={"image": {0: "b"}, "meta": {0: "b"}}, **names)
"""
two = export_113(EXPORT_TWO, "two")
rng = np.random.default_rng(9)
image, meta = rng.random((4, 3, 8, 8), dtype=np.float32), (rng.random((4, 5), dtype=np.float32) * 4 - 2)
save_arrays(two, image=image, meta=meta)
for f in ("two-fixed2-op17.onnx", "two-dynamic-op13.onnx"):
    path = os.path.join(two, f)
    ort_inputs(path, {"image": image, "meta": meta})
    for order in (["-i", os.path.join(two, "image.npy"), "-i", os.path.join(two, "meta.npy")],
                  ["-i", "meta=" + os.path.join(two, "meta.npy"), "image=" + os.path.join(two, "image.npy")]):
        j = json.loads(peat("save", "run", "-m", path, *order, "--expect", path + ".ref.npy", "--json").stdout)
        check([i["name"] for i in j.get("inputs", [])] == ["image", "meta"] and j["comparison"]["max_abs"] <= 1e-5 and
              j["comparison"]["top1_agree"] == 4,
              f"{f}: save run with inputs {'in order' if order[0] == '-i' and order[2] == '-i' else 'by name'} equals "
              f"onnxruntime (largest |difference| {j['comparison']['max_abs']:.3g})")
    if "fixed2" in f:
        read_as_batch(j, f"{f}: both inputs' fixed first dimension read as a batch")
# a box per input: the image in [0, 1], the side features in [-2, 2]; onnxruntime inside SAVE's bounds
path = os.path.join(two, "two-dynamic-op13.onnx")
box = ["--input-range", "0,1", "--input-range", "meta=-2:2", "--input-mean", "0", "--input-std", "1"]
a = json.loads(peat("save", "analyze", "-m", path, *box, "--json").stdout)
s_two = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
seen = s_two.run(None, {"image": rng.random((200, 3, 8, 8), dtype=np.float32),
                        "meta": rng.choice([-2.0, 2.0], (200, 5)).astype(np.float32)})[0]
boxes = {i["name"]: (i["lo"], i["hi"]) for i in a.get("inputs", [])}
check(boxes == {"image": (0, 1), "meta": (-2, 2)} and seen.min() >= a["output"]["lo"] and seen.max() <= a["output"]["hi"],
      f"two inputs: onnxruntime's outputs on 200 inputs (side features at the box's corners) lie in SAVE's bounds "
      f"[{a['output']['lo']:.4g}, {a['output']['hi']:.4g}] (seen [{seen.min():.4g}, {seen.max():.4g}]; boxes {boxes})")
narrow = json.loads(peat("save", "analyze", "-m", path, "--input-range", "0,1", "--input-mean", "0", "--input-std", "1",
                         "--json").stdout)["output"]
check(narrow["hi"] - narrow["lo"] < a["output"]["hi"] - a["output"]["lo"],
      f"two inputs: the side features' own wider range widens the bounds ({narrow['hi'] - narrow['lo']:.4g} < "
      f"{a['output']['hi'] - a['output']['lo']:.4g})")
# each input its own normalisation (ImageNet's per channel for the image, none for the side
# features): onnxruntime on the normalised corners and random raw inputs inside SAVE's bounds, and
# the bounds not those of one normalisation for all
own = ["--input-range", "0,1", "--input-range", "meta=-2:2", "--input-mean", "image=0.485,0.456,0.406",
       "--input-std", "image=0.229,0.224,0.225", "--input-mean", "meta=0", "--input-std", "meta=1"]
b = json.loads(peat("save", "analyze", "-m", path, *own, "--json").stdout)
norm = {i["name"]: (i.get("mean"), i.get("std")) for i in b.get("inputs", [])}
mean_c = np.array([0.485, 0.456, 0.406], np.float32)[None, :, None, None]
std_c = np.array([0.229, 0.224, 0.225], np.float32)[None, :, None, None]
raw_image = np.concatenate([rng.random((200, 3, 8, 8), dtype=np.float32),
                            rng.choice([0.0, 1.0], (200, 3, 8, 8)).astype(np.float32)])
raw_meta = np.concatenate([rng.random((200, 5), dtype=np.float32) * 4 - 2,
                           rng.choice([-2.0, 2.0], (200, 5)).astype(np.float32)])
seen = s_two.run(None, {"image": (raw_image - mean_c) / std_c, "meta": raw_meta})[0]
check(abs(norm["image"][0][2] - 0.406) < 1e-6 and abs(norm["image"][1][0] - 0.229) < 1e-6 and norm["meta"] == ([0], [1])
      and seen.min() >= b["output"]["lo"] and seen.max() <= b["output"]["hi"],
      f"two inputs, each normalised its own way: onnxruntime's outputs on 400 normalised inputs (half at the box's corners) "
      f"lie in SAVE's bounds [{b['output']['lo']:.4g}, {b['output']['hi']:.4g}] (seen [{seen.min():.4g}, {seen.max():.4g}]; "
      f"normalisations {norm})")
check(b["output"]["hi"] - b["output"]["lo"] > a["output"]["hi"] - a["output"]["lo"],
      f"two inputs: the image's own normalisation (std about 0.22) widens the bounds against mean 0, std 1 "
      f"({b['output']['hi'] - b['output']['lo']:.4g} > {a['output']['hi'] - a['output']['lo']:.4g})")
dflt = json.loads(peat("save", "analyze", "-m", path, "--input-range", "0,1", "--input-range", "meta=-2:2", "--input-mean",
                        "meta=0", "--input-std", "meta=1", "--json").stdout)["output"]
check(abs((b["output"]["hi"] - b["output"]["lo"]) - (dflt["hi"] - dflt["lo"])) > 1e-3,
      f"two inputs: the image's own normalisation is used, not the default one left for it "
      f"({b['output']['hi'] - b['output']['lo']:.4g} against {dflt['hi'] - dflt['lo']:.4g})")
one_error(["save", "analyze", "-m", path, "--input-mean", "colour=0.5"], "'colour'", "'image', 'meta'")
one_error(["save", "analyze", "-m", path, "--input-mean", "image=0.5,0.5"], "'image'", "1 or 3 values")
one_error(["save", "analyze", "-m", path, "--input-std", "meta=0"], "--input-std", "positive")
one_error(["save", "analyze", "-m", path, "--input-mean", "meta=0", "--input-mean", "meta=1"], "'meta'", "two values")

# protected: the side features outside [0, 1] are inside their own box, and refused without it
run = ["save", "run", "-m", path, "-i", os.path.join(two, "image.npy"), os.path.join(two, "meta.npy"), "--protect", "save",
       "--flips", "0", "--input-mean", "0", "--input-std", "1", "--json"]
j = json.loads(peat(*run, "--input-range", "meta=-2,2", "--expect", path + ".ref.npy").stdout)
check(j["comparison"]["max_abs"] <= 1e-5, f"two inputs under --protect save, each in its own box: equal to onnxruntime "
                                          f"({j['comparison']['max_abs']:.3g})")
one_error(run, "input 'meta'", "outside the analysed input box")
one_error(["save", "run", "-m", path, "-i", os.path.join(two, "image.npy")], "'meta'", "not given")
one_error(["save", "run", "-m", path, "-i", "colour=" + os.path.join(two, "image.npy")], "'colour'", "'image', 'meta'")
one_error(["save", "analyze", "-m", path, "--input-range", "colour=0,1"], "'colour'", "'image', 'meta'")
np.save(os.path.join(two, "meta3.npy"), meta[:3])
one_error(["save", "run", "-m", path, "-i", os.path.join(two, "image.npy"), os.path.join(two, "meta3.npy")], "'meta'",
          "samples")

# --- token ids and an attention mask: a user's masked self-attention classifier, HF-style
# (the mask an int64 input, cast to float and added to the scores as (1 - mask) * -10000)
EXPORT_MASKED = r"""
import sys, warnings, torch
warnings.filterwarnings("ignore")
class TinyBert(torch.nn.Module):
    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(1, 7, d) * 0.1)
        self.q, self.k, self.v = torch.nn.Linear(d, d), torch.nn.Linear(d, d), torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, 3)
    def forward(self, ids, mask):
        h = self.emb(ids) + self.pos
        scores = self.q(h) @ self.k(h).transpose(1, 2) / 4.0
        scores = scores + (1.0 - mask[:, None, :].to(scores.dtype)) * -10000.0
        h = self.norm(h + torch.softmax(scores, -1) @ self.v(h))
        return self.head(h[:, 0])
class DividesMask(torch.nn.Module):  # computes on the mask as integers: refused by name
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(7, 2)
    def forward(self, x, mask):
        return self.fc(x * (mask // 2).float())
torch.manual_seed(0)
m, out = TinyBert().eval(), sys.argv[1]
ids, mask = torch.randint(0, 50, (2, 7)), torch.ones(2, 7, dtype=torch.long)
names = {"input_names": ["ids", "mask"]}
torch.onnx.export(m, (ids, mask), out + "/masked-fixed2-op17.onnx", opset_version=17, **names)
torch.onnx.export(m, (ids, mask), out + "/masked-dynamic-op17.onnx", opset_version=17,
                  dynamic_axes={"ids": {0: "b"}, "mask": {0: "b"}}, **names)
torch.onnx.export(DividesMask(), (torch.rand(2, 7), mask), out + "/divides-mask.onnx", opset_version=17,
                  input_names=["x", "mask"], dynamic_axes={"x": {0: "b"}, "mask": {0: "b"}})
torch.save(m.state_dict(), out + "/masked.pt")
"""
masked = export_113(EXPORT_MASKED, "masked")
rng = np.random.default_rng(13)
ids = rng.integers(-50, 50, (6, 7)).astype(np.int64)  # negative ids count from the end, as Gather's
mask = np.ones((6, 7), np.int64)
for row, keep in ((1, 4), (2, 2), (3, 6), (5, 1)):
    mask[row, keep:] = 0
save_arrays(masked, ids=ids, mask=mask)
for f in ("masked-fixed2-op17.onnx", "masked-dynamic-op17.onnx"):
    path = os.path.join(masked, f)
    ref = ort_inputs(path, {"ids": ids, "mask": mask})
    j = json.loads(peat("save", "run", "-m", path, "-i", os.path.join(masked, "ids.npy"), os.path.join(masked, "mask.npy"),
                        "--expect", path + ".ref.npy", "--json").stdout)
    check(j["comparison"]["max_abs"] <= 1e-5 * max(1.0, float(np.abs(ref).max())) and j["comparison"]["top1_agree"] == 6,
          f"{f}: save run on token ids and a mask (4 of 6 rows padded) equals onnxruntime "
          f"(largest |difference| {j['comparison']['max_abs']:.3g})")
    if "fixed2" in f:
        read_as_batch(j, f"{f}: ids and mask fixed at 2 read as a batch")
path = os.path.join(masked, "masked-dynamic-op17.onnx")
a = json.loads(peat("save", "analyze", "-m", path, "--input-range", "mask=0,1", "--json").stdout)
s_m = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
many_ids = rng.integers(0, 50, (300, 7)).astype(np.int64)
many_mask = (rng.random((300, 7)) < 0.7).astype(np.int64)
many_mask[:, 0] = 1
seen = s_m.run(None, {"ids": many_ids, "mask": many_mask})[0]
boxes = {i["name"]: (i["lo"], i["hi"]) for i in a.get("inputs", [])}
check(boxes == {"ids": (0, 49), "mask": (0, 1)} and seen.min() >= a["output"]["lo"] and seen.max() <= a["output"]["hi"],
      f"ids and mask: onnxruntime's outputs on 300 random id sequences and masks lie in SAVE's bounds "
      f"[{a['output']['lo']:.4g}, {a['output']['hi']:.4g}] (seen [{seen.min():.4g}, {seen.max():.4g}]; boxes {boxes})")
one_error(["save", "analyze", "-m", path], "input 'mask'", "--input-range mask=")
one_error(["save", "analyze", "-m", path, "--input-range", "ids=0,9"], "'ids'", "token ids")
np.save(os.path.join(masked, "half.npy"), np.full((6, 7), 0.5, np.float32))
np.save(os.path.join(masked, "ids50.npy"), ids % 50)
one_error(["save", "run", "-m", path, "-i", os.path.join(masked, "ids50.npy"), os.path.join(masked, "half.npy"),
           "--input-range", "mask=0,1", "--protect", "save", "--flips", "1"], "input 'mask'", "not an integer")
one_error(["save", "analyze", "-m", os.path.join(masked, "divides-mask.onnx"), "--input-range", "mask=0,1"],
          "as integers", "Div")
# the same model through PyTorch 2.x's exporter (dynamic batch)
tb_path = os.path.join(masked, "masked-dynamo-op18.onnx")
tb_src = EXPORT_MASKED.split("torch.manual_seed(0)")[0]
exec(tb_src.replace("import sys, warnings, torch", "import warnings"), globals())
tb = TinyBert().eval()  # noqa: F821 - defined by the exec above
tb.load_state_dict(torch.load(os.path.join(masked, "masked.pt")))
torch.onnx.export(tb, (torch.from_numpy(ids[:2] % 50), torch.from_numpy(mask[:2])), tb_path, dynamo=True, opset_version=18,
                  input_names=["ids", "mask"], dynamic_shapes={"ids": {0: torch.export.Dim("b")}, "mask": {0: torch.export.Dim("b")}})
ref = ort.InferenceSession(tb_path, providers=["CPUExecutionProvider"]).run(None, {"ids": ids % 50, "mask": mask})[0]
np.save(tb_path + ".ref.npy", ref)
j = json.loads(peat("save", "run", "-m", tb_path, "-i", "mask=" + os.path.join(masked, "mask.npy"),
                    "ids=" + os.path.join(masked, "ids50.npy"), "--expect", tb_path + ".ref.npy", "--json").stdout)
check(j["comparison"]["max_abs"] <= 1e-5 * max(1.0, float(np.abs(ref).max())),
      f"masked-dynamo-op18: the dynamo export on ids and a mask equals onnxruntime ({j['comparison']['max_abs']:.3g})")

# --- models whose first axis is no batch
class SwapsAxis0(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x.transpose(0, 1).reshape(3, 8))


class NormalisesBatch(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x * 2, dim=0)


# models that use their fixed batch as a number (made with onnx.helper: PyTorch's exporters fold
# x.shape[0] into a constant at a fixed batch): N in the model, 1 in SAVE's one-sample graph
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
i64 = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]), helper.make_tensor("axes0", TensorProto.INT64, [1], [0])]
batch_as_number = {
    # relu(x) * x.shape[0]
    "scales_by_batch": ([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"]),
                         helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
                         helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "nf"], ["y"])],
                        [4], i64),
    # a token expanded to the batch (the shape traced at 3), joined with the samples and also summed
    # over its copies
    "sums_expanded_token": ([helper.make_node("Expand", ["token", "shape"], ["t"]),
                             helper.make_node("ReduceSum", ["t", "axes0"], ["ts"], keepdims=1),
                             helper.make_node("Add", ["x", "ts"], ["a"]),
                             helper.make_node("Concat", ["a", "t"], ["y"], axis=1)],
                            [8], i64 + [helper.make_tensor("token", TensorProto.FLOAT, [1, 4], [0.5, -1, 2, 0.25]),
                                        helper.make_tensor("shape", TensorProto.INT64, [2], [3, 4])]),
}
for name, (nodes, out, inits) in batch_as_number.items():
    path = os.path.join(WORK, name + ".onnx")
    graph = helper.make_graph(nodes, name, [x_info], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3] + out)],
                              inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    if name == "scales_by_batch":
        reading = compare(path, whole=True).get("batch_reading", "")
    else:  # SAVE folds no ReduceSum of constants: refused, the refusal saying how the batch was read
        r = subprocess.run([PEAT, "save", "inspect", "-m", path], capture_output=True, text=True, timeout=60)
        reading = r.stdout + r.stderr
    check("not read as a batch" in reading, f"{name}: a model that uses its fixed batch as a number (or sums over "
                                            f"a batch-sized copy) is not read as a batch: {reading[-200:]}")
swap = os.path.join(WORK, "swap_axis0.onnx")
torch.onnx.export(SwapsAxis0(), (torch.rand(2, 3, 4),), swap, opset_version=17, input_names=["x"], dynamo=False)
j = compare(swap, whole=True)
check("not read as a batch" in j.get("batch_reading", "") and
      ("Reshape" in j.get("batch_reading", "") or "holds the batch on axis 1" in j.get("batch_reading", "")),
      f"a model that swaps axis 0 is read as one sample, naming the node: {j.get('batch_reading', '')[:160]}")
soft = os.path.join(WORK, "softmax_batch.onnx")
torch.onnx.export(NormalisesBatch(), (torch.rand(4, 5),), soft, opset_version=17, input_names=["x"], dynamo=False)
one_error(["save", "analyze", "-m", soft], "Softmax", "not read as a batch")
H.exit()
