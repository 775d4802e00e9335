#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The op-wise candidates (issue 31) over the recorded calls of models written elsewhere, with the
detector's verdicts counted per op and candidate, and the slot's cost with every op routed.

    python3 tests/bench/op_candidates_bench.py BUILD_DIR [--iterations 10]

1. GPT-style model (6 pre-norm nn.TransformerEncoderLayer blocks, width 256, context 128, dropout
   0.1, Adam) and torchvision's VisionTransformer (6 layers, width 256, SGD), exported by Debian's
   PyTorch at full size: profile 3 iterations recording iteration 2 with --record-ops all, then a
   playback of every op candidate of `peat kernels` over the calls of its op (--store-outputs) and
   `peat detect --session` on the replay: the verdicts per (model, candidate, op, variant).
   The ViT a second time with --attention fused: its attention as one call, for the attention candidates.
2. The slot's cost: `peat train` of the GPT through the slot (every op routed) against the same
   module, data and loop left on ATen (PEAT_BENCH_NO_SLOT=1), user CPU seconds (best of 2; wall
   time on this shared machine is dominated by other work).
Prints markdown tables for docs/benchmarks.md. The verdicts depend on the detector's rules, which
were tuned on the project's own corpora: read them as a measurement on these two models only.
"""
import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

CANDIDATES = ["softmax-exp2", "softmax-poly", "softmax-poly:degree=5", "softmax-online", "softmax-bf16",
              "softmax-fp16", "softmax-nomax", "attention-flash", "attention-causal-off",
              "layernorm-onepass", "layernorm-fp16stats", "layernorm-eps-outside", "layernorm-bessel", "rmsnorm",
              "gelu-tanh", "adam-bf16", "adam-eps-inside", "embedding-atomic", "dropout-reuse", "grad-unscaled"]
LEGITIMATE = {"softmax-exp2", "softmax-poly", "softmax-poly:degree=5", "softmax-online", "softmax-bf16",
              "softmax-fp16", "attention-flash", "layernorm-onepass",
              "layernorm-fp16stats", "gelu-tanh", "adam-bf16", "adam-eps-inside", "embedding-atomic"}
VARIANTS = {0: "forward", 1: "grad_input", 2: "grad_weight", 3: "grad_bias", 4: "update"}


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr[-1500:]}")
    return p


def cpu_seconds(cmd, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()
    peat = os.path.join(args.build, "bin", "peat")
    work = tempfile.mkdtemp(prefix="peat-op-bench-")
    run([sys.executable, os.path.join(HERE, "..", "models", "export_models.py"), work, "--size", "full",
         "--models", "gpt,vit"])
    from file_models_data import lm_tokens
    tokens = os.path.join(work, "tokens.h5")
    lm_tokens(tokens, context=128, train=2048, test=256, vocabulary=96)
    models = {"gpt": ["--model", os.path.join(work, "gpt.pt"), "--data", tokens, "--batch", "8"],
              "vit": ["--model", os.path.join(work, "vit.pt"), "--data", "fashion-mnist:3x64x64", "--batch", "8"],
              # torchvision's ViT has no attention dropout: its attention fuses into one call per layer
              "vit (--attention fused)": ["--model", os.path.join(work, "vit.pt"), "--data", "fashion-mnist:3x64x64",
                                          "--batch", "8", "--attention", "fused"]}

    print("| model | candidate | op calls replayed | verdicts (per op and variant) |")
    print("|---|---|---:|---|")
    for name, common in models.items():
        session = os.path.join(work, f"{name.split()[0]}-{len(common)}.h5")
        run([peat, "profile", *common, "-n", "3", "--record-every", "2", "--record-ops", "all", "-o", session])
        import h5py
        variants = {}
        with h5py.File(session, "r") as f:
            def visit(path, obj):
                if isinstance(obj, h5py.Group) and "op" in obj.attrs:
                    variants[path] = int(obj.attrs.get("param.variant", 0))
            f["runs/golden"].visititems(visit)
        for k in CANDIDATES:
            run_name = "k-" + k.replace(":", "-").replace("=", "")
            r = subprocess.run([peat, "playback", "-s", session, "-k", k, "--store-outputs", "--name", run_name,
                                "--json"], capture_output=True, text=True)
            if r.returncode != 0 and ("can be replayed" in r.stderr or "no call" in r.stderr or "no recorded" in r.stderr):
                continue  # the model has no call of this candidate's op (the ViT trains with SGD, not Adam)
            if r.returncode != 0:
                raise SystemExit(f"playback {k} failed: {r.stderr[-1500:]}")
            p = json.loads(r.stdout)
            if p["replayed_calls"] == 0:
                continue
            d = json.loads(run([peat, "detect", "-s", session, "--run", run_name, "--json"]).stdout)
            counts = collections.Counter()
            for c in d.get("calls", []):
                if c.get("verdict", "exact") == "exact":
                    continue  # a variant the candidate leaves to golden
                op = f"{c.get('op', '?')} {VARIANTS.get(variants.get(c['call']), '?')}"
                counts[(op, c["verdict"])] += 1
            text = ", ".join(f"{op}: {v} {n}" for (op, v), n in sorted(counts.items())) or "all exact"
            label = k + (" (legitimate)" if k in LEGITIMATE else " (planted bug)")
            print(f"| {name} | {label} | {p['replayed_calls']} | {text} |")

    gpt = models["gpt"] + ["-n", str(args.iterations)]
    out = os.path.join(work, "t.h5")
    plain = min(cpu_seconds([peat, "train", *gpt, "-o", out, "--force"], {"PEAT_BENCH_NO_SLOT": "1"}) for _ in range(2))
    slot = min(cpu_seconds([peat, "train", *gpt, "-o", out, "--force"]) for _ in range(2))
    print()
    print("| measure | result | target |")
    print("|---|---|---|")
    print(f"| GPT 6x256 batch 8, {args.iterations} iterations, every op through the slot vs plain LibTorch "
          f"(user CPU, best of 2) | {slot:.2f} s vs {plain:.2f} s: **{slot / plain:.3f}x** | <= 1.15x |")


if __name__ == "__main__":
    main()
