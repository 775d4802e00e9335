# SPDX-License-Identifier: MIT
# Segmentation as people write it: a small encoder-decoder with an auxiliary head, per-pixel
# cross-entropy on [N, H, W] targets (the garment's class where the pixel is lit, background
# elsewhere, from Fashion-MNIST), the auxiliary loss weighted 0.4, Adam, bilinear upsampling.
import argparse
import gzip

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class SegNet(nn.Module):
    def __init__(self, classes=11):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.enc2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.head = nn.Conv2d(16, classes, 1)
        self.aux = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        f1 = self.enc1(x)
        f2 = self.enc2(f1)
        out = F.interpolate(self.head(f2), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return {"out": out, "aux": self.aux(f1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    torch.manual_seed(2)
    root = "/usr/share/datasets/fashion-mnist"
    images = idx(root + "/train-images-idx3-ubyte.gz")[: args.steps * args.batch].astype(np.float32) / 255.0
    labels = idx(root + "/train-labels-idx1-ubyte.gz")[: args.steps * args.batch].astype(np.int64)
    targets = np.where(images > 0.3, labels[:, None, None] + 1, 0)  # 0 = background
    model = SegNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(args.steps):
        sl = slice(step * args.batch, (step + 1) * args.batch)
        x = torch.from_numpy(images[sl]).unsqueeze(1)
        y = torch.from_numpy(targets[sl])
        outs = model(x)
        loss = F.cross_entropy(outs["out"], y) + 0.4 * F.cross_entropy(outs["aux"], y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
