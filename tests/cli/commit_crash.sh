#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The moments a random SIGKILL rarely hits: inside a commit (core/store/journal.h). For each stage of
# a commit (half the journal written; the journal complete; half its pages applied to the file) and
# a few commits of a run, `peat profile` kills itself there (PEAT_TEST_COMMIT_CRASH). Then:
# - a journal is left where one is expected (the kill landed in the window, beside the final name);
# - `peat info --verify` opens the session and every dataset matches its checksum;
# - it holds at least the iterations reported saved before the kill;
# - the journal is gone (replayed or dropped) and stock h5dump reads every object header;
# - a replayed journal keeps the iteration its commit was flushing; a half-written one loses it.
#                                                             usage: commit_crash.sh PEAT WORKDIR
set -u
peat=$1 dir=$2
work="$dir/commit-crash"
rm -rf "$work" && mkdir -p "$work"
cases=0
declare -A held
for commit in 3 12 30; do
  for stage in journal-half journal apply-half; do
    session="$work/$stage-$commit.h5"
    PEAT_TEST_COMMIT_CRASH="$commit:$stage" "$peat" --events jsonl profile --model mlp --iterations 40 \
      --record-every 1 --batch 32 --out "$session" >"$work/out" 2>&1 &
    wait $! 2>/dev/null
    rc=$?
    [[ $rc -eq 137 ]] || { echo "$stage $commit: expected the run to be killed (137), got $rc"; cat "$work/out"; exit 1; }
    [[ -e "$session-journal" ]] || { echo "$stage $commit: no journal beside $session after the kill: $(ls -a "$work")"; exit 1; }
    saved=$(grep -o '"saved":[0-9]*' "$work/out" | tail -1 | cut -d: -f2)
    saved=${saved:-0}
    report=$("$peat" info --verify --json "$session" 2>&1) || {
      echo "$stage $commit: the session does not verify: $report"; exit 1; }
    complete=$(echo "$report" | grep -o '"golden":[0-9]*' | cut -d: -f2)
    [[ ${complete:-0} -ge $saved ]] || { echo "$stage $commit: $saved reported saved, $complete complete"; exit 1; }
    [[ ! -e "$session-journal" ]] || { echo "$stage $commit: the journal was left after recovery"; exit 1; }
    h5dump -H "$session" >/dev/null 2>"$work/h5dump.err" || {
      echo "$stage $commit: h5dump cannot read the recovered file: $(head -3 "$work/h5dump.err")"; exit 1; }
    echo "$stage, commit $commit: $saved reported saved, $complete complete and verified; h5dump reads it"
    cases=$((cases + 1))
    held[$stage]=${complete:-0}
    rm -f "$session"
  done
  # A complete journal is the commit it was writing: replayed, the session holds what that commit
  # added (here, the iteration it was flushing); a half-written one is dropped with its commit.
  [[ ${held[journal]} -eq ${held[apply-half]} ]] || {
    echo "commit $commit: a complete journal gave ${held[journal]} iterations, a half-applied one ${held[apply-half]}"; exit 1; }
  if [[ $commit -gt 3 && ${held[journal]} -ne $((held[journal-half] + 1)) ]]; then
    echo "commit $commit: replaying the journal kept ${held[journal]} iterations, dropping it ${held[journal-half]}"; exit 1
  fi
done
echo "ok: $cases kills inside commits recovered"
