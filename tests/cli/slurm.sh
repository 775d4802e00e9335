#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# packaging/slurm end to end, with a stand-in `sbatch` that runs what it is given as Slurm would:
# each array task with SLURM_ARRAY_TASK_ID/COUNT set, and the merge only if the job it depends on
# (afterok) succeeded. peat-submit.sh over 3 shards must give exactly the one-process check-bits
# result; a task that fails blocks the merge, and submitting again redoes only what is missing.
#                                              usage: slurm.sh PEAT WEIGHTS PYTHON SOURCE_DIR WORKDIR
set -u
peat=$1 weights=$2 python=$3 src=$4 dir=$5/slurm
rm -rf "$dir" && mkdir -p "$dir/bin" && cd "$dir" || exit 1
cat >bin/sbatch <<'SB'
#!/usr/bin/env bash
# stand-in sbatch: --parsable, --array=0-K and --dependency=afterok:ID, run at once
array="" dependency="" args=()
for a in "$@"; do
  case $a in
    --array=*) array=${a#--array=} ;;
    --dependency=afterok:*) dependency=${a#--dependency=afterok:} ;;
    --parsable) ;;
    *) args+=("$a") ;;
  esac
done
id=$(( $(cat jobs 2>/dev/null || echo 1000) + 1 )); echo $id >jobs
echo "${args[*]}" >>submitted
if [[ -n $dependency && $(cat "status-$dependency") != ok ]]; then echo never >"status-$id"; echo $id; exit 0; fi
status=ok
if [[ -n $array ]]; then
  last=${array#0-}
  for ((i = 0; i <= last; ++i)); do
    SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=$((last + 1)) SLURM_ARRAY_TASK_MAX=$last SLURM_CPUS_PER_TASK=1 \
      bash "${args[@]}" >>"task-$id.log" 2>&1 || status=failed
  done
else
  bash "${args[@]}" >>"job-$id.log" 2>&1 || status=failed
fi
echo $status >"status-$id"
echo $id
SB
chmod +x bin/sbatch
export PATH="$dir/bin:$PATH" PEAT="$peat"
args=(save check-bits -m lenet -w "$weights" --batch 16 --weight-flips 3000 --activation-flips 300)
"$peat" "${args[@]}" --threads 1 --json >one.json 2>/dev/null || { echo "the one-process run failed"; exit 1; }

# A first submission where shard 1 fails (its binary is not found): no merge.
PEAT=/nonexistent/peat bash "$src/packaging/slurm/peat-submit.sh" 3 out.h5 "${args[@]}" >submit1.txt 2>&1 ||
  { echo "submit failed: $(cat submit1.txt)"; exit 1; }
[[ $(cat status-1002) == never && ! -e out.h5 ]] || { echo "the merge ran after failed shards"; exit 1; }
# Shard 0 done by hand (as a task that succeeded earlier would have): the resubmission keeps it.
SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=3 bash "$src/packaging/slurm/peat-shard.sbatch" out.h5 "${args[@]}" >/dev/null 2>&1 ||
  { echo "a shard task failed"; exit 1; }
bash "$src/packaging/slurm/peat-submit.sh" 3 out.h5 "${args[@]}" >submit2.txt 2>&1 || { echo "submit failed: $(cat submit2.txt)"; exit 1; }
grep -q "queued: shards as array job 1003, merge as job 1004" submit2.txt || { echo "unexpected: $(cat submit2.txt)"; exit 1; }
[[ $(cat status-1003) == ok && $(cat status-1004) == ok ]] || { echo "a job failed: $(cat task-1003.log job-1004.log)"; exit 1; }
grep -q "shard 0/3: .* is already done" task-1003.log || { echo "shard 0 was not kept: $(cat task-1003.log)"; exit 1; }
"$peat" merge out.h5.shards/{0,1,2}-of-3.h5 --json >merged.json 2>/dev/null || { echo "re-merge failed"; exit 1; }
"$python" - <<'PY' || exit 1
import json, h5py
a, b = json.load(open("one.json")), json.load(open("merged.json"))
a.pop("seconds"); b.pop("seconds")
assert a == b, {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
g = h5py.File("out.h5", "r")["save/lenet-check-bits"]
assert g.attrs["shard"] in (b"merged 3", "merged 3")
assert g["layer_confusions"][()][:, :4].sum() == 3000  # top-1 (then the promise)
PY
echo "ok: the Slurm array and its merge give the one-process result; a failed shard blocks the merge and a resubmission finishes it"
