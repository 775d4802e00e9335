#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The analyzer's standard report written in vectorised NumPy: the speed reference for `peat analyze`
(and a cross-check of its numbers). usage: analyze_reference.py GOLDEN.npy CANDIDATE.npy [TILE]"""
import json
import sys

import numpy as np

g = np.load(sys.argv[1], mmap_mode="r")
c = np.load(sys.argv[2], mmap_mode="r")
tile = int(sys.argv[3]) if len(sys.argv) > 3 else 16
gb = g.view(np.uint32).ravel()
cb = c.view(np.uint32).ravel()
n = gb.size
cols = g.shape[-1] if g.ndim else 1
rows = n // cols

mis = gb != cb
g_nan, c_nan = np.isnan(g).ravel(), np.isnan(c).ravel()
g_inf, c_inf = np.isinf(g).ravel(), np.isinf(c).ravel()
g_fin, c_fin = ~(g_nan | g_inf), ~(c_nan | c_inf)
both = mis & g_fin & c_fin
d = np.abs(c.ravel().astype(np.float64) - g.ravel().astype(np.float64))
d = np.where(both, d, 0.0)
rel = d / np.maximum(np.abs(g.ravel().astype(np.float64)), 2.0**-126)
gf = g.ravel()[g_fin].astype(np.float64)
rms_g = float(np.sqrt(np.mean(gf * gf))) if gf.size else 0.0
errs = d[both].astype(np.float32)
pct = {}
if errs.size:
    s = np.sort(errs)
    for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999")):
        pct[name] = float(s[min(errs.size - 1, int(np.ceil(q * errs.size)) - 1)])
x = (gb ^ cb)[mis]
bits = [(int(np.count_nonzero((x >> b) & 1))) for b in range(32)]
sign_only = int(np.count_nonzero(x == 0x80000000))
exponent = int(np.count_nonzero(x & 0x7F800000))
line = lambda b: np.where(b >> 31, -(b & 0x7FFFFFFF).astype(np.int64), b.astype(np.int64))
nan_pair = mis & (g_nan | c_nan)
ulp = np.abs(line(gb) - line(cb))[mis & ~nan_pair]
ulp_hist = np.bincount(np.floor(np.log2(ulp)).astype(np.int64), minlength=33) if ulp.size else np.zeros(33)
nz = d[both & (d > 0)]
abs_hist = np.bincount((np.floor(np.log2(nz)).astype(np.int64) + 160), minlength=291) if nz.size else np.zeros(291)
m2 = mis.reshape(rows, cols)
row_counts = m2.sum(axis=1)
col_counts = m2.sum(axis=0)
tr, tc = -(-rows // tile), -(-cols // tile)
tiles = np.zeros((tr * tile, tc * tile), dtype=np.int64)
tiles[:rows, :cols] = m2
tile_counts = tiles.reshape(tr, tile, tc, tile).sum(axis=(1, 3))
idx = np.flatnonzero(mis)
gaps = np.diff(idx)
starts = np.flatnonzero(np.diff(np.concatenate(([0], mis.astype(np.int8), [0]))) == 1)
ends = np.flatnonzero(np.diff(np.concatenate(([0], mis.astype(np.int8), [0]))) == -1)
run_lengths = ends - starts
dominant = int(np.bincount(gaps[gaps <= 4096]).argmax()) if gaps.size else 0
worst = int(np.argmax(d)) if both.any() else 0
print(json.dumps({
    "elements": int(n), "mismatched": int(mis.sum()), "identical": int(n - mis.sum()),
    "newly_non_finite": int(np.count_nonzero(mis & g_fin & ~c_fin)),
    "max_abs": float(d.max()), "mean_abs": float(d.sum() / n), "rms_abs": float(np.sqrt((d * d).sum() / n)),
    "max_rel": float(rel[both].max()) if both.any() else 0.0, "mean_rel": float(rel[both].sum() / n),
    "golden_rms": rms_g, **pct, "bit_mismatch": bits, "sign_only": sign_only, "exponent": exponent,
    "log2_ulp_hist": [int(v) for v in ulp_hist[:33]], "max_abs_index": worst,
    "runs": int(run_lengths.size), "longest_run": int(run_lengths.max()) if run_lengths.size else 0,
    "dominant_gap": dominant, "tiles_hit": int(np.count_nonzero(tile_counts)),
    "rows_hit": int(np.count_nonzero(row_counts)), "cols_hit": int(np.count_nonzero(col_counts)),
}))
