#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The build's layer check (cmake/PeatCheckLayers.cmake) on the tree as it is, then on a copy of
# core/ with each of the cycles planted: analyzer including the session layer, and the
# HDF5 layer including the analyzer. The first must pass, every planted one must fail and name
# the file, its include and both layers.
set -euo pipefail
root=$1 table=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -DROOT="$root" -DTABLE="$table" -DSTAMP="$work/ok" -P "$root/cmake/PeatCheckLayers.cmake"
plant() {  # plant FILE INCLUDE WANT: a copy of core/ where FILE includes INCLUDE; the check must refuse it
  rm -rf "$work/tree" && mkdir -p "$work/tree" && cp -r "$root/core" "$work/tree/"
  printf '#include "%s"\n' "$2" >> "$work/tree/core/$1"
  if cmake -DROOT="$work/tree" -DTABLE="$table" -DSTAMP="$work/bad" -P "$root/cmake/PeatCheckLayers.cmake" \
      > "$work/out" 2>&1; then
    echo "FAIL: core/$1 including $2 passed the layer check"; exit 1
  fi
  grep -qF "$3" "$work/out" || { cat "$work/out"; echo "FAIL: the refusal does not say: $3"; exit 1; }
  echo "refused: core/$1 -> $2"
}
plant analyzer/numerics.h core/store/session.h \
  "core/analyzer/numerics.h (layer analyzer) includes core/store/session.h (layer store), but analyzer uses only"
plant store/h5.cpp core/analyzer/error_summary.h \
  "core/store/h5.cpp (layer h5) includes core/analyzer/error_summary.h (layer analyzer)"
plant fp/format.cpp core/save/graph.h "core/fp/format.cpp (layer fp) includes core/save/graph.h (layer save)"
plant save/bits.cpp core/torch/ops/op_types.h \
  "core/save/bits.cpp (layer save) includes core/torch/ops/op_types.h, which belongs to no core layer"
echo "layer check: ok"
