#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian 12 package that PEAT Workbench's build, tests and demo need.
# Idempotent: packages already installed are skipped, and `apt-get update` runs at most once.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache git pkg-config
  # libraries
  qt6-base-dev qt6-base-dev-tools qt6-svg-dev libqcustomplot-dev libgl-dev
  libhdf5-dev libtorch-dev libcli11-dev libhwy-dev
  # an optimised BLAS for LibTorch (replaces the reference BLAS through update-alternatives)
  libopenblas0-openmp
  # optional GPU compiler for AMD (CUDA comes from /usr/local/cuda when present)
  hipcc libamdhip64-dev
  # data
  dataset-fashion-mnist fortunes
  # tests and demo
  hdf5-tools python3 python3-numpy python3-h5py xvfb xauth imagemagick
  libbenchmark-dev libgtest-dev
  # the exact placement solver of tests/bench/save_placement_optimum.py (HiGHS through SciPy)
  python3-scipy
  # models written by others, exported at test time (TorchScript for PEAT, ONNX for SAVE)
  python3-torch python3-torchvision python3-onnx libonnx-dev libprotobuf-dev protobuf-compiler
  # MPI for --mpi campaigns and their mpirun test (optional at build time)
  libopenmpi-dev openmpi-bin
  # the libFuzzer target for the .npy reader
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
"${sudo[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
