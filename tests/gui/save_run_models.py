#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Models and inputs for tst_saverun, with PyTorch's own outputs to compare the page against:

    save_run_models.py DIR

- classifier.onnx: a small MLP (1x4x4 -> 7 scores), dynamic batch; x.npy holds 6 inputs, ref.npy
  PyTorch's outputs on them, top_index.npy and top_value.npy torch.topk(ref, 5) per sample;
- conv.onnx: a conv and a ReLU (1x4x4 -> 2x2x2, not a vector of scores); conv_ref.npy its outputs;
- two_heads.onnx: a trunk with two outputs, "scores" (7 per sample) and "box" ([2, 3] per sample);
  two_scores_ref.npy and two_box_ref.npy PyTorch's outputs on x.npy;
- two_inputs.onnx: inputs "a" (1x4x4, x.npy) and "b" (3 values, b.npy), 5 scores; two_inputs_ref.npy
  PyTorch's outputs;
- wrong.npy: an input of another shape (3x3), which the model refuses.
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
torch.manual_seed(7)
x = torch.randn(6, 1, 4, 4).clamp(-0.8, 2.0)  # inside SAVE's default input box (ONNX mean and std)


def export(net, name):
    torch.onnx.export(net.eval(), torch.zeros(1, 1, 4, 4), os.path.join(out, name), opset_version=13,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}})


classifier = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 12), torch.nn.ReLU(), torch.nn.Linear(12, 7))
export(classifier, "classifier.onnx")
conv = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU())
export(conv, "conv.onnx")


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 12), torch.nn.ReLU())
        self.scores, self.box = torch.nn.Linear(12, 7), torch.nn.Linear(12, 6)

    def forward(self, x):
        h = self.trunk(x)
        return self.scores(h), self.box(h).view(-1, 2, 3)


two = TwoHeads().eval()
torch.onnx.export(two, torch.zeros(1, 1, 4, 4), os.path.join(out, "two_heads.onnx"), opset_version=13,
                  input_names=["x"], output_names=["scores", "box"],
                  dynamic_axes={"x": {0: "batch"}, "scores": {0: "batch"}, "box": {0: "batch"}})
with torch.no_grad():
    two_scores, two_box = two(x)
np.save(os.path.join(out, "two_scores_ref.npy"), two_scores.numpy())
np.save(os.path.join(out, "two_box_ref.npy"), two_box.numpy())


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(19, 5)

    def forward(self, a, b):
        return self.head(torch.cat([a.flatten(1), b], dim=1))


both = TwoInputs().eval()
b = torch.randn(6, 3).clamp(-0.8, 2.0)
torch.onnx.export(both, (torch.zeros(1, 1, 4, 4), torch.zeros(1, 3)), os.path.join(out, "two_inputs.onnx"),
                  opset_version=13, input_names=["a", "b"], output_names=["y"],
                  dynamic_axes={"a": {0: "batch"}, "b": {0: "batch"}, "y": {0: "batch"}})
with torch.no_grad():
    np.save(os.path.join(out, "two_inputs_ref.npy"), both(x, b).numpy())
np.save(os.path.join(out, "b.npy"), b.numpy())
with torch.no_grad():
    ref = classifier.eval()(x)
    top = torch.topk(ref, 5, dim=1)
    conv_ref = conv.eval()(x)
np.save(os.path.join(out, "x.npy"), x.numpy())
np.save(os.path.join(out, "ref.npy"), ref.numpy())
np.save(os.path.join(out, "top_index.npy"), top.indices.numpy().astype(np.float32))
np.save(os.path.join(out, "top_value.npy"), top.values.numpy())
np.save(os.path.join(out, "conv_ref.npy"), conv_ref.numpy())
np.save(os.path.join(out, "wrong.npy"), np.zeros((3, 3), np.float32))
print("classes per sample:", top.indices[:, 0].tolist())
