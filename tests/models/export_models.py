#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Exports architectures that this project did not write, from Debian's python3-torch and
python3-torchvision (1.13 / 0.14), as TorchScript for `peat --model FILE` (and ONNX for SAVE).

    export_models.py OUTDIR [--size small|full] [--models resnet18,mobilenet_v2,vit,gpt,lstm,bert]

small (ctest): the same operators in shallow and narrow versions; full (benchmarks): the real
sizes (ResNet-18, MobileNetV2, a 6-layer 256-wide GPT). lstm: an LSTM language model; bert: a
BERT-style classifier on integer tokens. Weights are random (seeded); nothing is
downloaded. Each model is traced in training mode (dropout and batch norm as in training).
"""
import argparse
import os

import torch
import torchvision


class Gpt(torch.nn.Module):
    """A GPT-style language model from torch.nn.TransformerEncoderLayer with a causal mask."""

    def __init__(self, vocabulary, width, layers, heads, context, dropout):
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.position = torch.nn.Parameter(torch.zeros(context, width))
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=dropout, batch_first=True,
                                                 norm_first=True, activation="gelu")
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocabulary)
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), 1))

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.embed(tokens) + self.position[:t]
        h = self.blocks(h, mask=self.mask[:t, :t])
        return self.head(self.norm(h))


class LstmLm(torch.nn.Module):
    """An LSTM language model from torch.nn.LSTM: its gate GEMMs run inside aten::lstm."""

    def __init__(self, vocabulary, width, layers):
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.rnn = torch.nn.LSTM(width, width, layers, batch_first=True)
        self.head = torch.nn.Linear(width, vocabulary)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.head(h)


class Bert(torch.nn.Module):
    """A BERT-style classifier: token and position embeddings, a torch.nn.TransformerEncoder
    (post-norm, GELU), the first token's state through a linear head: integer tokens [N, T] in,
    class logits [N, classes] out."""

    def __init__(self, vocabulary, width, layers, heads, context, classes, dropout):
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.position = torch.nn.Parameter(torch.randn(context, width) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=dropout, batch_first=True,
                                                 activation="gelu")
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.position[:tokens.shape[1]])
        return self.head(h[:, 0])


def build(name, size):
    small = size == "small"
    if name == "resnet18":
        if small:  # BasicBlock ResNet with one block per stage
            m = torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, [1, 1, 1, 1], num_classes=10)
        else:
            m = torchvision.models.resnet18(num_classes=10)
        return m, torch.randn(2, 3, 32 if small else 64, 32 if small else 64)
    if name == "mobilenet_v2":
        m = torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25 if small else 1.0)
        return m, torch.randn(2, 3, 32 if small else 64, 32 if small else 64)
    if name == "vit":
        if small:
            m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                     hidden_dim=32, mlp_dim=64, num_classes=10)
            return m, torch.randn(2, 3, 32, 32)
        m = torchvision.models.VisionTransformer(image_size=64, patch_size=8, num_layers=6, num_heads=4,
                                                 hidden_dim=256, mlp_dim=1024, num_classes=10)
        return m, torch.randn(2, 3, 64, 64)
    if name == "gpt":
        if small:
            return Gpt(64, 32, 2, 2, 16, 0.1), torch.randint(0, 64, (2, 16))
        return Gpt(96, 256, 6, 4, 128, 0.1), torch.randint(0, 96, (2, 128))
    if name == "gpt-nodrop":  # no dropout: nn.MultiheadAttention's scores, softmax and values fuse (--attention fused)
        if small:
            return Gpt(64, 32, 2, 2, 16, 0.0), torch.randint(0, 64, (2, 16))
        return Gpt(96, 256, 6, 4, 128, 0.0), torch.randint(0, 96, (2, 128))
    if name == "lstm":
        return LstmLm(64, 32 if small else 256, 1 if small else 2), torch.randint(0, 64, (2, 16))
    if name == "bert":
        if small:
            return Bert(64, 32, 2, 2, 16, 2, 0.1), torch.randint(0, 64, (2, 16))
        return Bert(96, 256, 4, 4, 64, 2, 0.1), torch.randint(0, 96, (2, 64))
    raise SystemExit(f"export_models.py: unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--size", default="small", choices=["small", "full"])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,vit,gpt,gpt-nodrop,lstm,bert")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, example = build(name, args.size)
        model.train()
        traced = torch.jit.trace(model, example, check_trace=False)
        path = os.path.join(args.outdir, f"{name}.pt")
        traced.save(path)
        print(path)


if __name__ == "__main__":
    main()
