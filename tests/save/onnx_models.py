#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`peat save ... -m FILE.onnx` on models exported by PyTorch (Debian's python3-torch 1.13):

    onnx_models.py PEAT WEIGHTS.h5 ONNX-EXTERNAL

- LeNet written in torch.nn with the shipped weights, through ONNX, gives the zoo LeNet's analysis
  number for number (an independent path: PyTorch's exporter, libonnx, the importer);
- an MLP with batch norm, tanh and sigmoid: every PyTorch output on 1000 real Fashion-MNIST test
  images lies inside the output interval SAVE states (soundness against another engine);
- a campaign and check-bits run on the ONNX LeNet;
- torchvision ResNet-18 and MobileNetV2 (depthwise convolutions, ReLU6): PyTorch's logits lie inside
  SAVE's interval bounds; a short campaign on MobileNetV2 at 3x64x64 (agreement with the fault-free
  prediction: random weights);
- dilated, depthwise and grouped convolutions, ReLU6, hardtanh and a padded average pool: bounds
  hold PyTorch's logits, SAVE's engine predicts what PyTorch predicts; the user's labelled data
  through --data (HDF5), and bad data refused with one line;
- transformers as PyTorch exports them (Shape arithmetic, Reshape, Transpose, Slice, Concat, Gather,
  attention's MatMuls, erf GELU, LayerNormalization, a causal mask): torchvision's VisionTransformer
  at 3x224x224 (patch 16) and a GPT-style decoder from torch.nn.TransformerEncoderLayer: PyTorch's
  logits lie in SAVE's bounds, SAVE's engine predicts what PyTorch predicts, short campaigns run;
- bad files: not ONNX, float64, a dynamic spatial dimension: one line each.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_onnx  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import Harness, finish  # noqa: E402

PEAT, WEIGHTS, EXTERNAL = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix="peat-onnx-")
H = Harness(PEAT)
check, peat, one_error, failures = H.check, H.run, H.one_error, H.failures


try:
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_onnx.py"), WORK,
                    WEIGHTS], check=True, capture_output=True)
    lenet = os.path.join(WORK, "lenet.onnx")
    a = json.loads(peat("save", "analyze", "-m", lenet, "--json").stdout)
    b = json.loads(peat("save", "analyze", "-m", "lenet", "-w", WEIGHTS, "--json").stdout)
    same = a["output"] == b["output"] and len(a["layers"]) == len(b["layers"]) and all(
        {k: v for k, v in x.items() if k != "name"} == {k: v for k, v in y.items() if k != "name"}
        for x, y in zip(a["layers"], b["layers"]))
    check(same, f"LeNet through ONNX equals the zoo's LeNet, layer for layer ({len(a['layers'])} layers, output "
                f"[{a['output']['lo']:.6g}, {a['output']['hi']:.6g}])")
    check([l["name"] for l in a["layers"] if l["op"] in ("conv2d", "linear")] == ["conv1", "conv2", "fc1", "fc2", "fc3"],
          "ONNX layers carry the module names")

    # soundness against PyTorch on real images
    torch.manual_seed(0)
    mlp_json = json.loads(peat("save", "analyze", "-m", os.path.join(WORK, "mlp.onnx"), "--json").stdout)
    lo, hi = mlp_json["output"]["lo"], mlp_json["output"]["hi"]
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        pixels = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(-1, 1, 28, 28)[:1000]
    x = (torch.from_numpy(pixels.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    torch.manual_seed(0)
    net = export_onnx.mlp_model()
    with torch.no_grad():
        out = net.eval()(x)
    check(float(out.min()) >= lo and float(out.max()) <= hi,
          f"MLP: PyTorch's logits on 1000 test images [{float(out.min()):.4g}, {float(out.max()):.4g}] lie in SAVE's "
          f"[{lo:.4g}, {hi:.4g}]")
    check({l["op"] for l in mlp_json["layers"]} >= {"batchnorm", "tanh", "sigmoid", "linear"},
          "MLP: batch norm, tanh and sigmoid mapped")

    # padded max-pooling (a briefly trained net): SAVE's symbolic bounds hold PyTorch's logits, and
    # SAVE's engine predicts what PyTorch predicts (its clean accuracy over 500 test images equals PyTorch's)
    pool = os.path.join(WORK, "pool.onnx")
    pj = json.loads(peat("save", "analyze", "-m", pool, "--json").stdout)
    pool_out = torch.from_numpy(np.load(os.path.join(WORK, "pool_logits.npy")))
    check(float(pool_out.min()) >= pj["output"]["lo"] and float(pool_out.max()) <= pj["output"]["hi"],
          f"padded max-pool: PyTorch's logits [{float(pool_out.min()):.4g}, {float(pool_out.max()):.4g}] lie in SAVE's "
          f"symbolic [{pj['output']['lo']:.4g}, {pj['output']['hi']:.4g}]")
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read()[8:], dtype=np.uint8)[:500]
    torch_acc = float((pool_out[:500].argmax(1).numpy() == labels).mean())
    pc = json.loads(peat("save", "campaign", "-m", pool, "--images", 500, "--flips", "1", "--json").stdout)
    check(abs(pc["clean_accuracy"] - torch_acc) < 1e-9,
          f"padded max-pool: SAVE's engine and PyTorch agree on 500 images (accuracy {pc['clean_accuracy']} vs {torch_acc})")

    bj = json.loads(peat("save", "analyze", "-m", os.path.join(WORK, "broadcast.onnx"), "--json").stdout)
    bo = np.load(os.path.join(WORK, "broadcast_logits.npy"))
    check(float(bo.min()) >= bj["output"]["lo"] and float(bo.max()) <= bj["output"]["hi"],
          f"broadcast constants and an unfoldable bias: PyTorch's logits [{float(bo.min()):.5g}, {float(bo.max()):.5g}] "
          f"lie in SAVE's [{bj['output']['lo']:.5g}, {bj['output']['hi']:.5g}]")

    rj = json.loads(peat("save", "analyze", "-m", os.path.join(WORK, "rgb.onnx"), "--input-mean", "0.485,0.456,0.406",
                         "--input-std", "0.229,0.224,0.225", "--json").stdout)
    ro = np.load(os.path.join(WORK, "rgb_logits.npy"))
    check(float(ro.min()) >= rj["output"]["lo"] and float(ro.max()) <= rj["output"]["hi"],
          f"per-channel normalisation: PyTorch's logits on 500 random pixel images [{float(ro.min()):.4g}, "
          f"{float(ro.max()):.4g}] lie in SAVE's [{rj['output']['lo']:.4g}, {rj['output']['hi']:.4g}]")
    one_error(["save", "analyze", "-m", os.path.join(WORK, "rgb.onnx"), "--input-mean", "1,2"], "1 or 3 values")

    c = json.loads(peat("save", "campaign", "-m", lenet, "--images", 100, "--flips", "16", "--json").stdout)
    z = json.loads(peat("save", "campaign", "-m", "lenet", "-w", WEIGHTS, "--images", 100, "--flips", "16",
                        "--json").stdout)
    check(c["clean_accuracy"] == z["clean_accuracy"] and c["unreliable_words_save"] == z["unreliable_words_save"],
          f"a campaign on the ONNX LeNet has the zoo LeNet's clean accuracy ({c['clean_accuracy']}) and placement")
    stored = os.path.join(WORK, "stored.h5")
    peat("save", "analyze", "-m", lenet, "-s", stored)
    peat("save", "check-bits", "-m", lenet, "--batch", 2, "--weight-flips", 200, "--activation-flips", 200, "-s", stored)
    peat("save", "campaign", "-m", lenet, "--images", 100, "--flips", "16", "-s", stored)
    with h5py.File(stored, "r") as f:
        names = set(f["save"].keys()) | set(f["runs"].keys())
    check({"lenet.onnx-symbolic", "lenet.onnx-check-bits", "save-campaign"} <= names,
          "analysis, check-bits and a campaign of an ONNX model are stored in a session under the file's name")

    # torchvision ResNet-18 (padded max-pooling, residual adds, batch norm folded by the exporter):
    # PyTorch's logits on Fashion-MNIST images resized to 3x64x64 lie in SAVE's interval bounds
    r18 = json.loads(peat("save", "analyze", "-m", os.path.join(WORK, "resnet18.onnx"), "--mode", "interval",
                          "--json").stdout)
    torch.manual_seed(0)
    resnet = export_onnx.torchvision.models.resnet18(num_classes=10).eval()
    images = torch.nn.functional.interpolate(x[:50], size=(64, 64), mode="bilinear", align_corners=False)
    with torch.no_grad():
        logits = resnet(images.expand(-1, 3, -1, -1).contiguous())
    check(float(logits.min()) >= r18["output"]["lo"] and float(logits.max()) <= r18["output"]["hi"],
          f"ResNet-18 analyses, and PyTorch's logits on 50 images lie in its interval bounds ({len(r18['layers'])} "
          f"layers; the bounds are very wide on random weights, so this mostly shows the import runs)")
    # torchvision MobileNetV2 (depthwise and grouped convolutions, ReLU6 as Clip) on Fashion-MNIST
    # resized to 3x64x64, ImageNet's normalisation; random weights (seed 0)
    norm = ["--input-mean", "0.485,0.456,0.406", "--input-std", "0.229,0.224,0.225"]
    mb_path = os.path.join(WORK, "mobilenet_v2.onnx")
    mb = json.loads(peat("save", "analyze", "-m", mb_path, "--mode", "interval", *norm, "--json").stdout)
    torch.manual_seed(0)
    mobilenet = export_onnx.torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25).eval()
    raw = torch.nn.functional.interpolate(torch.from_numpy(pixels[:50].astype(np.float32)) / 255.0, size=(64, 64),
                                          mode="bilinear", align_corners=False).expand(-1, 3, -1, -1)
    mean, std = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        mlog = mobilenet((raw - mean) / std)
    ops = {l["op"] for l in mb["layers"]}
    check({"conv2d", "clip", "add"} <= ops and float(mlog.min()) >= mb["output"]["lo"] and
          float(mlog.max()) <= mb["output"]["hi"],
          f"MobileNetV2 analyses ({len(mb['layers'])} layers, ops {sorted(ops)}) and PyTorch's logits on 50 images lie "
          f"in its interval bounds [{mb['output']['lo']:.4g}, {mb['output']['hi']:.4g}]")
    mc = json.loads(peat("save", "campaign", "-m", mb_path, "--mode", "interval", *norm, "--images", 50, "--batch", 50,
                         "--flips", "0,8", "--schemes", "none,save", "--agreement", "--json").stdout)
    save_points = [p for p in mc["points"] if p["scheme"] == "save"]
    check(mc["clean_accuracy"] == 1.0 and mc["data"] == "fashion-mnist 3x64x64" and len(save_points) == 2 and
          mc["scored_against"] == "fault-free prediction",
          f"a short campaign on MobileNetV2 at 3x64x64 (agreement with the fault-free prediction: "
          f"{[(p['scheme'], p['flips'], p['accuracy']) for p in mc['points']]})")

    # torchvision VisionTransformer at 3x224x224, 16x16 patches (shallow and narrow), random weights
    vit_path = os.path.join(WORK, "vit.onnx")
    vj = json.loads(peat("save", "analyze", "-m", vit_path, "--mode", "interval", "--json").stdout)
    vit_raw = torch.nn.functional.interpolate(torch.from_numpy(pixels[:20].astype(np.float32)) / 255.0, size=(224, 224),
                                              mode="bilinear", align_corners=False).expand(-1, 3, -1, -1)
    torch.manual_seed(0)
    with torch.no_grad():
        vlog = export_onnx.vit_model().eval()((vit_raw - 0.2860) / 0.3530)
    vops = {l["op"] for l in vj["layers"]}
    check({"matmul", "softmax", "gelu", "layernorm", "select"} <= vops and float(vlog.min()) >= vj["output"]["lo"] and
          float(vlog.max()) <= vj["output"]["hi"],
          f"ViT (224, patch 16): {len(vj['layers'])} layers, ops {sorted(vops)}; PyTorch's logits on 20 images "
          f"[{float(vlog.min()):.4g}, {float(vlog.max()):.4g}] lie in [{vj['output']['lo']:.4g}, {vj['output']['hi']:.4g}]")
    vit_data = os.path.join(WORK, "vit.h5")
    with h5py.File(vit_data, "w") as f:  # PyTorch's own predictions as the labels: SAVE's engine must match them
        f["test/x"] = np.clip(vit_raw.numpy(), 0, 1)
        f["test/y"] = vlog.argmax(1).numpy()
    vc = json.loads(peat("save", "campaign", "-m", vit_path, "--mode", "interval", "--data", vit_data, "--images", 20,
                         "--batch", 10, "--flips", "0,8", "--schemes", "none,save", "--json").stdout)
    check(vc["clean_accuracy"] == 1.0,
          f"ViT: SAVE's engine predicts PyTorch's class on all 20 images; campaign points "
          f"{[(p['scheme'], p['flips'], p['accuracy']) for p in vc['points']]}")
    inspect = peat("save", "inspect", "-m", vit_path).stdout
    check("encoder.layers.encoder_layer_0.self_attention" in inspect and "layernorm" in inspect,
          "peat save inspect lists the mapped ops under the module's names")

    # GPT-style decoder (causal mask) from token embeddings in [-3, 3]
    gpt_path = os.path.join(WORK, "gpt.onnx")
    box = ["--input-range=-3,3", "--input-mean", "0", "--input-std", "1"]
    gpj = json.loads(peat("save", "analyze", "-m", gpt_path, "--mode", "interval", *box, "--json").stdout)
    gpl = np.load(os.path.join(WORK, "gpt_logits.npy"))
    check(float(gpl.min()) >= gpj["output"]["lo"] and float(gpl.max()) <= gpj["output"]["hi"] and
          all(l["mean_width"] == l["mean_width"] for l in gpj["layers"]),
          f"GPT-style decoder: PyTorch's logits on 100 inputs [{float(gpl.min()):.4g}, {float(gpl.max()):.4g}] lie in "
          f"[{gpj['output']['lo']:.4g}, {gpj['output']['hi']:.4g}], every range finite (the causal mask's -inf)")
    gpt_dir = os.path.join(WORK, "gptdata")
    os.makedirs(gpt_dir)
    np.save(os.path.join(gpt_dir, "test_x.npy"), np.load(os.path.join(WORK, "gpt_x.npy")))
    np.save(os.path.join(gpt_dir, "test_y.npy"), np.zeros(100, dtype=np.int64))
    gpc = json.loads(peat("save", "campaign", "-m", gpt_path, *box, "--mode", "interval", "--data", gpt_dir, "--images",
                          100, "--flips", "0,8", "--schemes", "none,save", "--agreement", "--json").stdout)
    check(gpc["clean_accuracy"] == 1.0 and len(gpc["points"]) == 4,
          f"GPT-style decoder: a short campaign from a folder of .npy (agreement over the flattened logits): "
          f"{[(p['scheme'], p['flips'], p['accuracy']) for p in gpc['points']]}")

    # dilated, depthwise and grouped convolutions, ReLU6, hardtanh, a padded average pool (trained briefly)
    grouped = os.path.join(WORK, "grouped.onnx")
    gj = json.loads(peat("save", "analyze", "-m", grouped, "--json").stdout)
    glog = np.load(os.path.join(WORK, "grouped_logits.npy"))
    check(float(glog.min()) >= gj["output"]["lo"] and float(glog.max()) <= gj["output"]["hi"] and
          {"clip", "avgpool_window"} <= {l["op"] for l in gj["layers"]},
          f"grouped/dilated convs, clips, padded average pool: PyTorch's logits on 1000 test images "
          f"[{float(glog.min()):.4g}, {float(glog.max()):.4g}] lie in SAVE's symbolic "
          f"[{gj['output']['lo']:.4g}, {gj['output']['hi']:.4g}]")
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz") as f:
        labels1000 = np.frombuffer(f.read()[8:], dtype=np.uint8)[:1000]
    gacc = float((glog.argmax(1) == labels1000).mean())
    gc = json.loads(peat("save", "campaign", "-m", grouped, "--images", 1000, "--flips", "1", "--schemes", "none",
                         "--json").stdout)
    check(abs(gc["clean_accuracy"] - gacc) < 1e-9,
          f"grouped convs: SAVE's engine and PyTorch agree on 1000 images (accuracy {gc['clean_accuracy']} vs {gacc})")
    # the output criterion with faults on every parameter (clip bounds too, which have no sensitivity)
    oc = json.loads(peat("save", "campaign", "-m", grouped, "--criterion", "output", "--epsilon", 1000, "--images", 200,
                         "--flips", "64", "--schemes", "none,save", "--target", "weights", "--json").stdout)
    check(len(oc["points"]) == 2, "a campaign under the output criterion with faults on the weights and clip bounds runs")
    # the user's own labelled data: an HDF5 file of raw pixels (here the same images, labelled by hand)
    user = os.path.join(WORK, "user.h5")
    raw28 = pixels[:200].astype(np.float32) / 255.0
    with h5py.File(user, "w") as f:
        f["test/x"] = raw28
        f["test/y"] = labels1000[:200].astype(np.int64)
    uc = json.loads(peat("save", "campaign", "-m", grouped, "--data", user, "--images", 200, "--flips", "1",
                         "--schemes", "none", "--json").stdout)
    check(abs(uc["clean_accuracy"] - float((glog[:200].argmax(1) == labels1000[:200]).mean())) < 1e-9 and
          uc["ranger_profiled_on_test"] and uc["data"] == user + " (test)",
          f"--data FILE.h5: the user's 200 samples give PyTorch's accuracy ({uc['clean_accuracy']})")
    bad = os.path.join(WORK, "bad.h5")
    for x_bad, y_bad, needles in [(raw28 * 2, labels1000[:200], ("outside the analysed input range", "sample")),
                                  (raw28, np.full(200, 12), ("test/y[0] = 12", "0..9")),
                                  (raw28.reshape(200, 28, 28), labels1000[:200], ("28x28", "1x28x28"))]:
        with h5py.File(bad, "w") as f:
            f["test/x"] = x_bad
            f["test/y"] = y_bad.astype(np.int64)
        one_error(["save", "campaign", "-m", grouped, "--images", 100, "--flips", "1", "--data", bad], *needles)
    # PEAT fine-tunes the TorchScript LeNet; SAVE analyses the ONNX LeNet with those weights, by name:
    # the same numbers as the zoo's LeNet graph built from that checkpoint
    tuned = os.path.join(WORK, "tuned.h5")
    peat("train", "--model", os.path.join(WORK, "lenet.pt"), "--data", "fashion-mnist", "-n", 20, "--batch", 32,
         "-o", tuned)
    t_onnx = json.loads(peat("save", "analyze", "-m", lenet, "-w", tuned, "--json").stdout)
    t_zoo = json.loads(peat("save", "analyze", "-m", "lenet", "-w", tuned, "--json").stdout)
    check(t_onnx["output"] == t_zoo["output"] and t_onnx["output"] != a["output"],
          f"ONNX LeNet with PEAT-fine-tuned weights (by name) equals the zoo graph of that checkpoint "
          f"(output [{t_onnx['output']['lo']:.6g}, {t_onnx['output']['hi']:.6g}])")
    one_error(["save", "analyze", "-m", os.path.join(WORK, "mlp.onnx"), "-w", tuned], "no initializer", "do_constant_folding")
    one_error(["save", "analyze", "-m", lenet, "--random-weights", 3], "carries its weights")
    garbage = os.path.join(WORK, "garbage.onnx")
    with open(garbage, "wb") as f:
        f.write(b"\x0a\xff\xff\xff\xff\x0f garbage that is not a protobuf")
    one_error(["save", "analyze", "-m", garbage], "garbage.onnx")
    wide = os.path.join(WORK, "double.onnx")
    torch.onnx.export(torch.nn.Linear(4, 2).double(), torch.zeros(1, 4, dtype=torch.float64), wide, opset_version=17)
    one_error(["save", "analyze", "-m", wide], "float64")
    dyn = os.path.join(WORK, "dynamic.onnx")
    torch.onnx.export(torch.nn.Conv2d(1, 2, 3), torch.zeros(1, 1, 8, 8), dyn, opset_version=17, input_names=["x"],
                      dynamic_axes={"x": {0: "batch", 2: "height"}})
    one_error(["save", "analyze", "-m", dyn], "dynamic", "height")
    one_error(["save", "campaign", "-m", os.path.join(WORK, "mlp64.onnx")], "cannot read ONNX model")
    # graphs that would be misread (issue 30): a first axis the model fixes above 1 and mixes is no
    # batch (this model swaps it with the next: read as one sample of its declared shape), training-mode Dropout drops values, an empty input has
    # no sample; each refused by name rather than computed another way than the model declares
    class SwapsAxis0(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x.transpose(0, 1).reshape(3, 8))
    fixed = os.path.join(WORK, "fixed_batch.onnx")
    torch.onnx.export(SwapsAxis0(), torch.rand(2, 3, 4), fixed, opset_version=13, input_names=["x"])
    swapped = peat("save", "analyze", "-m", fixed).stdout
    check("fixes its first dimension to 2, not read as a batch" in swapped and "one sample" in swapped,
          "a first axis the model swaps is no batch: the whole [2, 3, 4] input is read as one sample (issue 42)")
    dropping = os.path.join(WORK, "train_dropout.onnx")
    torch.onnx.export(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)).train(),
                      torch.rand(1, 4), dropping, opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    one_error(["save", "analyze", "-m", dropping], "Dropout", "training mode")
    inference = os.path.join(WORK, "eval_dropout.onnx")
    torch.onnx.export(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)).eval(),
                      torch.rand(1, 4), inference, opset_version=13)
    check(peat("save", "analyze", "-m", inference).returncode == 0, "inference-mode Dropout maps as the identity")
    empty = os.path.join(WORK, "empty.onnx")
    torch.onnx.export(torch.nn.Linear(4, 2), torch.rand(1, 0, 4), empty, opset_version=13)
    one_error(["save", "analyze", "-m", empty], "is 0 (an empty tensor)")
    # declared sizes bounded before any allocation (issue 34): an input of 2^26 + 2^13 elements
    # per sample is refused at once, naming the input
    class Flat(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)
    big = os.path.join(WORK, "big_input.onnx")
    torch.onnx.export(Flat(), torch.rand(1, 2 ** 13, 2 ** 13 + 1), big, opset_version=13, input_names=["x"])
    t0 = time.time()
    one_error(["save", "analyze", "-m", big], "declares more than 2^26 elements", "'x'")
    check(time.time() - t0 < 5, f"a 2^26 + 2^13-element input refused in {time.time() - t0:.2f} s")
    # initializers in an external data file (as onnx.save writes models over 2 GB): the same analysis;
    # a missing data file, or one named outside the model's folder, is one line
    ext_dir = os.path.join(WORK, "external")
    os.makedirs(ext_dir)
    ext = os.path.join(ext_dir, "lenet.onnx")
    subprocess.run([EXTERNAL, lenet, ext, "lenet.weights"], check=True, capture_output=True)
    e = json.loads(peat("save", "analyze", "-m", ext, "--json").stdout)
    check(e["output"] == a["output"] and os.path.getsize(ext) < 10000,
          f"LeNet with its initializers in an external data file analyses as before ({os.path.getsize(ext)} bytes of model)")
    os.rename(os.path.join(ext_dir, "lenet.weights"), os.path.join(ext_dir, "moved.weights"))
    one_error(["save", "analyze", "-m", ext], "external data file", "missing")
    escape = os.path.join(ext_dir, "escape.onnx")
    subprocess.run([EXTERNAL, lenet, escape, "../x.weights"], check=False, capture_output=True)
    one_error(["save", "analyze", "-m", escape], "outside the model's folder")
    # the data file resolved, links included: a link to /etc/passwd inside the folder, a FIFO and a
    # directory in its place are refused before anything is read (the FIFO never blocks)
    weights = os.path.join(ext_dir, "lenet.weights")
    os.symlink("/etc/passwd", weights)
    one_error(["save", "analyze", "-m", ext], "resolves to '/etc/passwd'", "outside the model's folder")
    os.remove(weights)
    os.mkfifo(weights)
    t0 = time.time()
    one_error(["save", "analyze", "-m", ext], "not a regular file")
    check(time.time() - t0 < 10, f"external data on a FIFO refused in {time.time() - t0:.2f} s")
    os.remove(weights)
    os.mkdir(weights)
    one_error(["save", "analyze", "-m", ext], "not a regular file")
    os.rmdir(weights)
    os.symlink("moved.weights", weights)  # a link that stays inside the folder is followed
    e2 = json.loads(peat("save", "analyze", "-m", ext, "--json").stdout)
    check(e2["output"] == a["output"], "a link to a data file inside the model's folder is followed")
finally:
    shutil.rmtree(WORK, ignore_errors=True)

finish(failures)
