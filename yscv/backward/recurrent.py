"""Recurrent ops (backward): full backpropagation through time.

With ``dG[t]`` the gradient of the step's gate pre-activations, from
``t = T-1`` down to 0: the carried hidden-state gradient is
``g[t] + dG[t+1] @ w_hh.T`` (plus the carried cell gradient for the LSTM,
which starts from the gradient of the final cell state when that is an
output, else from zeros; ``z * dh`` for the GRU), then the gate backward
gives ``dG[t]``. Then ``dx = dG @ w_ih.T``, ``dW_ih = X^T dG``,
``dW_hh = H_prev^T dG`` (H_prev = [h0, h_0, ..., h_{T-2}]),
``dbias = sum(dG)`` (the GRU keeps two gate gradients: the input side
``(dr, dz, dn)`` for dx, dW_ih, dbias_ih; the recurrent side
``(dr, dz, dn * r)`` for dW_hh, dbias_hh and the carried gradient); ``dh0``
(and the LSTM's ``dc0``) are the carried gradients left after t = 0.

Attributes (by name): ``batched``, ``has_h0`` (RNN ``relu``; LSTM
``has_c0``, ``with_cell``), see yscv/ops/recurrent.py. The whole loop runs
in the kernels of yscv/kernels/recurrent_seq.py, driven by
yscv/compute/recurrent.py (row blocks, threads, scratch buffers).

Each recurrence is a fused op with a composite (its steps in primitive ops,
at the bottom): its rule runs on arrays only (``ns`` is always the array
interpreter and goes unused) and calls that loop; under
``create_graph=True`` each input gradient is one ``Op.VJP`` node whose value
is this rule's and whose derivative is the composite's
(yscv/engine/namespace/vjp.py).
"""
from __future__ import annotations

import numpy as np

from ..compute import recurrent as C
from ..node import Op
from ..registry import register_composite, register_rule


@register_rule(Op.RNN)
def rnn_rule(ns, g, inputs, out, attrs, saved, needs):
    x, w_ih, w_hh, bias = inputs[:4]
    (h0,) = C.optional_states((attrs.has_h0,), inputs[4:])
    need_h0 = attrs.has_h0 and needs[4]
    dx, dw_ih, dw_hh, db, dh = C.rnn_backward(g, x, out, w_ih, w_hh, h0, attrs.batched,
                                              attrs.relu, needs, need_h0)
    result = (dx, dw_ih, dw_hh, db)
    if attrs.has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
    return result


@register_rule(Op.LSTM)
def lstm_rule(ns, g, inputs, out, attrs, saved, needs):
    x, w_ih, w_hh, bias = inputs[:4]
    h0, c0 = C.optional_states((attrs.has_h0, attrs.has_c0), inputs[4:])
    gates, cells = saved
    dc_n = None
    if attrs.with_cell:  # value [T+1, (B,) H]: row T is c_n, its gradient seeds dc
        steps = x.shape[0]
        dc_n = g[steps]
        g, out = g[:steps], out[:steps]
    need_h0 = attrs.has_h0 and needs[4]
    dx, dw_ih, dw_hh, db, dh, dc = C.lstm_backward(g, x, out, w_ih, w_hh, h0, gates, cells, dc_n,
                                                   attrs.batched, needs, need_h0)
    result = (dx, dw_ih, dw_hh, db)
    k = 4
    if attrs.has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
        k += 1
    if attrs.has_c0:
        result += ((dc.reshape(c0.shape) if needs[k] else None),)
    return result


@register_rule(Op.GRU)
def gru_rule(ns, g, inputs, out, attrs, saved, needs):
    x, w_ih, w_hh, bias_ih, bias_hh = inputs[:5]
    (h0,) = C.optional_states((attrs.has_h0,), inputs[5:])
    need_h0 = attrs.has_h0 and needs[5]
    dx, dw_ih, dw_hh, db_ih, db_hh, dh = C.gru_backward(g, x, out, w_ih, w_hh, h0, saved,
                                                        attrs.batched, needs, need_h0)
    result = (dx, dw_ih, dw_hh, db_ih, db_hh)
    if attrs.has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
    return result


# -------------------------------------------------------------- composite
# The recurrences said step by step with primitive ops (registry.COMPOSITES):
# the derivative of their recorded gradients (Op.VJP) is the composite's,
# exact to any order.
def _sequence(G, x, batched):
    """x as [T, B, I] (an unbatched [T, I] gets B = 1)."""
    return x if batched else G.unsqueeze(x, 1)


def _state(G, h, batched, b, hsize):
    if h is None:
        return G.constant(np.zeros((b, hsize), dtype=G.dtype))
    return h if batched else G.unsqueeze(h, 0)


def _finish(G, hs, batched):
    out = G.stack(hs, 0)
    return out if batched else G.squeeze(out, 1)


def _rnn_composite(G, x, w_ih, w_hh, bias, *rest):
    *rest, attrs = rest
    h0 = rest[0] if attrs.has_h0 else None
    x3 = _sequence(G, x, attrs.batched)
    steps, b = x3.shape[0], x3.shape[1]
    xp = G.add(G.matmul(x3, w_ih), bias)
    h = _state(G, h0, attrs.batched, b, w_hh.shape[0])
    hs = []
    for t in range(steps):
        pre = G.add(G.select(xp, 0, t), G.matmul(h, w_hh))
        h = G.relu(pre) if attrs.relu else G.tanh(pre)
        hs.append(h)
    return _finish(G, hs, attrs.batched)


def _lstm_composite(G, x, w_ih, w_hh, bias, *rest):
    *rest, attrs = rest
    k = 0
    h0 = c0 = None
    if attrs.has_h0:
        h0 = rest[k]
        k += 1
    if attrs.has_c0:
        c0 = rest[k]
    x3 = _sequence(G, x, attrs.batched)
    steps, b = x3.shape[0], x3.shape[1]
    hsize = w_hh.shape[0]
    xp = G.add(G.matmul(x3, w_ih), bias)
    h = _state(G, h0, attrs.batched, b, hsize)
    c = _state(G, c0, attrs.batched, b, hsize)
    hs = []
    for t in range(steps):
        pre = G.add(G.select(xp, 0, t), G.matmul(h, w_hh))
        i = G.sigmoid(G.narrow(pre, 1, 0, hsize))
        f = G.sigmoid(G.narrow(pre, 1, hsize, hsize))
        gg = G.tanh(G.narrow(pre, 1, 2 * hsize, hsize))
        o = G.sigmoid(G.narrow(pre, 1, 3 * hsize, hsize))
        c = G.add(G.mul(f, c), G.mul(i, gg))
        h = G.mul(o, G.tanh(c))
        hs.append(h)
    if attrs.with_cell:
        hs.append(c)
    return _finish(G, hs, attrs.batched)


def _gru_composite(G, x, w_ih, w_hh, b_ih, b_hh, *rest):
    *rest, attrs = rest
    h0 = rest[0] if attrs.has_h0 else None
    x3 = _sequence(G, x, attrs.batched)
    steps, b = x3.shape[0], x3.shape[1]
    hsize = w_hh.shape[0]
    xp = G.add(G.matmul(x3, w_ih), b_ih)
    h = _state(G, h0, attrs.batched, b, hsize)
    hs = []
    for t in range(steps):
        gi = G.select(xp, 0, t)
        gh = G.add(G.matmul(h, w_hh), b_hh)
        r = G.sigmoid(G.add(G.narrow(gi, 1, 0, hsize), G.narrow(gh, 1, 0, hsize)))
        z = G.sigmoid(G.add(G.narrow(gi, 1, hsize, hsize), G.narrow(gh, 1, hsize, hsize)))
        n = G.tanh(G.add(G.narrow(gi, 1, 2 * hsize, hsize),
                         G.mul(r, G.narrow(gh, 1, 2 * hsize, hsize))))
        h = G.add(G.mul(G.sub(1.0, z), n), G.mul(z, h))
        hs.append(h)
    return _finish(G, hs, attrs.batched)


register_composite(Op.RNN, _rnn_composite)
register_composite(Op.LSTM, _lstm_composite)
register_composite(Op.GRU, _gru_composite)
