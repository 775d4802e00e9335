#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The session the workbench's SAVE view test reads: LeNet's selection and a small campaign.
# usage: save_views_session.sh PEAT WEIGHTS OUT
set -eu
peat=$1 weights=$2 out=$3
rm -f "$out"
"$peat" save analyze -m lenet -w "$weights" --budget-mib 0.005 -s "$out" >/dev/null  # room for some tiles only (the working set: 23 KiB)
"$peat" save campaign -m lenet -w "$weights" --images 200 --flips 1,64,1024,4096 --schemes none,save,ecc --no-rerun-faults \
  --budget-mib 1 -s "$out" >/dev/null 2>&1
echo "ok: $out"
