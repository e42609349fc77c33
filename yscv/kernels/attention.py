"""Row kernels of scaled dot-product attention: masked softmax forward and
its backward, over scores laid out as [N, Sq, Sk] (N = all leading axes).

The matrix products (Q K^T, P V and their gradients) stay in NumPy's batched
matmul (BLAS). These kernels fuse what NumPy would do in five or six passes
with temporaries: scaling, masking (boolean mask, additive floating mask
and/or causal), the row max, exp, the row sum and the normalisation; and,
backward, ``dS = scale * P * (dP - rowsum(dP * P))`` (the same for both mask
kinds: an additive mask is a constant, so it only enters through P).

A row with nothing to attend (every key False in a boolean mask, -inf in a
floating one, or beyond the causal diagonal) gets probabilities 0 (so the
output row is 0 and no gradient flows through it) instead of PyTorch's NaN.

float32 uses a vectorisable exp (Cody-Waite reduction, Cephes' expf
polynomial, 2**k built from bits; max relative error 8e-8; exactly 0 below
the smallest normal float, so exp(-inf) = 0, and inf on overflow); float64
uses ``math.exp``. The similar ``_exp32`` in yscv/kernels/recurrent.py is a
deliberate copy: Numba's on-disk cache only notices edits to a cached
function's own file.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import intrinsic, overload

from ._jit import jit


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
    # clamp so that k stays in [-126, 127]; comparisons are false for NaN,
    # so NaN propagates through the arithmetic
    xc = x
    if xc > np.float32(88.37):
        xc = np.float32(88.37)
    if xc < np.float32(-87.33654):
        xc = np.float32(-87.33654)
    magic = np.float32(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer
    k = (xc * np.float32(1.4426950408889634) + magic) - magic
    r = (xc - k * np.float32(0.693359375)) - k * np.float32(-2.12194440e-4)
    p = np.float32(1.9875691500e-4)  # Cephes' expf polynomial
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    p = p * (r * r) + r + np.float32(1.0)
    y = p * _f32_from_bits((np.int32(k) + np.int32(127)) << np.int32(23))
    if x < np.float32(-87.33654):  # below the smallest normal float32: 0 (exp(-inf) = 0)
        y = np.float32(0.0)
    if x > np.float32(88.72284):  # float32 overflow: inf
        y = np.float32(np.inf)
    return y


def fexp(x):
    """exp(x): libm for float64, vectorisable polynomial for float32."""
    return math.exp(x)


@overload(fexp)
def _fexp_impl(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: _exp32(x)
    return lambda x: math.exp(x)


@jit
def _row_sum(row, n):
    """Sum of row[:n] with eight independent partial sums (vectorisable
    without reassociating one accumulator)."""
    z = row.dtype.type(0)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = z
    j = 0
    while j + 8 <= n:
        a0 += row[j]
        a1 += row[j + 1]
        a2 += row[j + 2]
        a3 += row[j + 3]
        a4 += row[j + 4]
        a5 += row[j + 5]
        a6 += row[j + 6]
        a7 += row[j + 7]
        j += 8
    while j < n:
        a0 += row[j]
        j += 1
    return ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7))


@jit
def _row_max(row, n):
    """max of row[:n] ignoring NaN (-inf if none), with eight independent
    running maxima: one select chain would take ~4 cycles per element
    (measured: the forward kernel spent most of its time here)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = row.dtype.type(-np.inf)
    j = 0
    while j + 8 <= n:
        v0 = row[j]
        v1 = row[j + 1]
        v2 = row[j + 2]
        v3 = row[j + 3]
        v4 = row[j + 4]
        v5 = row[j + 5]
        v6 = row[j + 6]
        v7 = row[j + 7]
        a0 = v0 if v0 > a0 else a0
        a1 = v1 if v1 > a1 else a1
        a2 = v2 if v2 > a2 else a2
        a3 = v3 if v3 > a3 else a3
        a4 = v4 if v4 > a4 else a4
        a5 = v5 if v5 > a5 else a5
        a6 = v6 if v6 > a6 else a6
        a7 = v7 if v7 > a7 else a7
        j += 8
    while j < n:
        v0 = row[j]
        a0 = v0 if v0 > a0 else a0
        j += 1
    a0 = a4 if a4 > a0 else a0
    a1 = a5 if a5 > a1 else a1
    a2 = a6 if a6 > a2 else a2
    a3 = a7 if a7 > a3 else a3
    a0 = a2 if a2 > a0 else a0
    a1 = a3 if a3 > a1 else a1
    return a1 if a1 > a0 else a0


@jit
def _row_dot(a, b, n):
    """sum(a[:n] * b[:n]) with eight partial sums."""
    z = a.dtype.type(0)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = z
    j = 0
    while j + 8 <= n:
        a0 += a[j] * b[j]
        a1 += a[j + 1] * b[j + 1]
        a2 += a[j + 2] * b[j + 2]
        a3 += a[j + 3] * b[j + 3]
        a4 += a[j + 4] * b[j + 4]
        a5 += a[j + 5] * b[j + 5]
        a6 += a[j + 6] * b[j + 6]
        a7 += a[j + 7] * b[j + 7]
        j += 8
    while j < n:
        a0 += a[j] * b[j]
        j += 1
    return ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7))


@jit
def _softmax_allowed_row(row, end, allowed):
    """row[:end] (scaled scores, -inf where blocked) -> probabilities in
    place; row[end:] -> 0. ``allowed`` counts the keys not blocked: with none,
    the row becomes all 0 (not NaN); if every allowed score is NaN or -inf
    the row is NaN, as softmax."""
    Sk = row.shape[0]
    zero = row.dtype.type(0)
    one = row.dtype.type(1)
    ninf = row.dtype.type(-np.inf)
    if allowed == 0:  # nothing to attend: zeros, not NaN
        for j in range(Sk):
            row[j] = zero
        return
    m = _row_max(row, end)
    if not m > ninf:  # every allowed score is NaN or -inf: NaN, as softmax
        for j in range(Sk):
            row[j] = row.dtype.type(np.nan)
        return
    for j in range(end):
        row[j] = fexp(row[j] - m)
    row[end:] = zero
    inv = one / _row_sum(row, end)
    for j in range(end):
        row[j] *= inv


@jit
def masked_softmax_forward(s, mask, has_mask, causal, scale):
    """Scores -> attention probabilities, in place, row by row.

    s: [N, Sq, Sk] raw scores Q K^T; becomes softmax(scale * s) over the keys
    each query may attend: mask[n, i, j] (when ``has_mask``; mask is then
    [N, Sq, Sk] bool, else any placeholder) and j <= i (when ``causal``).
    Other entries become 0; a row with no allowed key becomes all 0.
    """
    N, Sq, Sk = s.shape
    ninf = s.dtype.type(-np.inf)
    for n in range(N):
        for i in range(Sq):
            row = s[n, i]
            end = min(i + 1, Sk) if causal else Sk
            # scale; masked entries become -inf, so exp gives exactly 0 there
            if has_mask:
                mrow = mask[n, i]
                allowed = 0
                for j in range(end):
                    allowed += mrow[j]
                for j in range(end):
                    row[j] = row[j] * scale if mrow[j] else ninf
            else:
                allowed = end
                for j in range(end):
                    row[j] = row[j] * scale
            _softmax_allowed_row(row, end, allowed)


@jit
def additive_softmax_forward(s, bias, causal, scale):
    """Scores -> attention probabilities with a floating (additive) mask, in
    place, row by row.

    s: [N, Sq, Sk] raw scores Q K^T; bias: [N, Sq, Sk], the graph dtype.
    Becomes softmax(scale * s + bias) over the keys j <= i (when ``causal``).
    A key whose bias is -inf is blocked exactly as a False boolean entry: its
    probability is 0 whatever its score (also a NaN or +inf score), and a row
    whose keys are all blocked becomes all 0. Any other bias (finite, +inf,
    NaN) is added as is, so +inf or NaN give NaN rows, as PyTorch.
    """
    N, Sq, Sk = s.shape
    ninf = s.dtype.type(-np.inf)
    for n in range(N):
        for i in range(Sq):
            row = s[n, i]
            brow = bias[n, i]
            end = min(i + 1, Sk) if causal else Sk
            allowed = 0
            for j in range(end):
                allowed += brow[j] != ninf
            for j in range(end):
                b = brow[j]
                row[j] = row[j] * scale + b if b != ninf else ninf
            _softmax_allowed_row(row, end, allowed)


@jit
def masked_softmax_backward(p, dp, scale, causal):
    """dp <- scale * p * (dp - rowsum(dp * p)), in place, row by row.

    p: [N, Sq, Sk] probabilities (0 where masked, so those entries and
    fully masked rows get 0); with ``causal`` only keys j <= i are visited.
    """
    N, Sq, Sk = p.shape
    zero = p.dtype.type(0)
    for n in range(N):
        for i in range(Sq):
            prow = p[n, i]
            drow = dp[n, i]
            end = min(i + 1, Sk) if causal else Sk
            d = _row_dot(prow, drow, end)
            for j in range(end):
                drow[j] = scale * prow[j] * (drow[j] - d)
            drow[end:] = zero
