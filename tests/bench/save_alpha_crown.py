#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Do optimised ReLU slopes (alpha-CROWN) tighten LeNet's ranges over the whole pixel box?

A measurement, not part of the product: it decides whether `core/save` should grow an alpha-CROWN
pass (issue 17, "tighter ranges where it pays"). LeNet (the shipped weights) is rewritten as an
exact chain of dense affine maps and ReLUs (each 2x2 max-pool as max(a, b) = b + relu(a - b): two
ReLU layers; checked against the network on a random input), then bounded over SAVE's box,
pixels in [0, 1], twice:

- CROWN: linear bounds substituted back to the input, each unstable ReLU relaxed by the adaptive
  lower slope (1 if u > -l, else 0) and the chord above;
- alpha-CROWN: the same, with every lower slope a free parameter in [0, 1] per (bounded neuron,
  relaxed neuron), optimised by Adam on the bound itself (gradients by PyTorch autograd), for the
  layers from FROM_LAYER on (intermediate bounds too, which then feed later layers).

Both are sound bounds of exact arithmetic (no fp32 rounding terms: they are compared with each
other, not used). Double precision, Debian's python3-torch.

    tests/bench/save_alpha_crown.py [WEIGHTS.h5] [STEPS] [FROM_LAYER]

(defaults: data/lenet-fashion-mnist.h5, 20 Adam steps, from layer 6 = fc1). Prints each layer's
mean width and the union of the logits' ranges for both, and the time.
"""
import sys
import time

import h5py
import torch
import torch.nn.functional as F

D = torch.float64


def dense_conv(w, b, h, wd, pad):
    """A conv as a dense matrix over the flattened [C, H, W] input, and its bias per output."""
    n = w.shape[1] * h * wd
    basis = torch.eye(n, dtype=D).reshape(n, w.shape[1], h, wd)
    out = F.conv2d(basis, w, padding=pad)
    return out.reshape(n, -1).T.contiguous(), b.repeat_interleave(out.shape[2] * out.shape[3])


def pool_as_relus(c, h, w):
    """2x2 max-pool of a non-negative [c, h, w] tensor as two affine+ReLU layers and a sum:
    [p - q, q, r - t, t] -> relu -> [m1 - m2, m2] -> relu -> sum, with m1 = max(p, q), m2 = max(r, t)."""
    oh, ow = h // 2, w // 2
    n = c * oh * ow
    a = torch.zeros(4 * n, c * h * w, dtype=D)
    b = torch.zeros(2 * n, 4 * n, dtype=D)
    s = torch.zeros(n, 2 * n, dtype=D)
    for ch in range(c):
        for y in range(oh):
            for x in range(ow):
                o = (ch * oh + y) * ow + x
                p, q = (ch * h + 2 * y) * w + 2 * x, (ch * h + 2 * y) * w + 2 * x + 1
                r, t = (ch * h + 2 * y + 1) * w + 2 * x, (ch * h + 2 * y + 1) * w + 2 * x + 1
                a[4 * o, p], a[4 * o, q], a[4 * o + 1, q] = 1, -1, 1
                a[4 * o + 2, r], a[4 * o + 2, t], a[4 * o + 3, t] = 1, -1, 1
    for o in range(n):
        b[2 * o, 4 * o:4 * o + 2] = 1
        b[2 * o, 4 * o + 2:4 * o + 4] = -1
        b[2 * o + 1, 4 * o + 2:4 * o + 4] = 1
        s[o, 2 * o:2 * o + 2] = 1
    return a, b, s


def lenet_chain(path):
    f = h5py.File(path, "r")
    p = {k: torch.tensor(v[()], dtype=D) for k, v in f["runs/train/checkpoints/002000/parameters"].items()}
    c1, b1 = dense_conv(p["conv1.weight"], p["conv1.bias"], 28, 28, 2)
    a1, m1, s1 = pool_as_relus(6, 28, 28)
    c2, b2 = dense_conv(p["conv2.weight"], p["conv2.bias"], 14, 14, 0)
    a2, m2, s2 = pool_as_relus(16, 10, 10)
    zeros = lambda m: torch.zeros(m.shape[0], dtype=D)
    layers = [(c1, b1), (a1, zeros(a1)), (m1, zeros(m1)), (c2 @ s1, b2), (a2, zeros(a2)), (m2, zeros(m2)),
              (p["fc1.weight"] @ s2, p["fc1.bias"]), (p["fc2.weight"], p["fc2.bias"]), (p["fc3.weight"], p["fc3.bias"])]

    def lenet(x):
        h = F.max_pool2d(F.relu(F.conv2d(x.reshape(1, 1, 28, 28), p["conv1.weight"], p["conv1.bias"], padding=2)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["conv2.weight"], p["conv2.bias"])), 2)
        h = F.relu(F.linear(h.flatten(), p["fc1.weight"], p["fc1.bias"]))
        return F.linear(F.relu(F.linear(h, p["fc2.weight"], p["fc2.bias"])), p["fc3.weight"], p["fc3.bias"])

    return layers, lenet


def bound(layers, k, lows, highs, lo_in, hi_in, sign, alphas=None):
    """A sound lower bound of sign * (layer k's pre-activation) over the input box, by substituting
    back through layers k-1..0 with ReLU relaxations (lower slope alpha, or adaptive)."""
    w, b = layers[k]
    lam, const = sign * w, sign * b
    for j in range(k - 1, -1, -1):
        l, u = lows[j], highs[j]
        unstable, active = (l < 0) & (u > 0), (l >= 0).to(D)
        chord = torch.where(unstable, u / (u - l).clamp_min(1e-300), active)
        slope = alphas[j] if alphas is not None else torch.where(unstable, (u > -l).to(D), active)
        slope = torch.where(unstable, slope, active)
        positive = lam >= 0
        const = const + torch.where(positive, torch.zeros_like(lam), -lam * chord * torch.where(unstable, l, 0 * l)).sum(-1)
        lam = lam * torch.where(positive, slope.expand_as(lam), chord.expand_as(lam))
        wj, bj = layers[j]
        const = const + lam @ bj
        lam = lam @ wj
    centre, radius = (hi_in + lo_in) / 2, (hi_in - lo_in) / 2
    return lam @ centre - lam.abs() @ radius + const


def analyse(layers, lo_in, hi_in, steps, first_optimised):
    lows, highs, start = [], [], time.time()
    for k in range(len(layers)):
        lo = bound(layers, k, lows, highs, lo_in, hi_in, 1)
        hi = -bound(layers, k, lows, highs, lo_in, hi_in, -1)
        if steps > 0 and k >= first_optimised:
            for sign in (1, -1):
                rows = layers[k][0].shape[0]
                alphas = [torch.where((lows[j] < 0) & (highs[j] > 0), (highs[j] > -lows[j]).to(D), 0 * lows[j])
                          .expand(rows, -1).clone().requires_grad_(True) for j in range(k)]
                opt = torch.optim.Adam(alphas, lr=0.1)
                best = bound(layers, k, lows, highs, lo_in, hi_in, sign).detach()
                for _ in range(steps):
                    value = bound(layers, k, lows, highs, lo_in, hi_in, sign, alphas)
                    best = torch.maximum(best, value.detach())
                    opt.zero_grad()
                    (-value.sum()).backward()
                    opt.step()
                    with torch.no_grad():
                        for a in alphas:
                            a.clamp_(0, 1)
                if sign == 1:
                    lo = torch.maximum(lo, best)
                else:
                    hi = torch.minimum(hi, -best)
        lows.append(lo)
        highs.append(hi)
        print(f"  layer {k}: {lo.numel():5d} neurons, {int(((lo < 0) & (hi > 0)).sum()):5d} unstable, "
              f"mean width {(hi - lo).mean().item():10.4g}  ({time.time() - start:.1f} s)", flush=True)
    return lows[-1], highs[-1], time.time() - start


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "data/lenet-fashion-mnist.h5"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    torch.set_num_threads(2)
    layers, lenet = lenet_chain(path)
    mean, std = 0.2860, 0.3530  # Fashion-MNIST, as the trainer normalises it
    lo_in, hi_in = torch.full((784,), (0 - mean) / std, dtype=D), torch.full((784,), (1 - mean) / std, dtype=D)
    x = lo_in + torch.rand(784, dtype=D) * (hi_in - lo_in)
    h = x
    for i, (w, b) in enumerate(layers):
        h = w @ h + b
        h = torch.relu(h) if i < len(layers) - 1 else h
    gap = (h - lenet(x)).abs().max().item()
    assert gap < 1e-9, f"the affine/ReLU chain is not LeNet: {gap}"
    print("CROWN (adaptive slopes)")
    l0, h0, t0 = analyse(layers, lo_in, hi_in, 0, len(layers))
    print(f"alpha-CROWN ({steps} Adam steps per bound, layers {first}-{len(layers) - 1} optimised)")
    l1, h1, t1 = analyse(layers, lo_in, hi_in, steps, first)
    w0, w1 = h0.max().item() - l0.min().item(), h1.max().item() - l1.min().item()
    print(f"logits: CROWN [{l0.min().item():.5g}, {h0.max().item():.5g}] in {t0:.1f} s; "
          f"alpha-CROWN [{l1.min().item():.5g}, {h1.max().item():.5g}] in {t1:.1f} s; "
          f"the optimised slopes narrow the union by {100 * (1 - w1 / w0):.1f}%")


if __name__ == "__main__":
    main()
