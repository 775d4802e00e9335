#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Queues a sharded PEAT campaign on Slurm: an array of N shard tasks, then the merge, which runs
# only if every task succeeded (afterok). Extra sbatch options go in SBATCH_* environment variables
# (e.g. SBATCH_PARTITION, SBATCH_TIMELIMIT) or in the #SBATCH lines of the two scripts.
#   peat-submit.sh N OUT PEAT-ARGS...
#   e.g. peat-submit.sh 64 resnet-bits.h5 save check-bits -m lenet -w weights.h5
# After a failure, run the same line again: finished shards are skipped.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 N OUT PEAT-ARGS..." >&2; exit 2; }
count=$1 out=$2; shift 2
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "$0: N must be a positive number, not '$count'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
array=$(sbatch --parsable --array="0-$((count - 1))" "$here/peat-shard.sbatch" "$out" "$@")
array=${array%%;*}  # "JOBID;CLUSTER" on federated clusters
merge=$(sbatch --parsable --dependency="afterok:$array" "$here/peat-merge.sbatch" "$out" "$count")
echo "queued: shards as array job $array, merge as job $merge (after every shard succeeds) into $out"
