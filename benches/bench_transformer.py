"""Transformer block forward+backward: yscv vs PyTorch.

Pre-norm block, B=8, S=64, d=128, 4 heads (head depth 32), float32:

    h = layer_norm(x); q, k, v = h Wq + bq, h Wk + bk, h Wv + bv
    a = scaled_dot_product_attention(q, k, v) over [B, heads, S, 32]
    x1 = x + a Wo + bo
    y = x1 + gelu(layer_norm(x1) W1 + b1) W2 + b2      (MLP 128 -> 512 -> 128)
    loss = mean(y * y)

One step = forward + backward with gradients to x and every parameter.
Linears run on [B*S, d] rows (2-D GEMMs) in both libraries; PyTorch uses the
same weights and the same op sequence (F.layer_norm, @, F.scaled_dot_product_attention,
F.gelu). yscv reuses one graph with ``truncate``. Target: <= 0.8x PyTorch.

A second row benches the attention core alone (SDPA forward+backward on
[8, 4, 64, 32] q, k, v with a random cotangent), causal, against
F.scaled_dot_product_attention(is_causal=True).
"""
from __future__ import annotations

import numpy as np

import yscv
from common import Bench

B, S, D, HEADS = 8, 64, 128, 4
DH = D // HEADS
FF = 4 * D


def _params(seed=0):
    rng = np.random.default_rng(seed)

    def lin(i, o):
        k = 1 / np.sqrt(i)
        return (rng.uniform(-k, k, (i, o)).astype(np.float32),
                rng.uniform(-k, k, o).astype(np.float32))

    p = {}
    for name in ("q", "k", "v", "o"):
        p["w" + name], p["b" + name] = lin(D, D)
    p["w1"], p["b1"] = lin(D, FF)
    p["w2"], p["b2"] = lin(FF, D)
    for n in ("1", "2"):
        p["ln_g" + n] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        p["ln_b" + n] = (0.1 * rng.standard_normal(D)).astype(np.float32)
    x = rng.standard_normal((B * S, D)).astype(np.float32)
    return x, p


def _yscv_step():
    x, params = _params()
    g = yscv.Graph()
    xn = g.variable(x)
    p = {k: g.variable(v) for k, v in params.items()}
    base = len(g)

    def heads(t):  # [B*S, D] -> [B, HEADS, S, DH]
        return g.transpose(g.reshape(t, (B, S, HEADS, DH)), (0, 2, 1, 3))

    def step():
        g.truncate(base)
        g.zero_grads()
        h = g.layer_norm(xn, p["ln_g1"], p["ln_b1"])
        q = heads(g.add(g.matmul(h, p["wq"]), p["bq"]))
        k = heads(g.add(g.matmul(h, p["wk"]), p["bk"]))
        v = heads(g.add(g.matmul(h, p["wv"]), p["bv"]))
        a = g.scaled_dot_product_attention(q, k, v)
        a = g.reshape(g.transpose(a, (0, 2, 1, 3)), (B * S, D))
        x1 = g.add(xn, g.add(g.matmul(a, p["wo"]), p["bo"]))
        h2 = g.layer_norm(x1, p["ln_g2"], p["ln_b2"])
        m = g.gelu(g.add(g.matmul(h2, p["w1"]), p["b1"]))
        y = g.add(x1, g.add(g.matmul(m, p["w2"]), p["b2"]))
        loss = g.mean(g.mul(y, y))
        g.backward(loss)
        return g.grad(p["wq"]), g.grad(xn)

    return step


def _torch_step(torch):
    F = torch.nn.functional
    x, params = _params()
    xt = torch.from_numpy(x).requires_grad_(True)
    p = {k: torch.from_numpy(v).requires_grad_(True) for k, v in params.items()}

    def heads(t):
        return t.view(B, S, HEADS, DH).transpose(1, 2)

    def step():
        for t in p.values():
            t.grad = None
        xt.grad = None
        h = F.layer_norm(xt, (D,), p["ln_g1"], p["ln_b1"])
        q = heads(h @ p["wq"] + p["bq"])
        k = heads(h @ p["wk"] + p["bk"])
        v = heads(h @ p["wv"] + p["bv"])
        a = F.scaled_dot_product_attention(q, k, v)
        a = a.transpose(1, 2).reshape(B * S, D)
        x1 = xt + (a @ p["wo"] + p["bo"])
        h2 = F.layer_norm(x1, (D,), p["ln_g2"], p["ln_b2"])
        m = F.gelu(h2 @ p["w1"] + p["b1"])
        y = x1 + (m @ p["w2"] + p["b2"])
        loss = (y * y).mean()
        loss.backward()
        return p["wq"].grad, xt.grad

    return step


def _sdpa_data():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((B, HEADS, S, DH)).astype(np.float32) for _ in range(3))
    cot = rng.standard_normal((B, HEADS, S, DH)).astype(np.float32)
    return q, k, v, cot


def _yscv_sdpa():
    q, k, v, cot = _sdpa_data()
    g = yscv.Graph()
    nodes = [g.variable(a) for a in (q, k, v)]
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        out = g.scaled_dot_product_attention(*nodes, causal=True)
        g.backward(out, grad=cot)
        return g.grad(nodes[0])

    return step


def _torch_sdpa(torch):
    q, k, v, cot = _sdpa_data()
    ts = [torch.from_numpy(a).requires_grad_(True) for a in (q, k, v)]
    ct = torch.from_numpy(cot)

    def step():
        for t in ts:
            t.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
        out.backward(ct)
        return ts[0].grad

    return step


def benches(torch):
    ys, ya = _yscv_step(), _yscv_sdpa()
    rs = _torch_step(torch) if torch is not None else None
    ra = _torch_sdpa(torch) if torch is not None else None
    if torch is not None:
        gw, gx = ys()
        tw, tx = rs()
        np.testing.assert_allclose(gw, tw.numpy(), rtol=2e-3, atol=1e-6)
        np.testing.assert_allclose(gx, tx.numpy(), rtol=2e-3, atol=1e-6)
        np.testing.assert_allclose(ya(), ra().numpy(), rtol=2e-3, atol=1e-5)
    return [
        Bench(f"transformer block B{B} S{S} d{D} h{HEADS} fwd+bwd", ys, rs, target=0.8),
        Bench(f"SDPA causal [{B},{HEADS},{S},{DH}] fwd+bwd", ya, ra),
    ]
