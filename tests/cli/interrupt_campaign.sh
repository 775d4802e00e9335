#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ctrl-C during `peat save campaign` (the workbench's Cancel, or closing it during the campaign,
# sends the same SIGINT): the point in flight ends, exit 130, and the session keeps the points
# finished in a run marked "cancelled".   usage: interrupt_campaign.sh PEAT LENET_WEIGHTS WORKDIR
set -u
peat=$1 weights=$2 dir=$3
session="$dir/campaign-interrupted.h5"
rm -f "$session"
PEAT_EVENTS=jsonl "$peat" save campaign -m lenet -w "$weights" --images 1000 --batch 100 --flips 1,2,4,8,16,32,64,128,256,512,1024,2048,4096 \
  --schemes none,save,tmr,ecc -s "$session" >"$dir/interrupt-campaign.out" 2>&1 &
pid=$!
for _ in $(seq 1 300); do  # until a point is stored
  grep -q '"event":"point"' "$dir/interrupt-campaign.out" 2>/dev/null && break
  sleep 0.2
done
kill -INT $pid
wait $pid
rc=$?
[[ $rc -eq 130 ]] || { echo "expected exit 130 after SIGINT, got $rc"; tail -5 "$dir/interrupt-campaign.out"; exit 1; }
info=$("$peat" info "$session") || { echo "the interrupted session is unreadable"; exit 1; }
echo "$info" | grep -q "save-campaign: .*cancelled" || { echo "run not marked cancelled:"; echo "$info"; exit 1; }
grep -q "campaign stopped early after" "$dir/interrupt-campaign.out" || { echo "no 'stopped early' line"; tail -5 "$dir/interrupt-campaign.out"; exit 1; }
echo "ok: $(echo "$info" | grep save-campaign:) ($(grep -o 'after [0-9]* of [0-9]* points' "$dir/interrupt-campaign.out"))"
