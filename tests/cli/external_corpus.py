#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# `peat detect-eval --external` on an external corpus: golden/candidate pairs made at test time by
# kernels this project did not write ("library kernels": NumPy's and PyTorch's own GEMM, conv2d,
# softmax, layer norm, sum), a separate "own injector" part where this script injects faults into such candidates, the
# "families" part (issue 32): fused attention, fused optimisers, norms, fast math, weight-only and
# fp8 quantisation, and the overflow, masking, scale and upset bugs of such kernels, and the "unseen"
# part: families chosen after issue 32's rules were written (Kahan sums, TF32 by truncation, int8
# GEMMs, a fused bias + GELU epilogue, a transposed tile write, atomic split-K). Made by NumPy,
# PyTorch or small references written here (one pair may give several candidates: replays of one
# input). The pairs go to WORKDIR/external-S as .npy files with labels.tsv, which `peat detect-eval
# --external DIR` reads (on .npy files it has no GEMM operands, so the output-only rules decide).
# Exit 1 if any legitimate pair gets a fault verdict (anything but exact, precision_loss,
# accumulation_order; unknown counts), if a part is below 97% top-1 (a part of fewer than 20 pairs:
# below all of them), or if detect-eval fails.
# usage: external_corpus.py PEAT WORKDIR [--json] [--seed S]
import json, os, subprocess, sys

import numpy as np
import torch

LEGIT = {"exact", "precision_loss", "accumulation_order"}
f32, f16 = np.float32, np.float16


SEED_OFFSET = 0  # --seed S: another draw of every pair (the rules must not depend on one draw)


def rng(seed):
    return np.random.default_rng(seed + 1000 * SEED_OFFSET)


def normal(r, *shape):
    return r.standard_normal(shape).astype(f32)


def tf32(x):
    """Rounds float32 to TF32 (10 mantissa bits) with round-to-nearest-even on the bit pattern."""
    b = np.ascontiguousarray(x, dtype=f32).view(np.uint32).astype(np.uint64)
    b = (b + 0x0FFF + ((b >> 13) & 1)) & ~np.uint64(0x1FFF)
    return b.astype(np.uint32).view(f32)


def half(x):
    return x.astype(f16).astype(f32)


def fp16_blocked(a, b, block=16):
    """fp16 inputs; each K-block's partial sum is formed in fp32, rounded to fp16 and added to an
    fp16 accumulator (NumPy rounds every fp16 add back to fp16)."""
    a, b = half(a), half(b)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=f16)
    for k in range(0, a.shape[1], block):
        acc = acc + (a[:, k:k + block] @ b[k:k + block]).astype(f16)
    return acc.astype(f32)


def reversed_k(a, b):
    """Sequential fp32 accumulation of the rank-1 products, K from last to first."""
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=f32)
    for k in range(a.shape[1] - 1, -1, -1):
        acc += a[:, k:k + 1] * b[k:k + 1]
    return acc


def split_k(a, b, parts=4):
    chunks = np.array_split(np.arange(a.shape[1]), parts)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=f32)
    for c in chunks:
        out += a[:, c] @ b[c]
    return out


def t(x):
    return torch.from_numpy(x)


def bf16_call(fn, *xs):
    """fn on bfloat16 copies of the inputs (CPU), result back to float32."""
    with torch.no_grad():
        return fn(*[t(x).bfloat16() for x in xs]).float().numpy()


def fp32_call(fn, *xs):
    with torch.no_grad():
        return fn(*[t(x) for x in xs]).numpy()


def flip(x, idx, bit):
    y = np.array(x, dtype=f32, copy=True)
    y.view(np.uint32)[idx] ^= np.uint32(1 << bit)
    return y


# ---- external part: legitimate differences from NumPy's and PyTorch's kernels ----------------
def external():
    pairs = []  # (name, expected class, expected format or None, golden, candidate)
    for seed, (m, k, n) in enumerate([(256, 512, 256), (64, 512, 512)]):
        r = rng(100 + seed)
        a, b = normal(r, m, k), normal(r, k, n)
        pairs.append(("tf32 gemm %dx%dx%d" % (m, k, n), "legitimate", "tf32", a @ b, tf32(a) @ tf32(b)))
    r = rng(110)
    a, b = normal(r, 256, 256), normal(r, 256, 256)
    pairs.append(("fp16-input gemm 256x256x256", "legitimate", "fp16", a @ b, half(a) @ half(b)))
    r = rng(120)
    a3, b3 = normal(r, 256, 512), normal(r, 512, 256)
    g3, c3 = fp32_call(torch.matmul, a3, b3), bf16_call(torch.matmul, a3, b3)
    pairs.append(("torch bf16 matmul 256x512x256", "legitimate", "bf16", g3, c3))
    r = rng(130)
    x, w = normal(r, 8, 16, 14, 14), normal(r, 32, 16, 3, 3)
    conv = lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)
    pairs.append(("torch bf16 conv2d 8x16x14x14 * 32x16x3x3", "legitimate", "bf16",
                  fp32_call(conv, x, w), bf16_call(conv, x, w)))
    for seed, (m, k, n) in enumerate([(64, 120, 10), (64, 400, 120)]):
        r = rng(140 + seed)
        a, b = normal(r, m, k), normal(r, k, n)
        pairs.append(("fp16 acc K-blocks of 16, %dx%dx%d" % (m, k, n), "legitimate", "fp16",
                      a @ b, fp16_blocked(a, b)))
    r = rng(150)
    a, b = normal(r, 256, 512), normal(r, 512, 256)
    g = a @ b
    pairs.append(("reorder (B^T A^T)^T 256x512x256", "legitimate", None, g, np.ascontiguousarray((b.T @ a.T).T)))
    pairs.append(("reorder reversed-K fp32 loop", "legitimate", None, g, reversed_k(a, b)))
    pairs.append(("reorder split-K 4 chunks", "legitimate", None, g, split_k(a, b)))
    r = rng(160)
    x = normal(r, 512, 1000)
    pairs.append(("torch.sum dim=1 512x1000 vs fp64", "legitimate", None,
                  x.astype(np.float64).sum(axis=1).astype(f32), fp32_call(lambda v: torch.sum(v, dim=1), x)))
    r = rng(170)
    x = normal(r, 64, 1000) * 3
    sm = lambda v: torch.softmax(v, dim=-1)
    pairs.append(("torch bf16 softmax 64x1000", "legitimate", "bf16", fp32_call(sm, x), bf16_call(sm, x)))
    x = normal(r, 64, 768)
    ln = lambda v: torch.nn.functional.layer_norm(v, (768,))
    pairs.append(("torch bf16 layer_norm 64x768", "legitimate", "bf16", fp32_call(ln, x), bf16_call(ln, x)))
    return pairs, (g3, c3)


# ---- own injector: faults this script injects into candidates ---------------------------------
def injected(bf16_pair):
    pairs = []
    g3, c3 = bf16_pair
    r = rng(200)
    i = tuple(r.integers(0, s) for s in c3.shape)
    pairs.append(("bf16 matmul + exponent bit 29 flip", "bit_flip", None, g3, flip(c3, i, 29)))

    a, b = normal(r, 256, 512), normal(r, 512, 256)
    g = a @ b
    c = g.copy().ravel()
    hit = r.choice(c.size, size=c.size // 200, replace=False)  # 0.5 %
    c[hit] = r.standard_normal(hit.size).astype(f32) * g.std()
    pairs.append(("fp32 gemm, 0.5% random values", "random_value", None, g, c.reshape(g.shape)))

    # tile-edge indexing bug: column j reads B's column j+1 when j % 16 == 15 (clipped at the edge)
    cols = np.arange(b.shape[1])
    cols = np.where(cols % 16 == 15, np.minimum(cols + 1, b.shape[1] - 1), cols)
    pairs.append(("fp32 gemm, tile-edge column j+1", "index_error", None, g, a @ b[:, cols]))

    c = g.copy()
    c[37] = 0
    pairs.append(("fp32 gemm, zeroed row", "zeroed", None, g, c))

    idx = r.choice(g.size, size=3, replace=False)
    c = g.copy().ravel()
    c.view(np.uint32)[idx] ^= np.uint32(1 << 22)
    pairs.append(("fp32 gemm, mantissa bit 22 in 3 elements", "bit_flip", None, g, c.reshape(g.shape)))
    return pairs


# ---- round two (issue 32): kernel families no rule was written for, made by NumPy, PyTorch or a
# small reference written here: fused attention, fused optimisers, norms, fast math, weight-only and
# fp8 quantisation, and the bugs real ports of them have (overflow, masking, scales, upsets) --------
def bf16r(x):
    return t(np.ascontiguousarray(x, dtype=f32)).bfloat16().float().numpy()


def attention(q, k, v, mask=None, max_sub=True, dtype=None):
    """softmax(q k^T / sqrt(d) + mask) v per leading index, in float32 (or dtype: scores and output
    rounded to it, as a 16-bit kernel stores them)."""
    s = np.einsum("...td,...sd->...ts", q, k).astype(f32) / f32(np.sqrt(q.shape[-1]))
    if dtype is not None:
        s = s.astype(dtype).astype(f32)
    if mask is not None:
        s = np.where(mask, s, f32(-np.inf))
    if max_sub:
        s = s - s.max(axis=-1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(s)
        p = p / p.sum(axis=-1, keepdims=True)
        o = np.einsum("...ts,...sd->...td", p.astype(f32), v).astype(f32)
    return o if dtype is None else o.astype(dtype).astype(f32)


def causal(tq, window=None, shift=0):
    i, j = np.arange(tq)[:, None], np.arange(tq)[None, :]
    m = j <= i + shift
    if window is not None:
        m &= j > i - window
    return m


def flash_attention(q, k, v, mask, block=32):
    """Online softmax over key blocks (running max and sum), fp32: another summation order."""
    d = q.shape[-1]
    o = np.zeros(q.shape, dtype=f32)
    run_max = np.full(q.shape[:-1] + (1,), -np.inf, dtype=f32)
    run_sum = np.zeros(q.shape[:-1] + (1,), dtype=f32)
    for s0 in range(0, k.shape[-2], block):
        kb, vb = k[..., s0:s0 + block, :], v[..., s0:s0 + block, :]
        sc = np.einsum("...td,...sd->...ts", q, kb).astype(f32) / f32(np.sqrt(d))
        sc = np.where(mask[:, s0:s0 + block], sc, f32(-np.inf))
        new_max = np.maximum(run_max, sc.max(axis=-1, keepdims=True))
        corr = np.exp(run_max - new_max).astype(f32)
        p = np.exp(sc - new_max).astype(f32)
        run_sum = run_sum * corr + p.sum(axis=-1, keepdims=True)
        o = o * corr + np.einsum("...ts,...sd->...td", p, vb).astype(f32)
        run_max = new_max
    return (o / run_sum).astype(f32)


def adam_numpy(p, grads, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    """A plain fp32 Adam written here, steps of torch.optim.Adam's algorithm in another order."""
    p = p.copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for step, g in enumerate(grads, 1):
        m = f32(b1) * m + f32(1 - b1) * g
        v = f32(b2) * v + f32(1 - b2) * g * g
        mh = m / f32(1 - b1 ** step)
        vh = v / f32(1 - b2 ** step)
        p = p - f32(lr) * mh / (np.sqrt(vh) + f32(eps))
    return p.astype(f32)


def torch_optim(p, grads, make, dtype=torch.float32):
    w = torch.nn.Parameter(t(p.copy()).to(dtype))
    opt = make([w])
    for g in grads:
        w.grad = t(g).to(dtype)
        opt.step()
    return w.detach().float().numpy()


def weight_quant(w, bits, group, asym=False, scale_fp16=True):
    """Weights [K, N] quantised per column in groups of `group` along K, dequantised (GPTQ/AWQ style)."""
    k, n = w.shape
    g = w.reshape(k // group, group, n)
    if asym:
        lo, hi = np.minimum(g.min(axis=1, keepdims=True), 0), np.maximum(g.max(axis=1, keepdims=True), 0)
        s = (hi - lo) / f32(2 ** bits - 1)
        s = s.astype(f16).astype(f32) if scale_fp16 else s
        z = np.rint(-lo / s)
        q = np.clip(np.rint(g / s) + z, 0, 2 ** bits - 1)
        out = (q - z) * s
    else:
        qmax = 2 ** (bits - 1) - 1
        s = np.abs(g).max(axis=1, keepdims=True) / f32(qmax)
        s = s.astype(f16).astype(f32) if scale_fp16 else s
        out = np.clip(np.rint(g / s), -qmax - 1, qmax) * s
    return out.reshape(k, n).astype(f32)


def fp8(x, dtype=torch.float8_e4m3fn if hasattr(torch, "float8_e4m3fn") else None):
    return t(np.ascontiguousarray(x, dtype=f32)).to(dtype).float().numpy()


def e4m3(x):
    """Rounds to OCP FP8 E4M3 (max 448, saturating) with NumPy: 3 mantissa bits, subnormals below 2^-6."""
    x = np.clip(x.astype(np.float64), -448, 448)
    e = np.floor(np.log2(np.maximum(np.abs(x), 2.0 ** -6)))
    step = 2.0 ** (e - 3)
    return (np.rint(x / step) * step).astype(f32)


def stochastic_bf16(x, r):
    """bf16 with stochastic rounding: add uniform noise below the 16 dropped bits, then truncate."""
    b = np.ascontiguousarray(x, dtype=f32).view(np.uint32).astype(np.uint64)
    b = (b + r.integers(0, 1 << 16, size=b.shape, dtype=np.uint64)) & ~np.uint64(0xFFFF)
    return b.astype(np.uint32).view(f32)


def rms_norm(x, w, eps=1e-6):
    return (x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + eps) * w).astype(f32)


def families():
    pairs = []  # (name, expected class, expected format or None, golden, candidate or [candidates])
    legit = lambda name, fmt, g, c: pairs.append((name, "legitimate", fmt, g, c))
    fault = lambda name, model, g, c: pairs.append((name, model, None, g, c))
    r = rng(300)
    # fused attention: [B, H, T, d]
    q, k, v = (normal(r, 2, 4, 128, 64) for _ in range(3))
    mask = causal(128)
    g_att = attention(q, k, v, mask)
    with torch.no_grad():  # torch's own ops in bf16 (softmax(q k^T / sqrt(d) + causal mask) v)
        qb, kb, vb = t(q).bfloat16(), t(k).bfloat16(), t(v).bfloat16()
        sc = (qb @ kb.transpose(-1, -2)) / 8.0
        sc = sc.masked_fill(~t(mask), float("-inf"))
        c = (torch.softmax(sc, dim=-1) @ vb).float().numpy()
    legit("torch bf16 attention causal 2x4x128x64", "bf16", g_att, c)
    legit("flash-style online softmax fp32, blocks of 32", None, g_att, flash_attention(q, k, v, mask))
    legit("attention fp16 scores and output", "fp16", g_att, attention(half(q), half(k), half(v), mask, dtype=f16))
    fault("causal mask off by one (sees next key)", "index_error", g_att, attention(q, k, v, causal(128, shift=1)))
    g_win = attention(q, k, v, causal(128, window=32))
    fault("sliding window 32 off by one", "index_error", g_win, attention(q, k, v, causal(128, window=33)))
    lengths = np.array([128, 96])  # key padding: batch 1 has 96 valid keys
    pad = np.arange(128)[None, :] < lengths[:, None]
    g_pad = attention(q, k, v, pad[:, None, None, :])
    pad1 = np.arange(128)[None, :] < (lengths + 1).clip(max=128)[:, None]
    fault("key padding mask off by one", "index_error", g_pad, attention(q, k, v, pad1[:, None, None, :]))
    big = q * 40
    g_big = attention(big, k, v, mask)
    fault("softmax without max subtraction (NaN)", "nan_inf", g_big, attention(big, k, v, mask, max_sub=False))
    q16 = q.copy()
    q16[0, 1] *= 3000.0  # one head's queries of massive size: its fp16 scores overflow
    g16 = attention(q16, k * 25, v, mask)
    fault("fp16 attention scores overflow to Inf", "nan_inf", g16, attention(q16, k * 25, v, mask, dtype=f16))
    c = g_att.copy()
    c[:, :, 96:] = 0  # the last query block never written
    fault("attention skips the last query block", "zeroed", g_att, c)
    # fused optimisers
    r = rng(310)
    p0 = normal(r, 256, 256)
    grads = [normal(r, 256, 256) * f32(0.01) for _ in range(3)]
    g_adam = torch_optim(p0, grads, lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False))
    legit("torch Adam foreach vs for-loop", None, g_adam,
          torch_optim(p0, grads, lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=True)))
    legit("Adam in NumPy vs torch Adam", None, g_adam, adam_numpy(p0, grads))
    legit("AdamW on bf16 parameters", "bf16",
          torch_optim(p0, grads, lambda ps: torch.optim.AdamW(ps, lr=1e-3)),
          torch_optim(p0, grads, lambda ps: torch.optim.AdamW(ps, lr=1e-3), torch.bfloat16))
    legit("SGD momentum foreach vs NumPy", None,
          torch_optim(p0, grads, lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True)),
          (p0 - f32(0.1) * (grads[0] * f32(1 + 0.9 + 0.81) + grads[1] * f32(1.9) + grads[2])).astype(f32))
    gr = grads[0] * f32(0.05)
    fault("fp16 gradient never unscaled (loss scale 1024)", "scaling", gr, half(gr * f32(1024)))
    # norms
    r = rng(320)
    x, w = normal(r, 64, 1024) * 2 + 0.5, normal(r, 1024) * 0.1 + 1
    g_rms = rms_norm(x, w)
    with torch.no_grad():
        xb, wb = t(x).bfloat16(), t(w).bfloat16()
        c = (xb * torch.rsqrt(xb.pow(2).mean(-1, keepdim=True) + 1e-6) * wb).float().numpy()
    legit("RMSNorm in bf16 (torch ops)", "bf16", g_rms, c)
    ln = lambda v: torch.nn.functional.layer_norm(v, (1024,))
    with torch.no_grad():
        c16 = torch.nn.functional.layer_norm(t(x).half().float(), (1024,)).half().float().numpy()
    legit("layer_norm fp16 in, fp16 out", "fp16", fp32_call(ln, x), c16)
    gn = lambda v: torch.nn.functional.group_norm(v, 8)
    x4 = normal(r, 4, 64, 16, 16)
    legit("torch bf16 group_norm 4x64x16x16", "bf16", fp32_call(gn, x4), bf16_call(gn, x4))
    xo = (normal(r, 32, 512) * f32(0.01) + f32(3000)).astype(f32)  # large mean, tiny variance
    mean = xo.mean(axis=-1, keepdims=True, dtype=np.float64)
    g_ln = ((xo - mean) / np.sqrt(xo.astype(np.float64).var(axis=-1, keepdims=True) + 1e-12)).astype(f32)
    with np.errstate(invalid="ignore"):
        var1 = (xo * xo).mean(axis=-1, keepdims=True) - xo.mean(axis=-1, keepdims=True) ** 2  # one pass, fp32
        c_ln = ((xo - xo.mean(axis=-1, keepdims=True)) / np.sqrt(var1 + f32(1e-12))).astype(f32)
    fault("one-pass variance goes negative (NaN rows)", "nan_inf", g_ln, c_ln)
    # fast math
    r = rng(330)
    a, b, cc = normal(r, 256, 256), normal(r, 256, 256), normal(r, 256, 256)
    legit("fma contraction a*b+c", None, (a * b + cc).astype(f32),
          (a.astype(np.float64) * b + cc).astype(f32))
    y = np.abs(normal(r, 256, 256)) + f32(0.1)
    legit("x * (1/y) for x / y", None, (a / y).astype(f32), (a * (f32(1) / y)).astype(f32))
    xe = normal(r, 256, 256) * 4
    legit("exp as exp2(x log2 e)", None, np.exp(xe), np.exp2(xe * f32(np.log2(np.e))).astype(f32))
    gelu = lambda v, approx: torch.nn.functional.gelu(v, approximate=approx)
    legit("torch gelu tanh approximation vs erf", None, fp32_call(lambda v: gelu(v, "none"), xe),
          fp32_call(lambda v: gelu(v, "tanh"), xe))
    xs = -(np.abs(normal(r, 128, 128)) * 6 + f32(84))  # exp of these: many fp32 subnormals
    g_exp = torch.exp(t(xs)).numpy().copy()
    ftz = torch.set_flush_denormal(True)  # the CPU's FTZ/DAZ mode, as a fast-math build sets it
    c_ftz = torch.exp(t(xs)).numpy().copy()
    torch.set_flush_denormal(False)
    if not ftz:  # no FTZ on this CPU: flush with NumPy instead
        c_ftz = np.where(np.abs(g_exp) < np.finfo(f32).tiny, f32(0), g_exp).astype(f32)
    legit("exp with subnormals flushed to zero (FTZ)", None, g_exp, c_ftz)
    # weight-only and fp8 quantisation (activations fp16, decode-sized M)
    r = rng(340)
    for (m_, k_, n_, bits, grp, asym) in [(8, 1024, 512, 4, 128, False), (16, 512, 512, 4, 64, True),
                                          (32, 512, 256, 8, 32, False), (8, 2048, 256, 4, 32, True)]:
        xa, wt = half(normal(r, m_, k_)), normal(r, k_, n_) * f32(0.05)
        legit("weight-only int%d %s g%d, M=%d" % (bits, "asym" if asym else "sym", grp, m_), None,
              xa @ wt, half(xa @ weight_quant(wt, bits, grp, asym)))
    xa, wt = normal(r, 64, 512), normal(r, 512, 256)
    sa, sw = np.abs(xa).max() / f32(448), np.abs(wt).max() / f32(448)
    qa, qw = e4m3(xa / sa), e4m3(wt / sw)
    g_fp8 = xa @ wt
    legit("fp8 e4m3 per-tensor scaled GEMM", None, g_fp8, ((qa @ qw) * (sa * sw)).astype(f32))
    fault("fp8 dequantised with the scale applied twice", "scaling", g_fp8,
          ((qa @ qw) * (sa * sw) * (sa * sw) / (sa * sw) * sw).astype(f32))
    fault("fp8 GEMM missing the activation scale", "scaling", g_fp8, ((qa @ qw) * sw).astype(f32))
    # upsets and stochastic rounding
    r = rng(350)
    xg = normal(r, 256, 256)
    g_ln2 = fp32_call(lambda v: torch.nn.functional.layer_norm(v, (256,)), xg)
    c = bf16r(g_ln2)
    j = 1000 + int(r.integers(0, 5000))
    while not (0.0625 <= abs(c.flat[j]) < 0.125):
        j += 1
    # exponent field 123 (0b01111011) with its bits 3 and 2 (fp32 bits 26, 25) flipped together is 119:
    # the value / 16, still on the bf16 grid
    c.view(np.uint32).flat[j] ^= np.uint32(0x06000000)
    fault("adjacent two-bit upset on the bf16 grid", "multi_bit_flip", g_ln2, c)
    c = half(g_att).copy()
    c.flat[4321] = flip(c.flat[4321:4322], 0, 28)[0]
    fault("fp16 attention output + exponent bit flip", "bit_flip", g_att, c)
    xm = normal(r, 128, 512)
    g_mm = xm @ normal(r, 512, 128)
    runs = [stochastic_bf16(g_mm, rng(360 + i)) for i in range(2)]
    legit("two runs of stochastic rounding to bf16", "bf16", g_mm, runs)
    c = half(g_mm).ravel()
    hit = r.choice(c.size, size=12, replace=False)
    c[hit] = half(normal(r, 12) * g_mm.std())
    fault("fp16 GEMM, 12 garbage elements", "random_value", g_mm, c.reshape(g_mm.shape))
    h = normal(r, 64, 512)
    wff = normal(r, 512, 512) * f32(0.5)
    h[[5, 40]] *= 20000  # massive activations in two rows: their fp16 outputs overflow
    g_ffn = h @ wff
    with np.errstate(over="ignore"):
        c = (half(h).astype(f16) @ half(wff).astype(f16)).astype(f32)
    fault("fp16 FFN overflows in two rows", "nan_inf", g_ffn, c)
    # rotary embeddings: bf16 (legitimate), and rotated by the next position (off by one)
    xr = normal(r, 4, 128, 64)
    rope = lambda v, shift: rotary(v, np.arange(128) + shift)
    g_rope = rope(xr, 0)
    legit("rotary embedding in bf16", "bf16", g_rope, bf16r(rotary(bf16r(xr), np.arange(128))))
    fault("rotary embedding position off by one", "index_error", g_rope, rope(xr, 1))
    return pairs


def rotary(x, pos, base=10000.0):
    """RoPE on the last dimension (pairs of halves), positions `pos`, in float32."""
    d = x.shape[-1] // 2
    ang = pos[:, None].astype(np.float64) * base ** (-np.arange(d) / d)
    cos, sin = np.cos(ang).astype(f32), np.sin(ang).astype(f32)
    a, b = x[..., :d], x[..., d:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1).astype(f32)


# ---- round three: families chosen after issue 32's rules were written, none of them named there or
# used to set a threshold; their labels are what a kernel engineer would call them, set before the
# detector was run on them ------------------------------------------------------------------------
def kahan_sum(x):
    """Kahan-compensated fp32 sum along the last axis, one term at a time."""
    s = np.zeros(x.shape[:-1], dtype=f32)
    comp = np.zeros_like(s)
    for k in range(x.shape[-1]):
        y = x[..., k] - comp
        tot = s + y
        comp = (tot - s) - y
        s = tot
    return s


def tf32_truncated(x):
    """TF32 by truncation (round toward zero): the low 13 mantissa bits cleared, as a kernel that
    feeds fp32 registers to a TF32 tensor core without rounding them first does."""
    b = np.ascontiguousarray(x, dtype=f32).view(np.uint32) & np.uint32(0xFFFFE000)
    return b.view(f32)


def int8_symmetric(x, axis):
    """Symmetric int8 with one scale per slice along `axis` (amax / 127): integer codes and scales."""
    s = (np.abs(x).max(axis=axis, keepdims=True) / f32(127)).astype(f32)
    return np.clip(np.rint(x / s), -127, 127), s


def w8a8(a, w, shift_scales=0):
    """int8 GEMM as SmoothQuant-style kernels run it: activations per token (row), weights per
    output channel (column), exact int32 accumulation, then both scales; `shift_scales`: the weight
    scales read `shift_scales` channels over (a scale-indexing bug)."""
    qa, sa = int8_symmetric(a, 1)
    qw, sw = int8_symmetric(w, 0)
    acc = qa.astype(np.int64) @ qw.astype(np.int64)  # exact, as int32 accumulation is at these sizes
    return (acc.astype(f32) * sa * np.roll(sw, -shift_scales, axis=1)).astype(f32)


def gelu_erf(x):
    return fp32_call(lambda v: torch.nn.functional.gelu(v), np.ascontiguousarray(x, dtype=f32))


def fused_bias_gelu_fp16(x, w, bias_of):
    """An fp16 GEMM with an fp32 accumulator whose epilogue adds the bias and applies GELU's tanh
    form, every intermediate stored in fp16. bias_of(h): the bias as the epilogue indexes it."""
    h = half(half(x) @ half(w))
    h = half(h + bias_of(h))
    inner = f32(np.sqrt(2 / np.pi)) * (h + f32(0.044715) * h * h * h)
    return half(f32(0.5) * h * (f32(1) + np.tanh(inner).astype(f32)))


def transposed_tiles(c, tile):
    """Each tile x tile block of the output written transposed in place (an epilogue whose thread
    map swaps the row and column index inside a tile)."""
    m, n = c.shape
    out = c.reshape(m // tile, tile, n // tile, tile).transpose(0, 3, 2, 1).reshape(m, n)
    return np.ascontiguousarray(out)


def atomic_split_k(a, b, parts, r):
    """Split-K with the partial products added to the output in an order that differs per element
    and per run, as fp32 atomicAdd from `parts` thread blocks does."""
    chunks = np.array_split(np.arange(a.shape[1]), parts)
    partial = np.stack([a[:, c] @ b[c] for c in chunks])  # [parts, M, N]
    order = np.argsort(r.random(partial.shape), axis=0)
    acc = np.zeros(partial.shape[1:], dtype=f32)
    for p in range(parts):
        acc += np.take_along_axis(partial, order[p:p + 1], axis=0)[0]
    return acc


def unseen():
    pairs = []
    legit = lambda name, fmt, g, c: pairs.append((name, "legitimate", fmt, g, c))
    fault = lambda name, model, g, c: pairs.append((name, model, None, g, c))
    r = rng(400)
    x = normal(r, 64, 64, 2048) + f32(1)
    legit("Kahan-summed reduction vs torch.sum", None, fp32_call(lambda v: torch.sum(v, dim=-1), x), kahan_sum(x))
    a, b = normal(r, 192, 768), normal(r, 768, 256)
    legit("tf32 GEMM by truncating inputs 192x768x256", "tf32", a @ b, tf32_truncated(a) @ tf32_truncated(b))
    a, w = normal(r, 128, 512), normal(r, 512, 384) * f32(0.05)
    g = a @ w
    legit("int8 W8A8 GEMM, per-token x per-channel", None, g, w8a8(a, w))
    fault("int8 GEMM, weight scales one channel over", "scaling", g, w8a8(a, w, shift_scales=1))
    x, w, bias = normal(r, 256, 512), normal(r, 512, 384) * f32(0.05), normal(r, 384) * f32(0.5)
    g = gelu_erf(x @ w + bias)
    legit("fused bias + GELU (tanh) epilogue in fp16", "fp16", g, fused_bias_gelu_fp16(x, w, lambda h: half(bias)))
    rows = np.arange(256) % 384
    fault("fused bias + GELU, bias indexed by row", "index_error", g,
          fused_bias_gelu_fp16(x, w, lambda h: half(bias)[rows][:, None]))
    a, b = normal(r, 256, 512), normal(r, 512, 256)
    fault("GEMM epilogue writes C^T in 16x16 tiles", "index_error", a @ b, transposed_tiles(a @ b, 16))
    a, b = normal(r, 128, 2048), normal(r, 2048, 128)
    legit("split-K 16 with atomicAdd, two runs", None, a @ b,
          [atomic_split_k(a, b, 16, rng(410 + i)) for i in range(2)])
    return pairs


def write_pair(workdir, i, g, c):
    """The pair's .npy files in workdir: golden, and one candidate per replay of the input."""
    golden = "%02d_golden.npy" % i
    np.save(os.path.join(workdir, golden), np.ascontiguousarray(g, dtype=f32))
    candidates = []
    for n, cand in enumerate(c if isinstance(c, list) else [c]):
        candidates.append("%02d_candidate%s.npy" % (i, "" if n == 0 else str(n)))
        np.save(os.path.join(workdir, candidates[-1]), np.ascontiguousarray(cand, dtype=f32))
    return golden, ",".join(candidates)


def main():
    global SEED_OFFSET
    argv = sys.argv[1:]
    if "--seed" in argv:
        at = argv.index("--seed")
        SEED_OFFSET = int(argv[at + 1])
        del argv[at:at + 2]
    args = [a for a in argv if a != "--json"]
    as_json = "--json" in argv
    if len(args) != 2:
        sys.exit("usage: external_corpus.py PEAT WORKDIR [--json] [--seed S]")
    peat, workdir = args[0], os.path.join(args[1], "external-%d" % SEED_OFFSET)
    os.makedirs(workdir, exist_ok=True)
    torch.manual_seed(SEED_OFFSET)

    legit, bf16_pair = external()
    corpus = [("library kernels",) + p for p in legit] + [("own injector",) + p for p in injected(bf16_pair)]
    corpus += [("families",) + p for p in families()]
    corpus += [("unseen",) + p for p in unseen()]
    # the corpus as `peat detect-eval --external` reads it: DIR/labels.tsv and the pairs' .npy files
    with open(os.path.join(workdir, "labels.tsv"), "w") as labels:
        labels.write("# part\tname\texpected\tformat\tgolden\tcandidates (tests/cli/external_corpus.py)\n")
        for i, (part, name, expected, fmt, g, c) in enumerate(corpus, 1):
            golden, candidates = write_pair(workdir, i, g, c)
            labels.write("\t".join([part, name, expected, fmt or "-", golden, candidates]) + "\n")
    p = subprocess.run([peat, "detect-eval", "--external", workdir, "--seeds", "0", "--json"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        print("peat detect-eval --external failed: %s" % (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
        return 1
    report = json.loads(p.stdout)["external"]
    rows = []
    for i, r in enumerate(report["pairs"], 1):
        fmt = r["expected_format"] or None
        rows.append({"pair": i, "name": r["name"], "part": r["part"], "expected": r["expected"], "verdict": r["got"],
                     "format": r["format"] or None, "expected_format": fmt,
                     "format_match": None if fmt is None or r["got"] != "precision_loss" else r["format"] == fmt,
                     "confidence": r["confidence"], "alternatives": r["alternatives"], "correct": r["correct"]})
    if len(rows) != len(corpus) or any(r["name"] != c[1] for r, c in zip(rows, corpus)):
        print("peat detect-eval --external judged other pairs than the %d written" % len(corpus))
        return 1

    parts = report["parts"]
    part_rows = lambda name: [r for r in rows if r["part"] == name] if name != "all" else rows
    legit_expected = {"legitimate", "exact", "precision_loss", "accumulation_order"}
    # the fault pairs named right: the accuracy that the outputs alone can reach (a legitimate format
    # is reproduced from outputs only when they lie on its grid; else the verdict is unknown, issue 41)
    faults_right = lambda name: sum(r["correct"] for r in part_rows(name) if r["expected"] not in legit_expected)
    summary = {}
    for name, part in list(parts.items()) + [("all", report)]:
        summary[name] = {"right": part["correct"], "pairs": part["cases"], "legitimate": part["legitimate_pairs"],
                         "fault_on_legitimate": part["fault_verdicts_on_legitimate"],
                         "unknown_on_legitimate": part["unknown_on_legitimate"],
                         "faults": part["fault_pairs"], "faults_right": faults_right(name),
                         "legitimate_on_faults": part["legitimate_verdicts_on_faults"],
                         "format_right": sum(r["format_match"] is True for r in part_rows(name)),
                         "format_checked": sum(r["format_match"] is not None for r in part_rows(name))}

    if as_json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=1))
    else:
        fmt_s = lambda x: "-" if x is None else ("yes" if x is True else "no" if x is False else str(x))
        print("%-2s %-42s %-15s %-12s %-18s %-6s %-5s %-3s %s" % (
            "#", "pair", "part", "expected", "verdict", "format", "conf", "ok", "format ok (expected)"))
        for r in rows:
            print("%-2d %-42s %-15s %-12s %-18s %-6s %-5.2f %-3s %s" % (
                r["pair"], r["name"], r["part"], r["expected"], r["verdict"], fmt_s(r["format"]), r["confidence"],
                "yes" if r["correct"] else "NO",
                "-" if r["expected_format"] is None else "%s (%s)" % (fmt_s(r["format_match"]), r["expected_format"])))
            if not r["correct"] and r["alternatives"]:
                print("   alternatives: %s" % ", ".join(map(str, r["alternatives"])))
        for name, part in summary.items():
            print("%-16s %d of %d right (%.0f%%); faults named right %d of %d, legitimate verdicts on them %d; "
                  "fault verdicts on %d legitimate pairs %d, unknown %d%s" % (
                      name + ":", part["right"], part["pairs"], 100.0 * part["right"] / max(1, part["pairs"]),
                      part["faults_right"], part["faults"], part["legitimate_on_faults"], part["legitimate"],
                      part["fault_on_legitimate"], part["unknown_on_legitimate"],
                      " (precision format right in %d of %d)" % (part["format_right"], part["format_checked"])
                      if part.get("format_checked") else ""))
        print("(peat detect-eval --external %s --seeds 0)" % workdir)
    # Fails on either error (a fault pair called legitimate, a legitimate pair called a fault) and
    # below the target for what the outputs can settle: 97% of the fault pairs named right on every part
    # with at least 20 of them, every fault pair of a smaller part. Unknown on a legitimate pair (nothing
    # reproduces a format from outputs alone) is counted and shown, not failed.
    below = [n for n, part in summary.items() if n != "all" and part["faults_right"] <
             (0.97 * part["faults"] if part["faults"] >= 20 else part["faults"])]
    errors = summary["all"]["fault_on_legitimate"] + summary["all"]["legitimate_on_faults"]
    if not as_json and not (errors or below):
        print("ok: external corpus (seed %d) within the targets" % SEED_OFFSET)
    return 1 if errors or below else 0

if __name__ == "__main__":
    sys.exit(main())
