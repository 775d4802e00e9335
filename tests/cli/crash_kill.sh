#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash consistency: `peat profile` killed with SIGKILL at 20 moments (seeded, spread from start-up
# to the end of training). After each kill the session must open with `peat info --verify` (every
# dataset of a complete iteration or checkpoint read back against its CRC-32), and hold at least the
# iterations the run had reported saved (the "saved" field of its last loss event, docs/events.md). A kill before the
# session's header is flushed must leave no file at all.   usage: crash_kill.sh PEAT WORKDIR [KILLS]
set -u
peat=$1 dir=$2 kills=${3:-20}
RANDOM=${PEAT_CRASH_SEED:-20261130}  # the same moments on every run
work="$dir/crash"
rm -rf "$work" && mkdir -p "$work"
opened=0 nofile=0 total_saved=0
for round in $(seq 1 "$kills"); do
  session="$work/s$round.h5"
  # 0.6 s (LibTorch still loading) to 4.6 s (training and flushing): a quarter before training starts
  delay=$(awk -v r=$((RANDOM % 1000)) 'BEGIN { printf "%.3f", 0.6 + 4.0 * r / 1000 }')
  "$peat" --events jsonl profile --model mlp --iterations 600 --record-every 1 --batch 32 \
    --out "$session" >"$work/out$round" 2>&1 &
  pid=$!
  sleep "$delay"
  kill -KILL $pid 2>/dev/null
  { wait $pid; } 2>/dev/null
  saved=$(grep -o '"saved":[0-9]*' "$work/out$round" | tail -1 | cut -d: -f2)
  saved=${saved:-0}
  if [[ ! -e "$session" ]]; then
    [[ $saved -eq 0 ]] || { echo "round $round: no session after $saved iterations were reported saved"; exit 1; }
    ls -a "$work" | grep -q "partial" && { echo "round $round: a staging file was left: $(ls -a "$work")"; exit 1; }
    nofile=$((nofile + 1))
    continue
  fi
  report=$("$peat" info --verify --json "$session" 2>&1) || {
    echo "round $round (killed after ${delay} s, $saved saved): the session does not verify: $report"; exit 1; }
  complete=$(echo "$report" | grep -o '"golden":[0-9]*' | cut -d: -f2)
  complete=${complete:-0}
  [[ $complete -ge $saved ]] || {
    echo "round $round: $saved iterations were reported saved but the session holds $complete: $report"; exit 1; }
  echo "round $round: killed after ${delay} s; $saved reported saved, $complete complete and verified"
  opened=$((opened + 1))
  total_saved=$((total_saved + complete))
  rm -f "$work"/.s*.partial-* 2>/dev/null  # a staging file of a killed creation is only litter, never a session
  rm -f "$session"
done
echo "ok: $kills kills; $opened sessions verified ($total_saved complete iterations in all), $nofile killed before the session existed"
[[ $opened -ge $((kills / 4)) ]] || { echo "too few kills landed during training to mean anything"; exit 1; }
