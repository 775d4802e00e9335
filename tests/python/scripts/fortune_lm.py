# SPDX-License-Identifier: MIT
# A small language model in the usual style: character tokens of Debian's fortunes, nn.TransformerEncoder
# with a causal mask, an embedding tied to the output head, AdamW and gradient clipping.
import argparse
import glob
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def corpus(limit=200000, path=None):
    if path:
        with open(path, encoding="utf-8", errors="ignore") as f:
            return f.read()[:limit]
    text = ""
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in path.rsplit("/", 1)[-1]:
            continue
        with open(path, encoding="utf-8", errors="ignore") as f:
            text += f.read()
        if len(text) > limit:
            break
    return text[:limit]


class TinyLM(nn.Module):
    def __init__(self, vocab, d=32, heads=2, layers=2, context=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(context, d))
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied embeddings

    def forward(self, ids):
        t = ids.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=ids.device), diagonal=1)
        x = self.tok(ids) * math.sqrt(self.tok.embedding_dim) + self.pos[:t]
        return self.head(self.norm(self.encoder(x, mask=mask)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--corpus", help="a text file instead of Debian's fortunes")
    ap.add_argument("--foreach", action="store_true", help="the optimiser's multi-tensor (_foreach_) path, CUDA's default")
    args = ap.parse_args()
    torch.manual_seed(0)
    text = corpus(path=args.corpus)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    model = TinyLM(len(chars), d=args.width, context=args.context).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, **({"foreach": True} if args.foreach else {}))
    g = torch.Generator().manual_seed(0)
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.context - 1, (args.batch,), generator=g)
        x = torch.stack([data[s:s + args.context] for s in starts])
        y = torch.stack([data[s + 1:s + args.context + 1] for s in starts])
        x, y = x.to(args.device), y.to(args.device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
