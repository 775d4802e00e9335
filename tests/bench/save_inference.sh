#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SAVE's engine against LibTorch on torchvision ResNet-18 (3x224x224, batch 1, one thread each):
#   tests/bench/save_inference.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work" <<'PY'
import sys, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10).eval()
x = torch.zeros(1, 3, 224, 224)
torch.onnx.export(m, x, f"{sys.argv[1]}/r18.onnx", opset_version=17)
torch.jit.trace(m, x).save(f"{sys.argv[1]}/r18.pt")
PY
PEAT_BENCH_ONNX=$work/r18.onnx PEAT_BENCH_TS=$work/r18.pt PEAT_MODULE_DIR=$build/lib/peat \
  "$build/tests/bin/bench_save_inference" "${@:2}"
