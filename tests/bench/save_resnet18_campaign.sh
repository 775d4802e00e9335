#!/bin/sh
# SPDX-License-Identifier: MIT
# SAVE on a network whose activations exceed the reliable memory (issue 17): torchvision's ResNet-18
# (written elsewhere; built and exported here by Debian's PyTorch 1.13), trained for a few hundred
# SGD steps on Fashion-MNIST resized to 3x64x64, then `peat save analyze` and `peat save campaign`
# at --budget 5% of its working set, with SAVE's placement, a random one and none. Prints the
# commands' tables; docs/save.md reports one run.
#   tests/bench/save_resnet18_campaign.sh [build/bin/peat] [WORKDIR] [STEPS]
set -eu
peat=${1:-build/bin/peat}
work=${2:-$(mktemp -d)}
steps=${3:-400}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
/usr/bin/python3 - "$work" "$here/../save" "$steps" <<'PY'
import sys, time, torch, torchvision
sys.path.insert(0, sys.argv[2])
import export_onnx as E
out, steps = sys.argv[1], int(sys.argv[3])
def resize(x):
    return torch.nn.functional.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False).expand(-1, 3, -1, -1)
x, y = E.fashion_mnist("train")
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
m.train()
start = time.time()
for i in range(steps):
    lo = (i * 32) % (len(x) - 32)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(resize(x[lo:lo + 32])), y[lo:lo + 32]).backward()
    opt.step()
m.eval()
tx, ty = E.fashion_mnist("t10k")
with torch.no_grad():
    acc = sum(int((m(resize(tx[i:i + 100])).argmax(1) == ty[i:i + 100]).sum()) for i in range(0, 1000, 100)) / 1000
print(f"trained {steps} steps of 32 in {time.time() - start:.0f} s; PyTorch top-1 on 1000 test images {100 * acc:.1f}%")
E.export(m, torch.zeros(1, 3, 64, 64), f"{out}/resnet18_64.onnx")
PY
model="$work/resnet18_64.onnx"
data="--data fashion-mnist:3x64x64"
/usr/bin/time -f "analyze: %e s wall, %M KiB peak" "$peat" save analyze -m "$model" --mode interval --budget 5% > "$work/analyze.txt"
grep -E "^reliable memory|working set|recomputation|avoid" "$work/analyze.txt" || true
common="$data --mode interval --budget 5% --images 100 --batch 20 --basis memory"
# SAVE's placement under faults, its checks one layer behind (the default) and four layers behind
for lag in 1 4; do
  /usr/bin/time -f "campaign (ranked, check lag $lag): %e s wall" "$peat" save campaign -m "$model" $common \
    --placement ranked --flips 0,64,1024 --schemes none,save,ecc --check-lag $lag > "$work/campaign-ranked-lag$lag.txt"
  sed -n '/^unreliable memory/p;/^scheme  *ms per batch/,/^(latency/p;/^flips/,/^$/p' "$work/campaign-ranked-lag$lag.txt"
done
# what the placement buys in latency, fault-free: a random placement in the same budget, and none
for placement in random none; do
  /usr/bin/time -f "campaign ($placement, check lag 4): %e s wall" "$peat" save campaign -m "$model" $common \
    --placement $placement --flips 0 --schemes none,save --check-lag 4 > "$work/campaign-$placement.txt"
  sed -n '/^unreliable memory/p;/^scheme  *ms per batch/,/^(latency/p' "$work/campaign-$placement.txt"
done
