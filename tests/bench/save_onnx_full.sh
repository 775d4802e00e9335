#!/bin/sh
# SPDX-License-Identifier: MIT
# SAVE on full-size models written elsewhere, exported here by Debian's PyTorch 1.13 (random weights,
# ImageNet normalisation): torchvision MobileNetV2 and ViT-B/16 at 3x224x224, `peat save analyze
# --mode interval`, wall time and peak memory of the whole process (docs/benchmarks.md).
#   tests/bench/save_onnx_full.sh [build/bin/peat] [WORKDIR]
set -eu
peat=${1:-build/bin/peat}
work=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
/usr/bin/python3 - "$work" "$here/../save" <<'PY'
import sys, torch, torchvision
sys.path.insert(0, sys.argv[2])
import export_onnx as E
out = sys.argv[1]
torch.manual_seed(0)
E.export(torchvision.models.mobilenet_v2(num_classes=1000), torch.zeros(1, 3, 224, 224), f"{out}/mobilenet_v2_224.onnx")
torch.manual_seed(0)
vit = torchvision.models.vit_b_16()
with torch.no_grad():
    vit.heads.head.weight.normal_(0, 0.02)  # torchvision starts the head at zero
E.export(vit, torch.zeros(1, 3, 224, 224), f"{out}/vit_b_16_224.onnx")
PY
for m in mobilenet_v2_224 vit_b_16_224; do
  /usr/bin/time -f "$m: %e s wall, %M KiB peak" "$peat" save analyze -m "$work/$m.onnx" --mode interval \
    --input-mean 0.485,0.456,0.406 --input-std 0.229,0.224,0.225 > "$work/$m.txt"
  sed -n 1,2p "$work/$m.txt"
  tail -1 "$work/$m.txt"
done
