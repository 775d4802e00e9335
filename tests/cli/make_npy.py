#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the .npy fixtures of the `peat analyze` tests with stock NumPy. usage: make_npy.py DIR"""
import os
import sys

import numpy as np

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(1)
g = rng.standard_normal((8, 16)).astype(np.float32)
c = ((g.view(np.uint32) + 0x7FFF + ((g.view(np.uint32) >> 16) & 1)) & 0xFFFF0000).view(np.float32)  # bf16 RNE
np.save(f"{d}/g.npy", g)
np.save(f"{d}/c.npy", c)
np.save(f"{d}/c_shape.npy", c.reshape(16, 8))
np.save(f"{d}/c_half.npy", c.astype(np.float16))
np.save(f"{d}/empty.npy", np.zeros((0,), dtype=np.float32))
np.save(f"{d}/empty2.npy", np.zeros((0,), dtype=np.float32))
np.save(f"{d}/nan.npy", np.full((8, 16), np.nan, dtype=np.float32))
np.save(f"{d}/big.npy", g.astype(">f4"))
np.save(f"{d}/fortran.npy", np.asfortranarray(g))
np.save(f"{d}/object.npy", np.array([1.0, "x"], dtype=object), allow_pickle=True)
