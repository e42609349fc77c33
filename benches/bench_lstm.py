"""LSTM forward+backward: yscv ``g.lstm`` vs PyTorch ``nn.LSTM``.

Workload: T=32, B=16, I=64 -> H=128, float32, time-major, zero initial
state; loss = mean of the outputs squared; one step = forward + backward
with gradients to x and to every weight. PyTorch gets the same weights
(transposed: its weights are output-major; its b_ih is ours, b_hh zero).
yscv reuses one graph: the leaves are bound once and each step truncates
back to them. Target: <= 1.0x PyTorch.

Also benched (no target): GRU and tanh-RNN of the same sizes against
``nn.GRU`` / ``nn.RNN``.
"""
from __future__ import annotations

import numpy as np

import yscv
from common import Bench

T, B, I, H = 32, 16, 64, 128


def _data(gates, seed=0):
    rng = np.random.default_rng(seed)
    k = 1.0 / np.sqrt(H)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    w_ih = rng.uniform(-k, k, (I, gates * H)).astype(np.float32)
    w_hh = rng.uniform(-k, k, (H, gates * H)).astype(np.float32)
    b_ih = rng.uniform(-k, k, gates * H).astype(np.float32)
    b_hh = rng.uniform(-k, k, gates * H).astype(np.float32)
    return x, w_ih, w_hh, b_ih, b_hh


def _yscv_step(kind):
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    x, w_ih, w_hh, b_ih, b_hh = _data(gates)
    g = yscv.Graph()
    xn = g.variable(x)
    wi = g.variable(w_ih)
    wh = g.variable(w_hh)
    bi = g.variable(b_ih)
    bh = g.variable(b_hh)
    base = len(g)

    def step():
        g.truncate(base)
        g.zero_grads()
        if kind == "lstm":
            out = g.lstm(xn, wi, wh, bi)
        elif kind == "gru":
            out = g.gru(xn, wi, wh, bi, bh)
        else:
            out = g.rnn(xn, wi, wh, bi)
        loss = g.mean(g.mul(out, out))
        g.backward(loss)
        return g.grad(wh), g.grad(xn)

    return step


def _torch_step(torch, kind):
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    x, w_ih, w_hh, b_ih, b_hh = _data(gates)
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
    m = cls(I, H)
    with torch.no_grad():
        m.weight_ih_l0.copy_(torch.from_numpy(w_ih.T.copy()))
        m.weight_hh_l0.copy_(torch.from_numpy(w_hh.T.copy()))
        m.bias_ih_l0.copy_(torch.from_numpy(b_ih))
        m.bias_hh_l0.copy_(torch.from_numpy(b_hh if kind == "gru" else np.zeros_like(b_hh)))
    xt = torch.from_numpy(x).requires_grad_(True)

    def step():
        m.zero_grad()
        xt.grad = None
        out, _ = m(xt)
        loss = (out * out).mean()
        loss.backward()
        return m.weight_hh_l0.grad, xt.grad

    return step


def benches(torch):
    out = []
    for kind, target in (("lstm", 1.0), ("gru", None), ("rnn", None)):
        ys = _yscv_step(kind)
        ref = _torch_step(torch, kind) if torch is not None else None
        if ref is not None:
            gw, gx = ys()
            tw, tx = ref()
            np.testing.assert_allclose(gw, tw.numpy().T, rtol=1e-3, atol=1e-6)
            np.testing.assert_allclose(gx, tx.numpy(), rtol=1e-3, atol=1e-6)
        name = f"{kind.upper()} T{T} B{B} {I}->{H} fwd+bwd"
        out.append(Bench(name, ys, ref, target=target))
    return out
