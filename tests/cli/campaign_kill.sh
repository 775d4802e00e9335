#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A SAVE campaign killed outright (SIGKILL) keeps the points it finished: the session opens and its
# points table holds them.   usage: campaign_kill.sh PEAT WEIGHTS PYTHON WORKDIR
set -u
peat=$1 weights=$2 python=$3 dir=$4
out="$dir/campaign-killed.h5"
rm -f "$out"
"$peat" save campaign -m lenet -w "$weights" --mode interval --images 1000 --batch 50 \
  --flips 1,2,4,8,16,32,64,128,256,512,1024,2048,4096,4096,4096,4096,4096,4096,4096,4096 \
  -s "$out" >"$dir/campaign-killed.out" 2>&1 &
pid=$!
# The writer flushes after each point; peek without HDF5's file lock until a few are there.
for _ in $(seq 1 300); do
  sleep 0.2
  n=$(HDF5_USE_FILE_LOCKING=FALSE "$python" -c "import h5py,sys; print(len(h5py.File(sys.argv[1],'r')['runs/save-campaign/tables/points']))" "$out" 2>/dev/null || echo 0)
  [[ "$n" -ge 3 ]] && break
done
kill -KILL $pid 2>/dev/null
{ wait $pid; } 2>/dev/null  # no "Killed" job notice before the verdict line
"$peat" info "$out" >/dev/null || { echo "the killed campaign's session is unreadable"; exit 1; }
n=$("$python" -c "import h5py,sys; t=h5py.File(sys.argv[1],'r')['runs/save-campaign/tables/points'][()]; assert all(0<=r['accuracy']<=1 for r in t); print(len(t))" "$out") \
  || { echo "no readable points table"; exit 1; }
[[ "$n" -ge 1 && "$n" -lt 100 ]] || { echo "expected a partial table, got $n points"; cat "$dir/campaign-killed.out"; exit 1; }
echo "ok: $n points kept"
