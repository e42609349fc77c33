"""Fused, max-subtracted softmax / log-softmax kernels (forward and backward).

Two layouts cover every axis without a transpose copy:

* ``rows``: x is [R, C], the softmax runs along C (the last axis);
* ``strided``: x is [O, K, I] (a C-contiguous reshape of the input with the
  softmax axis in the middle), the softmax runs along K for each of the ``O*I``
  columns; the inner loop runs over I, so memory is read contiguously.

``log`` selects log-softmax. Inputs arrive read-only and C-contiguous;
outputs are allocated here with the input's dtype, and all arithmetic stays
in that dtype. A row containing NaN gives NaN; a row of all -inf gives NaN
(as PyTorch). exp and the row reductions are yscv/kernels/fastmath.py's.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .fastmath import fast_exp, row_max, row_sum


@jit
def softmax_rows_forward(x, log):
    """Softmax (or log-softmax) of each row of x [R, C], C >= 1."""
    r_, c_ = x.shape
    out = np.empty((r_, c_), dtype=x.dtype)
    one = x.dtype.type(1.0)
    for r in range(r_):
        xr = x[r]
        orow = out[r]
        m = row_max(xr, c_)
        for c in range(c_):
            orow[c] = fast_exp(xr[c] - m)
        s = row_sum(orow, c_)
        if log:
            lse = m + math.log(s)
            for c in range(c_):
                orow[c] = xr[c] - lse
        else:
            inv = one / s
            for c in range(c_):
                orow[c] *= inv
    return out


@jit
def softmax_rows_backward(g, y, log):
    """Input gradient of softmax rows: y * (g - sum(g * y)); of log-softmax
    rows: g - exp(y) * sum(g). g, y: [R, C]."""
    r_, c_ = g.shape
    out = np.empty((r_, c_), dtype=g.dtype)
    for r in range(r_):
        gr = g[r]
        yr = y[r]
        orow = out[r]
        if log:
            s = row_sum(gr, c_)
            for c in range(c_):
                orow[c] = gr[c] - fast_exp(yr[c]) * s
        else:
            for c in range(c_):
                orow[c] = gr[c] * yr[c]
            s = row_sum(orow, c_)
            for c in range(c_):
                orow[c] = yr[c] * (gr[c] - s)
    return out


@jit
def softmax_strided_forward(x, log):
    """Softmax (or log-softmax) of x [O, K, I] along K, K >= 1."""
    o_, k_, i_ = x.shape
    out = np.empty((o_, k_, i_), dtype=x.dtype)
    m = np.empty(i_, dtype=x.dtype)
    s = np.empty(i_, dtype=x.dtype)
    zero = x.dtype.type(0.0)
    one = x.dtype.type(1.0)
    for o in range(o_):
        xo = x[o]
        oo = out[o]
        for i in range(i_):
            m[i] = xo[0, i]
            s[i] = zero
        for k in range(1, k_):
            for i in range(i_):
                if xo[k, i] > m[i]:
                    m[i] = xo[k, i]
        if log:
            for k in range(k_):
                for i in range(i_):
                    s[i] += fast_exp(xo[k, i] - m[i])
            for i in range(i_):
                m[i] += math.log(s[i])
            for k in range(k_):
                for i in range(i_):
                    oo[k, i] = xo[k, i] - m[i]
        else:
            for k in range(k_):
                for i in range(i_):
                    e = fast_exp(xo[k, i] - m[i])
                    oo[k, i] = e
                    s[i] += e
            for i in range(i_):
                s[i] = one / s[i]
            for k in range(k_):
                for i in range(i_):
                    oo[k, i] *= s[i]
    return out


@jit
def softmax_strided_backward(g, y, log):
    """Input gradient of softmax / log-softmax of [O, K, I] along K."""
    o_, k_, i_ = g.shape
    out = np.empty((o_, k_, i_), dtype=g.dtype)
    s = np.empty(i_, dtype=g.dtype)
    zero = g.dtype.type(0.0)
    for o in range(o_):
        go = g[o]
        yo = y[o]
        oo = out[o]
        for i in range(i_):
            s[i] = zero
        if log:
            for k in range(k_):
                for i in range(i_):
                    s[i] += go[k, i]
            for k in range(k_):
                for i in range(i_):
                    oo[k, i] = go[k, i] - fast_exp(yo[k, i]) * s[i]
        else:
            for k in range(k_):
                for i in range(i_):
                    s[i] += go[k, i] * yo[k, i]
            for k in range(k_):
                for i in range(i_):
                    oo[k, i] = yo[k, i] * (go[k, i] - s[i])
    return out
