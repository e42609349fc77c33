"""ONNX's GRU with ``linear_before_reset=0`` (ONNX's default), composed per
time step from graph ops: yscv's fused ``g.gru`` applies the reset gate
after the recurrent product (``linear_before_reset=1``, PyTorch's form),
while this form applies it to the hidden state before it:

    r = sigmoid(x W_r + h R_r + b_r),  z = sigmoid(x W_z + h R_z + b_z)
    n = tanh(x W_n + (r * h) R_n + b_n),  h' = (1 - z) * n + z * h

(``b_*`` the sums of the input and recurrent biases). Gradients reach the
weights, biases, initial state and inputs through ordinary ops.
"""
from __future__ import annotations

import numpy as np


def gru_reset_first(g, xs, w_ih, w_hh, b_in, b_rec, h0):
    """xs [T, B, I]; w_ih [I, 3H], w_hh [H, 3H], b_in / b_rec [3H] in yscv's
    gate order (r, z, n); h0 [B, H] or None (zeros). Returns [T, B, H]."""
    steps, batch = xs.shape[0], xs.shape[1]
    hidden = w_hh.shape[0]
    xw = g.matmul(xs, w_ih) + b_in                           # [T, B, 3H]
    r_rz = g.narrow(w_hh, 1, 0, 2 * hidden)
    r_n = g.narrow(w_hh, 1, 2 * hidden, hidden)
    b_rz = g.narrow(b_rec, 0, 0, 2 * hidden)
    b_n = g.narrow(b_rec, 0, 2 * hidden, hidden)
    h = h0 if h0 is not None else g.constant(np.zeros((batch, hidden), g.dtype))
    outs = []
    for t in range(steps):
        xt = g.select(xw, 0, t)
        rz = g.sigmoid(g.narrow(xt, 1, 0, 2 * hidden) + g.matmul(h, r_rz) + b_rz)
        r, z = g.narrow(rz, 1, 0, hidden), g.narrow(rz, 1, hidden, hidden)
        n = g.tanh(g.narrow(xt, 1, 2 * hidden, hidden) + g.matmul(r * h, r_n) + b_n)
        h = n + z * (h - n)
        outs.append(h)
    return g.stack(outs, axis=0)
