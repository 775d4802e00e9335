#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whole-process start-up cost of `peat` commands: median wall time and peak RSS over N runs.
Shows that the torch-free commands stay in milliseconds and what loading LibTorch costs.

usage: tests/bench/startup.py BUILD_DIR [RUNS]"""
import os
import statistics
import subprocess
import sys
import time

build = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
peat = os.path.join(build, "bin", "peat")
sample = os.path.join(build, "tests", "fixtures", "sample.h5")
if not os.path.exists(sample):
    subprocess.run([os.path.join(build, "bin", "peat-sample-session"), os.path.dirname(sample)], check=True)

commands = [
    ("true (baseline)", ["/bin/true"]),
    ("peat --version", [peat, "--version"]),
    ("peat info sample.h5", [peat, "info", sample]),
    ("peat env --no-torch (probes CUDA/HIP modules)", [peat, "env", "--no-torch"]),
    ("peat env (loads LibTorch)", [peat, "env"]),
]


def measure(argv):
    times, rss = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        rss.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{argv} failed")
    return statistics.median(times), statistics.median(rss)


results = [(name, *measure(argv)) for name, argv in commands]
info_time = results[2][1]
print(f"{'command':48} {'median ms':>10} {'peak RSS MiB':>13} {'x info':>7}")
for name, t, rss in results:
    print(f"{name:48} {t * 1000:10.1f} {rss:13.1f} {t / info_time:7.1f}")
print(f"({runs} runs each, {os.cpu_count()} cores)")
