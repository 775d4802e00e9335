#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A full disk (emulated by a file-size limit a little above the session's size) while `peat playback`
# adds a run to a session, with a kernel that crashes on 2 of its 16 calls (their outcomes are part
# of what it writes). At 16 KiB, 512 KiB and 1024 KiB of room: exit 1 with one `peat: error:` line,
# and the session still verifies, holds every run it had, and marks the new run failed, with the
# iterations committed before the disk filled (issue 34; core/store/journal.h).
#   full_disk_playback.sh PEAT PLUGIN_DIR RECORDED_SESSION WORKDIR [PYTHON_WITH_H5PY]
set -uo pipefail
peat=$1 plugins=$2 recorded=$3 dir=$4/full-disk-playback python=${5:-python3}
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
trap '' XFSZ  # a write past the limit then fails with EFBIG instead of killing the process
base=$(( $(stat -c %s "$recorded") / 1024 ))
for room in 16 512 1024; do
  cp "$recorded" "s$room.h5"
  ( ulimit -f $((base + room)); exec "$peat" playback -s "s$room.h5" -k "plugin:path=$plugins/libpeat_late_segv.so" \
      --store-outputs --name full ) >"$room.out" 2>"$room.err"
  rc=$?
  [[ $rc -eq 1 ]] || { cat "$room.err"; fail "$room KiB: exit $rc, not 1"; }
  [[ $(wc -l <"$room.err") -eq 1 ]] && grep -q "^peat: error: .*File too large" "$room.err" ||
    { cat "$room.err"; fail "$room KiB: not one 'peat: error:' line naming the full disk"; }
  "$peat" info --verify "s$room.h5" >/dev/null 2>"$room.verify" || { cat "$room.verify"; fail "$room KiB: does not verify"; }
  "$python" - "$recorded" "s$room.h5" <<'PY' || fail "$room KiB: the runs"
import sys, h5py
before, after = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
old = sorted(before["runs"])
assert sorted(set(after["runs"]) - {"full"}) == old, sorted(after["runs"])
for run in old:  # every run it had, with the same iterations and the same status
    assert before["runs"][run].attrs.get("status") == after["runs"][run].attrs.get("status"), run
    if "iterations" in before["runs"][run]:
        assert sorted(before["runs"][run]["iterations"]) == sorted(after["runs"][run]["iterations"]), run
full = after["runs/full"]
status = full.attrs["status"]
status = status.decode() if isinstance(status, bytes) else status
assert status == "failed", status
complete = [i for i in full["iterations"].values() if i.attrs.get("complete") == 1]
print(f"run full: {status}, {len(complete)} complete iteration(s) kept")
PY
  echo "ok: $room KiB of room: $(cat "$room.err")"
done
