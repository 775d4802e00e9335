#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 21's detector target: a recorded transformer's GEMMs (the zoo's chargpt) replayed through
# every block-scaled candidate and the planted bugs, then `peat detect -s`. Prints, per candidate,
# the verdicts on calls with recorded operands (linear: forward and both backward GEMMs) and on
# calls without (the attention matmuls), and how often the format and block are named.
#   usage: tests/bench/block_formats.sh PEAT [WORKDIR] [ITERATIONS]
set -eu
peat=$1 dir=${2:-$(mktemp -d)} iterations=${3:-3}
mkdir -p "$dir" && cd "$dir"
"$peat" profile --model chargpt -n "$iterations" --record-every 2 --batch 16 -o gpt.h5 --force >/dev/null
printf '%-28s %-34s %s\n' candidate "with operands (named/calls)" "outputs only: verdicts"
for k in mxfp8-e4m3 mxfp8-e5m2 mxfp6-e3m2 mxfp6-e2m3 mxfp4 nvfp4 mxfp4:block=16 mxfp4:output=1 nvfp4:output=1 \
         mxfp4:bug=wrong-block mxfp4:bug=truncated-scale mxfp4:bug=wrong-dim nvfp4:bug=wrong-block \
         nvfp4:bug=truncated-scale mxfp8-e4m3:bug=wrong-block mxfp8-e4m3:output=1 mxfp6-e3m2:output=1 \
         missing-ktile tile-edge; do
  run=pb-$(echo "$k" | tr ':=' '--')
  "$peat" playback -s gpt.h5 -k "$k" --store-outputs --name "$run" >/dev/null
  "$peat" detect -s gpt.h5 --run "$run" --json >"$run.json"
  python3 - "$k" "$run.json" <<'PY'
import collections, json, sys
kernel, path = sys.argv[1], sys.argv[2]
calls = json.load(open(path))["calls"]
name = kernel.split(":")[0]
block = dict(p.split("=") for p in kernel.split(":")[1].split(",")) if ":" in kernel else {}
want = block.get("block", "16" if name == "nvfp4" else "32")
bug = "bug" in block or name in ("missing-ktile", "tile-edge")
withops = [c for c in calls if c["op"] == "linear"]
named = sum(1 for c in withops if c["verdict"] == "precision_loss" and name in [c["parameters"].get("format")] + c["parameters"].get("also_reproduced_by", "").split(",")
            and c.get("parameters", {}).get("block") == want)
legit = sum(1 for c in withops if c["verdict"] == "precision_loss")
other = collections.Counter(c["verdict"] for c in calls if c["op"] != "linear")
verdicts = collections.Counter(c["verdict"] for c in withops)
summary = (f"precision_loss {legit}/{len(withops)}" if bug else f"{named}/{len(withops)}") + " " + \
    ",".join(f"{v}:{n}" for v, n in sorted(verdicts.items()))
print(f"{kernel:28s} {summary:34s} " + ",".join(f"{v}:{n}" for v, n in sorted(other.items())))
PY
done
