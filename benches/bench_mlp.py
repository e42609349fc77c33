"""MLP training step: batch 128, 784-512-512-10, ReLU, cross-entropy (mean),
forward + backward. Target: <= 1.0x PyTorch eager CPU.

Both sides compute the same math with input-major weights:
``relu(x @ W1 + b1) -> relu(. @ W2 + b2) -> . @ W3 + b3 -> cross_entropy``.
The yscv step reuses one Graph (parameters are its first leaves, the step
truncates back to them, zeroes the grads, binds the batch as a constant,
builds the graph and runs backward), as a training loop would. The PyTorch
step sets ``.grad = None``, runs forward and ``loss.backward()``. No optimizer
update on either side (it is identical work and not the subject here).

Run standalone (``python benches/bench_mlp.py``) for a cProfile breakdown of
the yscv step per op.
"""
from __future__ import annotations

import numpy as np

import yscv
from common import Bench

BATCH = 128
SIZES = (784, 512, 512, 10)


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    labels = rng.integers(0, SIZES[-1], size=BATCH)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch nn.Linear default
        params.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
    return x, labels, params


def _yscv_step(x_np, labels, params_np):
    g = yscv.Graph()
    w1, b1, w2, b2, w3, b3 = (g.variable(p) for p in params_np)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        x = g.constant(x_np)
        h = g.relu(g.matmul(x, w1) + b1)
        h = g.relu(g.matmul(h, w2) + b2)
        loss = g.cross_entropy(g.matmul(h, w3) + b3, labels)
        g.backward(loss)
        return g.value(loss), [g.grad(p) for p in (w1, b1, w2, b2, w3, b3)]

    return step


def _torch_step(torch, x_np, labels, params_np):
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(labels)
    params = [torch.tensor(p, requires_grad=True) for p in params_np]
    w1, b1, w2, b2, w3, b3 = params
    F = torch.nn.functional

    def step():
        for p in params:
            p.grad = None
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        loss = F.cross_entropy(h @ w3 + b3, y)
        loss.backward()
        return loss.detach().numpy(), [p.grad.numpy() for p in params]

    return step


def benches(torch):
    x, labels, params = _data()
    ys = _yscv_step(x, labels, params)
    ref = _torch_step(torch, x, labels, params) if torch is not None else None
    if ref is not None:  # same math: loss and every gradient agree
        (ly, gy), (lt, gt) = ys(), ref()
        np.testing.assert_allclose(ly, lt, rtol=1e-4)
        for a, b in zip(gy, gt):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
    return [Bench("MLP 128x784-512-512-10 ReLU CE, fwd+bwd", ys, ref, target=1.0)]


def _profile(steps: int = 300) -> None:
    """cProfile of the yscv step: total time per function, top rows."""
    import cProfile
    import pstats

    x, labels, params = _data()
    step = _yscv_step(x, labels, params)
    for _ in range(20):
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    _profile()
