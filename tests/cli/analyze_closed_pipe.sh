#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `peat analyze --session` prints each call while it stores the analysis: a reader that stops early
# (`| head`, a pager quit) must not stop the store. The analysis still lands complete, and the same
# command to a file prints every call.   usage: analyze_closed_pipe.sh PEAT SESSION WORKDIR
set -u
peat=$1 session=$2 dir=$3
copy="$dir/closed-pipe.h5"
rm -f "$copy"
cp "$session" "$copy"
# stdout line-buffered into a pipe whose reader has already gone: the first line written raises SIGPIPE
stdbuf -oL "$peat" analyze --session "$copy" --run stored --force --name piped 2>"$dir/closed-pipe.err" | true
info=$("$peat" info "$copy") || { echo "the session is unreadable after the closed pipe"; exit 1; }
echo "$info" | grep -q "piped: analysis, kernel -, complete" || {
  echo "the analysis was not stored complete:"; echo "$info"; cat "$dir/closed-pipe.err"; exit 1; }
"$peat" analyze --session "$copy" --run stored --force --name whole >"$dir/closed-pipe.out" 2>/dev/null || exit 1
lines=$(grep -c "^iterations/" "$dir/closed-pipe.out")
verdicts=$(echo "$info" | sed -n 's/.*piped: analysis.* \([0-9]*\) verdicts.*/\1/p')
[[ "$lines" -gt 0 && "$lines" == "$verdicts" ]] || { echo "printed $lines calls, stored $verdicts verdicts"; exit 1; }
echo "ok: $(echo "$info" | grep piped:)"
