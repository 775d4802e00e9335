#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runtime-FI sweeps over frequencies and seeds (--every LIST --seeds LIST): three shards merged by
# `peat merge` hold exactly the runs of the one-process sweep (every table of every run; one golden
# run per seed), and so does `mpirun -n 2 ... --mpi` when MPI is there. Bad shards are refused with
# one error line, and nothing is written.              usage: runtime_fi_sweep.sh PEAT PYTHON WORKDIR
set -u
source "$(dirname "$0")/expect_error.sh"
peat=$1 python=$2 dir=$3/runtime-fi-sweep
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
sweep=(runtime-fi --model mlp --iterations 30 -k bitflip --every 20,50 --seeds 1,2)
"$peat" "${sweep[@]}" -o one.h5 >/dev/null 2>&1 || { echo "the one-process sweep failed"; exit 1; }
for i in 0 1 2; do
  "$peat" "${sweep[@]}" --shard $i/3 -o s$i.h5 >/dev/null 2>&1 || { echo "shard $i failed"; exit 1; }
done
"$peat" runtime-fi --model mlp --iterations 30 -k bitflip --every 20,60 --seeds 1,2 --shard 1/3 -o foreign.h5 >/dev/null 2>&1 ||
  { echo "the foreign shard failed"; exit 1; }
"$peat" merge s2.h5 s0.h5 s1.h5 -s merged.h5 >merge.out 2>&1 || { echo "merge failed: $(cat merge.out)"; exit 1; }
grep -q "merged 3 runtime-FI sweep shards, 4 points and 2 golden runs, into merged.h5" merge.out ||
  { echo "unexpected merge summary: $(cat merge.out)"; exit 1; }
compare='
import h5py, sys
a, b = h5py.File(sys.argv[1], "r")["runs"], h5py.File(sys.argv[2], "r")["runs"]
names = sorted(a)
assert names == sorted(b), (names, sorted(b))
assert len(names) == 6 and sum(n.startswith("golden-seed-") for n in names) == 2, names
for r in names:
    assert b[r].attrs["status"] in (b"complete", "complete"), r
    assert sorted(a[r]["tables"]) == sorted(b[r]["tables"]), r
    for t in a[r]["tables"]:
        x, y = a[r]["tables"][t][()], b[r]["tables"][t][()]
        assert len(x) == len(y), (r, t)
        for n in x.dtype.names:
            same = (x[n] == y[n]) | ((x[n] != x[n]) & (y[n] != y[n])) if x[n].dtype.kind == "f" else x[n] == y[n]
            assert same.all(), (r, t, n)
print("same")'
"$python" -c "$compare" one.h5 merged.h5 | grep -q same || { echo "the merged sweep differs from one process"; exit 1; }
absent=out.h5
expect_error "shard 1/3 is missing" merge s0.h5 s2.h5 -s out.h5
expect_error "appears twice" merge s0.h5 s1.h5 s1.h5 s2.h5 -s out.h5
expect_error "belongs to another campaign than s0.h5 (every=20,60 vs every=20,50)" merge s0.h5 foreign.h5 s2.h5 -s out.h5
expect_error "already has a run" merge s0.h5 s1.h5 s2.h5 -s merged.h5
expect_error "splits a sweep" runtime-fi --model mlp --iterations 5 -k bitflip --shard 0/2 -o out.h5
expect_error "has no point" "${sweep[@]}" --shard 7/8 -o out.h5
expect_error "sweep the seeds, not --every" runtime-fi --model mlp --iterations 5 -k bitflip --prob 0.1 --every 2,3 -o out.h5
if command -v mpirun >/dev/null && "$peat" env 2>/dev/null | grep -q '^MPI  *yes'; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpirun -n 2 --bind-to none "$peat" "${sweep[@]}" -o mpi.h5 --mpi --shards 4 >mpi.out 2>&1 ||
    { echo "mpirun failed: $(tail -3 mpi.out)"; exit 1; }
  "$python" -c "$compare" one.h5 mpi.h5 | grep -q same || { echo "the MPI sweep differs from one process"; exit 1; }
  echo "ok: three sweep shards, and 2 MPI ranks, equal the one-process sweep; bad shards refused"
else
  echo "ok: three sweep shards equal the one-process sweep; bad shards refused (no MPI here)"
fi
