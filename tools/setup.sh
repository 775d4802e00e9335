#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian 12 package that PEAT Workbench's build, tests and demo need, then the project
# virtual environment from PyPI (PyTorch 2.x and the ONNX references, pinned in
# tools/python-requirements.txt) outside the build tree, so that a fresh clone reuses it.
# Idempotent: packages already installed are skipped, `apt-get update` runs at most once, and the
# environment is made once per machine and set of pins (tools/venv-path.sh prints where).
set -euo pipefail
cd "$(dirname "$0")/.."

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
  # the Python package (pybind11 over the torch-free core) and the project virtual environment
  pybind11-dev python3-dev python3-venv
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

make_venv() {
  local venv stamp want
  venv=$(tools/venv-path.sh)
  stamp="$venv/.peat-requirements"
  if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$stamp" tools/python-requirements.txt; then
    echo "setup: the virtual environment $venv is ready"
    return
  fi
  echo "setup: making the virtual environment $venv (PyTorch 2.x from PyPI: a few GB, once per machine)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv"
  # A pin bump starts from the newest finished environment of another set of pins (its packages
  # hard-linked: pip removes and writes whole files, never edits one in place), so changing one pin
  # downloads that package, not PyTorch's few GB again.
  local site seed
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  seed=$(ls -td "$(dirname "$venv")"/venv-*/ 2>/dev/null | while read -r d; do
           d=${d%/}
           [[ "$d" != "$venv" && -f "$d/.peat-requirements" && -d "$d/${site#"$venv"/}" ]] && { echo "$d"; break; }
         done || true)
  if [[ -n "$seed" ]]; then
    echo "setup: starting from the packages of $seed"
    rm -rf "$site"
    cp -al "$seed/${site#"$venv"/}" "$site"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r tools/python-requirements.txt
  cp tools/python-requirements.txt "$stamp"   # written last: a broken install is made again next time
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages are installed"
  make_venv
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
make_venv
