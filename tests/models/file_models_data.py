# SPDX-License-Identifier: MIT
"""Data for model-file tests and benchmarks, from Debian packages (no download)."""
import h5py
import numpy as np


def lm_tokens(path, context=16, train=512, test=128, vocabulary=64):
    """Next-token windows of Debian's fortunes text (real text, not the project's): int64 token ids,
    the vocabulary-1 most frequent bytes and one id for the rest. x = ids[i:i+T], y = ids[i+1:i+T+1]."""
    text = open("/usr/share/games/fortunes/fortunes", "rb").read()
    counts = np.bincount(np.frombuffer(text, dtype=np.uint8), minlength=256)
    top = np.argsort(-counts)[:vocabulary - 1]
    table = np.full(256, vocabulary - 1, dtype=np.int64)
    table[top] = np.arange(vocabulary - 1)
    ids = table[np.frombuffer(text, dtype=np.uint8)]
    stride = max(1, (len(ids) // 2 - context - 1) // max(train, test))
    def windows(start, n):
        x = np.stack([ids[start + i * stride:start + i * stride + context] for i in range(n)])
        y = np.stack([ids[start + i * stride + 1:start + i * stride + context + 1] for i in range(n)])
        return x, y
    with h5py.File(path, "w") as f:
        for split, start, n in (("train", 0, train), ("test", len(ids) // 2, test)):
            x, y = windows(start, n)
            f[f"{split}/x"] = x
            f[f"{split}/y"] = y


def token_classes(path, context=16, train=512, test=128, vocabulary=64):
    """Token-id windows of Debian's fortunes text (int64 [N, T]) with a class label per window
    (int64 [N]): 1 when the window holds more spaces than the median window, else 0. Real text, a
    synthetic but learnable label: a format test for token classifiers, not a claim."""
    lm_tokens(path, context, train, test, vocabulary)
    text = open("/usr/share/games/fortunes/fortunes", "rb").read()
    counts = np.bincount(np.frombuffer(text, dtype=np.uint8), minlength=256)
    space = int(np.where(np.argsort(-counts)[:vocabulary - 1] == ord(" "))[0][0])
    with h5py.File(path, "r+") as f:
        for split in ("train", "test"):
            x = f[f"{split}/x"][()]
            spaces = (x == space).sum(1)
            del f[f"{split}/y"]
            f[f"{split}/y"] = (spaces > np.median(spaces)).astype(np.int64)
