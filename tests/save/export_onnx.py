#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ONNX models for `peat save -m FILE.onnx`, exported at test time by Debian's python3-torch 1.13
(torch.onnx.export, opset 17, eval mode, constant folding): what a user's exporter writes.

    export_onnx.py OUTDIR [WEIGHTS.h5]

lenet.onnx    the zoo's LeNet written in torch.nn, with the shipped weights (data/lenet-fashion-mnist.h5),
              and lenet.pt, its TorchScript trace (PEAT trains it; SAVE takes the new weights by name)
pool.onnx     conv, ReLU and a padded max-pool (ResNet's stem pool), random weights
mlp.onnx      a torch.nn MLP with batch norm and tanh, random weights (a different op mix)
resnet18.onnx torchvision ResNet-18 at 3x64x64, random weights (seed 0)
mobilenet_v2.onnx torchvision MobileNetV2 (width 0.25) at 3x64x64, random weights (seed 0)
vit.onnx      torchvision VisionTransformer, shallow and narrow (1 layer, width 32) at 3x224x224 with
              16x16 patches, random weights (a random head: torchvision starts it at zero)
gpt.onnx      a GPT-style decoder from torch.nn.TransformerEncoderLayer with a causal mask, 2 layers of
              width 32 over 16 tokens, taking token embeddings ([16, 32] floats: SAVE's input is a box
              of floats, not token ids); gpt_x.npy / gpt_logits.npy: 100 inputs and PyTorch's logits
grouped.onnx  dilated, depthwise and grouped convolutions, ReLU6, hardtanh and a padded average pool,
              briefly trained; grouped_logits.npy holds PyTorch's logits on the first 1000 test images
"""
import gzip
import os
import sys

import h5py
import numpy as np
import torch
import torchvision


class LeNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(6, 16, 5)
        self.fc1 = torch.nn.Linear(400, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def fashion_mnist(split):
    """Debian's Fashion-MNIST, normalised as the zoo does: (pixel / 255 - 0.2860) / 0.3530."""
    d = "/usr/share/datasets/fashion-mnist"
    with gzip.open(f"{d}/{split}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read()[16:], dtype=np.uint8).reshape(-1, 1, 28, 28)
    with gzip.open(f"{d}/{split}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read()[8:], dtype=np.uint8)
    return (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.2860) / 0.3530, torch.from_numpy(y.astype(np.int64))


def train_briefly(model, steps=150, batch=64):
    """A few SGD steps on Fashion-MNIST, so that predictions mean something (about 70% accuracy)."""
    x, y = fashion_mnist("train")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for i in range(steps):
        xb, yb = x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def pool_model():
    """Padded max-pooling as ResNet's stem has it (3x3, stride 2, padding 1), on 1x28x28 images."""
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(3, 2, padding=1), torch.nn.Flatten(), torch.nn.Linear(4 * 14 * 14, 10))


class Broadcast(torch.nn.Module):
    """Constants an exporter leaves as Add operands: a per-channel [C, 1, 1] one on [C, H, W] with C == W
    (broadcast over the right axes), and a bias Add after a MatMul whose output has a second consumer
    (so it must not fold into the MatMul): SAVE must bound what PyTorch computes."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 28, 3, padding=1)
        self.c = torch.nn.Parameter(torch.arange(28.0).view(28, 1, 1) * 10.0)
        self.w = torch.nn.Parameter(torch.randn(28 * 28 * 28, 10) * 0.001)
        self.b = torch.nn.Parameter(torch.full((10,), 50.0))

    def forward(self, x):
        h = torch.flatten(self.conv(x) + self.c, 1) @ self.w
        return (h + self.b) + h


class Grouped(torch.nn.Module):
    """The convolution geometry MobileNets and DeepLabs use, on 1x28x28 images."""

    def __init__(self):
        super().__init__()
        self.dilated = torch.nn.Conv2d(1, 8, 3, padding=2, dilation=2)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, stride=2)
        self.grouped = torch.nn.Conv2d(8, 12, 3, padding=1, groups=4)
        self.pool = torch.nn.AvgPool2d(3, 2, padding=1)
        self.fc = torch.nn.Linear(12 * 7 * 7, 10)

    def forward(self, x):
        x = torch.nn.functional.relu6(self.dilated(x))
        x = torch.nn.functional.hardtanh(self.depthwise(x), -1.0, 2.0)
        x = self.pool(torch.relu(self.grouped(x)))
        return self.fc(torch.flatten(x, 1))


def vit_model():
    from torchvision.models.vision_transformer import VisionTransformer
    vit = VisionTransformer(image_size=224, patch_size=16, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64,
                            num_classes=10)
    with torch.no_grad():
        vit.heads.head.weight.normal_(0, 0.2)
    return vit


class GPT(torch.nn.Module):
    """GPT-style: pre-norm TransformerEncoderLayers under a causal mask, from token embeddings on."""

    def __init__(self, tokens=16, width=32, layers=2, vocab=20):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, tokens, width) * 0.1)
        layer = torch.nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0, activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.ln = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(tokens))

    def forward(self, x):
        return self.head(self.ln(self.blocks(x + self.pos, mask=self.mask)))


def mlp_model():
    """Seeded by the caller (torch.manual_seed(0)), so a test can build the same network again."""
    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.BatchNorm1d(64), torch.nn.Tanh(),
                              torch.nn.Linear(64, 32), torch.nn.Sigmoid(), torch.nn.Linear(32, 10))
    with torch.no_grad():  # batch-norm statistics that are not the identity
        mlp[2].running_mean.uniform_(-0.5, 0.5)
        mlp[2].running_var.uniform_(0.5, 2.0)
    return mlp


def export(model, example, path):
    model.eval()
    torch.onnx.export(model, example, path, opset_version=17, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    print(path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    lenet = LeNet()
    if len(sys.argv) > 2:
        with h5py.File(sys.argv[2], "r") as f:
            cps = f["runs/train/checkpoints"]
            params = cps[sorted(cps.keys())[-1]]["parameters"]
            lenet.load_state_dict({k: torch.from_numpy(params[k][()]) for k in params.keys()})
    export(lenet, torch.zeros(1, 1, 28, 28), os.path.join(out, "lenet.onnx"))
    torch.jit.trace(lenet.train(), torch.zeros(1, 1, 28, 28)).save(os.path.join(out, "lenet.pt"))  # for PEAT
    torch.manual_seed(0)
    mlp = mlp_model()
    export(mlp, torch.zeros(1, 1, 28, 28), os.path.join(out, "mlp.onnx"))
    torch.manual_seed(0)  # three channels normalised per channel (ImageNet's constants), random pixels
    rgb = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    export(rgb, torch.zeros(1, 3, 8, 8), os.path.join(out, "rgb.onnx"))
    pixels = torch.rand(500, 3, 8, 8)
    mean, std = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        np.save(os.path.join(out, "rgb_logits.npy"), rgb.eval()((pixels - mean) / std).numpy())
    torch.manual_seed(0)
    bc = Broadcast()
    export(bc, torch.zeros(1, 1, 28, 28), os.path.join(out, "broadcast.onnx"))
    with torch.no_grad():
        np.save(os.path.join(out, "broadcast_logits.npy"), bc.eval()(fashion_mnist("t10k")[0][:200]).numpy())
    torch.manual_seed(0)
    pool = pool_model()
    train_briefly(pool)
    export(pool, torch.zeros(1, 1, 28, 28), os.path.join(out, "pool.onnx"))
    with torch.no_grad():  # PyTorch's logits on the first 1000 test images, for the test to compare with
        np.save(os.path.join(out, "pool_logits.npy"), pool.eval()(fashion_mnist("t10k")[0][:1000]).numpy())
    torch.manual_seed(0)
    export(torchvision.models.resnet18(num_classes=10), torch.zeros(1, 3, 64, 64), os.path.join(out, "resnet18.onnx"))
    torch.manual_seed(0)
    export(torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25), torch.zeros(1, 3, 64, 64),
           os.path.join(out, "mobilenet_v2.onnx"))
    torch.manual_seed(0)
    export(vit_model(), torch.zeros(1, 3, 224, 224), os.path.join(out, "vit.onnx"))
    torch.manual_seed(0)
    gpt = GPT().eval()
    export(gpt, torch.zeros(1, 16, 32), os.path.join(out, "gpt.onnx"))
    gx = torch.randn(100, 16, 32).clamp(-3, 3)
    np.save(os.path.join(out, "gpt_x.npy"), gx.numpy())
    with torch.no_grad():
        np.save(os.path.join(out, "gpt_logits.npy"), gpt(gx).numpy())
    torch.manual_seed(0)
    grouped = Grouped()
    train_briefly(grouped)
    export(grouped, torch.zeros(1, 1, 28, 28), os.path.join(out, "grouped.onnx"))
    with torch.no_grad():
        np.save(os.path.join(out, "grouped_logits.npy"), grouped.eval()(fashion_mnist("t10k")[0][:1000]).numpy())


if __name__ == "__main__":
    main()
