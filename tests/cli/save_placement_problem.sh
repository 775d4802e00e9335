#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `peat save analyze --placement-problem`: the CSV an exact solver reads agrees with the selection's
# own report (work in all, work left by its placement) and its placement stays within the budget at
# every step, recomputed here from the tiles' lifetimes and bytes.
# usage: save_placement_problem.sh PEAT WEIGHTS WORKDIR
set -eu
peat=$1 weights=$2 dir=$3
mkdir -p "$dir"
csv=$dir/placement-problem.csv json=$dir/placement-problem.json
rm -f "$csv"  # peat refuses to replace it without --force
"$peat" save analyze -m lenet -w "$weights" --mode interval --budget 5% --placement-problem "$csv" --json >"$json"
/usr/bin/python3 - "$csv" "$json" <<'PY'
import json, sys
import numpy as np
csv, report = sys.argv[1], json.load(open(sys.argv[2]))
head = open(csv).readline()
meta = dict(kv.split("=", 1) for kv in head[1:].split())
assert open(csv).readlines()[1] == "# model=lenet\n"
rows = np.loadtxt(csv, delimiter=",", skiprows=3, ndmin=2)
budget, steps = int(meta["budget_bytes"]), int(meta["steps"])
assert budget == report["budget_bytes"], (budget, report["budget_bytes"])
first, last, size, work, placed = rows[:, 2].astype(int), rows[:, 3].astype(int), rows[:, 4], rows[:, 5], rows[:, 6] > 0
in_use = np.zeros(steps)
for j in np.flatnonzero(placed):
    in_use[first[j]:last[j] + 1] += size[j]
assert in_use.max() <= budget, f"placement uses {in_use.max()} bytes of a {budget}-byte budget"
assert in_use.max() == report["reliable_bytes"], (in_use.max(), report["reliable_bytes"])
assert placed.any() and not placed.all(), "5% of LeNet's working set holds some tiles, not all"
total, left = work.sum(), work[~placed].sum()
assert abs(total - report["recompute_work_without_reliable_memory"]) <= 1e-9 * total, total
assert abs(left - report["recompute_work"]) <= 1e-9 * total, (left, report["recompute_work"])
print(f"ok: {len(rows)} tiles, peak {in_use.max():.0f} of {budget} bytes, avoids {100 * (1 - left / total):.1f}%")
PY
