"""Differentially private SGD (Abadi et al. 2016) on scikit-learn's digits
with a small CNN, per-sample gradients from ``yscv.func.vmap``.

    python examples/dp_sgd_digits.py            # trains, prints the test accuracy
    python examples/dp_sgd_digits.py --quick    # small budget (tests)

Each step: the per-sample gradients of the cross-entropy
(``vmap(grad(loss), in_axes=(None, 0, 0))`` over a batch of one-image
samples), each clipped to L2 norm ``--clip`` over all parameters, summed,
Gaussian noise of standard deviation ``--noise * --clip`` added, averaged,
and an SGD step. The per-sample gradient norms of the first batch are printed
(``per-sample gradient norms``), the test accuracy at the end.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing
sys.path.insert(0, HERE)

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
from yscv import func  # noqa: E402
from train_digits_cnn import load_data  # noqa: E402


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * 2 * 16, 10))


def per_sample_grads(model, params, x, y):
    """{name: [B, *shape]}: the gradient of each sample's loss."""
    def loss(g, p, xb, yb):  # ONE sample: xb [1, 8, 8, 1], yb [1]
        return g.cross_entropy(func.functional_call(model, p, (g, xb)), yb)

    return func.vmap(func.grad(loss), in_axes=(None, 0, 0))(params, x[:, None], y[:, None])


def privatize(grads, clip, noise, rng):
    """Clip each sample's gradient to norm ``clip``, sum, add noise, average."""
    norms = np.sqrt(sum((g.reshape(len(g), -1) ** 2).sum(1) for g in grads.values()))
    scale = np.minimum(1.0, clip / (norms + 1e-12))
    n = len(norms)
    out = {}
    for k, g in grads.items():
        s = np.tensordot(scale, g, axes=1)
        out[k] = ((s + rng.normal(0.0, noise * clip, size=s.shape)) / n).astype(g.dtype)
    return out, norms


def accuracy(model, x, y):
    g = yscv.Graph()
    logits = g.value(model(g, g.constant(x)))
    return float((logits.argmax(1) == y).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 60
    yscv.manual_seed(0)
    rng = np.random.default_rng(0)
    xtr, xte, ytr, yte = load_data()
    model = build_model()
    params = dict(model.named_parameters())
    first_norms = None
    for step in range(args.steps):
        idx = rng.choice(len(xtr), size=args.batch, replace=False)
        grads = per_sample_grads(model, {k: p.data for k, p in params.items()},
                                 xtr[idx], ytr[idx])
        noisy, norms = privatize(grads, args.clip, args.noise, rng)
        if first_norms is None:
            first_norms = norms
            print("per-sample gradient norms (first batch): "
                  f"min {norms.min():.3f}, median {np.median(norms):.3f}, max {norms.max():.3f}")
        for k, p in params.items():
            p.data -= args.lr * noisy[k]
    acc = accuracy(model, xte, yte)
    print(f"test accuracy after {args.steps} DP-SGD steps (clip {args.clip}, noise "
          f"{args.noise}): {acc:.3f}")
    return {"accuracy": acc, "first_norms": first_norms}


if __name__ == "__main__":
    main()
