#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ctrl-C during `peat profile` stops it at an iteration boundary: exit 130 and a readable session
# whose run says "cancelled".   usage: interrupt.sh PEAT WORKDIR
set -u
peat=$1 dir=$2
rm -f "$dir/interrupted.h5"
"$peat" profile --model lenet --iterations 100000 --record-every 3 --out "$dir/interrupted.h5" >"$dir/interrupt.out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do  # until the session exists (the writer holds it locked, so peat info must wait)
  [[ -e "$dir/interrupted.h5" ]] && break
  sleep 0.2
done
sleep 2  # some iterations of training
kill -INT $pid
wait $pid
rc=$?
[[ $rc -eq 130 ]] || { echo "expected exit 130 after SIGINT, got $rc"; cat "$dir/interrupt.out"; exit 1; }
info=$("$peat" info "$dir/interrupted.h5") || { echo "the interrupted session is unreadable"; exit 1; }
echo "$info" | grep -q "golden: profile, kernel golden, cancelled" || { echo "run not marked cancelled:"; echo "$info"; exit 1; }
grep -q "stopped early" "$dir/interrupt.out" || { echo "no 'stopped early' in the summary"; cat "$dir/interrupt.out"; exit 1; }
echo "ok: $(echo "$info" | grep golden:)"
