#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Does branch and bound on unstable ReLUs tighten LeNet's logit bounds over the whole pixel box?

A measurement, not part of the product (issue 17, "tighter ranges where it pays": branch and bound
on unstable ReLUs under a time budget, width against time). It reuses save_alpha_crown.py's exact
rewrite of LeNet as dense affine maps and ReLUs and its CROWN bounds (double precision, Debian's
python3-torch), then, for the logit whose upper bound is largest and the one whose lower bound is
smallest (the two ends of the union; then the next logit that sets an end), runs best-first branch
and bound: a domain is split on one
unstable ReLU of fc1 or fc2 (the one whose relaxation costs the bound most, as in BaBSR), into an
active branch (its pre-activation bounds become [max(l, 0), u]) and an inactive one ([l, min(u, 0)]);
each branch re-bounds fc2 (when an fc1 ReLU was split) and the logit with CROWN. Every branch is
sound for the inputs where its split holds, and the branches cover the box, so the largest branch
bound is a sound bound. It stops at the time budget and prints the bound against time.

    tests/bench/save_relu_bab.py [WEIGHTS.h5] [SECONDS_PER_END]

(defaults: data/lenet-fashion-mnist.h5, 240 s for each end; each end branches on the logit that sets
it, for an eighth of the budget at a time, until the budget is spent or that logit stops gaining).
"""
import heapq
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from save_alpha_crown import D, bound, lenet_chain  # noqa: E402

FC1, FC2, LOGITS = 6, 7, 8  # the chain's layers: fc1, fc2 (each followed by a ReLU), fc3


def relaxation_cost(layers, k, lows, highs, sign, row):
    """BaBSR-style score of every unstable fc1/fc2 neuron for bounding sign * logit[row]: the slack
    its triangle relaxation adds, |lambda| * u * (-l) / (u - l), from one back-substitution."""
    w = layers[k][0]
    lam = sign * w[row:row + 1]
    scores = {}
    for j in range(k - 1, FC1 - 1, -1):
        l, u = lows[j], highs[j]
        unstable, active = (l < 0) & (u > 0), (l >= 0).to(D)
        chord = torch.where(unstable, u / (u - l).clamp_min(1e-300), active)
        slope = torch.where(unstable, (u > -l).to(D), active)
        scores[j] = torch.where(unstable, lam.abs()[0] * chord * (-l), torch.zeros_like(l))
        lam = lam * torch.where(lam >= 0, slope.expand_as(lam), chord.expand_as(lam))
        lam = lam @ layers[j][0]
    return scores


def branch_bound(layers, lows, highs, lo_in, hi_in, sign, row, budget):
    """Best-first branch and bound of sign * logit[row] from below; returns [(seconds, bound)]."""
    def evaluate(lw, hg):
        if (lw[FC1] > hg[FC1]).any() or (lw[FC2] > hg[FC2]).any():
            return None  # an empty branch
        return bound(layers, LOGITS, lw, hg, lo_in, hi_in, sign)[row].item()

    start = time.time()
    first = evaluate(lows, highs)
    heap, count, trace = [(first, 0, lows, highs)], 1, [(0.0, first)]
    while time.time() - start < budget:
        value, _, lw, hg = heapq.heappop(heap)  # the weakest lower bound: the one that sets the result
        scores = relaxation_cost(layers, LOGITS, lw, hg, sign, row)
        j, best = max(((j, s.max().item()) for j, s in scores.items()), key=lambda t: t[1])
        if best <= 0:
            heapq.heappush(heap, (value, count, lw, hg))
            break  # nothing unstable left in fc1/fc2: this domain is as tight as CROWN gets
        i = int(scores[j].argmax())
        for active in (True, False):
            l2, h2 = [x.clone() for x in lw], [x.clone() for x in hg]
            if active:
                l2[j][i] = 0.0
            else:
                h2[j][i] = 0.0
            if j == FC1:  # fc2's bounds follow from fc1's
                l2[FC2] = torch.maximum(l2[FC2], bound(layers, FC2, l2, h2, lo_in, hi_in, 1))
                h2[FC2] = torch.minimum(h2[FC2], -bound(layers, FC2, l2, h2, lo_in, hi_in, -1))
            v = evaluate(l2, h2)
            if v is not None:
                heapq.heappush(heap, (max(v, value), count, l2, h2))  # a child is no looser than its parent
                count += 1
        trace.append((time.time() - start, heap[0][0]))
    return trace, count


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "data/lenet-fashion-mnist.h5"
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 240.0
    torch.set_num_threads(2)
    layers, _ = lenet_chain(path)
    mean, std = 0.2860, 0.3530  # Fashion-MNIST, as the trainer normalises it
    lo_in, hi_in = torch.full((784,), (0 - mean) / std, dtype=D), torch.full((784,), (1 - mean) / std, dtype=D)
    start = time.time()
    lows, highs = [], []
    with torch.no_grad():
        for k in range(len(layers) - 1):
            lows.append(bound(layers, k, lows, highs, lo_in, hi_in, 1))
            highs.append(-bound(layers, k, lows, highs, lo_in, hi_in, -1))
        lo = bound(layers, LOGITS, lows, highs, lo_in, hi_in, 1)
        hi = -bound(layers, LOGITS, lows, highs, lo_in, hi_in, -1)
    print(f"CROWN: logits [{lo.min().item():.6g}, {hi.max().item():.6g}] ({time.time() - start:.1f} s); "
          f"unstable ReLUs: fc1 {int(((lows[FC1] < 0) & (highs[FC1] > 0)).sum())}, "
          f"fc2 {int(((lows[FC2] < 0) & (highs[FC2] > 0)).sum())}")
    # Each end of the union: branch on the logit whose bound sets that end, for a slice of the budget,
    # until the budget is spent or the logit setting the end gains nothing more (all are sound bounds).
    ends = {}
    with torch.no_grad():
        for name, sign, current in (("upper", -1, (-hi).clone()), ("lower", 1, lo.clone())):
            spent, done, domains = 0.0, set(), 0
            while spent < budget:
                row = int(current.argmin())  # the weakest bound of sign * logit sets the end
                if row in done:
                    break
                trace, count = branch_bound(layers, lows, highs, lo_in, hi_in, sign, row, min(budget / 8, budget - spent))
                spent += trace[-1][0]
                domains += count
                if trace[-1][1] <= current[row].item() + 1e-9:
                    done.add(row)  # no gain in its slice: the branching has stalled on this logit
                current[row] = max(current[row].item(), trace[-1][1])
                print(f"  {name} end: logit {row} {sign * trace[-1][1]:.6g} after its {trace[-1][0]:.1f} s "
                      f"({count} domains); the end is now {sign * current.min().item():.6g} after {spent:.1f} s",
                      flush=True)
            ends[name] = sign * current.min().item()
            print(f"  {name} end: {ends[name]:.6g} ({domains} domains, {spent:.1f} s)")
    w0, w1 = hi.max().item() - lo.min().item(), ends["upper"] - ends["lower"]
    print(f"logits' union: CROWN [{lo.min().item():.6g}, {hi.max().item():.6g}] width {w0:.6g}; after branch and "
          f"bound [{ends['lower']:.6g}, {ends['upper']:.6g}] width {w1:.6g} ({100 * (1 - w1 / w0):.2f}% narrower)")


if __name__ == "__main__":
    main()
