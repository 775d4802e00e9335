# SPDX-License-Identifier: MIT
# A plain training script as people write it: Fashion-MNIST (Debian's dataset-fashion-mnist) through a
# Dataset and a shuffled DataLoader, a small CNN, SGD with momentum and a StepLR scheduler. Nothing
# here knows about PEAT.
import argparse
import gzip

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

ROOT = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class FashionMNIST(Dataset):
    def __init__(self, train=True, limit=None):
        split = "train" if train else "t10k"
        self.x = idx(f"{ROOT}/{split}-images-idx3-ubyte.gz")[:limit]
        self.y = idx(f"{ROOT}/{split}-labels-idx1-ubyte.gz")[:limit]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = torch.from_numpy(self.x[i].astype(np.float32) / 255.0).unsqueeze(0)
        return (x - 0.2860) / 0.3530, int(self.y[i])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc1 = nn.Linear(16 * 14 * 14, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--fail-at", type=int, default=-1, help="raise at this step (tests a script that fails)")
    args = ap.parse_args()
    torch.manual_seed(1)
    loader = DataLoader(FashionMNIST(limit=args.steps * args.batch), batch_size=args.batch, shuffle=True)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    model.train()
    for step, (x, y) in enumerate(loader):
        if step == args.fail_at:
            raise RuntimeError("planted failure at step %d" % step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    model.eval()
    test = FashionMNIST(train=False, limit=256)
    with torch.no_grad():
        x = torch.stack([test[i][0] for i in range(len(test))])
        acc = (model(x).argmax(1) == torch.tensor(test.y.astype(np.int64))).float().mean().item()
    print(f"test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
