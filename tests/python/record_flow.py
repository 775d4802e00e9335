# SPDX-License-Identifier: MIT
"""ctest python_record_torch1 / _torch2: the Python package inside unchanged training scripts, under
one interpreter (Debian's PyTorch 1.13 or the project venv's 2.x).
Usage: record_flow.py PEAT PYTHON WORKDIR PACKAGE_DIR"""
import collections
import json
import os
import shutil
import signal
import subprocess
import sys

PEAT, PY, WORK, PKG = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")
env = dict(os.environ, PEAT_PYTHON=PY, PYTHONPATH=PKG + os.pathsep + HERE)
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def run(args, code=0):
    p = subprocess.run(args, cwd=WORK, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != code:
        raise SystemExit("FAIL: %s exited %d (expected %d)\n%s\n%s" % (" ".join(args), p.returncode, code, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def summary(session):
    code = "import json, peat._core as c; print(json.dumps(c.summary(%r)))" % session
    return json.loads(run([PY, "-c", code]).stdout)


def verdicts(result):
    return [c["verdict"] for c in result["analysis"]["calls"]]


torch2 = run([PY, "-c", "import torch; print(torch.__version__)"]).stdout.strip()[0] == "2"
print("PyTorch", run([PY, "-c", "import torch; print(torch.__version__)"]).stdout.strip())

# 1. a plain DataLoader loop with SGD and a scheduler, recorded without changing it
p = run([PEAT, "record", "-o", "mlp.h5", "--every", "5", "--checkpoint-every", "10", "--",
         PY, os.path.join(SCRIPTS, "fashion_mlp.py"), "--steps", "20"])
check("test accuracy" in p.stdout, "the script's own output passes through")
run([PEAT, "info", "--verify", "mlp.h5"])
s = summary("mlp.h5")
golden = [r for r in s["runs"] if r["name"] == "golden"][0]
calls = [c for it in golden["iterations"] for c in it["calls"]]
ops = collections.Counter(c["op"] for c in calls)
layers = {c["layer"] for c in calls}
check({"linear", "conv2d", "matmul", "relu", "log_softmax", "nll_loss", "optimizer"} <= set(ops), "ops classified: %s" % dict(ops))
check({"conv1", "conv2", "fc1", "fc2"} <= layers, "calls named by module path")
check(any(c["phase"] == "backward" for c in calls), "backward calls recorded")
if torch2:  # backward calls named as their forward calls: F.relu between layers is the model's, the loss the script's
    back = {(c["op"], c["layer"]) for c in calls if c["phase"] == "backward"}
    fwd = {(c["op"], c["layer"]) for c in calls if c["phase"] == "forward" and c["op"] != "optimizer"}
    check(("relu", "model") in back and ("nll_loss", "script") in back and ("matmul", "fc1") in back
          and not any(op == "relu" and layer != "model" for op, layer in back) and
          {(op, layer) for op, layer in back if op in ("relu", "log_softmax", "nll_loss")} <= fwd,
          "backward calls named as their forward calls: %s" % sorted(back))
check([it["iteration"] for it in golden["iterations"]][:4] == [0, 5, 10, 15], "every 5th iteration recorded")
check(len(golden["checkpoints"]) >= 2, "checkpoints at 0, 10, 20: %s" % golden["checkpoints"])
check("unclassified" in golden["attributes"] and "curve" in golden["tables"], "unclassified ops listed, loss curve stored")

r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "golden", "--json"]).stdout)
check(r["replayed"] == len(calls) and r["bit_exact"] == r["replayed"] and r["failed"] == 0,
      "golden replay bit-exact: %d of %d" % (r["bit_exact"], r["replayed"]))

r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:bf16_gemm", "--op", "gemm",
                    "--analyze", "--json"]).stdout)
v = verdicts(r)
named = sum(1 for x in v if x["model"] == "precision_loss" and x["parameters"].get("format") == "bf16")
check(r["replayed"] > 0 and named == len(v), "bf16 GEMM: precision_loss (bf16) on %d of %d calls" % (named, len(v)))

# formats declared by the decorator: judged with them (declared, the format named), as a plugin's are
r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:bf16_io_gemm", "--op", "gemm",
                    "--analyze", "--json"]).stdout)
v = verdicts(r)
named = [x for x in v if x["model"] == "precision_loss" and x["parameters"].get("format") == "bf16" and
         x["parameters"].get("declared") == "bf16->bf16"]
check(r["replayed"] > 0 and len(named) == len(v),
      "declared bf16 in and out: precision_loss (bf16), declared bf16->bf16, on %d of %d calls (%s)"
      % (len(named), len(v), sorted({(x["model"], x["parameters"].get("format"), x["parameters"].get("declared"))
                                     for x in v})))
# a call is changed by the bug where it differs from what its twin without the bug gives (every call of a
# port that stores bf16 differs from golden); the twin, correct, is never a fault
twin = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:bf16_out_gemm", "--op", "gemm",
                       "--analyze", "--json"]).stdout)
v = verdicts(twin)
check(v and all(x["model"] in ("precision_loss", "accumulation_order", "exact") for x in v),
      "bf16-output port (correct): every call legitimate (%s)" % collections.Counter(x["model"] for x in v))
numbers = {(x["iteration"], x["call_index"]): (x["mismatched"], x["max_abs"]) for x in twin["calls"]}
r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:ktail_bf16_gemm", "--op", "gemm",
                    "--analyze", "--json"]).stdout)
changed = {(x["iteration"], x["call_index"]) for x in r["calls"] if x["outcome"] == "ok" and x["mismatched"] > 0
           and numbers.get((x["iteration"], x["call_index"])) != (x["mismatched"], x["max_abs"])}
legit = [c for c in r["analysis"]["calls"] if (c["iteration"], c["call_index"]) in changed
         and c["verdict"]["model"] in ("precision_loss", "accumulation_order", "exact")]
check(changed and not legit, "K tail dropped in a bf16-output port: no changed call called legitimate (%d changed, %d "
      "legitimate)" % (len(changed), len(legit)))
if torch2:
    r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:fp8_gemm", "--op", "gemm",
                        "--analyze", "--json"]).stdout)
    v = verdicts(r)
    named = [x for x in v if x["model"] == "precision_loss" and x["parameters"].get("format") == "fp8_e4m3" and
             x["parameters"].get("scale") == "per-tensor" and x["parameters"].get("declared") == "fp8_e4m3->f32"]
    check(r["replayed"] > 0 and len(named) == len(v), "declared fp8 e4m3 inputs: precision_loss (fp8_e4m3, per-tensor) "
          "on %d of %d calls (%s)" % (len(named), len(v), sorted({(x["model"], x["parameters"].get("format"))
                                                                   for x in v})))

r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:stale_row_gemm", "--op", "gemm",
                    "--analyze", "--json"]).stdout)
changed = {(x["iteration"], x["call_index"]) for x in r["calls"] if x["outcome"] == "ok" and x["mismatched"] > 0}
legit = [c for c in r["analysis"]["calls"] if (c["iteration"], c["call_index"]) in changed
         and c["verdict"]["model"] in ("precision_loss", "accumulation_order", "exact")]
check(changed and not legit, "stale-row bug: no changed call called legitimate (%d changed, %d legitimate: %s)"
      % (len(changed), len(legit), [c["verdict"]["model"] for c in legit]))

# the C++ kernels replay the same session through the LibTorch module
run([PEAT, "playback", "-s", "mlp.h5", "-k", "bf16", "--store-outputs"])
a = json.loads(run([PEAT, "analyze", "--session", "mlp.h5", "--run", "playback-bf16", "--json"]).stdout)
check(len(json.dumps(a)) > 100, "peat playback -k bf16 (C++) and peat analyze read the Python session")

# failures are outcomes, bad input one line
r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:raises", "--op", "matmul",
                    "--json"]).stdout)
check(r["failed"] == r["replayed"] > 0 and all(x["outcome"] == "raised:RuntimeError" for x in r["calls"]),
      "a candidate that raises: an outcome per call, the replay goes on")
r = json.loads(run([PEAT, "playback", "-s", "mlp.h5", "-k", "python:kernels_under_test:wrong_shape", "--op", "matmul",
                    "--json"]).stdout)
check(all(x["outcome"] == "wrong_shape" for x in r["calls"]), "another shape: outcome wrong_shape")
for kernel, text in (("python:no_such_module:f", "no module named"), ("python:kernels_under_test:nope", "has no"),
                     ("python:kernels_under_test:one_arg", "cannot take")):
    p = run([PEAT, "playback", "-s", "mlp.h5", "-k", kernel, "--op", "matmul"], code=1)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and lines[0].startswith("peat: error:") and text in lines[0], "%s: %s" % (kernel, lines))

# 2. segmentation: per-pixel cross-entropy, an auxiliary head, batch norm, bilinear upsampling
run([PEAT, "record", "-o", "seg.h5", "--every", "3", "--", PY, os.path.join(SCRIPTS, "segment.py"), "--steps", "6"])
ops = collections.Counter(c["op"] for r_ in summary("seg.h5")["runs"] for it in r_["iterations"] for c in it["calls"])
check({"nll_loss2d", "interpolate", "batch_norm", "conv2d"} <= set(ops), "segmentation ops: %s" % dict(ops))
r = json.loads(run([PEAT, "playback", "-s", "seg.h5", "-k", "golden", "--json"]).stdout)
check(r["bit_exact"] == r["replayed"] > 0, "segmentation golden replay bit-exact: %d of %d" % (r["bit_exact"], r["replayed"]))

# 3. a language model: TransformerEncoder, causal mask, tied embeddings
run([PEAT, "record", "-o", "lm.h5", "--every", "4", "--", PY, os.path.join(SCRIPTS, "fortune_lm.py"), "--steps", "8"])
r = json.loads(run([PEAT, "playback", "-s", "lm.h5", "-k", "golden", "--json"]).stdout)
check(r["bit_exact"] == r["replayed"] > 0, "LM golden replay bit-exact: %d of %d" % (r["bit_exact"], r["replayed"]))
if torch2:  # scaled_dot_product_attention reaches the recorder as one attention call
    r = json.loads(run([PEAT, "playback", "-s", "lm.h5", "-k", "python:kernels_under_test:causal_off_by_one",
                        "--op", "attention", "--analyze", "--json"]).stdout)
    v = verdicts(r)
    check(v and all(x["model"] == "index_error" for x in v), "causal mask off by one: %s" % [x["model"] for x in v])

# the optimiser's _foreach_ path (CUDA's default) after clip_grad_norm_ (whose in-place _foreach_mul_
# PyTorch 2.x does not count in version counters under a dispatch mode): replayed bit-exact, and each
# tensor stored once (a call that reads an earlier call's tensor links to it)
run([PEAT, "record", "-o", "lmf.h5", "--every", "2", "--", PY, os.path.join(SCRIPTS, "fortune_lm.py"), "--steps", "4",
     "--foreach"])
r = json.loads(run([PEAT, "playback", "-s", "lmf.h5", "-k", "golden", "--json"]).stdout)
opt = [x for x in r["calls"] if x["op"] == "optimizer"]
check(opt and r["bit_exact"] == r["replayed"], "LM with foreach AdamW: golden replay bit-exact %d of %d (%d optimiser calls)"
      % (r["bit_exact"], r["replayed"], len(opt)))


def stored_and_referenced(path):
    """Bytes of the distinct datasets under the recorded iterations, and of every reference to one
    (hard links counted each time: what a dump of each call's tensors would hold)."""
    import h5py  # Debian's, in this driver's interpreter
    seen, referenced = {}, 0
    with h5py.File(path, "r") as f:
        stack = [f["runs/golden/iterations"]]
        while stack:
            g = stack.pop()
            for k in g:
                o = g[k]
                if isinstance(o, h5py.Group):
                    stack.append(o)
                else:
                    referenced += o.nbytes
                    seen[h5py.h5o.get_info(o.id).addr] = o.nbytes
    return sum(seen.values()), referenced


stored, referenced = stored_and_referenced(os.path.join(WORK, "lmf.h5"))
check(stored < 0.75 * referenced, "tensors stored once: %.1f MB stored for %.1f MB of call tensors"
      % (stored / 1e6, referenced / 1e6))

# Ctrl-C in the terminal: the script stops, the session keeps the iterations recorded before it
p = subprocess.Popen([PEAT, "record", "-o", "int.h5", "--", PY, os.path.join(SCRIPTS, "fortune_lm.py"), "--steps", "100000"],
                     cwd=WORK, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
for line in p.stdout:  # the script prints every 4th step
    if line.startswith("step 8 "):
        break
os.killpg(p.pid, signal.SIGINT)
out, err = p.communicate(timeout=300)
run([PEAT, "info", "--verify", "int.h5"])
g = [r_ for r_ in summary("int.h5")["runs"] if r_["name"] == "golden"][0]
check(p.returncode == 130 and g["status"] == "cancelled" and sum(1 for it in g["iterations"] if it["complete"]) >= 8,
      "Ctrl-C: exit %d, run %s with %d complete iterations" % (p.returncode, g["status"],
                                                                sum(1 for it in g["iterations"] if it["complete"])))

# 4. autocast mixed precision: bf16 GEMMs recorded in bf16
run([PEAT, "record", "-o", "amp.h5", "--", PY, os.path.join(SCRIPTS, "amp_mlp.py")])
s = summary("amp.h5")
dts = {t[1] for r_ in s["runs"] for it in r_["iterations"] for c in it["calls"] if c["op"] == "linear" for t in c["tensors"]}
check("bfloat16" in dts, "autocast GEMMs recorded in bfloat16: %s" % dts)
r = json.loads(run([PEAT, "playback", "-s", "amp.h5", "-k", "golden", "--json"]).stdout)
check(r["bit_exact"] == r["replayed"] > 0, "autocast golden replay bit-exact: %d of %d" % (r["bit_exact"], r["replayed"]))

# 5. runtime FI in the user's loop: every 3rd GEMM through the bf16 candidate, beside a golden run
run([PEAT, "record", "-o", "fi.h5", "--every", "100", "--swap", "gemm=python:kernels_under_test:bf16_gemm",
     "--swap-every", "3", "--", PY, os.path.join(SCRIPTS, "fashion_mlp.py"), "--steps", "10"])
code = ("import json, peat._core as c; r = c.Reader('fi.h5'); print(json.dumps([r.table('golden', 'curve'), "
        "r.table('runtime-fi-bf16_gemm', 'curve'), r.table('runtime-fi-bf16_gemm', 'call_errors')]))")
g, f, e = json.loads(run([PY, "-c", code]).stdout)
check(len(g["loss"]) == len(f["loss"]) == 10 and g["loss"][0] == f["loss"][0], "both loss curves, same first loss")
check(len(e["op"]) > 0 and all(o == "ok" for o in e["outcome"]) and max(e["mismatched"]) > 0,
      "swapped calls recorded with their errors: %d" % len(e["op"]))

# 6. a script that raises keeps what it recorded
p = run([PEAT, "record", "-o", "fail.h5", "--", PY, os.path.join(SCRIPTS, "fashion_mlp.py"), "--steps", "20",
         "--fail-at", "7"], code=1)
check("planted failure at step 7" in p.stderr, "the script's traceback passes through")
run([PEAT, "info", "--verify", "fail.h5"])
g = [r_ for r_ in summary("fail.h5")["runs"] if r_["name"] == "golden"][0]
check(g["status"] == "failed" and sum(1 for it in g["iterations"] if it["complete"]) >= 7,
      "failed run keeps its %d complete iterations" % sum(1 for it in g["iterations"] if it["complete"]))

# 8. a GradScaler that skips a step (an inf in one batch): still one iteration per step, the loss
# curve unscaled; and the event stream the workbench reads (PEAT_EVENTS=jsonl, docs/events.md)
if torch2:
    env["PEAT_EVENTS"] = "jsonl"
    p = run([PEAT, "record", "-o", "gs.h5", "--", PY, os.path.join(SCRIPTS, "scaler_skip.py")])
    del env["PEAT_EVENTS"]
    events = [json.loads(l) for l in p.stderr.splitlines() if l.startswith("{")]
    kinds = collections.Counter(e["event"] for e in events)
    check(kinds["progress"] >= 2 and kinds["loss"] >= 1 and kinds["stored"] == 1 and
          all(e["v"] == 1 and e.get("stage") == "record" for e in events if e["event"] == "progress"),
          "events: %s" % dict(kinds))
    g = [r_ for r_ in summary("gs.h5")["runs"] if r_["name"] == "golden"][0]
    code = "import json, peat._core as c; print(json.dumps(c.Reader('gs.h5').table('golden', 'curve')))"
    curve = json.loads(run([PY, "-c", code]).stdout)
    check(len(g["iterations"]) == 6 and g["attributes"].get("skipped_steps") == "1",
          "GradScaler: 6 iterations for 6 steps, 1 skipped step (%d, %s)" % (len(g["iterations"]), g["attributes"].get("skipped_steps")))
    finite = [v for v in curve["loss"] if v == v]
    check(len(curve["loss"]) == 6 and finite and max(finite) < 10, "loss curve unscaled: %s" % ["%.3f" % v for v in curve["loss"]])

# 7. TorchScript saved by PyTorch 2.x through the C++ `--model` path: trains, or one line naming the op
if torch2:
    code = ("import torch, torch.nn as nn, torch.nn.functional as F\n"
            "class MLP(nn.Module):\n"
            "    def __init__(s):\n        super().__init__(); s.a = nn.Linear(784, 32); s.b = nn.Linear(32, 10)\n"
            "    def forward(s, x):\n        return s.b(F.relu(s.a(x.flatten(1))))\n"
            "class Att(nn.Module):\n"
            "    def __init__(s):\n        super().__init__(); s.q = nn.Linear(16, 48); s.o = nn.Linear(16, 10)\n"
            "    def forward(s, x):\n"
            "        q, k, v = s.q(x.reshape(x.shape[0], -1, 16)).chunk(3, -1)\n"
            "        return s.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).mean(1))\n"
            "for name, m in (('mlp2.pt', MLP()), ('att2.pt', Att())):\n"
            "    torch.jit.trace(m, torch.randn(4, 1, 28, 28)).save(name)\n")
    run([PY, "-c", code])
    p = run([PEAT, "train", "--model", "mlp2.pt", "--data", "fashion-mnist", "--iterations", "3", "-o", "ts2.h5"])
    check("trained mlp2.pt" in p.stdout, "a TorchScript MLP traced by PyTorch 2.x trains through --model")
    p = run([PEAT, "train", "--model", "att2.pt", "--data", "fashion-mnist", "--iterations", "3", "-o", "ts2a.h5"], code=1)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and lines[0].startswith("peat: error:") and "aten::scaled_dot_product_attention" in lines[0]
          and "peat record" in lines[0], "2.x TorchScript with SDPA refused in one line: %s" % lines)

if failures:
    raise SystemExit("%d checks failed: %s" % (len(failures), failures))
print("all checks passed")
