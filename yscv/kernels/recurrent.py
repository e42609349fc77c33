"""Fused per-time-step gate kernels of the recurrent ops (RNN, LSTM, GRU).

The matrix products stay in NumPy (BLAS): the input projection of every
time step is one GEMM before the loop and the recurrent product ``h @ w_hh``
is one GEMM per step. These kernels do the elementwise gate math of one step
in one call, forward and backward, reading and writing time slice ``t`` of
the per-sequence arrays (so the Python loop makes no views or temporaries). Every array is C-contiguous and of one float dtype; constants
are made with ``dtype.type`` so float32 stays float32.

Shapes (T steps, B batch, H hidden; G gates = 1, 4 or 3):

- ``hw[B, G*H]``: the recurrent projection of this step, ``h_{t-1} @ w_hh``.
- ``out[T, B, H]``: the hidden states h_0..h_{T-1} (the op's value).
- the input projection ``x @ w_ih`` of every step is computed by one GEMM
  straight into the array the forward kernel then overwrites in place
  (LSTM: the saved gates; GRU: the first 3H columns of its saved array;
  RNN: the output), so it needs no buffer of its own; biases are added in
  the kernels.

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
3-4x slower than the split loops).
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


# ---------------------------------------------------------------- kernels
# Gate blocks are taken as slices (``gt[2*H:3*H]``) and looped from 0: an
# index like ``gt[j]`` with j from 2*H keeps Numba's negative-index
# wraparound in the loop (LLVM cannot prove H >= 0) and the loop then stays
# scalar.


@jit
def rnn_step_forward(hw, bias, t, relu, out):
    """out[t] = act(out[t] + bias + hw), in place: out[t] holds x_t @ w_ih on
    entry. act = relu if ``relu`` else tanh."""
    B, H = hw.shape
    zero = out.dtype.type(0)
    for b in range(B):
        h = hw[b]
        o = out[t, b]
        if relu:
            for j in range(H):
                a = o[j] + bias[j] + h[j]
                o[j] = a if a > zero else zero
        else:
            for j in range(H):
                o[j] = ftanh(o[j] + bias[j] + h[j])


@jit
def rnn_step_backward(out, gout, dh_rec_t, t, relu, dpre):
    """dpre[t] = (gout[t] + dh_rec) * act'(pre-activation), from h_t = out[t].

    ``dh_rec_t`` is dh_rec transposed, [H, B] (see the backward driver).
    act' is 1 - h^2 for tanh and (h > 0) for relu (0 at the kink, as PyTorch).
    """
    H, B = dh_rec_t.shape
    zero = out.dtype.type(0)
    one = out.dtype.type(1)
    for b in range(B):
        o = out[t, b]
        go = gout[t, b]
        dr = dh_rec_t[:, b]
        d = dpre[t, b]
        if relu:
            for j in range(H):
                d[j] = go[j] + dr[j] if o[j] > zero else zero
        else:
            for j in range(H):
                h = o[j]
                d[j] = (go[j] + dr[j]) * (one - h * h)


@jit
def lstm_step_forward(hw, bias, t, gates, cells, out):
    """One LSTM step, gate columns (i, f, g, o).

    gates[t] holds x_t @ w_ih on entry and is overwritten in place with the
    gate activations ([B, 4H]: sigmoid(i), sigmoid(f), tanh(g), sigmoid(o))
    of ``gates[t] + bias + hw``. Reads c_{t-1} = cells[t]; writes c_t to
    cells[t + 1] and h_t = o * tanh(c_t) to out[t].
    """
    B, H = out.shape[1], out.shape[2]
    b_if, b_g, b_o = bias[:2 * H], bias[2 * H:3 * H], bias[3 * H:]
    for b in range(B):
        h = hw[b]
        gt = gates[t, b]
        g_if, g_i, g_f, g_g, g_o = gt[:2 * H], gt[:H], gt[H:2 * H], gt[2 * H:3 * H], gt[3 * H:]
        h_if, h_g, h_o = h[:2 * H], h[2 * H:3 * H], h[3 * H:]
        for j in range(2 * H):
            g_if[j] = fsigmoid(g_if[j] + b_if[j] + h_if[j])
        for j in range(H):
            g_g[j] = ftanh(g_g[j] + b_g[j] + h_g[j])
        for j in range(H):
            g_o[j] = fsigmoid(g_o[j] + b_o[j] + h_o[j])
        cp = cells[t, b]
        cn = cells[t + 1, b]
        for j in range(H):
            cn[j] = g_f[j] * cp[j] + g_i[j] * g_g[j]
        o = out[t, b]
        for j in range(H):
            o[j] = g_o[j] * ftanh(cn[j])


@jit
def lstm_step_backward(gates, cells, gout, dh_rec_t, t, dc, dgates):
    """Backward of one LSTM step.

    dh = gout[t] + dh_rec, with dh_rec = dgates[t+1] @ w_hh.T (zeros at the
    last step) given transposed as ``dh_rec_t`` [H, B]; ``dc`` carries
    dL/dc_t in and dL/dc_{t-1} out (updated in place). Writes the
    pre-activation gate gradients to dgates[t] ([B, 4H]).
    """
    H, B = dh_rec_t.shape
    one = gates.dtype.type(1)
    tcb = np.empty(H, dtype=gates.dtype)
    dhb = np.empty(H, dtype=gates.dtype)
    for b in range(B):
        gt = gates[t, b]
        g_i, g_f, g_g, g_o = gt[:H], gt[H:2 * H], gt[2 * H:3 * H], gt[3 * H:]
        dg = dgates[t, b]
        d_i, d_f, d_g, d_o = dg[:H], dg[H:2 * H], dg[2 * H:3 * H], dg[3 * H:]
        dcb = dc[b]
        cn = cells[t + 1, b]
        for j in range(H):
            tcb[j] = ftanh(cn[j])
        go = gout[t, b]
        dr = dh_rec_t[:, b]
        for j in range(H):
            dhb[j] = go[j] + dr[j]
        for j in range(H):
            o = g_o[j]
            d_o[j] = dhb[j] * tcb[j] * o * (one - o)
        for j in range(H):
            tc = tcb[j]
            dcb[j] = dcb[j] + dhb[j] * g_o[j] * (one - tc * tc)
        cp = cells[t, b]
        for j in range(H):
            gi = g_i[j]
            d_i[j] = dcb[j] * g_g[j] * gi * (one - gi)
        for j in range(H):
            gf = g_f[j]
            d_f[j] = dcb[j] * cp[j] * gf * (one - gf)
        for j in range(H):
            gg = g_g[j]
            d_g[j] = dcb[j] * g_i[j] * (one - gg * gg)
        for j in range(H):
            dcb[j] = dcb[j] * g_f[j]


@jit
def gru_step_forward(hw, b_ih, b_hh, h_prev, t, saved, out):
    """One GRU step, gate columns (r, z, n), as PyTorch.

    saved[t, :, :3H] holds x_t @ w_ih on entry; hw = h_{t-1} @ w_hh (biases
    are added here). Overwrites saved[t] in place with ([B, 4H]) r, z, n and
    h_{t-1} W_hn + b_hn, and writes h_t = (1-z)*n + z*h_{t-1} to out[t].
    """
    B, H = h_prev.shape
    one = out.dtype.type(1)
    bi_rz, bi_n = b_ih[:2 * H], b_ih[2 * H:]
    bh_rz, bh_n = b_hh[:2 * H], b_hh[2 * H:]
    for b in range(B):
        h = hw[b]
        h_rz, h_n = h[:2 * H], h[2 * H:]
        s = saved[t, b]
        s_rz, s_r, s_z, s_n, s_hn = s[:2 * H], s[:H], s[H:2 * H], s[2 * H:3 * H], s[3 * H:]
        for j in range(2 * H):
            s_rz[j] = fsigmoid(s_rz[j] + bi_rz[j] + h_rz[j] + bh_rz[j])
        for j in range(H):
            s_hn[j] = h_n[j] + bh_n[j]
        for j in range(H):
            s_n[j] = ftanh(s_n[j] + bi_n[j] + s_r[j] * s_hn[j])
        hp = h_prev[b]
        o = out[t, b]
        for j in range(H):
            z = s_z[j]
            o[j] = (one - z) * s_n[j] + z * hp[j]


@jit
def gru_step_backward(saved, h_prev, gout, dh_rec_t, t, dh_direct, dxp, dhp):
    """Backward of one GRU step.

    dh = gout[t] + dh_rec + dh_direct, where dh_rec = dhp[t+1] @ w_hh.T
    (given transposed as ``dh_rec_t`` [H, B]) and
    dh_direct = z * dh of the later step (updated in place for the next
    call). Writes the pre-activation gradients of the input side to dxp[t]
    (r, z, n) and of the recurrent side to dhp[t] (r, z, n * r).
    """
    B, H = h_prev.shape
    one = saved.dtype.type(1)
    dhb = np.empty(H, dtype=saved.dtype)
    for b in range(B):
        go = gout[t, b]
        dr = dh_rec_t[:, b]
        dd = dh_direct[b]
        for j in range(H):
            dhb[j] = go[j] + dr[j] + dd[j]
        s = saved[t, b]
        s_r, s_z, s_n, s_hn = s[:H], s[H:2 * H], s[2 * H:3 * H], s[3 * H:]
        dx = dxp[t, b]
        dx_rz, dx_r, dx_z, dx_n = dx[:2 * H], dx[:H], dx[H:2 * H], dx[2 * H:]
        for j in range(H):
            z = s_z[j]
            n = s_n[j]
            dx_n[j] = dhb[j] * (one - z) * (one - n * n)
        hp = h_prev[b]
        for j in range(H):
            z = s_z[j]
            dx_z[j] = dhb[j] * (hp[j] - s_n[j]) * z * (one - z)
        for j in range(H):
            r = s_r[j]
            dx_r[j] = dx_n[j] * s_hn[j] * r * (one - r)
        dh = dhp[t, b]
        dh_rz, dh_n = dh[:2 * H], dh[2 * H:]
        for j in range(2 * H):
            dh_rz[j] = dx_rz[j]
        for j in range(H):
            dh_n[j] = dx_n[j] * s_r[j]
        for j in range(H):
            dd[j] = dhb[j] * s_z[j]
