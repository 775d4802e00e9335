# SPDX-License-Identifier: MIT
# Mixed precision with a GradScaler as people write it for fp16 (here on the CPU, PyTorch 2.x), with one
# bad batch (an inf in the input): the scaler skips that optimiser step and lowers its scale.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(64, 20), torch.randint(0, 4, (64,))
for step in range(6):
    xb = x.clone()
    if step == 2:
        xb[0, 0] = float("inf")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(xb), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print("step", step, "loss %.4f" % loss.item(), "scale %g" % scaler.get_scale())
