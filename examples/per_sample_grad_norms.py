"""Per-sample gradient norms of a classifier on scikit-learn's digits: which
training images pull hardest on the weights.

    python examples/per_sample_grad_norms.py            # trains an MLP, prints the norms
    python examples/per_sample_grad_norms.py --quick    # small budget (tests)

An MLP is trained briefly with ordinary mini-batch SGD; then one
``vmap(grad(loss), in_axes=(None, 0, 0))`` call gives the gradient of every
test image's loss with respect to every parameter, and their L2 norms (over
all parameters) are compared for the images the model gets right and those
it gets wrong: a misclassified image's gradient is typically several times
larger (it is what the next update would chase).
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
import yscv.optim as optim  # noqa: E402
from yscv import func  # noqa: E402
from train_digits_cnn import load_data  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps = 60
    yscv.manual_seed(0)
    xtr, xte, ytr, yte = load_data()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    for _ in range(args.steps):
        idx = rng.choice(len(xtr), size=32, replace=False)
        g = yscv.Graph()
        loss = g.cross_entropy(model(g, g.constant(xtr[idx])), ytr[idx])
        opt.zero_grad()
        g.backward(loss)
        opt.step()

    params = {k: p.data for k, p in model.named_parameters()}

    def sample_loss(g, p, x, y):  # ONE image [1, 8, 8, 1], its label [1]
        return g.cross_entropy(func.functional_call(model, p, (g, x)), y)

    grads = func.vmap(func.grad(sample_loss), in_axes=(None, 0, 0))(
        params, xte[:, None], yte[:, None])
    norms = np.sqrt(sum((v.reshape(len(yte), -1) ** 2).sum(1) for v in grads.values()))
    g = yscv.Graph()
    right = g.value(model(g, g.constant(xte))).argmax(1) == yte
    print(f"{len(yte)} test images, {int(right.sum())} classified right")
    print(f"per-sample gradient norm: median {np.median(norms[right]):.4f} when right, "
          f"{np.median(norms[~right]):.4f} when wrong")
    worst = np.argsort(norms)[::-1][:5]
    print("largest norms: " + ", ".join(f"image {i} (label {yte[i]}, norm {norms[i]:.3f})"
                                        for i in worst))
    return {"norms": norms, "right": right}


if __name__ == "__main__":
    main()
