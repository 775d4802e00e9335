# SPDX-License-Identifier: MIT
"""A golden replay on the device, broken down: bit-exact, nondeterministic (two golden runs of the
call differ: the kernel itself is not deterministic here), raised (with the message), and the rest
by ATen op. usage: golden_breakdown.py SESSION"""
import collections
import json
import sys

import peat
import peat._core as c

session = sys.argv[1]
r = peat.playback(session, "golden")
labels = {}
for run in c.summary(session)["runs"]:
    if run["name"] == r["source_run"]:
        for it in run["iterations"]:
            for call in it["calls"]:
                labels[(call["iteration"], call["call_index"])] = json.loads(call["labels"]["replay"])["op"]
nondet = set(r["nondeterministic"])
exact = differ = 0
by_op = collections.Counter()
nd_ops = collections.Counter()
for row in r["rows"]:
    key = (row["iteration"], row["call_index"])
    path = "iterations/%06d/calls/%06d" % key
    if row["outcome"] != "ok":
        by_op[("raised", labels.get(key))] += 1
    elif row["mismatched"] == 0:
        exact += 1
    elif path in nondet:
        nd_ops[labels.get(key)] += 1
    else:
        differ += 1
        by_op[("differs", labels.get(key))] += 1
print("golden replay of %d calls on %s: bit-exact %d, nondeterministic kernel %d, differ %d, raised %d"
      % (r["replayed"], r["device"], exact, sum(nd_ops.values()), differ, r["failed"]))
for k, v in nd_ops.most_common(12):
    print("  nondeterministic %-60s %d" % (k, v))
for k, v in by_op.most_common(15):
    print("  %-8s %-60s %d" % (k[0], k[1], v))
for e in r["errors"][:5]:
    print("  raised:", e["call"], e["op"], e["message"][:240])
