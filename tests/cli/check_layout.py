#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a sample session with stock tools: `h5dump -H` shows the documented layout
(docs/session-format.md), and h5py reads every tensor, attribute and table back."""
import math
import subprocess
import sys

import h5py
import numpy as np

path = sys.argv[1]

# --- h5dump -H: the documented groups and attributes, no plugins needed -------------------------
dump = subprocess.run(["h5dump", "-H", path], check=True, capture_output=True, text=True).stdout
expected = [
    'ATTRIBUTE "format"', 'ATTRIBUTE "schema_version"', 'ATTRIBUTE "created"',
    'GROUP "provenance"', 'ATTRIBUTE "tool_version"', 'ATTRIBUTE "git_commit"', 'ATTRIBUTE "seed"',
    'ATTRIBUTE "libtorch_version"', 'ATTRIBUTE "hdf5_version"',
    'GROUP "runs"', 'GROUP "golden"', 'ATTRIBUTE "status"', 'ATTRIBUTE "iterations_complete"',
    'GROUP "iterations"', 'GROUP "000002"', 'ATTRIBUTE "complete"', 'GROUP "calls"', 'GROUP "000003"',
    'ATTRIBUTE "layer"', 'ATTRIBUTE "op"', 'ATTRIBUTE "phase"', 'ATTRIBUTE "call_index"',
    'DATASET "input_0"', 'DATASET "output_fp16"', 'DATASET "output_bf16"',
    'GROUP "checkpoints"', 'GROUP "parameters"', 'GROUP "optimizer"', 'DATASET "fc0.weight"',
    'GROUP "reports"', 'GROUP "call-000001-000002"', 'DATASET "verdicts"',
    'GROUP "save"', 'GROUP "fc0-bits"',
]
missing = [e for e in expected if e not in dump]
assert not missing, f"h5dump -H lacks {missing}"
assert "H5T_IEEE_F32LE" in dump and "DATASPACE  SIMPLE { ( 64, 128 ) / ( 64, 128 ) }" in dump

# --- h5py ------------------------------------------------------------------------------------
def sample_value(salt, i):
    return np.float32(math.sin(0.37 * i + salt) * (1.0 + salt))

with h5py.File(path, "r") as f:
    assert f.attrs["format"] == "peat-session", f.attrs["format"]
    assert int(f.attrs["schema_version"]) == 1
    prov = f["provenance"].attrs
    assert int(prov["seed"]) == 42 and prov["model"] == "format-sample"
    run = f["runs/golden"]
    assert run.attrs["status"] == "complete" and int(run.attrs["iterations_complete"]) == 3
    call = run["iterations/000002/calls/000001"]
    assert call.attrs["layer"] == "fc1" and call.attrs["op"] == "relu" and call.attrs["phase"] == "forward"
    x = call["input_0"]
    assert x.shape == (64, 128) and x.dtype == np.float32
    assert x.chunks is not None and x.compression == "gzip" and x.shuffle, (x.chunks, x.compression, x.shuffle)
    salt = 21
    want = np.array([sample_value(salt, i) for i in range(64 * 128)], dtype=np.float32).reshape(64, 128)
    assert np.array_equal(x[...], want)
    half = call["output_fp16"]
    assert half.dtype == np.float16, half.dtype
    out = np.array([sample_value(salt + 100, i) for i in range(64 * 32)], dtype=np.float32).reshape(64, 32)
    assert np.array_equal(half[...], out.astype(np.float16))  # numpy rounds to nearest even too
    bf = call["output_bf16"]
    assert bf.dtype == np.uint16 and bf.attrs["dtype"] == "bfloat16"
    widened = (bf[...].astype(np.uint32) << 16).view(np.float32)
    assert np.all(np.abs(widened - out) <= np.abs(out) * 2.0**-8)
    verdicts = run["verdicts"][...]
    assert verdicts.dtype.names == ("call", "model", "confidence", "evidence"), verdicts.dtype.names
    assert verdicts[0]["model"].decode() == "precision_loss" and verdicts[1]["confidence"] == 0.75
    report = run["reports/call-000001-000002"]
    assert report.attrs["abs_error_max"] == 0.125
    assert list(report["log2_abs_error_hist"][...]) == [0, 3, 17, 40, 12, 1]
    cp = run["checkpoints/000002"]
    assert cp["parameters/fc0.weight"].shape == (32, 128)
    assert f["save/fc0-bits/bit_class"].dtype == np.uint8

print("layout ok:", path)
