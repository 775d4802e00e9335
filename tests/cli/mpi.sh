#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `mpirun -n 2 peat ... --mpi` (OpenMPI, on this machine):
# 1. check-bits over 2 ranks gives exactly the one-process result with the same seed;
# 2. a rank killed (SIGKILL) as it starts its second shard: the job fails, the shard that rank had
#    finished stays on disk and verifies; the same command run again keeps the finished shards,
#    computes only the rest, and the merged result is again exactly the one-process one;
# 3. a SAVE campaign over 2 ranks: its points equal the one-process campaign's (but the timings);
# 4. a shard file that is no session is computed again.
#                                                    usage: mpi.sh PEAT WEIGHTS PYTHON WORKDIR
set -u
peat=$1 weights=$2 python=$3 dir=$4/mpi
same_points="$(cd "$(dirname "$0")" && pwd)/same_points.py"
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun -n 2 --bind-to none)
args=(save check-bits -m lenet -w "$weights" --batch 16 --weight-flips 6000 --activation-flips 600)
same() {  # same A.json B.json: equal but for the seconds
  "$python" -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
a.pop("seconds"); b.pop("seconds")
assert a == b, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}' "$1" "$2"
}
"$peat" "${args[@]}" --threads 1 --json >one.json 2>/dev/null || { echo "the one-process run failed"; exit 1; }

"${mpi[@]}" "$peat" "${args[@]}" --mpi -s two.h5 --json >two.json 2>two.err || { echo "mpirun failed: $(tail -3 two.err)"; exit 1; }
grep -q "2 shards over 2 ranks: 2 computed, 0 kept" two.err || { echo "unexpected summary: $(cat two.err)"; exit 1; }
same one.json two.json || { echo "2 ranks differ from one process"; exit 1; }
[[ -e two.h5.shards/0-of-2.h5 && -e two.h5.shards/1-of-2.h5 ]] || { echo "no shard files: $(ls two.h5.shards)"; exit 1; }

# A shard file that is no session (damaged, or something else) is computed again, the rest kept.
echo "not a session" >two.h5.shards/1-of-2.h5
rm -f two.h5
"${mpi[@]}" "$peat" "${args[@]}" --mpi -s two.h5 --json >redo.json 2>redo.err || { echo "the redo failed: $(tail -3 redo.err)"; exit 1; }
grep -q "2 shards over 2 ranks: 1 computed, 1 kept" redo.err || { echo "the damaged shard was not redone: $(cat redo.err)"; exit 1; }
same one.json redo.json || { echo "the redone job differs from one process"; exit 1; }

PEAT_TEST_RANK_DIES=1:3 "${mpi[@]}" "$peat" "${args[@]}" --mpi --shards 4 -s dead.h5 --json >dead.json 2>dead.err &&
  { echo "the job whose rank died succeeded"; exit 1; }
[[ ! -e dead.h5 ]] || { echo "a merged result was written although a rank died"; exit 1; }
"$peat" info --verify dead.h5.shards/1-of-4.h5 >/dev/null 2>&1 || { echo "the dead rank's finished shard is not intact"; exit 1; }
"${mpi[@]}" "$peat" "${args[@]}" --mpi --shards 4 -s dead.h5 --json >again.json 2>again.err ||
  { echo "the rerun failed: $(tail -3 again.err)"; exit 1; }
kept=$(grep -o "[0-9]* kept from an earlier run" again.err | cut -d' ' -f1)
[[ ${kept:-0} -ge 1 ]] || { echo "the rerun kept no finished shard: $(cat again.err)"; exit 1; }
same one.json again.json || { echo "the resumed job differs from one process"; exit 1; }

campaign=(save campaign -m lenet -w "$weights" --mode interval --schemes none,save --images 100 --batch 50 --flips 1,64,4096)
"$peat" "${campaign[@]}" -s c1.h5 >/dev/null 2>&1 || { echo "the one-process campaign failed"; exit 1; }
"${mpi[@]}" "$peat" "${campaign[@]}" --mpi -s c2.h5 >/dev/null 2>c2.err || { echo "the MPI campaign failed: $(tail -3 c2.err)"; exit 1; }
"$python" "$same_points" c1.h5 c2.h5 6 || exit 1
echo "ok: 2 ranks equal one process; a dead rank's finished shard is kept and the rerun completes the job; the SAVE campaign too (kept after the kill: $kept)"
