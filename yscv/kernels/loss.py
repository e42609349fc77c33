"""Fused cross-entropy kernels: log-softmax + NLL + label smoothing in one pass.

For row i with logits x[i, :], label y_i, C classes and smoothing eps:

    m   = max_c x[i, c],  d_c = x[i, c] - m,  s = sum_c exp(d_c)
    loss_i = log(s) - (1 - eps) * d_{y_i} - eps * mean_c d_c

which equals -(1 - eps) * logp[y_i] - (eps / C) * sum_c logp[c] with
logp = log_softmax(x): PyTorch's cross_entropy with label_smoothing. Only the
per-row log-sum-exp ``lse_i = m + log(s)`` is saved for backward, which
rebuilds the softmax in the same pass that writes the gradient:

    dL/dx[i, c] = scale * (exp(x[i, c] - lse_i) - eps / C - (1 - eps) * [c == y_i])

with ``scale = upstream / N``. Labels are validated by the op (0 <= y < C).
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .softmax import fast_exp, row_max, row_sum


@jit
def cross_entropy_forward(x, labels, eps):
    """Mean smoothed cross-entropy of x [N, C] (C >= 1) against int labels [N].

    Returns:
        (mean loss as a scalar of x's dtype, lse [N] of x's dtype).
    """
    n_, c_ = x.shape
    dt = x.dtype.type
    zero = dt(0.0)
    one = dt(1.0)
    e = dt(eps)
    inv_c = one / dt(c_)
    lse = np.empty(n_, dtype=x.dtype)
    buf = np.empty(c_, dtype=x.dtype)
    total = zero
    for i in range(n_):
        xr = x[i]
        m = row_max(xr, c_)
        for c in range(c_):
            buf[c] = xr[c] - m
        t = row_sum(buf, c_)
        dy = buf[labels[i]]
        for c in range(c_):
            buf[c] = fast_exp(buf[c])
        ls = math.log(row_sum(buf, c_))
        lse[i] = m + ls
        total += ls - (one - e) * dy - e * (t * inv_c)
    return total / dt(n_), lse


@jit
def cross_entropy_backward(x, labels, lse, eps, scale):
    """Gradient of the mean smoothed cross-entropy w.r.t. x [N, C]; ``scale``
    is the upstream gradient divided by N (a scalar of x's dtype)."""
    n_, c_ = x.shape
    dt = x.dtype.type
    one = dt(1.0)
    e = dt(eps)
    sc = dt(scale)
    off = e / dt(c_)
    hit = one - e
    out = np.empty((n_, c_), dtype=x.dtype)
    for i in range(n_):
        xr = x[i]
        orow = out[i]
        li = lse[i]
        for c in range(c_):
            orow[c] = sc * (fast_exp(xr[c] - li) - off)
        orow[labels[i]] -= sc * hit
    return out
