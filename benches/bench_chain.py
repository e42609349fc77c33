"""Per-node overhead: a 2,000-op scalar chain, x = tanh(x*w + b), forward+backward.

667 iterations of three ops each (mul, add, tanh) on one-element float32
values; one step builds the chain on a graph reused with ``truncate`` (as a
training loop would) and back-propagates. The ratio is per op, so it equals
the ratio of step times. Target: <= 0.4x PyTorch.
"""
from __future__ import annotations

import numpy as np

import yscv
from common import Bench

ITERS = 667  # x 3 ops = 2,001 ops


def _yscv_step():
    g = yscv.Graph()
    x0 = g.variable(np.array([0.5], dtype=np.float32))
    w = g.variable(np.array([0.9], dtype=np.float32))
    b = g.variable(np.array([0.1], dtype=np.float32))
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        x = x0
        for _ in range(ITERS):
            x = g.tanh(x * w + b)
        g.backward(x)
        return g.grad(w)

    return step


def _torch_step(torch):
    x0 = torch.tensor([0.5], requires_grad=True)
    w = torch.tensor([0.9], requires_grad=True)
    b = torch.tensor([0.1], requires_grad=True)

    def step():
        w.grad = None
        x = x0
        for _ in range(ITERS):
            x = torch.tanh(x * w + b)
        x.sum().backward()
        return w.grad

    return step


def benches(torch):
    ys = _yscv_step()
    ref = _torch_step(torch) if torch is not None else None
    if ref is not None:
        np.testing.assert_allclose(ys(), ref().numpy(), rtol=1e-4)
    return [Bench("scalar chain, 2,001 ops fwd+bwd", ys, ref, target=0.4)]
