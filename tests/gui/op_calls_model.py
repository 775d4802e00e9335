#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small language model for tst_opcalls, whose every op goes through the kernel slot with
parameters the test chose (so the workbench cannot show them right by accident):

    op_calls_model.py DIR

- model.pt: token embedding, a layer norm with eps 1e-6, a linear layer, GELU in its tanh form,
  dropout with p 0.25 and a linear head, traced in training mode;
- tokens.h5: next-token windows of Debian's fortunes (tests/models/file_models_data.py).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from file_models_data import lm_tokens  # noqa: E402

out = sys.argv[1]


class OpCalls(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.norm = torch.nn.LayerNorm(16, eps=1e-6)
        self.up = torch.nn.Linear(16, 24)
        self.act = torch.nn.GELU(approximate="tanh")
        self.drop = torch.nn.Dropout(0.25)
        self.head = torch.nn.Linear(24, 64)

    def forward(self, tokens):
        return self.head(self.drop(self.act(self.up(self.norm(self.embed(tokens))))))


torch.manual_seed(0)
model = OpCalls().train()
torch.jit.trace(model, torch.randint(0, 64, (2, 16)), check_trace=False).save(os.path.join(out, "model.pt"))
lm_tokens(os.path.join(out, "tokens.h5"), train=64, test=32)
