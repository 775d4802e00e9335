#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Whole-process start-up cost of `peat` commands: median wall time and peak RSS over N runs.
Shows that the torch-free commands stay in milliseconds, what the probe of a session costs (a
helper process) against a session a previous probe passed (core/store/probe.h), and what loading
LibTorch costs. Target (issue 15): `peat info` on a missing path spawns nothing, and on a session
it knows, under 50 ms.

usage: tests/bench/startup.py BUILD_DIR [RUNS]   (after tools/demo.sh, demo/lenet.h5 is timed too)"""
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

# the probe cache in a scratch place, made once by a first `peat info` on a file old enough
cache = os.path.join(build, "tests", "startup-probe-cache")
if os.path.exists(cache):
    os.remove(cache)
old = time.time() - 10
os.utime(sample, (old, old))  # changes ctime now: wait until it is old enough to be cached
time.sleep(2.5)
subprocess.run([peat, "info", sample], env=dict(os.environ, PEAT_PROBE_CACHE=cache), stdout=subprocess.DEVNULL,
               check=True)
cached = dict(os.environ, PEAT_PROBE_CACHE=cache)
cold = dict(os.environ, PEAT_PROBE_CACHE="off")

commands = [
    ("true (baseline)", ["/bin/true"], None, 0),
    ("peat --version", [peat, "--version"], None, 0),
    ("peat info sample.h5 (probe passed before)", [peat, "info", sample], cached, 0),
    ("peat info sample.h5 (probed now)", [peat, "info", sample], cold, 0),
    ("peat info missing.h5 (no process started)", [peat, "info", sample + ".missing"], cold, 1),
]
demo = os.path.join(os.path.dirname(os.path.abspath(build)), "demo", "lenet.h5")
if os.path.exists(demo):
    os.utime(demo, (old, old))
    time.sleep(2.5)
    subprocess.run([peat, "info", demo], env=cached, stdout=subprocess.DEVNULL, check=True)
    commands += [
        ("peat info demo/lenet.h5 (probe passed before)", [peat, "info", demo], cached, 0),
        ("peat info demo/lenet.h5 (probed now)", [peat, "info", demo], cold, 0),
    ]
commands += [
    ("peat env --no-torch (probes CUDA/HIP modules)", [peat, "env", "--no-torch"], None, 0),
    ("peat env (loads LibTorch)", [peat, "env"], None, 0),
]


def measure(argv, env, expected):
    times, rss = [], []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        rss.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != expected:
            sys.exit(f"{argv} exited {os.waitstatus_to_exitcode(status)}, not {expected}")
    return statistics.median(times), statistics.median(rss)


results = [(name, *measure(argv, env, expected)) for name, argv, env, expected in commands]
info_time = results[2][1]
print(f"{'command':48} {'median ms':>10} {'peak RSS MiB':>13} {'x info':>7}")
for name, t, rss in results:
    print(f"{name:48} {t * 1000:10.1f} {rss:13.1f} {t / info_time:7.1f}")
print(f"({runs} runs each, {os.cpu_count()} cores)")
