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
"""
from __future__ import annotations

from ..compute import recurrent as C
from ..node import Op
from ..registry import register_backward


@register_backward(Op.RNN)
def rnn_op_backward(g, inputs, out, attrs, saved, needs):
    x, w_ih, w_hh, bias = inputs[:4]
    (h0,) = C.optional_states((attrs.has_h0,), inputs[4:])
    need_h0 = attrs.has_h0 and needs[4]
    dx, dw_ih, dw_hh, db, dh = C.rnn_backward(g, x, out, w_ih, w_hh, h0, attrs.batched,
                                              attrs.relu, needs, need_h0)
    result = (dx, dw_ih, dw_hh, db)
    if attrs.has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
    return result


@register_backward(Op.LSTM)
def lstm_op_backward(g, inputs, out, attrs, saved, needs):
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


@register_backward(Op.GRU)
def gru_op_backward(g, inputs, out, attrs, saved, needs):
    x, w_ih, w_hh, bias_ih, bias_hh = inputs[:5]
    (h0,) = C.optional_states((attrs.has_h0,), inputs[5:])
    need_h0 = attrs.has_h0 and needs[5]
    dx, dw_ih, dw_hh, db_ih, db_hh, dh = C.gru_backward(g, x, out, w_ih, w_hh, h0, saved,
                                                        attrs.batched, needs, need_h0)
    result = (dx, dw_ih, dw_hh, db_ih, db_hh)
    if attrs.has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
    return result
