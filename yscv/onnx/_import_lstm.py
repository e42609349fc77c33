"""ONNX's LSTM with peephole weights (input P), composed per time step from
graph ops: yscv's fused ``g.lstm`` has no peepholes. With yscv's gate order
(i, f, g, o) and ``b`` the sum of the input and recurrent biases:

    i = sigmoid(x W_i + h R_i + P_i * c + b_i)
    f = sigmoid(x W_f + h R_f + P_f * c + b_f)
    c' = f * c + i * tanh(x W_g + h R_g + b_g)
    o = sigmoid(x W_o + h R_o + P_o * c' + b_o),  h' = o * tanh(c')

(the output gate sees the new cell state, as ONNX defines it). Gradients
reach the weights, biases, peepholes, initial states and inputs through
ordinary ops.
"""
from __future__ import annotations

import numpy as np


def lstm_peephole(g, xs, w_ih, w_hh, b, h0, c0, p):
    """xs [T, B, I]; w_ih [I, 4H], w_hh [H, 4H], b [4H] in yscv's gate
    order; h0 / c0 [B, H] or None (zeros); p [3H] in ONNX's order (i, o, f).
    Returns (outputs [T, B, H], last cell state [B, H])."""
    steps, batch = xs.shape[0], xs.shape[1]
    hidden = w_hh.shape[0]
    p_i, p_o, p_f = (g.narrow(p, 0, k * hidden, hidden) for k in range(3))
    xw = g.matmul(xs, w_ih) + b                              # [T, B, 4H]
    zeros = np.zeros((batch, hidden), g.dtype)
    h = h0 if h0 is not None else g.constant(zeros)
    c = c0 if c0 is not None else g.constant(zeros)
    outs = []
    for t in range(steps):
        z = g.select(xw, 0, t) + g.matmul(h, w_hh)            # [B, 4H]
        i = g.sigmoid(g.narrow(z, 1, 0, hidden) + p_i * c)
        f = g.sigmoid(g.narrow(z, 1, hidden, hidden) + p_f * c)
        c = f * c + i * g.tanh(g.narrow(z, 1, 2 * hidden, hidden))
        o = g.sigmoid(g.narrow(z, 1, 3 * hidden, hidden) + p_o * c)
        h = o * g.tanh(c)
        outs.append(h)
    return g.stack(outs, axis=0), c
