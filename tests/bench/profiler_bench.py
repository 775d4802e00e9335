#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Profiler benchmarks, whole-process numbers from `peat ... --json`, all in one run:
  1. golden LeNet training with recording every 10th iteration against plain training (target <= 1.15x);
  2. recorded bytes against a full dump of every op in every iteration, per zoo model, at default
     settings (target <= 5%);
  3. playback speed: recorded LeNet calls replayed per second through the bf16 candidate (target >= 200).
usage: tests/bench/profiler_bench.py BUILD_DIR [WORKDIR]"""
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="peat-bench-")
os.makedirs(work, exist_ok=True)
peat = os.path.join(build, "bin", "peat")


def run(*args):
    out = subprocess.run([peat, *args, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def best_seconds(args, repeats=3):
    return min(run(*args)["seconds"] for _ in range(repeats))


its = "300"
common = ["--model", "lenet", "--iterations", its, "--eval-batches", "1", "--force"]
plain = best_seconds(["train", *common, "--out", f"{work}/plain.h5"])
print(f"1. LeNet, {its} iterations, best of 3: plain training {plain:.2f} s")
for level in (0, 1, 4):  # 0 is the default
    recorded = best_seconds(["profile", *common, "--record-every", "10", "--compression", str(level),
                             "--out", f"{work}/rec10.h5"])
    print(f"   recording every 10th, deflate level {level}: {recorded:.2f} s, ratio {recorded / plain:.3f}")
recorded = run("profile", *common, "--record-every", "10", "--out", f"{work}/rec10.h5")

print("2. storage at default settings (record every 50th iteration, GEMM ops, forward and backward):")
for model, n in (("mlp", 200), ("lenet", 200), ("resnet", 100), ("chargpt", 100)):
    r = run("profile", "--model", model, "--iterations", str(n), "--eval-batches", "1", "--force",
            "--out", f"{work}/{model}.h5")
    print(f"   {model:8} {n:4} iterations: recorded {r['recorded_bytes'] / 2**20:8.2f} MiB, full dump "
          f"{r['full_dump_bytes'] / 2**20:9.1f} MiB, ratio {100 * r['storage_ratio']:.2f}%, "
          f"stored once {r['stored_bytes'] / 2**20:.2f} MiB, file {r['file_bytes'] / 2**20:.2f} MiB")

p = run("playback", "--session", f"{work}/rec10.h5", "--kernel", "bf16")
print(f"3. playback: {p['replayed_calls']} recorded LeNet calls through bf16 at "
      f"{p['calls_per_second']:.0f} calls/s (one core)")
