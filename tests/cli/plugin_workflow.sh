#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# docs/plugins.md's workflow with the wrong example kernel: it loads with one warning that says how
# wrong its probe GEMM was, playback stores its outputs, and the detector names an indexing error
# on the calls whose column count leaves a partial tile (and none on the others).
#   plugin_workflow.sh PEAT PLUGIN SESSION
set -euo pipefail
peat=$1 plugin=$2 source=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$source" "$work/s.h5"
"$peat" playback -s "$work/s.h5" -k "plugin:path=$plugin" --store-outputs --name tilebug >"$work/out" 2>"$work/err"
grep -q "^peat: warning: plugin 'user-tilebug' computed its probe GEMM (7x5 by 5x6, exact in fp32) with [0-9]* of 42 elements wrong" "$work/err" \
  || { echo "FAIL: no probe warning"; cat "$work/err"; exit 1; }
[ "$(grep -c . "$work/err")" = 1 ] || { echo "FAIL: more than the warning on stderr"; cat "$work/err"; exit 1; }
"$peat" detect -s "$work/s.h5" --run tilebug >"$work/verdicts"
index=$(grep -c " index_error " "$work/verdicts" || true)
echo "calls named index_error: $index"
[ "$index" -gt 0 ] || { echo "FAIL: the detector found no indexing error"; cat "$work/verdicts"; exit 1; }
# fc1 of the MLP has 256 output columns (full 8-wide tiles): its forward calls are correct up to order
if grep -E " fc1 +linear " "$work/verdicts" | grep -q "index_error"; then
  echo "FAIL: a call with full tiles only was called an indexing error"; grep " fc1 " "$work/verdicts"; exit 1
fi
echo "ok"
