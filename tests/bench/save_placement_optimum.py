#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Is SAVE's greedy placement of tiles in reliable memory optimal? An exact solver says.

A measurement, not part of the product (issue 17, "placement that matters"). `peat save analyze
... --placement-problem FILE` writes the problem SAVE's selection solved: every tile holding
type-2 values, the steps it occupies memory (its tensor's op to its last reader), its bytes and
the recomputation work (multiply-adds per image) that placing it in reliable memory saves, and
whether SAVE placed it. Choosing tiles of most work whose bytes in use at every step stay within
the budget is a 0/1 integer program (an unsplittable flow on a path); this script

- checks SAVE's placement against the budget at every step (independently of the C++ code),
- solves the integer program exactly with HiGHS (SciPy's milp, Debian's python3-scipy) under a
  time limit, and its LP relaxation, an upper bound on any placement,

and prints the share of the recomputation work each avoids.

    tests/bench/save_placement_optimum.py PROBLEM.csv [TIME_LIMIT_S]
"""
import sys
import time

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp


def load(path):
    with open(path) as f:
        head, name = f.readline(), f.readline()
        if not head.startswith("# budget_bytes=") or not name.startswith("# model="):
            sys.exit(f"{path}: not a placement problem (no '# budget_bytes=' and '# model=' lines)")
        meta = dict(kv.split("=", 1) for kv in head[1:].split())
        f.readline()  # the column names
        rows = np.loadtxt(f, delimiter=",", ndmin=2)
    return int(meta["budget_bytes"]), int(meta["steps"]), name[len("# model="):].rstrip("\n"), rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    budget, steps, model, rows = load(sys.argv[1])
    if len(rows) == 0:
        sys.exit(f"{model}: no tile holds a type-2 value: nothing to place")
    limit = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0
    first, last = rows[:, 2].astype(int), rows[:, 3].astype(int)
    size, work, placed = rows[:, 4], rows[:, 5], rows[:, 6] > 0
    n, total = len(rows), work.sum()
    cols = np.concatenate([np.full(last[j] - first[j] + 1, j) for j in range(n)])
    steps_of = np.concatenate([np.arange(first[j], last[j] + 1) for j in range(n)])
    use = sp.csr_matrix((size[cols], (steps_of, cols)), shape=(steps, n))

    in_use = use @ placed.astype(float)
    print(f"{model}: {n} tiles with type-2 values, budget {budget} bytes, {steps} steps, "
          f"work without reliable memory {total:.4g} multiply-adds per image")
    print(f"SAVE's placement: {placed.sum()} tiles, peak {in_use.max():.0f} bytes in use "
          f"({'within' if in_use.max() <= budget else 'OVER'} the budget), "
          f"avoids {100 * work[placed].sum() / total:.2f}%")
    cap = LinearConstraint(use, -np.inf, budget)
    t = time.time()
    lp = milp(-work, constraints=cap, integrality=np.zeros(n), bounds=Bounds(0, 1))
    print(f"LP relaxation (upper bound on any placement): {100 * -lp.fun / total:.2f}% ({time.time() - t:.1f} s)")
    t = time.time()
    ip = milp(-work, constraints=cap, integrality=np.ones(n), bounds=Bounds(0, 1),
              options={"time_limit": limit})
    if ip.x is None:
        print(f"exact placement: no solution within {limit:.0f} s ({ip.message})")
        return
    gap = getattr(ip, "mip_gap", float("nan"))
    print(f"exact placement (HiGHS, {'optimal' if ip.status == 0 else ip.message}, gap {gap:.2g}): "
          f"{100 * -ip.fun / total:.2f}% ({time.time() - t:.1f} s)")


if __name__ == "__main__":
    main()
