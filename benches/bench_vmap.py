"""Batching (``yscv.func.vmap``) against ``torch.func.vmap``, float32:

* per-sample gradients of an MLP 784-256-10 (ReLU, cross-entropy) at batch
  64 and 256: ``vmap(grad(loss), in_axes=(None, 0, 0))`` over one-sample
  losses through ``functional_call``;
* per-sample gradients of a 28x28 CNN (conv 3x3 1->8, ReLU, 2x2 max pool,
  conv 3x3 8->16, ReLU, 2x2 max pool, linear 784->10) at batch 64 and 256;
* an ensemble of 8 MLPs 64-128-10 (stacked states), forward + backward of
  the mean loss of each member on a shared batch of 64;
* the Hessians of a small function (``sum(tanh(x @ A) ** 2)``, x [16]) at 64
  points, ``vmap(hessian(f))``.

Each side's target is <= 1.0x torch.func. Run:
``python benches/run.py vmap --separate``.
"""
from __future__ import annotations

import numpy as np

import yscv
from yscv import func, nn
from common import Bench


def _torch_mlp(torch, sizes):
    layers = []
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if k < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _yscv_mlp(sizes):
    layers = []
    for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if k < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(7 * 7 * 16, 10))


def _torch_cnn(torch):
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, padding=1),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(7 * 7 * 16, 10))


def _per_sample_yscv(model, x, y):
    params = {k: p.data for k, p in model.named_parameters()}

    def loss(g, p, xb, yb):
        return g.cross_entropy(func.functional_call(model, p, (g, xb)), yb)

    step_fn = func.vmap(func.grad(loss), in_axes=(None, 0, 0))
    return lambda: step_fn(params, x[:, None], y[:, None])


def _per_sample_torch(torch, model, x, y):
    params = {k: v.detach() for k, v in model.named_parameters()}
    xt, yt = torch.tensor(x), torch.tensor(y)

    def loss(p, xb, yb):
        out = torch.func.functional_call(model, p, (xb[None],))
        return torch.nn.functional.cross_entropy(out, yb[None])

    step_fn = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    return lambda: step_fn(params, xt, yt)


def _mlp_rows(torch, batch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=batch)
    yscv.manual_seed(0)
    ys = _per_sample_yscv(_yscv_mlp((784, 256, 10)), x, y)
    ts = None
    if torch is not None:
        torch.manual_seed(0)
        ts = _per_sample_torch(torch, _torch_mlp(torch, (784, 256, 10)), x, y)
    return Bench(f"per-sample grads, MLP 784-256-10, batch {batch}", ys, ts,
                 reference_name="PyTorch torch.func", target=1.0)


def _cnn_row(torch, batch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=batch)
    yscv.manual_seed(0)
    ys = _per_sample_yscv(_cnn(), x, y)
    ts = None
    if torch is not None:
        torch.manual_seed(0)
        xt = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        ts = _per_sample_torch(torch, _torch_cnn(torch), xt, y)
    return Bench(f"per-sample grads, CNN 28x28 (2 convs, 2 pools, linear), batch {batch}", ys, ts,
                 reference_name="PyTorch torch.func", target=1.0)


def _ensemble_row(torch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=64)
    members = []
    for s in range(8):
        yscv.manual_seed(s)
        members.append(_yscv_mlp((64, 128, 10)))
    params, _ = func.stack_module_state(members)

    def loss(g, p, xb, yb):
        return g.cross_entropy(func.functional_call(members[0], p, (g, xb)), yb)

    step_fn = func.vmap(func.value_and_grad(loss), in_axes=(0, None, None))
    ys = lambda: step_fn(params, x, y)  # noqa: E731
    ts = None
    if torch is not None:
        tms = []
        for s in range(8):
            torch.manual_seed(s)
            tms.append(_torch_mlp(torch, (64, 128, 10)))
        tp, _ = torch.func.stack_module_state(tms)
        base = tms[0]
        xt, yt = torch.tensor(x), torch.tensor(y)

        def tloss(p, xb, yb):
            return torch.nn.functional.cross_entropy(torch.func.functional_call(base, p, (xb,)),
                                                     yb)

        tstep = torch.func.vmap(torch.func.grad_and_value(tloss), in_dims=(0, None, None))
        ts = lambda: tstep(tp, xt, yt)  # noqa: E731
    return Bench("ensemble of 8 MLPs 64-128-10, forward + backward, batch 64", ys, ts,
                 reference_name="PyTorch torch.func", target=1.0)


def _hessian_row(torch):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    xs = rng.standard_normal((64, 16)).astype(np.float32)

    def f(g, x):
        return g.sum(g.square(g.tanh(g.matmul(x, a))))

    hess = func.vmap(func.hessian(f))
    ys = lambda: hess(xs)  # noqa: E731
    ts = None
    if torch is not None:
        at, xt = torch.tensor(a), torch.tensor(xs)
        th = torch.func.vmap(torch.func.hessian(lambda x: (torch.tanh(x @ at) ** 2).sum()))
        ts = lambda: th(xt)  # noqa: E731
    return Bench("Hessians of sum(tanh(x @ A)^2), x [16], 64 points", ys, ts,
                 reference_name="PyTorch torch.func", target=1.0)


def benches(torch):
    return [_mlp_rows(torch, 64), _mlp_rows(torch, 256), _cnn_row(torch, 64),
            _cnn_row(torch, 256), _ensemble_row(torch), _hessian_row(torch)]
