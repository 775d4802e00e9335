#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Model files through the kernel slot, end to end: `peat models --inspect`, profile, playback
(golden bit-exact, a candidate, --resume), runtime-fi, same-seed bit-identity, and bad input.

    file_models.py PEAT MODELDIR CASE

MODELDIR holds the TorchScript files of export_models.py (architectures from torchvision and
torch.nn, not the project's). CASE is one of resnet18, mobilenet_v2, vit, gpt, lstm, bert, regression,
bad-input, attention, plugins, bugs.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from file_models_data import lm_tokens, token_classes  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from peattest import finish  # noqa: E402

PEAT, MODELS, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix=f"peat-models-{CASE}-")
failures = []


def run(*args, expect=0):
    p = subprocess.run([PEAT, *map(str, args)], capture_output=True, text=True, timeout=900)
    if p.returncode != expect:
        raise SystemExit(f"FAIL: peat {' '.join(map(str, args))} exited {p.returncode} (expected {expect})\n"
                         f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def run_json(*args):
    return json.loads(run(*args, "--json").stdout)


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def error_line(args, *needles):
    """A bad input gives exactly one line, 'peat: error: ...', naming what is wrong, and exit 1."""
    p = run(*args, expect=1)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("peat: error: ")]
    ok = len(errors) == 1 and all(n in errors[0] for n in needles)
    check(ok, f"{' '.join(map(str, args[:3]))}...: one error line with {needles}: {errors or lines[-1:]}")


def graph_case(name, session, layer_names, must_have=None):
    """The model as a graph (issue 43): a TorchScript model's session holds no data flow, so its
    graph is the recorded forward calls in order, each named by its module path, none left out."""
    graph = run_json("graph", session, "--run", "golden")
    ops = {(n["name"], n["op"]) for n in graph["nodes"]}
    has = must_have is None or must_have in ops
    check(graph["structure"] == "call order" and graph["unplaced_calls"] == 0 and len(ops) == len(graph["nodes"])
          and {n for n, op in ops if n != op} <= layer_names and all(n["calls"] > 0 for n in graph["nodes"]) and has,
          f"{name}: peat graph draws {len(graph['nodes'])} recorded ops in call order, every call on one "
          f"({graph['unplaced_calls']} left out{'' if has else f'; {must_have} missing'})")


def slot_case(name, shape, data, extra=()):
    model = os.path.join(MODELS, f"{name}.pt")
    task = ["--task", "lm"] if name == "gpt" else []
    inspect = run_json("models", "--inspect", model, "--input-shape", shape, *task)
    sites = inspect["sites"]
    gemm_kinds = {"aten::linear", "aten::conv1d", "aten::conv2d", "aten::_convolution", "aten::matmul", "aten::mm",
                  "aten::bmm", "aten::addmm", "aten::baddbmm"}
    gemms = [s for s in sites if s["aten"] in gemm_kinds]
    check(len(gemms) > 0 and all(s["routed"] for s in gemms), f"{name}: every GEMM site routed ({inspect['summary']})")
    routed = [s for s in sites if s["routed"]]
    check(all("shapes" in s for s in routed), f"{name}: every routed site ran in the inspection forward")
    left = [s for s in sites if not s["routed"]]
    check(all(s["detail"] for s in left), f"{name}: every site left on ATen says why ({len(left)} sites)")
    # the op-wise kernels ports rewrite: routed wherever the architecture has them
    slot_ops = {s["aten"] for s in routed}
    expected = {"vit": {"aten::softmax", "aten::layer_norm", "aten::gelu"},  # torchvision's ViT: dropout 0
                "gpt": {"aten::softmax", "aten::layer_norm", "aten::gelu", "aten::dropout", "aten::embedding"},
                "bert": {"aten::softmax", "aten::layer_norm", "aten::gelu", "aten::dropout", "aten::embedding"},
                "resnet18": {"aten::relu_"}}.get(name, set())
    check(expected <= slot_ops, f"{name}: op-wise sites routed: {sorted(expected - slot_ops) or 'all of'} {sorted(expected)}")
    layers = [s["layer"] for s in sites]
    if name == "resnet18":
        check("layer1.0.conv1" in layers and "fc" in layers and "layer2.0.downsample.0" in layers,
              "resnet18: sites carry torchvision's module paths")
    if name == "mobilenet_v2":
        check(any("depthwise" in s["detail"] for s in sites), "mobilenet_v2: depthwise convolutions routed")
    if name in ("vit", "gpt"):
        check(any(s["aten"] == "aten::bmm" for s in sites), f"{name}: attention's bmm routed")
    if name == "gpt":
        check(any(s["aten"] == "aten::baddbmm" for s in sites), "gpt: the causal mask's baddbmm routed")

    common = ["--model", model, "--data", data, "--batch", 4, "--seed", 3, *extra]
    s1, s2 = os.path.join(WORK, "a.h5"), os.path.join(WORK, "b.h5")
    record = ["--record-every", 2, "--checkpoint-every", 1, "--record-ops", "all"]
    p1 = run_json("profile", *common, "-n", 3, *record, "-o", s1)
    p2 = run_json("profile", *common, "-n", 3, *record, "-o", s2)
    check(p1["recorded_calls"] > 0, f"{name}: profile recorded {p1['recorded_calls']} calls")
    check(p1["final_loss"] == p2["final_loss"] and p1["test_loss"] == p2["test_loss"],
          f"{name}: same-seed runs give the same losses bit for bit ({p1['final_loss']!r})")
    with h5py.File(s1, "r") as f1, h5py.File(s2, "r") as f2:
        run1 = f1["runs/golden"]
        attrs = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in run1.attrs.items()}
        check(len(attrs.get("model_sha256", "")) == 64, f"{name}: the model file's SHA-256 is in the run's attributes")
        it1, it2 = run1["iterations/000000/calls"], f2["runs/golden/iterations/000000/calls"]
        names = sorted(it1.keys())
        same = all(np.array_equal(it1[c]["output"][()], it2[c]["output"][()]) for c in names if "output" in it1[c])
        layer_names = {it1[c].attrs["layer"].decode() if isinstance(it1[c].attrs["layer"], bytes)
                       else str(it1[c].attrs["layer"]) for c in names}
        check(same, f"{name}: the two runs' recorded outputs are bit-identical ({len(names)} calls)")
        check(layer_names & set(layers), f"{name}: recorded calls carry the module paths")
        phases = {it1[c].attrs["phase"].decode() if isinstance(it1[c].attrs["phase"], bytes) else str(it1[c].attrs["phase"])
                  for c in names}
        check("backward" in phases, f"{name}: backward GEMMs went through the slot and were recorded")
        kinds = set()
        for c in names:
            a = it1[c].attrs
            op = a["op"].decode() if isinstance(a["op"], bytes) else str(a["op"])
            kinds.add((op, int(a.get("param.variant", 0))))
        # forward and backward of every op-wise kind the model has, the loss and the optimiser's updates
        want = {("cross_entropy", 0), ("cross_entropy", 1), ("sgd" if name in ("resnet18", "mobilenet_v2", "vit", "bert")
                                                              else "adam", 4)}
        if name in ("vit", "gpt", "bert"):
            want |= {("softmax", 0), ("softmax", 1), ("layernorm", 0), ("layernorm", 1), ("layernorm", 2),
                     ("layernorm", 3), ("gelu", 0), ("gelu", 1)}
        if name in ("gpt", "bert"):
            want |= {("embedding", 0), ("embedding", 2), ("dropout", 0), ("dropout", 1)}
        if name == "resnet18":
            want |= {("relu", 0), ("relu", 1)}
        check(want <= kinds, f"{name}: recorded (op, variant) pairs include {sorted(want - kinds) or 'all of'} {len(want)}")

    graph_case(name, s1, layer_names, ("layer2.0.downsample.0", "conv2d") if name == "resnet18" else None)

    golden = run_json("playback", "-s", s1, "-k", "golden")
    check(golden["worst"]["mismatched"] == 0 and golden["replayed_calls"] == p1["recorded_calls"],
          f"{name}: golden replay of {golden['replayed_calls']} calls is bit-exact")
    cand = run_json("playback", "-s", s1, "-k", "bf16", "--resume", 1)
    check(cand["worst"]["mismatched"] > 0, f"{name}: bf16 replay differs from golden ({cand['worst']['max_abs']:.3g})")
    fi = run_json("runtime-fi", *common, "-n", 2, "-k", "bf16", "--every", 5, "--op", "all", "-o",
                  os.path.join(WORK, "fi.h5"))
    check(fi["substituted_calls"] > 0, f"{name}: runtime FI substituted {fi['substituted_calls']} calls")

    if name == "vit":  # shards, sweeps and the analysis work on model-file runs as on the zoo's
        one, merged = os.path.join(WORK, "one.h5"), os.path.join(WORK, "merged.h5")
        shutil.copy(s1, one)
        shutil.copy(s1, merged)
        run("playback", "-s", one, "-k", "bitflip:count=2", "--seed", 4)
        shards = []
        for i in range(2):
            shards.append(os.path.join(WORK, f"shard{i}.h5"))
            run("playback", "-s", s1, "-k", "bitflip:count=2", "--seed", 4, "--shard", f"{i}/2", "--out", shards[-1])
        run("merge", *shards, "-s", merged)
        with h5py.File(one, "r") as a, h5py.File(merged, "r") as b:
            x = a["runs/playback-bitflip/tables/call_errors"][()]
            y = b["runs/playback-bitflip/tables/call_errors"][()]
            check(len(x) == len(y) > 0 and all(np.array_equal(x[n], y[n], equal_nan=True) for n in x.dtype.names
                                               if x[n].dtype.kind == "f"),
                  f"vit: two merged playback shards equal the one-process replay ({len(y)} calls)")
        sweep = run_json("runtime-fi", *common, "-n", 2, "-k", "bf16", "--every", "3,7", "--op", "all", "-o",
                         os.path.join(WORK, "sweep.h5"))
        check(sweep["points"] == 2, f"vit: a runtime-FI sweep over --every 3,7 gives {sweep['points']} points")
        run("playback", "-s", s1, "-k", "bf16", "--store-outputs", "--name", "kept", "--max-calls", 10)
        analysis = run_json("analyze", "--session", s1, "--run", "kept")
        check(len(analysis.get("calls", [])) == 10, "vit: peat analyze reports the 10 replayed calls")

    # A model file changed after recording is refused by a resume.
    changed = os.path.join(WORK, "changed.pt")
    shutil.copy(model, changed)
    s3 = os.path.join(WORK, "c.h5")
    run("profile", "--model", changed, "--data", data, "--batch", 4, "-n", 1, "--record-every", 1, "-o", s3, *extra)
    with open(changed, "ab") as f:
        f.write(b"\0")
    error_line(["playback", "-s", s3, "-k", "bf16", "--resume", 1], "has changed since the session was recorded")


def recurrent_matches_torch(name, model_path, data, task):
    """The decomposed recurrent layer computes what PyTorch's fused one does: the head's recorded
    input (the recurrent output, iteration 0, before any update) against the module run by PyTorch
    on the recorded token ids."""
    import torch
    session = os.path.join(WORK, f"{name}-check.h5")
    run("profile", "--model", model_path, "--data", data, "--batch", 4, "--seed", 3, "-n", 1, "--record-every", 1,
        "--record-ops", "all", *task, "-o", session)
    with h5py.File(session, "r") as f:
        calls = f["runs/golden/iterations/000000/calls"]
        def attr(c, key):
            v = calls[c].attrs[key]
            return v.decode() if isinstance(v, bytes) else str(v)
        ids = head_in = None
        layers = set()
        for c in sorted(calls.keys()):
            layers.add(attr(c, "layer"))
            if attr(c, "phase") != "forward":
                continue
            if attr(c, "layer") == "embed" and ids is None:
                ids = calls[c]["input_0"][()]
            if attr(c, "layer") == "head" and head_in is None:
                head_in = calls[c]["input_0"][()]
    module = torch.jit.load(model_path)
    with torch.no_grad():
        out = module.rnn(module.embed(torch.from_numpy(ids)))  # a traced submodule returns what was used
        expected = (out[0] if isinstance(out, tuple) else out).numpy()
    diff = float(np.abs(expected - head_in).max())
    check(diff < 1e-5, f"{name}: the slot's decomposition gives PyTorch's output (largest difference {diff:.2g})")
    return layers


def lstm_case():
    """An LSTM language model: aten::lstm is decomposed so that its gate GEMMs go through the slot
    (each layer's input projection over all steps, each step's hidden projection), and a
    two-layer bidirectional GRU the same way; both compute PyTorch's outputs, train, record and
    replay; the packed-sequence form stays listed as left on ATen."""
    import torch
    model = os.path.join(MODELS, "lstm.pt")
    data = os.path.join(WORK, "tokens.h5")
    lm_tokens(data)
    inspect = run_json("models", "--inspect", model, "--input-shape", "1,16", "--task", "lm")
    sites = {s["aten"]: s for s in inspect["sites"]}
    check("aten::lstm" in sites and sites["aten::lstm"]["routed"] and "hh_l0" in sites["aten::lstm"]["detail"],
          f"lstm: aten::lstm is routed, its gate GEMMs through the slot ({inspect['summary']})")
    s1 = os.path.join(WORK, "lstm.h5")
    p = run_json("profile", "--model", model, "--data", data, "--batch", 4, "--seed", 3, "-n", 3, "--record-every", 1,
                 "-o", s1)
    check(p["recorded_calls"] > 0, f"lstm: profile recorded {p['recorded_calls']} calls")
    with h5py.File(s1, "r") as f:
        calls = f["runs/golden/iterations/000000/calls"]
        layers = {(calls[c].attrs["layer"].decode() if isinstance(calls[c].attrs["layer"], bytes)
                   else str(calls[c].attrs["layer"])) for c in calls}
    check({"rnn.ih_l0", "rnn.hh_l0"} <= layers, f"lstm: the gate GEMMs are recorded ({sorted(layers)})")
    graph_case("lstm", s1, layers, ("rnn.ih_l0", "linear"))

    golden = run_json("playback", "-s", s1, "-k", "golden")
    check(golden["worst"]["mismatched"] == 0 and golden["replayed_calls"] == p["recorded_calls"],
          f"lstm: golden replay of {golden['replayed_calls']} calls is bit-exact")

    class Rnn(torch.nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 24)
            self.rnn = (torch.nn.GRU if kind == "gru" else torch.nn.LSTM)(24, 16, 2, batch_first=True,
                                                                           bidirectional=True)
            self.head = torch.nn.Linear(32, 64)

        def forward(self, tokens):
            return self.head(self.rnn(self.embed(tokens))[0])

    for kind in ("gru", "lstm"):
        torch.manual_seed(5)
        path = os.path.join(WORK, f"{kind}2.pt")
        torch.jit.trace(Rnn(kind).train(), torch.zeros(2, 16, dtype=torch.long)).save(path)
        layers = recurrent_matches_torch(f"{kind} (2 layers, bidirectional)", path, data, ["--task", "lm"])
        check({"rnn.ih_l1_reverse", "rnn.hh_l1_reverse"} <= layers,
              f"{kind}: both layers and directions recorded ({sorted(l for l in layers if 'rnn' in l)})")
    recurrent_matches_torch("lstm", model, data, ["--task", "lm"])

    class Packed(torch.nn.Module):  # the packed-sequence overload: listed, never skipped silently
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 16)
            self.rnn = torch.nn.LSTM(16, 16, batch_first=True)
            self.head = torch.nn.Linear(16, 64)

        def forward(self, tokens):
            lengths = torch.full((tokens.shape[0],), tokens.shape[1], dtype=torch.long)
            packed = torch.nn.utils.rnn.pack_padded_sequence(self.embed(tokens), lengths, batch_first=True)
            out, _ = self.rnn(packed)
            return self.head(torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0])

    packed = os.path.join(WORK, "packed.pt")
    torch.jit.script(Packed()).save(packed)
    inspect = run_json("models", "--inspect", packed, "--input-shape", "1,16", "--task", "lm")
    check(any(s["aten"] == "aten::lstm" and not s["routed"] and "gate GEMMs" in s["detail"] for s in inspect["sites"]),
          f"lstm (packed): listed as left on ATen with its gate GEMMs ({inspect['summary']})")


def bert_case():
    """A BERT-style classifier on integer tokens [N, T] with class labels [N]: the tokens reach the
    model as int64 (not Float), every GEMM site is routed, it trains, and replays are exact."""
    data = os.path.join(WORK, "classes.h5")
    token_classes(data)
    with h5py.File(data, "r") as f:
        check(f["train/x"].dtype == np.int64 and f["train/x"].ndim == 2 and f["train/y"].ndim == 1,
              "bert: the data are int64 tokens [N, T] with labels [N]")
    slot_case("bert", "1,16", data)
    r = run_json("train", "--model", os.path.join(MODELS, "bert.pt"), "--data", data, "-n", 60, "--batch", 16,
                 "--lr", 0.05, "--seed", 2, "-o", os.path.join(WORK, "bert-train.h5"))
    check(r["test_accuracy"] > 0.5, f"bert: trains on integer tokens (test accuracy {r['test_accuracy']:.3f} after "
                                    f"60 iterations; two balanced classes)")


def regression_case():
    """Float targets from .npy files: mean squared error (synthetic data: a format test, not a claim)."""
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    path = os.path.join(WORK, "reg.pt")
    torch.jit.trace(net, torch.randn(4, 8)).save(path)
    data = os.path.join(WORK, "reg")
    os.makedirs(data)
    rng = np.random.default_rng(1)
    for split, n in (("train", 256), ("test", 64)):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        y = np.stack([np.sin(x[:, 0]) + x[:, 1], x[:, 2] * x[:, 3]], 1).astype(np.float32)
        np.save(os.path.join(data, f"{split}_x.npy"), x)
        np.save(os.path.join(data, f"{split}_y.npy"), y)
    r = run_json("train", "--model", path, "--data", data, "-n", 40, "--batch", 16, "--lr", 0.05, "-o",
                 os.path.join(WORK, "reg.h5"))
    check(r["final_loss"] < 1.0, f"regression: MSE falls below 1.0 in 40 iterations ({r['final_loss']:.3f})")


def bad_input_case():
    import torch
    model = os.path.join(MODELS, "resnet18.pt")
    out = os.path.join(WORK, "bad.h5")
    eager = os.path.join(WORK, "eager.pt")
    torch.save(torch.nn.Linear(4, 2), eager)
    error_line(["profile", "--model", eager, "--data", "fashion-mnist", "-o", out], "not TorchScript", "torch.jit.trace")
    onnx = os.path.join(WORK, "m.onnx")
    torch.onnx.export(torch.nn.Linear(4, 2), torch.randn(1, 4), onnx)
    error_line(["profile", "--model", onnx, "--data", "fashion-mnist", "-o", out], "ONNX")
    # the first forward runs in the probe helper, which names the shape it was given
    error_line(["profile", "--model", model, "--data", "fashion-mnist:1x28x28", "-o", out], "does not take",
               "[2, 1, 28, 28]", "3 channels")
    error_line(["profile", "--model", model, "-o", out], "needs --data")
    rng = np.random.default_rng(0)
    def images(path, labels, nan_at=None):
        x = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
        if nan_at is not None:
            x[nan_at, 1, 2, 3] = np.nan
        with h5py.File(path, "w") as f:
            for split in ("train", "test"):
                f[f"{split}/x"] = x
                f[f"{split}/y"] = np.array(labels, dtype=np.int64)
    labels = os.path.join(WORK, "labels.h5")
    images(labels, [1] * 5 + [12] + [0] * 10)
    error_line(["profile", "--model", model, "--data", labels, "-o", out], "train/y[5] = 12", "10")
    nan = os.path.join(WORK, "nan.h5")
    images(nan, [1] * 16, nan_at=7)
    error_line(["profile", "--model", model, "--data", nan, "-o", out], "NaN", "sample 7")
    error_line(["profile", "--model", "lenet", "--data", nan, "-o", out], "for model files")
    error_line(["models", "--inspect", os.path.join(WORK, "missing.pt")], "cannot read model file")


def call_kinds(session):
    """(op, variant, wrt) of every recorded call of a session's golden run."""
    kinds = collections.Counter()
    with h5py.File(session, "r") as f:
        for it in f["runs/golden/iterations"].values():
            for c in it["calls"].values():
                a = c.attrs
                op = a["op"].decode() if isinstance(a["op"], bytes) else str(a["op"])
                kinds[(op, int(a.get("param.variant", 0)), int(a.get("param.wrt", 0)))] += 1
    return kinds


def attention_case():
    """--attention fused: nn.MultiheadAttention's scores, softmax and values (GPT-style model with and
    without dropout, torchvision's ViT) as one attention call; the same values as the parts, bit for bit
    (the dropout's multipliers drawn by the call as the unfused dropout draws them)."""
    data = os.path.join(WORK, "tokens.h5")
    lm_tokens(data)
    for name, shape, model_data, task in (("gpt-nodrop", "1,16", data, ["--task", "lm"]),
                                          ("gpt", "1,16", data, ["--task", "lm"]),
                                          ("vit", "1,3,32,32", "fashion-mnist:3x32x32", [])):
        model = os.path.join(MODELS, f"{name}.pt")
        sites = run_json("models", "--inspect", model, "--input-shape", shape, "--attention", "fused", *task)["sites"]
        fused = [s for s in sites if s.get("slot_op") == "attention" or "as one call" in s["detail"]]
        check(len(fused) == 2 and all(s["routed"] and "shapes" in s for s in fused),
              f"{name}: both layers' attention fused into one routed call ({[s['layer'] for s in fused]})")
        check(not any(s["aten"] == "aten::softmax" and not s in fused for s in sites),
              f"{name}: no softmax left beside the fused attention")
        common = ["--model", model, "--data", model_data, "--batch", 4, "--seed", 5, "-n", 3, "--record-every", 2,
                  "--record-ops", "all"]
        fs, ps = os.path.join(WORK, f"{name}-fused.h5"), os.path.join(WORK, f"{name}-parts.h5")
        f = run_json("profile", *common, "--attention", "fused", "-o", fs)
        p = run_json("profile", *common, "-o", ps)
        check(f["final_loss"] == p["final_loss"] and f["test_loss"] == p["test_loss"],
              f"{name}: fused attention trains bit for bit as its parts ({f['final_loss']!r} vs {p['final_loss']!r})")
        if name == "gpt":  # on one thread too (its dk was 1 ulp off the parts' on an AVX2 machine at 1 or 2)
            f1 = run_json("profile", *common, "--threads", 1, "--attention", "fused", "-o", fs.replace(".h5", "-1.h5"))
            p1 = run_json("profile", *common, "--threads", 1, "-o", ps.replace(".h5", "-1.h5"))
            check(f1["final_loss"] == p1["final_loss"] and f1["test_loss"] == p1["test_loss"],
                  f"{name}: on one thread as well ({f1['final_loss']!r} vs {p1['final_loss']!r})")
        kinds = call_kinds(fs)
        want = {("attention", 0, 0), ("attention", 1, 0), ("attention", 1, 1), ("attention", 1, 2)}
        check(want <= set(kinds), f"{name}: attention forward, dq, dk and dv recorded ({sorted(k for k in kinds if k[0] == 'attention')})")
        if name == "gpt":  # its attention dropouts are inside the calls: two dropout sites fewer than the parts
            parts = run_json("models", "--inspect", model, "--input-shape", shape, *task)["sites"]
            drops = lambda ss: sum(1 for s in ss if s["routed"] and s.get("slot_op") == "dropout")
            check(drops(parts) - drops(sites) == 2 and "dropout" in fused[0]["detail"],
                  f"gpt: the attention's dropout went into the fused call ({drops(parts)} -> {drops(sites)} dropout sites)")
        golden = run_json("playback", "-s", fs, "-k", "golden", "--op", "attention")
        check(golden["worst"]["mismatched"] == 0 and golden["replayed_calls"] == sum(
            n for k, n in kinds.items() if k[0] == "attention"), f"{name}: golden replay of the attention calls is bit-exact")


def plugins_case():
    """The ABI v2 example plugins (core/plugin/examples) on the GPT-style model from
    nn.TransformerEncoderLayer: playback over its recorded calls with the detector's verdicts, and
    runtime FI in live training."""
    plugins = os.environ["PEAT_PLUGIN_DIR"]
    lib = lambda n: "plugin:path=" + os.path.join(plugins, f"libpeat_example_{n}.so")
    data = os.path.join(WORK, "tokens.h5")
    lm_tokens(data)
    verdicts = {}
    for name, attention in (("gpt", "parts"), ("gpt-nodrop", "fused"), ("gpt", "fused")):
        model = os.path.join(MODELS, f"{name}.pt")
        common = ["--model", model, "--data", data, "--batch", 4, "--seed", 5, "--attention", attention]
        s = os.path.join(WORK, f"{name}-{attention}.h5")
        run_json("profile", *common, "-n", 3, "--record-every", 2, "--record-ops", "all", "-o", s)
        runs = {("gpt", "parts"): [("bf16_gemm", "linear"), ("bf16_gemm", "matmul"), ("online_softmax", "softmax")],
                ("gpt-nodrop", "fused"): [("flash_attention", "attention"), ("flash_attention_causalbug", "attention")],
                # attention with dropout inside the call: the flash example declares the feature
                ("gpt", "fused"): [("flash_attention", "attention"), ("flash_attention_causalbug", "attention")]}
        for plugin, op in runs[(name, attention)]:
            rn = f"{plugin}-{op}" + ("-dropout" if name == "gpt" and attention == "fused" else "")
            r = run_json("playback", "-s", s, "-k", lib(plugin), "--op", op, "--store-outputs", "--name", rn)
            check(r["replayed_calls"] > 0 and not r.get("kernel_failures"),
                  f"{name}: {plugin} replayed {r['replayed_calls']} {op} calls without a failure")
            local = run_json("playback", "-s", s, "-k", lib(plugin), "--op", op, "--in-process", "--name", rn + "-local")
            check(local["worst"] == r["worst"], f"{name}: {plugin} in process gives the kernel host's numbers")
            calls = run_json("detect", "-s", s, "--run", rn)["calls"]
            verdicts[rn] = collections.Counter((c["op"] if "op" in c else op, c.get("variant", "?"), c["verdict"])
                                               for c in calls)
            print(f"  {rn}: {dict(verdicts[rn])}")
            fi = run_json("runtime-fi", *common, "-n", 2, "-k", lib(plugin), "--every", 3, "--op", op, "-o",
                          os.path.join(WORK, f"fi-{rn}.h5"))
            check(fi["substituted_calls"] > 0 and fi.get("failed_steps", 0) == 0,
                  f"{name}: runtime FI swapped {plugin} into {fi['substituted_calls']} live {op} calls")
    faults = {"index_error", "random_value", "zeroed", "nan_inf", "bit_flip", "scaling", "unknown"}
    for rn in ("bf16_gemm-linear", "bf16_gemm-matmul", "online_softmax-softmax", "flash_attention-attention",
               "flash_attention-attention-dropout"):
        bad = {k: n for k, n in verdicts[rn].items() if k[2] in faults}
        check(not bad, f"{rn}: a legitimate port, no call named a fault ({bad or dict(verdicts[rn])})")
    bf16 = sum(n for k, n in verdicts["bf16_gemm-linear"].items() if k[2] == "precision_loss")
    check(bf16 > 0, f"bf16_gemm-linear: calls named precision_loss ({bf16})")
    for suffix in ("", "-dropout"):
        bug = verdicts["flash_attention_causalbug-attention" + suffix]
        named = sum(n for k, n in bug.items() if k[2] == "index_error")
        check(named == sum(bug.values()), f"flash_attention_causalbug{suffix}: every call (forward, dq, dk, dv) named "
                                          f"index_error ({dict(bug)})")
        flash = verdicts["flash_attention-attention" + suffix]
        check(sum(n for k, n in flash.items() if k[2] == "precision_loss") == sum(flash.values()),
              f"flash_attention{suffix}: every call named precision_loss (its bf16 inputs) ({dict(flash)})")


LEGITIMATE = {"exact", "precision_loss", "accumulation_order"}


def bugs_case():
    """Issue 41's count of the worst verdict: every built-in bug candidate and fault model over the ops it
    applies to, the example plugins' planted bugs, and bug plugins written from docs/plugins.md alone
    (tests/plugins/verdict_plugins.c: a dropped K tail, attention scaled by 1/D, a conv padding by the
    edge pixel, fp8 with one operand's scale missed), each replayed over calls recorded from the zoo's
    LeNet and a TorchScript GPT (nn.TransformerEncoderLayer, attention as its parts and fused): every call
    a bug changes gets a verdict that is not legitimate. And the correct fp8 e4m3 GEMM with per-tensor
    scales is precision_loss (fp8_e4m3, per-tensor scale) on every call it replays."""
    plugins, test_plugins = os.environ["PEAT_PLUGIN_DIR"], os.environ["PEAT_TEST_PLUGIN_DIR"]
    example = lambda n: "plugin:path=" + os.path.join(plugins, f"libpeat_example_{n}.so")
    verdict_plugin = lambda n: "plugin:path=" + os.path.join(test_plugins, f"libpeat_verdict_{n}.so")
    data = os.path.join(WORK, "tokens.h5")
    lm_tokens(data)
    sessions = {"lenet": os.path.join(WORK, "lenet.h5"), "gpt": os.path.join(WORK, "gpt.h5"),
                "gpt-fused": os.path.join(WORK, "gpt-fused.h5")}
    run_json("profile", "--model", "lenet", "-n", 2, "--batch", 16, "--record-ops", "all", "-o", sessions["lenet"])
    for key, name, attention in (("gpt", "gpt", "parts"), ("gpt-fused", "gpt-nodrop", "fused")):
        run_json("profile", "--model", os.path.join(MODELS, f"{name}.pt"), "--data", data, "--batch", 4, "--seed", 5,
                 "--attention", attention, "-n", 2, "--record-ops", "all", "-o", sessions[key])
    gemm_bugs = ["tile-edge", "missing-ktile", "zeroed-tail", "stale-race", "gpu-tile-edge", example("tilebug_gemm"),
                 verdict_plugin("ktail"), verdict_plugin("fp8noscale"), verdict_plugin("ktailbf16")]
    faults = ["bitflip", "multibit", "stuckat0", "stuckat1", "random-value", "zero", "nan", "inf", "grad-unscaled"]
    runs = []  # (session, kernel, op)
    for kernel in gemm_bugs:
        for session, op in (("lenet", "linear"), ("gpt", "linear"), ("gpt", "matmul")):
            if "tilebug" in kernel and op == "matmul":
                continue  # a v1 plugin: plain GEMMs only
            runs.append((session, kernel, op))
    runs += [("lenet", k, "conv2d") for k in ("tile-edge", "missing-ktile", "zeroed-tail", verdict_plugin("convborder"))]
    runs += [("gpt-fused", k, "attention") for k in ("attention-causal-off", example("flash_attention_causalbug"),
                                                      verdict_plugin("attnscale"), verdict_plugin("attnscalebf16"))]
    runs += [("gpt", k, "layernorm") for k in ("layernorm-eps-outside", "layernorm-bessel", "rmsnorm",
                                               verdict_plugin("lnbesselbf16"))]
    runs += [("gpt", "dropout-reuse", "dropout"), ("gpt", "softmax-nomax", "softmax")]
    for kernel in faults:
        for session, op in (("lenet", "conv2d"), ("gpt", "linear"), ("gpt", "softmax"), ("gpt", "layernorm"),
                            ("gpt-fused", "attention")):
            runs.append((session, kernel, op))
    # A call is changed by a bug where the kernel's output differs from what its twin, the same arithmetic
    # without the bug, gives (a tile bug in a call narrower than a tile changes nothing, though its
    # own summation order differs from golden's); kernels that take golden's output and corrupt it,
    # or compute another formula, change a call where it differs from golden at all.
    # (pairwise with leaves of 4096 is one at::mm, the arithmetic of tile-edge's and missing-ktile's
    # engines: every K recorded here is below 4096)
    twins = {"tile-edge": "pairwise:leaf=4096", "missing-ktile": "pairwise:leaf=4096", "gpu-tile-edge": "gpu-tiled",
             example("tilebug_gemm"): "plugin:path=" + os.path.join(test_plugins, "libpeat_v1_macro.so"),
             verdict_plugin("ktail"): verdict_plugin("gemm"), verdict_plugin("fp8noscale"): verdict_plugin("fp8"),
             verdict_plugin("convborder"): verdict_plugin("conv"), verdict_plugin("attnscale"): verdict_plugin("attn"),
             verdict_plugin("ktailbf16"): verdict_plugin("gemmbf16"),
             verdict_plugin("attnscalebf16"): verdict_plugin("attnbf16"),
             verdict_plugin("lnbesselbf16"): verdict_plugin("lnbf16")}
    replays = {}

    def replay(session, kernel, op):
        """The per-call numbers of `kernel` replayed over `session`'s `op` calls, by call."""
        key = (session, kernel, op)
        if key not in replays:
            rn = f"bug-{len(replays)}"
            r = run_json("playback", "-s", sessions[session], "-k", kernel, "--op", op, "--store-outputs", "--name", rn)
            calls = run_json("analyze", "--session", sessions[session], "--run", rn)["calls"] if r["replayed_calls"] else []
            replays[key] = {c["call"]: c for c in calls}
        return replays[key]

    numbers = lambda c: (c["mismatched"], c["max_abs"], c["p99_abs"], c["mean_abs_over_scale"])
    table = []
    rule_counts = []  # per bug run: (changed calls the reference rule was evaluated on, of them passed)
    worst = []  # (run, call, verdict) of a changed call called legitimate
    for session, kernel, op in runs:
        calls = replay(session, kernel, op)
        twin = replay(session, twins[kernel], op) if kernel in twins else None
        changed = [c for path, c in calls.items()
                   if c["mismatched"] > 0 and (twin is None or path not in twin or numbers(twin[path]) != numbers(c))]
        verdicts = collections.Counter(c["verdict"] for c in changed)
        table.append((session, kernel, op, len(calls), len(changed), dict(verdicts)))
        # softmax without its max subtraction is softmax's own formula below exp's overflow (logits <= 88):
        # there it differs by fp32 rounding alone, a legitimate difference; the test's logits never reach 88
        if kernel == "softmax-nomax":
            continue
        worst += [(f"{kernel} on {session} {op}", c["call"], c["verdict"]) for c in changed if c["verdict"] in LEGITIMATE]
        # FlashAttention's rule beside the verdict: the changed calls it was evaluated on, and those it passes
        rules = [c["criteria"]["reference_rule"]["pass"] for c in changed if "reference_rule" in c["criteria"]]
        rule_counts.append((len(rules), sum(rules)))
    print("%-58s %-10s %-10s %6s %8s  %s" % ("kernel", "session", "op", "calls", "changed", "verdicts of the changed calls"))
    for session, kernel, op, n, changed, verdicts in table:
        print("%-58s %-10s %-10s %6d %8d  %s" % (kernel.replace("plugin:path=", "")[-58:], session, op, n, changed,
                                               ", ".join(f"{k}:{v}" for k, v in sorted(verdicts.items()))))
    changed_calls = sum(t[4] for t in table if t[1] != "softmax-nomax")
    print(f"bug and fault runs: {len(table)}, calls they changed: {changed_calls}, "
          f"legitimate verdicts on them: {len(worst)}")
    print("FlashAttention's rule (max error against float64 <= 2x PyTorch's + 1e-5) on the changed calls: evaluated on "
          f"{sum(e for e, _ in rule_counts)}, passed by {sum(p for _, p in rule_counts)}")
    unchanged = [(t[1], t[0], t[2]) for t in table if t[4] == 0 and t[1] != "softmax-nomax"]
    print(f"runs in which the bug changed no call (the recorded shapes never trigger it): {unchanged}")
    check(changed_calls >= 500, f"the bugs changed {changed_calls} recorded calls (a bug that changes nothing proves nothing)")
    check(not worst, f"no call a bug changed was called legitimate ({worst[:8]})")
    # the correct fp8 e4m3 GEMM with per-tensor scales (the ABI's own convention): precision_loss with
    # fp8_e4m3 on every call, on the zoo's and the TorchScript model's GEMMs
    for session, op in (("lenet", "linear"), ("gpt", "linear"), ("gpt", "matmul")):
        rn = f"fp8-{session}-{op}"
        run_json("playback", "-s", sessions[session], "-k", verdict_plugin("fp8"), "--op", op, "--store-outputs",
                 "--name", rn)
        calls = run_json("analyze", "--session", sessions[session], "--run", rn)["calls"]
        named = collections.Counter((c["verdict"], c["parameters"].get("format", "-"), c["parameters"].get("scale", "-"))
                                    for c in calls)
        print(f"  fp8 e4m3 scaled GEMM on {session} {op}: {dict(named)}")
        rule = [c["criteria"].get("reference_rule", {}).get("pass") for c in calls]
        print(f"    FlashAttention's rule against the fp8 replay: {rule.count(True)} of {len(rule)} pass")
        check(all(rule), f"fp8 e4m3 GEMM on {session} {op}: FlashAttention's rule passes on every call, the reference "
                         f"being the fp8 replay ({rule.count(True)} of {len(rule)})")
        check(all(c["parameters"].get("declared") == "fp8_e4m3->f32" for c in calls),
              f"fp8 e4m3 GEMM on {session} {op}: the declared formats judged with every call (fp8_e4m3->f32)")
        check(calls and all(c["verdict"] == "precision_loss" and c["parameters"].get("format") == "fp8_e4m3" and
                            c["parameters"].get("scale") == "per-tensor" for c in calls),
              f"fp8 e4m3 GEMM with per-tensor scales on {session} {op}: precision_loss (fp8_e4m3) on every call "
              f"({dict(named)})")
    # the bugs' twins with bf16 outputs are correct ports: every value on bf16's grid, none a fault, and the
    # GEMMs named precision_loss (bf16) (the bf16-output bugs above land on the same grid: the grid alone
    # must not excuse them)
    for session, op, kernel in (("lenet", "linear", "gemmbf16"), ("gpt", "linear", "gemmbf16"),
                                ("gpt", "matmul", "gemmbf16"), ("gpt-fused", "attention", "attnbf16"),
                                ("gpt", "layernorm", "lnbf16")):
        calls = replay(session, verdict_plugin(kernel), op)
        named = collections.Counter((c["verdict"], c["parameters"].get("format", "-")) for c in calls.values())
        print(f"  {kernel} (correct, bf16 outputs) on {session} {op}: {dict(named)}")
        check(calls and all(c["verdict"] in LEGITIMATE for c in calls.values()),
              f"{kernel} on {session} {op}: a correct bf16-output port, every call legitimate ({dict(named)})")
        if kernel in ("gemmbf16", "lnbf16"):
            check(all(c["verdict"] == "exact" or c["parameters"].get("format") == "bf16" for c in calls.values()),
                  f"{kernel} on {session} {op}: named precision_loss (bf16) ({dict(named)})")
    # a kernel declaring f16 inputs and bf16 outputs for every op (the probe tests' all-ops plugin): the
    # layer norm's forward calls replayed in those formats and named fp16; its backward calls, which
    # no replay covers, say the format was not replayed and rest on the generic rules
    rn = "f16-layernorm"
    run_json("playback", "-s", sessions["gpt"], "-k", "plugin:path=" + os.path.join(test_plugins, "libpeat_ops_v2_f16.so"),
             "--op", "layernorm", "--store-outputs", "--name", rn)
    calls = run_json("analyze", "--session", sessions["gpt"], "--run", rn)["calls"]
    said = [c for c in calls if c["parameters"].get("declared_format_replayed") == "no"]
    forward = [c for c in calls if c["variant"] == 0]
    print(f"  f16 layer norm: {collections.Counter((c['variant'], c['verdict'], c['parameters'].get('format', '-')) for c in calls)}; "
          f"{len(said)} say the format was not replayed")
    check(calls and all(c["parameters"].get("declared") == "f16->bf16" for c in calls) and said and
          all("not replayed" in c["explanation"] and c["variant"] != 0 for c in said),
          f"f16 layer norm: declared formats named, {len(said)} of {len(calls)} calls (backward) say the format was "
          "not replayed")
    check(forward and all(c["verdict"] == "precision_loss" and c["parameters"].get("format") == "fp16" for c in forward),
          f"f16 layer norm: {len(forward)} forward calls replayed with f16 inputs and bf16 outputs, precision_loss (fp16)")


try:
    if CASE == "attention":
        attention_case()
    elif CASE == "plugins":
        plugins_case()
    elif CASE == "bugs":
        bugs_case()
    elif CASE == "regression":
        regression_case()
    elif CASE == "bad-input":
        bad_input_case()
    elif CASE == "lstm":
        lstm_case()
    elif CASE == "bert":
        bert_case()
    elif CASE == "gpt":
        data = os.path.join(WORK, "tokens.h5")
        lm_tokens(data)
        slot_case("gpt", "1,16", data)
    else:
        slot_case(CASE, "1,3,32,32", "fashion-mnist:3x32x32")
finally:
    shutil.rmtree(WORK, ignore_errors=True)

finish(failures)
