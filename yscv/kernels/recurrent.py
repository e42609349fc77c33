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

Transcendentals: ``fsigmoid`` and ``ftanh`` below are exact libm calls
(``math.exp``, ``math.tanh``) for float64. For float32 they are branch-free
forms that LLVM vectorises (libm calls cannot be vectorised without SVML,
and were 3-4x slower per element here), built on ``_exp32``: Cody-Waite
range reduction, Cephes' expf polynomial and a bit-built 2**k (max relative
error 8e-8 on [-87.3, 88.3]). ``fsigmoid`` = 1 / (1 + exp(-x)) (max absolute
error 9e-8); ``ftanh`` is Eigen's 13/6-degree rational function (no exp;
max error 6.6 ulp, 4e-7 absolute, near |x| = 5.8). NaN propagates;
+-inf give the limits (sigmoid(-inf) is 4e-39, not exactly 0).

Loops are split so each writes one array and reads few: Numba cannot tell
LLVM that arguments do not alias, and LLVM gives up vectorising a loop that
would need many runtime overlap checks (one fused loop over five arrays ran
3-4x slower than the split loops). Gate blocks are taken as slices
(``gt[2*H:3*H]``) and looped from 0: an index like ``gt[j]`` with j from
2*H keeps Numba's negative-index wraparound in the loop (LLVM cannot prove
H >= 0), and the loop then stays scalar.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import intrinsic, overload

from ._jit import jit


# ------------------------------------------------------ float32 fast math
@intrinsic
def _f32_from_bits(typingctx, bits):
    """Reinterpret the low 32 bits of an integer as a float32."""
    if not isinstance(bits, types.Integer):
        return None
    sig = types.float32(bits)

    def codegen(context, builder, signature, args):
        v = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.bitcast(v, context.get_value_type(types.float32))

    return sig, codegen


@jit
def _exp32(x):
    """exp(x) for float32, x clamped to [-87.34, 88.37] (the range where the
    result is a normal float): enough for sigmoid and tanh, whose limits come
    out right from the clamped values. NaN propagates (the clamps compare
    false). Cephes' expf polynomial after Cody-Waite reduction."""
    xc = min(x, np.float32(88.37))
    xc = max(xc, np.float32(-87.33654))
    magic = np.float32(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer
    k = (xc * np.float32(1.4426950408889634) + magic) - magic
    r = (xc - k * np.float32(0.693359375)) - k * np.float32(-2.12194440e-4)
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    p = p * (r * r) + r + np.float32(1.0)
    return p * _f32_from_bits((np.int32(k) + np.int32(127)) << np.int32(23))


@jit
def _tanh32(x):
    """Eigen's 13/6-degree rational tanh on the argument clamped to +-7.9053
    (the same function as yscv.kernels.activation._tanh32; copied because
    Numba's cache only tracks a kernel's own file)."""
    c = min(max(x, np.float32(-7.90531110763549805)), np.float32(7.90531110763549805))
    c2 = c * c
    p = np.float32(-2.76076847742355e-16)
    p = p * c2 + np.float32(2.00018790482477e-13)
    p = p * c2 + np.float32(-8.60467152213735e-11)
    p = p * c2 + np.float32(5.12229709037114e-08)
    p = p * c2 + np.float32(1.48572235717979e-05)
    p = p * c2 + np.float32(6.37261928875436e-04)
    p = (p * c2 + np.float32(4.89352455891786e-03)) * c
    q = np.float32(1.19825839466702e-06)
    q = q * c2 + np.float32(1.18534705686654e-04)
    q = q * c2 + np.float32(2.26843463243900e-03)
    q = q * c2 + np.float32(4.89352518554385e-03)
    r = p / q
    r = x if abs(x) < np.float32(0.0004) else r
    return r if x == x else x


def ftanh(x):
    """tanh(x): libm for float64, vectorisable approximation for float32."""
    return math.tanh(x)


def fsigmoid(x):
    """1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + math.exp(-x))


def _is_f32(x):
    return isinstance(x, types.Float) and x.bitwidth == 32


@overload(ftanh)
def _ftanh_impl(x):
    if _is_f32(x):
        return lambda x: _tanh32(x)
    return lambda x: math.tanh(x)


@overload(fsigmoid)
def _fsigmoid_impl(x):
    if _is_f32(x):
        return lambda x: np.float32(1.0) / (np.float32(1.0) + _exp32(-x))
    return lambda x: 1.0 / (1.0 + math.exp(-x))


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
            o[j] = ftanh(o[j] + bias[j])


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
        g_if[j] = fsigmoid(g_if[j] + b_if[j])
    for j in range(H):
        g_g[j] = ftanh(g_g[j] + b_g[j])
    for j in range(H):
        g_o[j] = fsigmoid(g_o[j] + b_o[j])
    for j in range(H):
        cn[j] = g_f[j] * cp[j] + g_i[j] * g_g[j]
    for j in range(H):
        o[j] = g_o[j] * ftanh(cn[j])


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
        tc[j] = ftanh(cn[j])
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
        s_rz[j] = fsigmoid(s_rz[j] + bi_rz[j] + h_rz[j] + bh_rz[j])
    for j in range(H):
        s_hn[j] = h_n[j] + bh_n[j]
    for j in range(H):
        s_n[j] = ftanh(s_n[j] + bi_n[j] + s_r[j] * s_hn[j])
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
