#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Model files at full size (issue 16's speed targets), whole processes, one run on this machine.

    python3 tests/bench/models_bench.py BUILD_DIR [--iterations 30]

1. torchvision ResNet-18 (3x64x64, batch 16, Fashion-MNIST resized): plain LibTorch (the same
   module, data and loop, graph left on ATen: PEAT_BENCH_NO_SLOT=1) against training through the
   slot, and recording every 10th iteration against not recording. Best of 2.
2. GPT-style model (6 layers, width 256, context 128, Debian's fortunes text): profile, then
   playback of every recorded linear call through bf16, tf32 and splitk with the detector's
   verdicts (peat detect) counted per kernel.
Prints a markdown table for docs/benchmarks.md.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--only", default="resnet18,gpt,full",
                    help="parts to run: resnet18 (the slot's and recording's cost), gpt (K = 1024 and the detector's "
                         "verdicts on its linear and matmul calls), full (full-size MobileNetV2 and ViT)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    peat = os.path.join(args.build, "bin", "peat")
    work = tempfile.mkdtemp(prefix="peat-models-bench-")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "export_models.py"), work, "--size", "full",
                    "--models", ",".join(m for part, models in (("resnet18", ["resnet18"]), ("gpt", ["gpt"]),
                                                                    ("full", ["mobilenet_v2", "vit"]))
                                         if part in only for m in models)], check=True, capture_output=True)

    def timed(cmd, env=None, repeat=2):
        best = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr[-1500:]}")
            best = dt if best is None else min(best, dt)
        return best, p

    rows = []
    if "resnet18" in only:
        r18 = os.path.join(work, "resnet18.pt")
        common = ["--model", r18, "--data", "fashion-mnist:3x64x64", "--batch", "16", "-n", str(args.iterations)]
        out = os.path.join(work, "r18.h5")
        plain, _ = timed([peat, "train", *common, "-o", out, "--force"], {"PEAT_BENCH_NO_SLOT": "1"})
        slot, _ = timed([peat, "train", *common, "-o", out, "--force"])
        rec, p = timed([peat, "profile", *common, "--record-every", "10", "-o", out, "--force", "--json"])
        prof = json.loads(p.stdout)
        rows += [("ResNet-18 3x64x64 batch 16, %d iterations: slot vs plain LibTorch" % args.iterations,
                 f"{slot:.1f} s vs {plain:.1f} s: **{slot / plain:.3f}x**", "<= 1.10x"),
                ("the same, recording every 10th iteration vs not recording",
                 f"{rec:.1f} s vs {slot:.1f} s: **{rec / slot:.3f}x**", "<= 1.15x"),
                ("recorded per recorded iteration / session file",
                 f"{prof['recorded_bytes'] / prof['recorded_iterations'] / 2**20:.0f} MiB / {prof['file_bytes'] / 2**20:.0f} MiB", "")]
    if "gpt" in only:
        # GPT: K = 1024 in the MLP's second linear (4 x 256)
        from file_models_data import lm_tokens
        data = os.path.join(work, "tokens.h5")
        lm_tokens(data, context=128, train=2048, test=256, vocabulary=96)
        gpt = os.path.join(work, "gpt.pt")
        session = os.path.join(work, "gpt.h5")
        t, p = timed([peat, "profile", "--model", gpt, "--data", data, "--batch", "8", "-n", "3", "--record-every", "2",
                      "--record-ops", "linear,matmul", "-o", session, "--force", "--json"], repeat=1)
        gp = json.loads(p.stdout)
        rows.append(("GPT 6x256, context 128, batch 8: profile of 3 iterations recording 2",
                     f"{t:.1f} s, {gp['recorded_calls']} calls", ""))
        inspect = json.loads(subprocess.run([peat, "models", "--inspect", gpt, "--input-shape", "1,128", "--task", "lm",
                                             "--json"], capture_output=True, text=True, check=True).stdout)
        kmax = max(s.get("reduction", 0) for s in inspect["sites"])
        rows.append(("GPT: largest GEMM reduction K", str(kmax), ">= 1024"))
        for op in ("linear", "matmul"):  # matmul: the attention scores and values, batched over batch and heads
            for kernel in ("bf16", "tf32", "splitk"):
                t, p = timed([peat, "playback", "-s", session, "-k", kernel, "--op", op, "--store-outputs", "--name",
                              f"{kernel}-{op}", "--json"], repeat=1)
                pb = json.loads(p.stdout)
                d = subprocess.run([peat, "detect", "-s", session, "--run", f"{kernel}-{op}", "--json"], capture_output=True,
                                   text=True, check=True)
                calls = json.loads(d.stdout)["calls"]
                verdicts = collections.Counter(
                    c["verdict"] + (f" ({c['parameters']['format']})" if c.get("parameters", {}).get("format") else "")
                    for c in calls)
                rows.append((f"GPT: playback of {pb['replayed_calls']} {op} calls through {kernel}, detector verdicts",
                             f"{t:.1f} s; " + ", ".join(f"{k} {n}" for k, n in verdicts.most_common()), ""))
    if "full" in only:
        # full-size MobileNetV2 (3x64x64) and ViT (6 layers, 256 wide, patch 8 at 64x64): the three PEAT
        # commands work at size (a few iterations, batch 8)
        for name in ("mobilenet_v2", "vit"):
            model = os.path.join(work, f"{name}.pt")
            session = os.path.join(work, f"{name}.h5")
            base = ["--model", model, "--data", "fashion-mnist:3x64x64", "--batch", "8"]
            t1, p = timed([peat, "profile", *base, "-n", "3", "--record-every", "2", "-o", session, "--force", "--json"], repeat=1)
            prof = json.loads(p.stdout)
            t2, p = timed([peat, "playback", "-s", session, "-k", "bf16", "--resume", "2", "--json"], repeat=1)
            pb = json.loads(p.stdout)
            t3, p = timed([peat, "runtime-fi", *base, "-n", "3", "-k", "tf32", "--every", "10", "--op", "all", "-o",
                           os.path.join(work, f"{name}-fi.h5"), "--force", "--json"], repeat=1)
            fi = json.loads(p.stdout)
            rows.append((f"{name} (full size, 3x64x64, batch 8): profile 3 iterations / playback bf16 + resume 2 / runtime-FI 3",
                         f"{t1:.1f} s ({prof['recorded_calls']} calls, {prof['parameters']} parameters) / {t2:.1f} s "
                         f"({pb['replayed_calls']} calls) / {t3:.1f} s ({fi['substituted_calls']} substituted)", "works"))
    print("| measure | result | target |\n|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
