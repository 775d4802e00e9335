#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# User kernels that pass their probe and fail a later call (tests/plugins/late_plugins.c: every GEMM
# with 10 output columns, the MLP's fc3 forward, 2 of the 16 recorded calls) replayed through
# `peat playback` in the kernel host. For each: exit 0 (never a signal), one warning line, the two
# calls with their outcome and NaN errors, the 14 others ok with their numbers, a session that
# `peat info --verify` accepts. Then --stop-on-kernel-failure, a constructor that crashes after
# the probe, runtime FI and --in-process.
#   kernel_host.sh PEAT PLUGIN_DIR RECORDED_SESSION WORKDIR EXAMPLE_PLUGIN [PYTHON_WITH_H5PY]
set -uo pipefail
peat=$1 plugins=$2 recorded=$3 dir=$4/kernel-host example=$5 python=${6:-python3}
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# outcomes FILE RUN EXPECTED: fc3's forward calls have EXPECTED, every other call is ok with numbers
outcomes() {
  "$python" - "$1" "$2" "$3" <<'PY' || fail "$2: outcomes in call_errors"
import sys, math, h5py
path, run, expected = sys.argv[1:]
t = h5py.File(path, "r")[f"runs/{run}/tables/call_errors"][()]
text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
rows = [(text(r["layer"]), text(r["op"]), text(r["variant"]), text(r["outcome"]), float(r["max_abs"])) for r in t]
assert len(rows) == 16, len(rows)
for layer, op, variant, outcome, err in rows:
    hit = layer == "fc3" and variant == "forward"
    if hit:
        assert outcome == expected and math.isnan(err), (layer, variant, outcome, err)
    else:
        assert outcome == "ok" and math.isfinite(err) and err < 1e-3, (layer, variant, outcome, err)
print(f"{run}: 2 calls {expected}, 14 ok")
PY
}

for kind in segv:crash:SIGSEGV abort:crash:SIGABRT hang:hang overflow:out_of_bounds tail:out_of_bounds; do
  name=${kind%%:*} expected=${kind#*:}
  start=$(date +%s%N)
  PEAT_KERNEL_TIMEOUT=1 "$peat" playback -s "$recorded" -k "plugin:path=$plugins/libpeat_late_$name.so" \
    --out "$name.h5" --name "$name" >"$name.out" 2>"$name.err"
  rc=$?
  [ $rc -eq 0 ] || { cat "$name.err"; fail "$name: exit $rc"; }
  grep -q "^peat: warning: the kernel failed 2 of 16 calls ($expected 2) in its kernel host; first it 0 call [0-9]* fc3 linear forward: plugin 'late-failure'" "$name.err" \
    || { cat "$name.err"; fail "$name: the warning"; }
  grep -q "failed in the kernel host: 2 of 16 calls ($expected 2)" "$name.out" || { cat "$name.out"; fail "$name: the summary"; }
  outcomes "$name.h5" "$name" "$expected"
  "$peat" info --verify "$name.h5" >/dev/null || fail "$name: the session does not verify"
  "$peat" info --json "$name.h5" | grep -q "\"kernel_failures\":\"2 of 16 calls ($expected 2)\"" || fail "$name: info"
  echo "$name: $(head -c 300 "$name.err" | sed -n 1p | cut -c1-220) ($(( ($(date +%s%N) - start) / 1000000 )) ms)"
done
grep -q "wrote past the end of output 2 \[16x10\] (640 bytes) at byte 640 of it (a guard page)" overflow.err || { cat overflow.err; fail "overflow: message"; }
grep -q "wrote past the end of output 2 \[16x10\] (640 bytes) at byte 640 of it" tail.err || { cat tail.err; fail "tail: message"; }
grep -q "did not return within 1 s (PEAT_KERNEL_TIMEOUT)" hang.err || { cat hang.err; fail "hang: message"; }

# the analysis names the failed calls with verdicts of their own (and the call to replay)
cp "$recorded" kept.h5
"$peat" playback -s kept.h5 -k "plugin:path=$plugins/libpeat_late_segv.so" --store-outputs --name kept \
  >kept.out 2>kept.err || fail "kept: exit $?"
"$peat" analyze --session kept.h5 --run kept --json >kept.json || fail "kept: analyze"
"$python" - kept.json <<'PY' || fail "kept: the failed calls' verdicts"
import json, sys
a = json.load(open(sys.argv[1]))
failed = a["kernel_failures"]
assert len(failed) == 2 and all(f["verdict"] == "kernel_crash" and f["outcome"] == "crash:SIGSEGV" for f in failed), failed
assert all("peat playback --call " + f["call"] in f["explanation"] and "output [" in f["explanation"] for f in failed), failed
assert len(a["calls"]) == 14 and not {f["call"] for f in failed} & {c["call"] for c in a["calls"]}
print("analysis: 14 calls analysed, 2 kernel_crash verdicts:", failed[0]["explanation"][:120])
PY
"$peat" playback -s "$recorded" -k "plugin:path=$plugins/libpeat_late_segv.so" --out one.h5 --name one \
  --call "$("$python" -c "import json,sys; print(json.load(open('kept.json'))['kernel_failures'][0]['call'])")" \
  >one.out 2>one.err || fail "one call: exit $?"
grep -q "the kernel failed 1 of 1 calls" one.err || { cat one.err; fail "one call: replayed alone"; }

# --stop-on-kernel-failure: exit 1 with one line, the run keeps the calls before it, marked failed
"$peat" playback -s "$recorded" -k "plugin:path=$plugins/libpeat_late_segv.so" --out stop.h5 --name stop \
  --stop-on-kernel-failure >stop.out 2>stop.err
rc=$?
[ $rc -eq 1 ] || fail "stop: exit $rc"
[ "$(wc -l <stop.err)" -eq 1 ] && grep -q "^peat: error: stopped at the first call the kernel failed (--stop-on-kernel-failure): it 0 call [0-9]* fc3 linear forward: plugin 'late-failure' crashed in the kernel host (signal 11" stop.err \
  || { cat stop.err; fail "stop: message"; }
"$peat" info --verify stop.h5 >/dev/null || fail "stop: the session does not verify"
"$peat" info --json stop.h5 | grep -q '"name":"stop","kind":"playback","kernel":"[^"]*","status":"failed"' || fail "stop: status"
echo "stop: $(cat stop.err)"

# A constructor that crashes outside the probe: refused with one line, the session untouched
cp "$recorded" ctor.h5
"$peat" playback -s ctor.h5 -k "plugin:path=$plugins/libpeat_late_ctor.so" >ctor.out 2>ctor.err
rc=$?
[ $rc -eq 1 ] || fail "ctor: exit $rc"
[ "$(wc -l <ctor.err)" -eq 1 ] && grep -q "passed its probe but crashed while loading in the kernel host (signal 11, Segmentation fault)" ctor.err \
  || { cat ctor.err; fail "ctor: message"; }
"$peat" info --verify ctor.h5 >/dev/null || fail "ctor: the session does not verify"
cmp -s ctor.h5 "$recorded" || fail "ctor: the session changed"
echo "ctor: $(cat ctor.err)"

# Runtime FI: each failed call keeps golden's output and counts its step as failed
"$peat" runtime-fi --model mlp --iterations 3 --batch 16 -k "plugin:path=$plugins/libpeat_late_segv.so" --every 1 \
  -o fi.h5 --force --json >fi.json 2>fi.err
rc=$?
[ $rc -eq 0 ] || { cat fi.err; fail "runtime-fi: exit $rc"; }
"$python" - <<'PY' || fail "runtime-fi: numbers"
import json, math
r = json.load(open("fi.json"))
assert r["iterations"] == 3 and r["failed_calls"] >= 3 and r["failed_steps"] == 3, r
assert r["kernel_failures"].endswith(f"calls (crash:SIGSEGV {r['failed_calls']})"), r["kernel_failures"]
assert math.isfinite(r["fi_loss"]), r
PY
"$peat" info --verify fi.h5 >/dev/null || fail "runtime-fi: the session does not verify"
echo "runtime-fi: $("$python" -c 'import json; r=json.load(open("fi.json")); print(r["kernel_failures"], "in", r["failed_steps"], "steps")')"

# --in-process keeps the old path for trusted kernels
"$peat" playback -s "$recorded" -k "plugin:path=$example" --in-process --out inproc.h5 --name inproc >inproc.out 2>&1 \
  || { cat inproc.out; fail "--in-process"; }
grep -q "replayed 16 calls" inproc.out || fail "--in-process: calls"
echo "ok: late segfault, abort, hang, overflow and tail each recorded on their 2 calls with 14 intact; stop, constructor, runtime FI and --in-process as documented"
