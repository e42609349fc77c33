"""A character-level transformer language model with yscv.

    python examples/transformer_lm.py            # trains, prints the loss and a sample
    python examples/transformer_lm.py --quick    # small budget (tests)

The model reads a window of characters and predicts, at every position, the
next one: a token embedding plus a learned position embedding, a
``TransformerEncoder`` (pre-norm layers, GELU) under a causal mask (a
boolean mask, True = blocked, PyTorch's meaning in the Transformer layers),
a final LayerNorm and a Linear head over the characters. It is trained with
Adam on random windows of the opening paragraphs of Lewis Carroll's
"Alice's Adventures in Wonderland" (1865, public domain), embedded below,
then writes a sample, one character at a time, from a prompt.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402

TEXT = (
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of "
    "having nothing to do: once or twice she had peeped into the book her sister was "
    "reading, but it had no pictures or conversations in it, 'and what is the use of a "
    "book,' thought Alice 'without pictures or conversations?' So she was considering in "
    "her own mind (as well as she could, for the hot day made her feel very sleepy and "
    "stupid), whether the pleasure of making a daisy-chain would be worth the trouble of "
    "getting up and picking the daisies, when suddenly a White Rabbit with pink eyes ran "
    "close by her. There was nothing so very remarkable in that; nor did Alice think it so "
    "very much out of the way to hear the Rabbit say to itself, 'Oh dear! Oh dear! I shall "
    "be late!' (when she thought it over afterwards, it occurred to her that she ought to "
    "have wondered at this, but at the time it all seemed quite natural); but when the "
    "Rabbit actually took a watch out of its waistcoat-pocket, and looked at it, and then "
    "hurried on, Alice started to her feet, for it flashed across her mind that she had "
    "never before seen a rabbit with either a waistcoat-pocket, or a watch to take out of "
    "it, and burning with curiosity, she ran across the field after it, and fortunately "
    "was just in time to see it pop down a large rabbit-hole under the hedge. In another "
    "moment down went Alice after it, never once considering how in the world she was to "
    "get out again."
)


class CharTransformer(nn.Module):
    """Token + learned position embeddings, a causal TransformerEncoder,
    LayerNorm, Linear head: [B, T] character ids -> [B, T, vocab] logits."""

    def __init__(self, vocab: int, context: int, d_model: int = 48, nhead: int = 4,
                 num_layers: int = 2, dropout: float = 0.0):
        super().__init__()
        self.context = context
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(context, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model,
                                           dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, g, ids):
        t = ids.shape[1]
        x = g.add(self.tokens(g, ids), self.positions(g, np.arange(t)))
        causal = np.triu(np.ones((t, t), bool), 1)  # True = blocked (PyTorch's meaning)
        x = self.encoder(g, x, mask=causal, is_causal=True)
        return self.head(g, x)


def windows(rng, data, batch, context):
    starts = rng.integers(0, len(data) - context - 1, batch)
    idx = starts[:, None] + np.arange(context + 1)
    chunk = data[idx]
    return chunk[:, :-1], chunk[:, 1:]


def generate(model, prompt_ids, n, rng, temperature=0.8):
    model.eval()
    ids = list(prompt_ids)
    for _ in range(n):
        ctx = np.array([ids[-model.context:]])
        g = yscv.Graph()
        logits = g.value(model(g, ctx))[0, -1].astype(np.float64) / temperature
        p = np.exp(logits - logits.max())
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    model.train()
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=48)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--sample", type=int, default=200, help="characters to generate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a small budget (60 steps)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.context, args.sample = 60, 32, 40

    yscv.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in TEXT], np.int64)

    model = CharTransformer(len(chars), args.context)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        xb, yb = windows(rng, data, args.batch, args.context)
        g = yscv.Graph()
        loss = g.cross_entropy(model(g, xb), yb)  # logits [B, T, vocab], labels [B, T]
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(float(g.value(loss)))
        if step == 1 or step % max(1, args.steps // 10) == 0:
            print(f"step {step:4d}  loss {np.mean(losses[-10:]):.3f}  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)

    prompt = "Alice was "
    ids = generate(model, [stoi[c] for c in prompt], args.sample, rng)
    sample = "".join(chars[i] for i in ids)
    print(f"uniform guess: loss {np.log(len(chars)):.3f}")
    print(f"sample: {sample!r}")
    return {"losses": losses, "vocab": len(chars), "sample": sample}


if __name__ == "__main__":
    main()
