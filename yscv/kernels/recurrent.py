"""Fused per-time-step gate kernels of the recurrent ops (RNN, LSTM, GRU).

The matrix products stay in NumPy (BLAS): the input projection of every
time step is one GEMM before the loop and the recurrent product ``h @ w_hh``
is one GEMM per step. These kernels do the elementwise gate math of one step
in a single pass, forward and backward, reading and writing time slice ``t``
of the per-sequence arrays (so the Python loop makes no views or
temporaries). Every array is C-contiguous and of one float dtype; constants
are made with ``dtype.type`` so float32 stays float32.

Shapes (T steps, B batch, H hidden; G gates = 1, 4 or 3):

- ``xp[T, B, G*H]``: the input projection ``x @ w_ih + bias``.
- ``hw[B, G*H]``: the recurrent projection of this step, ``h_{t-1} @ w_hh``.
- ``out[T, B, H]``: the hidden states h_0..h_{T-1} (the op's value).

Transcendentals: ``fsigmoid``, ``ftanh`` and ``fexp`` below are exact libm
calls (``math.exp``, ``math.tanh``) for float64. For float32 they are
branch-free polynomial/rational forms that LLVM vectorises (libm calls
cannot be vectorised without SVML, and were 3-4x slower per element here):
``fexp`` is Cody-Waite range reduction with a degree-7 polynomial and a
bit-built 2**k (max relative error ~1e-7, i.e. about 1 ulp), ``ftanh`` a
rational approximation (Eigen's) for |x| < 0.625 and 1 - 2/(1 + exp(2|x|))
above (max absolute error ~1e-7). NaN propagates; +-inf saturate.
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
    # clamp by comparisons (false for NaN, so NaN propagates); k in [-126, 127]
    if x > np.float32(88.0):
        x = np.float32(88.0)
    if x < np.float32(-87.0):
        x = np.float32(-87.0)
    magic = np.float32(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer
    k = (x * np.float32(1.4426950408889634) + magic) - magic
    r = (x - k * np.float32(0.693359375)) - k * np.float32(-2.12194440e-4)
    p = np.float32(1.0 / 5040.0)
    p = p * r + np.float32(1.0 / 720.0)
    p = p * r + np.float32(1.0 / 120.0)
    p = p * r + np.float32(1.0 / 24.0)
    p = p * r + np.float32(1.0 / 6.0)
    p = p * r + np.float32(0.5)
    p = p * r + np.float32(1.0)
    p = p * r + np.float32(1.0)
    return p * _f32_from_bits((np.int32(k) + np.int32(127)) << np.int32(23))


@jit
def _tanh32(x):
    ax = abs(x)
    # small |x|: odd/even rational (Eigen's float tanh), accurate relative to x
    x2 = x * x
    p = np.float32(-2.76076847742355e-16)
    p = p * x2 + np.float32(2.00018790482477e-13)
    p = p * x2 + np.float32(-8.60467152213735e-11)
    p = p * x2 + np.float32(5.12229709037114e-08)
    p = p * x2 + np.float32(1.48572235717979e-05)
    p = p * x2 + np.float32(6.37261928875436e-04)
    p = p * x2 + np.float32(4.89352455891786e-03)
    q = np.float32(1.19825839466702e-06)
    q = q * x2 + np.float32(1.18534705686654e-04)
    q = q * x2 + np.float32(2.26843463243900e-03)
    q = q * x2 + np.float32(4.89352518554385e-03)
    small = x * p / q
    # larger |x|: through exp, where the subtraction loses nothing
    big = np.float32(1.0) - np.float32(2.0) / (np.float32(1.0) + _exp32(ax + ax))
    if x < np.float32(0.0):
        big = -big
    return small if ax < np.float32(0.625) else big


def fexp(x):
    """exp(x): libm for float64, vectorisable polynomial for float32."""
    return math.exp(x)


def ftanh(x):
    """tanh(x): libm for float64, vectorisable approximation for float32."""
    return math.tanh(x)


def fsigmoid(x):
    """1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + math.exp(-x))


def _is_f32(x):
    return isinstance(x, types.Float) and x.bitwidth == 32


@overload(fexp)
def _fexp_impl(x):
    if _is_f32(x):
        return lambda x: _exp32(x)
    return lambda x: math.exp(x)


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


# ---------------------------------------------------------------- kernels
@jit
def rnn_step_forward(xp, hw, t, relu, out):
    """out[t] = act(xp[t] + hw), act = relu if ``relu`` else tanh."""
    B, H = hw.shape
    zero = out.dtype.type(0)
    for b in range(B):
        for j in range(H):
            a = xp[t, b, j] + hw[b, j]
            if relu:
                out[t, b, j] = a if a > zero else zero
            else:
                out[t, b, j] = ftanh(a)


@jit
def rnn_step_backward(out, gout, dh_rec, t, relu, dpre):
    """dpre[t] = (gout[t] + dh_rec) * act'(pre-activation), from h_t = out[t].

    act' is 1 - h^2 for tanh and (h > 0) for relu (0 at the kink, as PyTorch).
    """
    B, H = dh_rec.shape
    zero = out.dtype.type(0)
    one = out.dtype.type(1)
    for b in range(B):
        for j in range(H):
            dh = gout[t, b, j] + dh_rec[b, j]
            h = out[t, b, j]
            if relu:
                dpre[t, b, j] = dh if h > zero else zero
            else:
                dpre[t, b, j] = dh * (one - h * h)


@jit
def lstm_step_forward(xp, hw, t, gates, cells, out):
    """One LSTM step, gate columns (i, f, g, o).

    Reads c_{t-1} = cells[t]; writes the gate activations to gates[t]
    ([B, 4H]: sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)), c_t to
    cells[t + 1] and h_t = o * tanh(c_t) to out[t].
    """
    B, H = out.shape[1], out.shape[2]
    one = out.dtype.type(1)
    for b in range(B):
        for j in range(H):
            gi = fsigmoid(xp[t, b, j] + hw[b, j])
            gf = fsigmoid(xp[t, b, H + j] + hw[b, H + j])
            gg = ftanh(xp[t, b, 2 * H + j] + hw[b, 2 * H + j])
            go = fsigmoid(xp[t, b, 3 * H + j] + hw[b, 3 * H + j])
            c = gf * cells[t, b, j] + gi * gg
            gates[t, b, j] = gi
            gates[t, b, H + j] = gf
            gates[t, b, 2 * H + j] = gg
            gates[t, b, 3 * H + j] = go
            cells[t + 1, b, j] = c
            out[t, b, j] = go * ftanh(c)


@jit
def lstm_step_backward(gates, cells, gout, dh_rec, t, dc, dgates):
    """Backward of one LSTM step.

    dh = gout[t] + dh_rec (dh_rec = dgates[t+1] @ w_hh.T, zeros at the last
    step); ``dc`` carries dL/dc_t in and dL/dc_{t-1} out (updated in place).
    Writes the pre-activation gate gradients to dgates[t] ([B, 4H]).
    """
    B, H = dh_rec.shape
    one = gates.dtype.type(1)
    for b in range(B):
        for j in range(H):
            gi = gates[t, b, j]
            gf = gates[t, b, H + j]
            gg = gates[t, b, 2 * H + j]
            go = gates[t, b, 3 * H + j]
            tc = ftanh(cells[t + 1, b, j])
            dh = gout[t, b, j] + dh_rec[b, j]
            dct = dc[b, j] + dh * go * (one - tc * tc)
            dgates[t, b, j] = dct * gg * gi * (one - gi)
            dgates[t, b, H + j] = dct * cells[t, b, j] * gf * (one - gf)
            dgates[t, b, 2 * H + j] = dct * gi * (one - gg * gg)
            dgates[t, b, 3 * H + j] = dh * tc * go * (one - go)
            dc[b, j] = dct * gf


@jit
def gru_step_forward(xp, hw, b_hh, h_prev, t, saved, out):
    """One GRU step, gate columns (r, z, n), as PyTorch.

    hw = h_{t-1} @ w_hh (without b_hh, added here). Writes saved[t]
    ([B, 4H]: r, z, n, h_{t-1} W_hn + b_hn) and h_t = (1-z)*n + z*h_{t-1}
    to out[t].
    """
    B, H = h_prev.shape
    one = out.dtype.type(1)
    for b in range(B):
        for j in range(H):
            r = fsigmoid(xp[t, b, j] + hw[b, j] + b_hh[j])
            z = fsigmoid(xp[t, b, H + j] + hw[b, H + j] + b_hh[H + j])
            hn = hw[b, 2 * H + j] + b_hh[2 * H + j]
            n = ftanh(xp[t, b, 2 * H + j] + r * hn)
            saved[t, b, j] = r
            saved[t, b, H + j] = z
            saved[t, b, 2 * H + j] = n
            saved[t, b, 3 * H + j] = hn
            out[t, b, j] = (one - z) * n + z * h_prev[b, j]


@jit
def gru_step_backward(saved, h_prev, gout, dh_rec, t, dh_direct, dxp, dhp):
    """Backward of one GRU step.

    dh = gout[t] + dh_rec + dh_direct, where dh_rec = dhp[t+1] @ w_hh.T and
    dh_direct = z * dh of the later step (updated in place for the next
    call). Writes the pre-activation gradients of the input side to dxp[t]
    (r, z, n) and of the recurrent side to dhp[t] (r, z, n * r).
    """
    B, H = h_prev.shape
    one = saved.dtype.type(1)
    for b in range(B):
        for j in range(H):
            r = saved[t, b, j]
            z = saved[t, b, H + j]
            n = saved[t, b, 2 * H + j]
            hn = saved[t, b, 3 * H + j]
            dh = gout[t, b, j] + dh_rec[b, j] + dh_direct[b, j]
            dn = dh * (one - z) * (one - n * n)
            dz = dh * (h_prev[b, j] - n) * z * (one - z)
            dr = dn * hn * r * (one - r)
            dxp[t, b, j] = dr
            dxp[t, b, H + j] = dz
            dxp[t, b, 2 * H + j] = dn
            dhp[t, b, j] = dr
            dhp[t, b, H + j] = dz
            dhp[t, b, 2 * H + j] = dn * r
            dh_direct[b, j] = dh * z
