#!/bin/bash
# Carried to the GPU machine with the package (python/peat + a cp312 build of peat._core and its
# libraries) in .gpu-py/ (docs/gpu.md says how); run there as `bash .gpu-py/run.sh`.
# The GPU check of issue 40 (docs/gpu.md): record a small GPT on CUDA with the device's PyTorch,
# golden replay broken down, replay through Triton kernels and a planted bug, recording cost,
# autocast with a GradScaler, runtime FI.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/libs PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
O=${OUT:-/tmp/out}; mkdir -p $O; rm -f /tmp/*.h5
t() { local n=$1; shift; local a=$(date +%s.%N); "$@"; local rc=$?; echo "$n $(python3 -c "print(round($(date +%s.%N)-$a,2))") s rc=$rc" >&2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
python3 -c "import peat; print('peat', peat.__version__)" || exit 1
ARGS="--corpus corpus.txt --device cuda --batch 16 --context 64 --width 128"
# plain wall time, then recorded at every 10th iteration and at every iteration (interleaved)
for i in 1 2; do
  t plain40 python3 fortune_lm.py $ARGS --steps 40 > /dev/null
  t every10 python3 -m peat record -o /tmp/gpt.h5 --force --every 10 -- fortune_lm.py $ARGS --steps 40 > /dev/null
done
t plain10 python3 fortune_lm.py $ARGS --steps 10 > /dev/null
t every1 python3 -m peat record -o /tmp/gpt-all.h5 --every 1 -- fortune_lm.py $ARGS --steps 10 > /dev/null
ls -la /tmp/gpt.h5 /tmp/gpt-all.h5
t golden python3 golden_breakdown.py /tmp/gpt.h5
python3 -m peat playback -s /tmp/gpt.h5 -k python:triton_kernels:bf16_gemm --op gemm --analyze
python3 -m peat playback -s /tmp/gpt.h5 -k python:kernels_under_test:causal_off_by_one --op attention --analyze
python3 -m peat playback -s /tmp/gpt-all.h5 -k python:triton_kernels:bf16_gemm --op gemm --max-calls 400 | head -1
python3 -m peat playback -s /tmp/gpt-all.h5 -k python:triton_kernels:bf16_gemm --op gemm --max-calls 400 | head -1
# autocast float16 with a GradScaler on CUDA (amp_mlp.py reads Fashion-MNIST from Debian's path)
if mkdir -p /usr/share/datasets/fashion-mnist 2>/dev/null && cp fmnist/* /usr/share/datasets/fashion-mnist/ 2>/dev/null; then
  python3 -m peat record -o /tmp/amp.h5 -- amp_mlp.py 2>&1 | tail -2
  python3 -c "
import peat._core as c
r = [x for x in c.summary('/tmp/amp.h5')['runs'] if x['name'] == 'golden'][0]
print('amp: iterations', len(r['iterations']), 'skipped steps', r['attributes'].get('skipped_steps', '0'),
      'dtypes', sorted({t[1] for it in r['iterations'] for cl in it['calls'] if cl['op'] == 'linear' for t in cl['tensors']}))
print('amp: losses', ['%.3f' % v for v in c.Reader('/tmp/amp.h5').table('golden', 'curve')['loss']])"
  python3 golden_breakdown.py /tmp/amp.h5
fi
t runtime-fi python3 -m peat record -o /tmp/fi.h5 --every 100 --swap gemm=python:triton_kernels:bf16_gemm --swap-every 10 -- fortune_lm.py $ARGS --steps 40 2>&1 | tail -3
python3 - <<'PY'
import peat._core as c
r = c.Reader("/tmp/fi.h5")
for run in ("golden", "runtime-fi-bf16_gemm"):
    t = r.table(run, "curve")
    print(run, "loss", ["%.4f" % v for v in t["loss"][:20:4]], "final %.4f" % t["loss"][-1])
e = r.table("runtime-fi-bf16_gemm", "call_errors")
print("swapped calls", len(e["op"]), "max abs error %.3g" % max(e["max_abs"]))
PY
