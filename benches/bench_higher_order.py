"""Derivatives of derivatives (SPEC section 9), float32, each against the same
math in PyTorch:

* HVP of an MLP: tanh, batch 256, 64-256-256-10, mean squared output; the
  Hessian of the loss in the weights times a fixed direction, by reverse
  over reverse (``yscv.func.hvp`` / ``torch.autograd.grad(create_graph=True)``
  twice). Target <= 1.0x PyTorch.
* One WGAN-GP critic step: two stride-2 3x3 convolutions (3 -> 16 -> 32
  channels) with leaky_relu, a linear layer; batch 32 of 16x16x3; the
  critic's gradient with respect to interpolated inputs, the penalty
  ``(||grad||_2 - 1)^2``, and the backward of critic loss + 10 penalty to
  every weight. Target <= 1.0x PyTorch (channels-last on both sides).
* ``jvp`` against ``vjp`` of the same function (the MLP's output in its
  first weight), both in yscv: target jvp <= 3x vjp.

Run: ``python benches/run.py higher_order`` (``--separate`` for each side
alone).
"""
from __future__ import annotations

import numpy as np

import yscv
from yscv import func as F
from common import Bench

BATCH = 256
SIZES = (64, 256, 256, 10)


def _mlp_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    ws = [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
          for a, b in zip(SIZES[:-1], SIZES[1:])]
    vs = [rng.standard_normal(w.shape).astype(np.float32) for w in ws]
    return x, ws, vs


def _mlp(g, x, *ws):
    h = x
    for k, w in enumerate(ws):
        h = g.matmul(h, w)
        if k < len(ws) - 1:
            h = g.tanh(h)
    return g.mean(h * h)


def _yscv_hvp(x, ws, vs):
    def f(g, *ws_nodes):
        return _mlp(g, g.constant(x), *ws_nodes)

    def step():
        return F.hvp(f, tuple(ws), tuple(vs))[1]
    return step


def _torch_hvp(torch, x, ws, vs):
    xt = torch.tensor(x)
    wt = [torch.tensor(w, requires_grad=True) for w in ws]
    vt = [torch.tensor(v) for v in vs]

    def step():
        h = xt
        for k, w in enumerate(wt):
            h = h @ w
            if k < len(wt) - 1:
                h = torch.tanh(h)
        loss = (h * h).mean()
        gs = torch.autograd.grad(loss, wt, create_graph=True)
        dot = sum((gk * vk).sum() for gk, vk in zip(gs, vt))
        return [a.numpy() for a in torch.autograd.grad(dot, wt)]
    return step


def _critic_data():
    rng = np.random.default_rng(1)
    real = rng.standard_normal((32, 16, 16, 3)).astype(np.float32)
    fake = rng.standard_normal((32, 16, 16, 3)).astype(np.float32)
    eps = rng.uniform(size=(32, 1, 1, 1)).astype(np.float32)
    w1 = (rng.standard_normal((3, 3, 3, 16)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(np.float32)
    wl = (rng.standard_normal((4 * 4 * 32, 1)) * 0.05).astype(np.float32)
    return real, fake, eps, (w1, w2, wl)


def _critic(g, x, w1, w2, wl):
    h = g.leaky_relu(g.conv2d(x, w1, stride=2, padding=1), 0.2)
    h = g.leaky_relu(g.conv2d(h, w2, stride=2, padding=1), 0.2)
    return g.matmul(g.flatten(h), wl)


def _yscv_critic(real, fake, eps, weights):
    interp = eps * real + (1 - eps) * fake

    def step():
        g = yscv.Graph()
        ws = [g.variable(w) for w in weights]
        d_real = g.mean(_critic(g, g.constant(real), *ws))
        d_fake = g.mean(_critic(g, g.constant(fake), *ws))
        xi = g.variable(interp)
        (gx,) = g.gradients(g.sum(_critic(g, xi, *ws)), [xi], create_graph=True)
        norms = g.sqrt(g.sum(g.reshape(gx * gx, (32, -1)), axis=1))
        penalty = g.mean((norms - 1.0) ** 2)
        g.backward(d_fake - d_real + 10.0 * penalty)
        return [g.grad(w) for w in ws]
    return step


def _torch_critic(torch, real, fake, eps, weights):
    tF = torch.nn.functional
    # NCHW data and OIHW weights for PyTorch's conv2d, channels-last memory
    to_nchw = lambda a: torch.tensor(a).permute(0, 3, 1, 2).contiguous(
        memory_format=torch.channels_last)
    rt, ft = to_nchw(real), to_nchw(fake)
    it = to_nchw(eps * real + (1 - eps) * fake)
    w1 = torch.tensor(weights[0]).permute(3, 2, 0, 1).contiguous().requires_grad_(True)
    w2 = torch.tensor(weights[1]).permute(3, 2, 0, 1).contiguous().requires_grad_(True)
    wl = torch.tensor(weights[2]).requires_grad_(True)

    def critic(x):
        h = tF.leaky_relu(tF.conv2d(x, w1, stride=2, padding=1), 0.2)
        h = tF.leaky_relu(tF.conv2d(h, w2, stride=2, padding=1), 0.2)
        return h.permute(0, 2, 3, 1).reshape(x.shape[0], -1) @ wl

    def step():
        for w in (w1, w2, wl):
            w.grad = None
        xi = it.clone().requires_grad_(True)
        (gx,) = torch.autograd.grad(critic(xi).sum(), xi, create_graph=True)
        penalty = ((gx.reshape(32, -1).norm(dim=1) - 1) ** 2).mean()
        loss = critic(ft).mean() - critic(rt).mean() + 10 * penalty
        loss.backward()
        return [w1.grad.permute(2, 3, 1, 0).numpy(), w2.grad.permute(2, 3, 1, 0).numpy(),
                wl.grad.numpy()]
    return step


def _jvp_vjp(x, ws, vs):
    def f(g, w0):
        h = g.matmul(g.constant(x), w0)
        for w in ws[1:]:
            h = g.matmul(g.tanh(h), g.constant(w))
        return h

    out_shape = (BATCH, SIZES[-1])
    cot = np.ones(out_shape, dtype=np.float32)

    def jvp():
        return F.jvp(f, (ws[0],), (vs[0],))[1]

    def vjp():
        _, fn = F.vjp(f, ws[0])
        return fn(cot)[0]
    return jvp, vjp


def benches(torch):
    x, ws, vs = _mlp_data()
    hy = _yscv_hvp(x, ws, vs)
    ht = _torch_hvp(torch, x, ws, vs) if torch is not None else None
    real, fake, eps, weights = _critic_data()
    cy = _yscv_critic(real, fake, eps, weights)
    ct = _torch_critic(torch, real, fake, eps, weights) if torch is not None else None
    if torch is not None:  # same math: the results agree
        for a, b in zip(hy(), ht()):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)
        for a, b in zip(cy(), ct()):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)
    jvp, vjp = _jvp_vjp(x, ws, vs)
    return [
        Bench("HVP, MLP tanh 256x64-256-256-10", hy, ht, target=1.0),
        Bench("WGAN-GP critic step, 2 convs s2 + linear, 32x16x16x3", cy, ct, target=1.0),
        Bench("jvp vs vjp, MLP output in its first weight", jvp, vjp,
              reference_name="yscv vjp", target=3.0),
    ]
