#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sharded SAVE campaigns: two shards merged equal one process with the same seed (every column but
# the timings); a missing, duplicated, unfinished or foreign shard is refused with one error line and nothing
# is written.   usage: campaign_merge.sh PEAT WEIGHTS PYTHON WORKDIR
set -u
source "$(dirname "$0")/expect_error.sh"
peat=$1 weights=$2 python=$3 dir=$4/merge
same_points="$(cd "$(dirname "$0")" && pwd)/same_points.py"
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
base=(save campaign -m lenet -w "$weights" --mode interval --schemes none,save,ecc)
args=("${base[@]}" --images 200 --flips 1,64,1024,4096)
"$peat" "${args[@]}" -s whole.h5 >/dev/null 2>&1 || { echo "the whole campaign failed"; exit 1; }
"$peat" "${args[@]}" --shard 0/2 -s s0.h5 >/dev/null 2>&1 || { echo "shard 0 failed"; exit 1; }
"$peat" "${args[@]}" --shard 1/2 -s s1.h5 >/dev/null 2>&1 || { echo "shard 1 failed"; exit 1; }
"$peat" "${args[@]}" --shard 1/2 --seed 5 -s foreign.h5 >/dev/null 2>&1 || { echo "the foreign shard failed"; exit 1; }
"$peat" save merge s1.h5 s0.h5 -s merged.h5 || { echo "merge failed"; exit 1; }
"$python" "$same_points" whole.h5 merged.h5 12 || exit 1
"$python" - <<'PY' || exit 1
import h5py
run = h5py.File("merged.h5", "r")["runs/save-campaign"]
assert run.attrs["status"] in (b"complete", "complete"), run.attrs["status"]
PY
absent=out.h5
expect_error "shard 1/2 is missing" save merge s0.h5 -s out.h5
expect_error "appears twice" save merge s0.h5 s0.h5 s1.h5 -s out.h5
expect_error "another campaign than s0.h5 (seed=5 vs seed=1)" save merge s0.h5 foreign.h5 -s out.h5
expect_error "no such file" save merge s0.h5 gone.h5 -s out.h5
expect_error "holds no shard to merge" save merge "$weights" -s out.h5
# A shard killed mid-run (a long one, killed once its run exists): its session keeps its finished
# points but the merge refuses it.
"$peat" "${base[@]}" --images 5000 --batch 100 --flips 1,1,1,1,1,1,1,1,1,1,4096,4096,4096,4096,4096,4096,4096,4096,4096,4096 \
  --shard 1/2 -s killed.h5 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  sleep 0.1
  HDF5_USE_FILE_LOCKING=FALSE "$python" -c "import h5py,sys; h5py.File(sys.argv[1],'r')['runs/save-campaign/tables/verifiers']" killed.h5 2>/dev/null && break
done
kill -KILL $pid 2>/dev/null
{ wait $pid; } 2>/dev/null
expect_error "did not finish (status interrupted)" save merge s0.h5 killed.h5 -s out.h5
echo "ok: two shards merge into the single-process campaign; bad shards refused"
