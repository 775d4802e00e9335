# SPDX-License-Identifier: MIT
# Mixed precision as people write it: torch.autocast (bfloat16 on the CPU, float16 with a GradScaler
# on CUDA) around the forward and the loss, on Fashion-MNIST, no peat.step() and no PEAT import.
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


def main():
    torch.manual_seed(3)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.bfloat16
    root = "/usr/share/datasets/fashion-mnist"
    x_all = torch.from_numpy(idx(root + "/train-images-idx3-ubyte.gz")[:640].reshape(640, -1).astype(np.float32) / 255.0)
    y_all = torch.from_numpy(idx(root + "/train-labels-idx1-ubyte.gz")[:640].astype(np.int64))
    model = nn.Sequential(nn.Linear(784, 128), nn.GELU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler() if device == "cuda" else None
    for step in range(10):
        x, y = x_all[step * 64:(step + 1) * 64].to(device), y_all[step * 64:(step + 1) * 64].to(device)
        with torch.autocast(device_type=device, dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    print(f"final loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
