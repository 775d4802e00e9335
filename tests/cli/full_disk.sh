#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A full disk (emulated with a 1 MiB file-size limit) fails with one clear error line and leaves no
# corrupt session: either a readable one or none.   usage: full_disk.sh PEAT WORKDIR
set -u
peat=$1 dir=$2
rm -f "$dir/full.h5"
trap '' XFSZ  # writes past the limit then fail with EFBIG instead of killing the process
( ulimit -f 1024; exec "$peat" profile --model lenet --iterations 30 --record-every 1 --out "$dir/full.h5" ) \
  >"$dir/full.out" 2>"$dir/full.err"
rc=$?
[[ $rc -eq 1 ]] || { echo "expected exit 1, got $rc"; cat "$dir/full.err"; exit 1; }
[[ $(wc -l <"$dir/full.err") -eq 1 ]] && grep -q "^peat: error: " "$dir/full.err" ||
  { echo "expected one 'peat: error:' line:"; cat "$dir/full.err"; exit 1; }
if [[ -e "$dir/full.h5" ]]; then
  "$peat" info "$dir/full.h5" >/dev/null || { echo "a corrupt session was left behind"; exit 1; }
  echo "ok: $(cat "$dir/full.err") (session kept, readable)"
else
  echo "ok: $(cat "$dir/full.err") (no session left)"
fi
