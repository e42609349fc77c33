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

exp and the row reductions (max ignoring NaN, sums with eight partial sums)
are yscv/kernels/fastmath.py's: exactly 0 below the smallest normal float32,
so exp(-inf) = 0.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .fastmath import fast_exp, row_dot, row_max, row_sum


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
    m = row_max(row, end)
    if not m > ninf:  # every allowed score is NaN or -inf: NaN, as softmax
        for j in range(Sk):
            row[j] = row.dtype.type(np.nan)
        return
    for j in range(end):
        row[j] = fast_exp(row[j] - m)
    row[end:] = zero
    inv = one / row_sum(row, end)
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
            end = (Sk if Sk < i + 1 else i + 1) if causal else Sk
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
            end = (Sk if Sk < i + 1 else i + 1) if causal else Sk
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
            end = (Sk if Sk < i + 1 else i + 1) if causal else Sk
            d = row_dot(prow, drow, end)
            for j in range(end):
                drow[j] = scale * prow[j] * (drow[j] - d)
            drow[end:] = zero
