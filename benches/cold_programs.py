"""Small training programs for the cold-start measurement (benches/cold_start.py).

    python benches/cold_programs.py lstm          # sequence classifier, LSTM
    python benches/cold_programs.py transformer   # one pre-norm transformer block

Each is what a user's first script looks like: build a model, train it with
Adam and ``yscv.train.Trainer`` for a few epochs on synthetic data (nothing is
downloaded), evaluate, print the accuracy. float32 throughout. The README's
main job (``examples/train_digits_cnn.py``) is the third program.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402
from yscv.train import Trainer  # noqa: E402


def _labels(x: np.ndarray) -> np.ndarray:
    """4 classes from the sign pattern of two summed features (learnable)."""
    s = x.sum(axis=1)
    return ((s[:, 0] > 0).astype(np.int64) * 2 + (s[:, 1] > 0)).astype(np.int64)


class LSTMClassifier(nn.Module):
    """x [B, T, I] -> LSTM (batch-first) -> last hidden state -> Linear -> 4 logits."""

    def __init__(self, inputs=16, hidden=64):
        super().__init__()
        self.rnn = nn.LSTM(inputs, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 4)

    def forward(self, g, x):
        out, (h_n, _) = self.rnn(g, x)
        return self.head(g, g.select(h_n, 0, 0))


class TransformerClassifier(nn.Module):
    """x [B, S, D] -> pre-norm block (LayerNorm, self-attention, residual;
    LayerNorm, Linear-GELU-Linear, residual) -> mean over S -> Linear -> 4 logits."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = nn.MultiHeadAttention(d, heads)
        self.norm2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, 4)

    def forward(self, g, x):
        x = x if hasattr(x, "index") else g.constant(x)
        x = g.add(x, self.attn(g, self.norm1(g, x)))
        x = g.add(x, self.ff(g, self.norm2(g, x)))
        return self.head(g, g.mean(x, axis=1))


def run(program: str, epochs: int = 3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    if program == "lstm":
        x = rng.standard_normal((512, 24, 16)).astype(np.float32)
        model_fn = LSTMClassifier
    elif program == "transformer":
        x = rng.standard_normal((512, 32, 64)).astype(np.float32)
        model_fn = TransformerClassifier
    else:
        raise ValueError(f"unknown program {program!r}: lstm or transformer")
    y = _labels(x)
    t0 = time.perf_counter()
    yscv.manual_seed(seed)
    model = model_fn()
    opt = optim.Adam(model.parameters(), lr=3e-3)
    trainer = Trainer(model, "cross_entropy", opt, seed=seed, progress=False)
    trainer.fit((x[:384], y[:384]), epochs=epochs, batch_size=32)
    test = trainer.evaluate((x[384:], y[384:]))
    return {"accuracy": test["accuracy"], "seconds": time.perf_counter() - t0}


if __name__ == "__main__":
    r = run(sys.argv[1] if len(sys.argv) > 1 else "lstm")
    print(f"accuracy {r['accuracy']:.3f}  ({r['seconds']:.1f} s after imports)")
