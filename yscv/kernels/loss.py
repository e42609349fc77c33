"""Fused cross-entropy kernels: log-softmax + weighted NLL + label smoothing
in one pass per row.

Rows are the logits reshaped to x [R, C] (classes on the last axis). For row
i with label y, class weights w (all ones when there is no weight), C
classes and smoothing eps:

    m = max_c x[i, c],  d_c = x[i, c] - m,  ls = log(sum_c exp(d_c))
    -logp_c = ls - d_c
    loss_i = (1 - eps) * w_y * (ls - d_y) + (eps / C) * (W * ls - sum_c w_c d_c)

with ``W = sum_c w_c``: PyTorch's cross_entropy with weight and
label_smoothing, term for term. With ``eps == 0`` the smoothing term is not
evaluated at all (as PyTorch), so a ``-inf`` logit gives a finite loss (or
``inf`` when it is the target's) instead of ``0 * -inf = NaN``. A row whose
label equals ``ignore_index`` has loss 0 and gradient 0. Only the per-row
log-sum-exp ``lse_i = m + ls`` is saved for backward, which rebuilds the
softmax ``p`` in the same pass that writes the gradient:

    dL/dx[i, c] = up_i * (A_i * p_c - (eps / C) * w_c - (1 - eps) * w_y * [c == y])
    A_i = (1 - eps) * w_y + (eps / C) * W

where ``up_i`` is the upstream gradient of row i's loss (divided by the
mean's denominator by the caller). Without a weight ``A_i = 1``. Labels are
validated by the op (0 <= y < C or y == ignore_index). A weight of length 0
means "no weight" (one specialisation per dtype, no Optional arguments).
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .fastmath import fast_exp
from .fastmath import row_max_called as row_max
from .fastmath import row_sum_called as row_sum


@jit
def cross_entropy_forward(x, labels, weight, ignore_index, eps):
    """Per-row smoothed, weighted cross-entropy of x [R, C] (C >= 1).

    Args:
        x: logits [R, C], float32 or float64.
        labels: int64 [R].
        weight: class weights [C] of x's dtype, or [0] for none.
        ignore_index: rows with this label get loss 0.
        eps: label smoothing in [0, 1].

    Returns:
        (loss [R], lse [R]) of x's dtype; both 0 on ignored rows.
    """
    r_, c_ = x.shape
    dt = x.dtype.type
    zero = dt(0.0)
    one = dt(1.0)
    smooth = eps > 0.0
    has_w = weight.shape[0] > 0
    hit = one - dt(eps)
    off = dt(eps) / dt(c_)
    loss = np.empty(r_, dtype=x.dtype)
    lse = np.empty(r_, dtype=x.dtype)
    buf = np.empty(c_, dtype=x.dtype)    # exp(d_c)
    wbuf = np.empty(c_, dtype=x.dtype)   # w_c d_c (d_c without a weight), when smoothing
    if has_w:    # row_sum of a copy: one array type (and compiled variant) for row_sum
        for c in range(c_):
            wbuf[c] = weight[c]
    w_all = row_sum(wbuf, c_) if has_w else dt(c_)
    for i in range(r_):
        y = labels[i]
        if y == ignore_index:
            loss[i] = zero
            lse[i] = zero
            continue
        xr = x[i]
        m = row_max(xr, c_)
        if smooth:
            for c in range(c_):
                wbuf[c] = weight[c] * (xr[c] - m) if has_w else xr[c] - m
        for c in range(c_):
            buf[c] = fast_exp(xr[c] - m)
        ls = math.log(row_sum(buf, c_))
        lse[i] = m + ls
        wy = weight[y] if has_w else one
        li = wy * (ls - (xr[y] - m))
        if smooth:
            li = hit * li + off * (w_all * ls - row_sum(wbuf, c_))
        loss[i] = li
    return loss, lse


@jit
def cross_entropy_backward(x, labels, lse, weight, ignore_index, eps, up):
    """Gradient of the per-row losses of `cross_entropy_forward` w.r.t.
    x [R, C], row i scaled by ``up[i]`` (``up`` [R] of x's dtype), or every
    row by ``up[0]`` when ``up`` has one element; 0 on ignored rows."""
    r_, c_ = x.shape
    dt = x.dtype.type
    zero = dt(0.0)
    one = dt(1.0)
    has_w = weight.shape[0] > 0
    hit = one - dt(eps)
    off = dt(eps) / dt(c_)
    wcopy = np.empty(c_ if has_w else 0, dtype=x.dtype)
    for c in range(wcopy.shape[0]):   # row_sum of a copy, as the forward
        wcopy[c] = weight[c]
    w_all = row_sum(wcopy, c_) if has_w else dt(c_)
    per_row = up.shape[0] == r_
    out = np.empty((r_, c_), dtype=x.dtype)
    for i in range(r_):
        orow = out[i]
        y = labels[i]
        if y == ignore_index:
            for c in range(c_):
                orow[c] = zero
            continue
        xr = x[i]
        li = lse[i]
        u = up[i] if per_row else up[0]
        wy = weight[y] if has_w else one
        a = hit * wy + off * w_all if has_w else one     # A_i (1 without a weight)
        for c in range(c_):
            wc = weight[c] if has_w else one
            orow[c] = u * (a * fast_exp(xr[c] - li) - off * wc)
        orow[y] -= u * (hit * wy)
    return out
