"""Optimizer step cost: Adam over the MLP's parameters (784-512-512-10).

One call = one ``opt.step()`` over the six weight/bias arrays (669,706
float32 values) with fixed random gradients, against
``torch.optim.Adam(foreach=True)`` (PyTorch's default multi-tensor path on
CPU). yscv runs one fused Numba pass per parameter.
"""
from __future__ import annotations

import numpy as np

from common import Bench

SHAPES = [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]


def _setup(seed: int = 0):
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in SHAPES]
    grads = [rng.standard_normal(s).astype(np.float32) * 1e-3 for s in SHAPES]
    return values, grads


def benches(torch):
    from yscv.nn import Parameter
    from yscv.optim import SGD, Adam, AdamW

    values, grads = _setup()
    out = []
    for name, cls, tname, kw, target in [
            ("adam step, MLP 784-512-512-10 params", Adam, "Adam", dict(lr=1e-3), 1.0),
            ("adamw step (amsgrad), MLP params", AdamW, "AdamW", dict(lr=1e-3, amsgrad=True), None),
            ("sgd step (momentum 0.9), MLP params", SGD, "SGD", dict(lr=1e-2, momentum=0.9), None)]:
        params = [Parameter(v) for v in values]
        for p, g in zip(params, grads):
            p.grad = g.copy()
        opt = cls(params, **kw)
        ref = None
        if torch is not None:
            tparams = [torch.nn.Parameter(torch.tensor(v)) for v in values]
            for p, g in zip(tparams, grads):
                p.grad = torch.tensor(g)
            topt = getattr(torch.optim, tname)(tparams, foreach=True, **kw)
            ref = topt.step
        out.append(Bench(name, opt.step, ref, "PyTorch foreach=True", target=target))
    return out
