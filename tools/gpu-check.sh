#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU check, in one command, on a machine with an NVIDIA (or AMD) GPU: builds gpu/ alone
# (PEAT_GPU_ONLY: no Qt, HDF5 or LibTorch needed), runs the conformance tests of every device
# against the CPU reference, then the benchmark on the first GPU. Results go to stdout and, when
# $OUT is set, to $OUT/gpu-check.txt. Takes 2-4 minutes (most of it nvcc).
#   tools/gpu-check.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
log=${OUT:+$OUT/gpu-check.txt}
say() { if [[ -n "$log" ]]; then tee -a "$log"; else cat; fi; }
[[ -n "$log" ]] && mkdir -p "$OUT" && : > "$log"

{
  echo "== gpu-check $(date -u +%FT%TZ) on $(hostname)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  "$nvcc_path" --version | tail -1 || true
} 2>&1 | say

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DPEAT_GPU_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DPEAT_CUDA_ARCHS="${PEAT_CUDA_ARCHS:-80;90}" 2>&1 | tail -5 | say
start=$(date +%s)
cmake --build "$build" -j"$(nproc)" 2>&1 | tail -3 | say
echo "build: $(( $(date +%s) - start )) s" | say

modules=$(dirname "$(find "$build" -name 'libpeat_gpu_*.so' -print -quit 2>/dev/null || true)")
export PEAT_MODULE_DIR="$modules"
status=0
echo "== conformance (every device against the CPU reference)" | say
(cd "$build" && ctest --output-on-failure -R 'gpu_conformance' 2>&1) | say || status=1

# The device this machine has, by the driver's device nodes: where there is one, it must work.
expected=""
[[ -e /dev/nvidia0 ]] && expected=cuda:0
[[ -z "$expected" && -e /dev/kfd ]] && expected=hip:0
device=""
for d in cuda:0 hip:0; do
  if "$build/tests/bin/gpu_tests" --device "$d" >/dev/null 2>&1; then device=$d; break; fi
done
if [[ -n "$device" ]]; then
  echo "== benchmark on $device" | say
  "$build/tests/bin/bench_gpu" --device "$device" 2>&1 | say || status=1
elif [[ -n "$expected" ]]; then
  echo "== FAIL: this machine has $expected but its tests do not pass:" | say
  "$build/tests/bin/gpu_tests" --device "$expected" 2>&1 | tail -5 | say || true
  status=1
else
  echo "== no GPU on this machine (no /dev/nvidia0 or /dev/kfd): benchmark skipped" | say
fi
exit $status
