#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sharded playback: three shards (--shard i/3 --out) of a replay through a seeded fault kernel,
# merged by `peat merge` into the recorded session, equal the one-process replay row for row (per
# call errors and every injection: faults are drawn per call); with --mpi over 2 ranks (when
# mpirun is there) too. Bad shards and bad combinations are refused with one error line.
#                                                          usage: playback_shards.sh PEAT PYTHON WORKDIR
set -u
source "$(dirname "$0")/expect_error.sh"
peat=$1 python=$2 dir=$3/playback-shards
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
"$peat" profile --model mlp --iterations 20 --record-every 5 --out rec.h5 >/dev/null 2>&1 || { echo "profile failed"; exit 1; }
cp rec.h5 one.h5 && cp rec.h5 merged.h5
replay=(playback -k bitflip:count=3 --seed 4)
foreign=(playback -k bitflip:count=3 --seed 5)
"$peat" "${replay[@]}" -s one.h5 >/dev/null 2>&1 || { echo "the one-process replay failed"; exit 1; }
for i in 0 1 2; do
  "$peat" "${replay[@]}" -s rec.h5 --shard $i/3 --out s$i.h5 >/dev/null 2>&1 || { echo "shard $i failed"; exit 1; }
done
"$peat" "${foreign[@]}" -s rec.h5 --shard 1/3 --out foreign.h5 >/dev/null 2>&1 || { echo "the foreign shard failed"; exit 1; }
"$peat" merge s1.h5 s2.h5 s0.h5 -s merged.h5 >merge.out 2>&1 || { echo "merge failed: $(cat merge.out)"; exit 1; }
grep -q "merged 3 playback shards, 32 calls and 96 injections, into run 'playback-bitflip' of merged.h5" merge.out ||
  { echo "unexpected merge summary: $(cat merge.out)"; exit 1; }
compare='
import h5py, sys
import numpy as np
a = h5py.File(sys.argv[1], "r")["runs/playback-bitflip"]
b = h5py.File(sys.argv[2], "r")["runs/playback-bitflip"]
assert b.attrs["status"] in (b"complete", "complete")
for t in ("call_errors", "injections"):
    x, y = a["tables/" + t][()], b["tables/" + t][()]
    assert len(x) == len(y) > 0, (t, len(x), len(y))
    for n in x.dtype.names:
        same = (x[n] == y[n]) | ((x[n] != x[n]) & (y[n] != y[n])) if x[n].dtype.kind == "f" else x[n] == y[n]
        assert same.all(), (t, n)
print("same")'
"$python" -c "$compare" one.h5 merged.h5 | grep -q same || { echo "the merged replay differs from one process"; exit 1; }
cp rec.h5 out.h5
expect_error "shard 2/3 is missing" merge s0.h5 s1.h5 -s out.h5
expect_error "appears twice" merge s0.h5 s1.h5 s2.h5 s2.h5 -s out.h5
expect_error "replays another campaign than s0.h5 (seed=5 vs seed=4)" merge s0.h5 foreign.h5 s2.h5 -s out.h5
"$python" -c 'import h5py,sys; assert "playback-bitflip" not in h5py.File(sys.argv[1],"r")["runs"]' out.h5 ||
  { echo "a refused merge wrote a run"; exit 1; }
expect_error "give --out" "${replay[@]}" -s rec.h5 --shard 0/2
expect_error "drop --shard" "${replay[@]}" -s rec.h5 --shard 0/2 --out x.h5 --store-outputs
expect_error "is not INDEX/COUNT" "${replay[@]}" -s rec.h5 --shard 3/3 --out x.h5
expect_error "has no call to replay" "${replay[@]}" -s rec.h5 --shard 40/50 --out x.h5
if command -v mpirun >/dev/null && "$peat" env 2>/dev/null | grep -q '^MPI  *yes'; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  cp rec.h5 mpi.h5
  mpirun -n 2 --bind-to none "$peat" "${replay[@]}" -s mpi.h5 --mpi --shards 3 >mpi.out 2>&1 || { echo "mpirun failed: $(tail -3 mpi.out)"; exit 1; }
  "$python" -c "$compare" one.h5 mpi.h5 | grep -q same || { echo "the MPI replay differs from one process"; exit 1; }
  expect_error "--mpi chooses the shards" "${replay[@]}" -s mpi.h5 --mpi --out x.h5
  echo "ok: three playback shards, and 2 MPI ranks, equal the one-process replay; bad shards refused"
else
  echo "ok: three playback shards equal the one-process replay; bad shards refused (no MPI here)"
fi
