#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale-out benchmark, whole processes in one run on this machine: check-bits on LeNet (1,000,000
# of its 1.97 M weight-bit flips and 2,000 activation-bit flips, 16 images) as
#   1. one process, one thread;
#   2. one process, every core (the default);
#   3. mpirun -n 2 --mpi (a rank per core, one thread each), shards written and merged;
# and the time per injection that the cost model of docs/scale-out.md uses.   usage: scaleout_bench.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
peat="$build/bin/peat"
weights="$(cd "$(dirname "$0")/../.." && pwd)/data/lenet-fashion-mnist.h5"
work=$(mktemp -d /tmp/peat-scaleout-XXXX)
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
args=(save check-bits -m lenet -w "$weights" --batch 16 --weight-flips 1000000 --activation-flips 2000)
wall() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
one=$(wall "$peat" "${args[@]}" --threads 1)
all=$(wall "$peat" "${args[@]}")
rm -rf m.h5 m.h5.shards
two=$(wall mpirun -n 2 --bind-to none "$peat" "${args[@]}" --mpi -s m.h5)
cores=$(nproc)
printf '1. one process, one thread:        %6.2f s\n' "$one"
printf '2. one process, %d threads:         %6.2f s  (%sx against 1)\n' "$cores" "$all" "$(ratio "$one" "$all")"
printf '3. mpirun -n 2, one thread each:   %6.2f s  (%sx against 1, %sx against 2)\n' "$two" "$(ratio "$one" "$two")" \
  "$(ratio "$all" "$two")"
fixed=$(wall "$peat" save check-bits -m lenet -w "$weights" --batch 16 --weight-flips 1 --activation-flips 1 --threads 1)
printf 'fixed cost of one process (1 flip): %.2f s\n' "$fixed"
awk -v t="$one" -v f="$fixed" 'BEGIN { printf "time per injection (run 1 less the fixed cost, 1,002,000 flips of 16 images): %.1f us\n", (t - f) / 1002000 * 1e6 }' 
rm -rf "$work"
