"""Gate math of the recurrent cells (RNN, LSTM, GRU), one batch row at a time.

The sequence drivers (yscv/kernels/recurrent_seq.py) compute a step's matrix
products for a block of batch rows and then call these functions once per
row: each reads and writes 1-d rows (``H`` or ``G*H`` long) of the
per-sequence arrays, with no allocation. Every array is C-contiguous and of
one float dtype; constants are made with ``dtype.type`` so float32 stays
float32.

Row layouts (G gate blocks of H columns, in PyTorch's order):

- LSTM gates ``(i, f, g, o)``; GRU ``(r, z, n)``.
- The pre-activations arrive summed over the input and recurrent products
  (LSTM, RNN: ``x_t w_ih + h_{t-1} w_hh``, biases added here); the GRU keeps
  ``h_{t-1} w_hh`` apart (``hw``) because ``n`` multiplies its third block
  by ``r``.

Transcendentals: `fast_sigmoid` and `fast_tanh` of
yscv/kernels/fastmath.py (libm for float64; branch-free forms that LLVM
vectorises for float32; see that module for accuracy and the NaN/inf
contract: NaN propagates, +-inf give the limits).

Loops are split so each writes one array and reads few: Numba cannot tell
LLVM that arguments do not alias, and LLVM gives up vectorising a loop that
would need many runtime overlap checks (a fused loop over five arrays stayed
scalar and was several times slower; docs/ops/recurrent.md). Gate blocks are
taken as slices (``gt[2*H:3*H]``) and looped from 0: an index like ``gt[j]``
with j from ``2*H`` keeps Numba's negative-index wraparound in the loop (LLVM
cannot prove H >= 0), and the loop then stays scalar.
"""
from __future__ import annotations

from ._jit import jit
from .fastmath import fast_sigmoid, fast_tanh


# ------------------------------------------------------------------ cells
@jit
def rnn_cell_forward(o, bias, relu):
    """``o = act(o + bias)`` in place (``o`` holds ``x_t w_ih + h_{t-1} w_hh``);
    act = relu if ``relu`` else tanh."""
    zero = o.dtype.type(0)
    if relu:
        for j in range(o.shape[0]):
            a = o[j] + bias[j]
            o[j] = a if a > zero else zero
    else:
        for j in range(o.shape[0]):
            o[j] = fast_tanh(o[j] + bias[j])


@jit
def rnn_cell_backward(o, dh, relu, d):
    """``d = dh * act'`` from the output ``o = h_t``: ``1 - h^2`` for tanh,
    ``h > 0`` for relu (0 at the kink, as PyTorch)."""
    zero = o.dtype.type(0)
    one = o.dtype.type(1)
    if relu:
        for j in range(o.shape[0]):
            d[j] = dh[j] if o[j] > zero else zero
    else:
        for j in range(o.shape[0]):
            h = o[j]
            d[j] = dh[j] * (one - h * h)


@jit
def lstm_cell_forward(gt, bias, cp, cn, o):
    """One row of an LSTM step: ``gt`` ([4H]) holds the pre-activations
    without the bias on entry and the activations (sigmoid i, sigmoid f,
    tanh g, sigmoid o) on return; ``cn = f*cp + i*g``; ``o = o_gate*tanh(cn)``."""
    H = cp.shape[0]
    g_if, g_i, g_f, g_g, g_o = gt[:2 * H], gt[:H], gt[H:2 * H], gt[2 * H:3 * H], gt[3 * H:]
    b_if, b_g, b_o = bias[:2 * H], bias[2 * H:3 * H], bias[3 * H:]
    for j in range(2 * H):
        g_if[j] = fast_sigmoid(g_if[j] + b_if[j])
    for j in range(H):
        g_g[j] = fast_tanh(g_g[j] + b_g[j])
    for j in range(H):
        g_o[j] = fast_sigmoid(g_o[j] + b_o[j])
    for j in range(H):
        cn[j] = g_f[j] * cp[j] + g_i[j] * g_g[j]
    for j in range(H):
        o[j] = g_o[j] * fast_tanh(cn[j])


@jit
def lstm_cell_backward(gt, cp, cn, dh, dc, tc, dg):
    """Backward of one row of an LSTM step.

    ``gt`` the saved activations, ``cp`` / ``cn`` = c_{t-1} / c_t, ``dh`` the
    whole gradient of h_t; ``dc`` carries dL/dc_t in and dL/dc_{t-1} out (in
    place); ``tc`` ([H]) is scratch for tanh(c_t), recomputed rather than
    saved. Writes the pre-activation gate gradients to ``dg`` ([4H]).
    """
    H = cp.shape[0]
    one = gt.dtype.type(1)
    g_i, g_f, g_g, g_o = gt[:H], gt[H:2 * H], gt[2 * H:3 * H], gt[3 * H:]
    d_i, d_f, d_g, d_o = dg[:H], dg[H:2 * H], dg[2 * H:3 * H], dg[3 * H:]
    for j in range(H):
        tc[j] = fast_tanh(cn[j])
    for j in range(H):
        o = g_o[j]
        d_o[j] = dh[j] * tc[j] * o * (one - o)
    for j in range(H):
        t = tc[j]
        dc[j] = dc[j] + dh[j] * g_o[j] * (one - t * t)
    for j in range(H):
        gi = g_i[j]
        d_i[j] = dc[j] * g_g[j] * gi * (one - gi)
    for j in range(H):
        gf = g_f[j]
        d_f[j] = dc[j] * cp[j] * gf * (one - gf)
    for j in range(H):
        gg = g_g[j]
        d_g[j] = dc[j] * g_i[j] * (one - gg * gg)
    for j in range(H):
        dc[j] = dc[j] * g_f[j]


@jit
def gru_cell_forward(s, hw, b_ih, b_hh, hp, o):
    """One row of a GRU step, gates (r, z, n) as PyTorch.

    ``s`` ([4H]) holds ``x_t w_ih`` in its first 3H columns on entry and r,
    z, n and ``h_{t-1} W_hn + b_hn`` on return; ``hw`` ([3H]) is
    ``h_{t-1} w_hh``; ``o = (1-z)*n + z*hp``.
    """
    H = hp.shape[0]
    one = o.dtype.type(1)
    bi_rz, bi_n = b_ih[:2 * H], b_ih[2 * H:]
    bh_rz, bh_n = b_hh[:2 * H], b_hh[2 * H:]
    h_rz, h_n = hw[:2 * H], hw[2 * H:]
    s_rz, s_r, s_z, s_n, s_hn = s[:2 * H], s[:H], s[H:2 * H], s[2 * H:3 * H], s[3 * H:]
    for j in range(2 * H):
        s_rz[j] = fast_sigmoid(s_rz[j] + bi_rz[j] + h_rz[j] + bh_rz[j])
    for j in range(H):
        s_hn[j] = h_n[j] + bh_n[j]
    for j in range(H):
        s_n[j] = fast_tanh(s_n[j] + bi_n[j] + s_r[j] * s_hn[j])
    for j in range(H):
        z = s_z[j]
        o[j] = (one - z) * s_n[j] + z * hp[j]


@jit
def gru_cell_backward(s, hp, dh, dd, dx, dhr):
    """Backward of one row of a GRU step.

    ``dh`` is the gradient of h_t from the output and the next step's
    recurrent product; ``dd`` adds ``z * dh`` of the next step (the direct
    path h_{t-1} -> h_t) on entry and holds this step's on return. Writes
    the pre-activation gradients of the input side to ``dx`` (r, z, n) and
    of the recurrent side to ``dhr`` (r, z, n * r), both [3H].
    """
    H = hp.shape[0]
    one = s.dtype.type(1)
    for j in range(H):
        dd[j] = dh[j] + dd[j]
    s_r, s_z, s_n, s_hn = s[:H], s[H:2 * H], s[2 * H:3 * H], s[3 * H:]
    dx_rz, dx_r, dx_z, dx_n = dx[:2 * H], dx[:H], dx[H:2 * H], dx[2 * H:]
    for j in range(H):
        z = s_z[j]
        n = s_n[j]
        dx_n[j] = dd[j] * (one - z) * (one - n * n)
    for j in range(H):
        z = s_z[j]
        dx_z[j] = dd[j] * (hp[j] - s_n[j]) * z * (one - z)
    for j in range(H):
        r = s_r[j]
        dx_r[j] = dx_n[j] * s_hn[j] * r * (one - r)
    dh_rz, dh_n = dhr[:2 * H], dhr[2 * H:]
    for j in range(2 * H):
        dh_rz[j] = dx_rz[j]
    for j in range(H):
        dh_n[j] = dx_n[j] * s_r[j]
    for j in range(H):
        dd[j] = dd[j] * s_z[j]
