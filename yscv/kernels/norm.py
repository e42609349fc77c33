"""Numba kernels of the normalization ops (batch, layer, group, instance norm).

Two layouts cover the four ops:

* **grouped columns** ``x[N, R, C]`` (C-contiguous): statistics per
  ``(n, group)`` over the ``R`` rows and the ``K`` consecutive channels of the
  group. Batch norm is ``N=1, K=1`` (rows = every position of the batch),
  instance norm ``K=1`` (rows = the spatial positions of one sample), group
  norm ``K = C // num_groups``.
* **rows** ``x[M, C]``: layer norm, statistics per row over the last axis.

Precision without promotion: every reduction accumulates in float64 whatever
the data dtype, and statistics are returned as float64 (they are tiny). The
elementwise passes (normalise, input gradient) run in the data dtype, which
keeps float32 data at float32 speed; the mean is passed to them as a
two-term split ``mean_hi + mean_lo`` (both in the data dtype) and subtracted
as ``(x - mean_hi) - mean_lo``, so data with a large common offset (mean 1e4,
std 1) loses nothing: ``x - mean_hi`` is exact when x is near the mean.

Variance: shifted sums, never the raw ``E[x^2] - E[x]^2``. Each statistics
group accumulates ``sum(x - s)`` and ``sum((x - s)^2)`` around a shift ``s``
taken from the data, and ``M2 = sum((x-s)^2) - sum(x-s)^2 / n``. With a shift
near the mean this cancels nothing: the relative error of M2 is about
``eps64 * (1 + (mean - s)^2 / var)``. The grouped-column kernel walks the rows
in blocks of about ``_CHUNK`` elements; the first block is shifted by the
group's first value (one value deviates from the mean by at most
``sqrt(n) * std``, so the bound is ``eps64 * n_block``, at most ~1e-11 for
the 65,536-element blocks and far less in practice), every
later block by the mean so far, and blocks are merged with Chan's pairwise
update. Layer-norm rows use the row's first value (bound ``eps64 * C``). Compared with Welford
(a division per element, a serial dependency: no vectorisation) and with
two-pass (a second read of the data), this is one vectorised read with the
same accuracy: on 32x32x32x64 float32 the statistics take 0.43 ms against
0.58 ms for a blocked two-pass kernel, and on data offset by 1e4 (1e6) both
match NumPy's float64 two-pass variance to 9e-13 (6e-12) relative.

No fast-math flags (project rule, kernels/_jit.py). ``fastmath={"reassoc"}``
alone was measured to make the float64 running sums 4x faster (it lets LLVM
split them into SIMD lanes: 0.18 ms instead of 0.71 ms for 4096x512 float32
rows) while keeping NaN/Inf semantics, but it also makes the summation order
depend on the compiler; it is left out until the project decides otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit

_CHUNK = 65536  # elements per chunk of the grouped-column statistics (256 KB float32, in L2)
_MIN_ROWS = 16  # rows per chunk at least, so very wide rows still amortise the merge


@jit
def group_stats(x, K):
    """Mean and biased variance per ``(n, group)`` of ``x[N, R, C]``.

    Groups are ``K`` consecutive channels. Returns float64 ``mean[N, G]`` and
    ``var[N, G]`` with ``G = C // K``. Blocks of rows are summed as shifted
    data (``sum(x - s)``, ``sum((x - s)^2)``, ``s`` = the first value of the
    group for the first block, then the mean so far) and merged with Chan's
    update; see the module docstring for the error bound.
    """
    N, R, C = x.shape
    G = C // K
    mean = np.zeros((N, G))
    var = np.zeros((N, G))
    rows = max(_MIN_ROWS, _CHUNK // max(C, 1))
    s1 = np.empty(C)
    s2 = np.empty(C)
    shift = np.empty(C)      # per channel: the shift of its group
    for n in range(N):
        if R == 0:
            continue
        for c in range(C):
            shift[c] = x[n, 0, (c // K) * K]
        count = 0.0
        for r0 in range(0, R, rows):
            r1 = min(r0 + rows, R)
            nb = float((r1 - r0) * K)
            s1[:] = 0.0
            s2[:] = 0.0
            for r in range(r0, r1):
                for c in range(C):
                    d = x[n, r, c] - shift[c]
                    s1[c] += d
                    s2[c] += d * d
            total = count + nb
            w_new = nb / total
            w_cross = count * w_new
            if K == 1:   # batch / instance norm: vectorised per-channel loops
                for c in range(C):
                    bmean = s1[c] / nb
                    delta = (shift[c] + bmean) - mean[n, c]
                    mean[n, c] += delta * w_new
                    var[n, c] += (s2[c] - s1[c] * bmean) + delta * delta * w_cross
                    shift[c] = mean[n, c]
            else:
                for g in range(G):
                    t1 = 0.0
                    t2 = 0.0
                    for k in range(g * K, g * K + K):
                        t1 += s1[k]
                        t2 += s2[k]
                    bmean = t1 / nb
                    delta = (shift[g * K] + bmean) - mean[n, g]
                    mean[n, g] += delta * w_new
                    var[n, g] += (t2 - t1 * bmean) + delta * delta * w_cross
                    for k in range(g * K, g * K + K):
                        shift[k] = mean[n, g]
            count = total
        for g in range(G):
            var[n, g] = max(var[n, g], 0.0) / count
    return mean, var


@jit
def group_apply(x, mean_hi, mean_lo, scale, shift):
    """``y = ((x - mean_hi) - mean_lo) * scale + shift``, coefficients ``[N, C]``.

    All arrays have ``x``'s dtype (``mean_hi + mean_lo`` is the float64 mean
    split in two); ``y`` too.
    """
    N, R, C = x.shape
    y = np.empty_like(x)
    for n in range(N):
        for r in range(R):
            for c in range(C):
                y[n, r, c] = ((x[n, r, c] - mean_hi[n, c]) - mean_lo[n, c]) * scale[n, c] \
                    + shift[n, c]
    return y


@jit
def group_grad_sums(g, x, mean):
    """Per ``(n, c)``, float64: ``sum_r g`` and ``sum_r g * (x - mean[n, c])``."""
    N, R, C = x.shape
    sg = np.zeros((N, C))
    sgx = np.zeros((N, C))
    for n in range(N):
        for r in range(R):
            for c in range(C):
                gv = np.float64(g[n, r, c])
                sg[n, c] += gv
                sgx[n, c] += gv * (x[n, r, c] - mean[n, c])
    return sg, sgx


@jit
def group_grad_apply(g, x, mean_hi, mean_lo, p, q, s):
    """``dx = p * g + q * ((x - mean_hi) - mean_lo) + s``, coefficients ``[N, C]``
    in ``x``'s dtype."""
    N, R, C = x.shape
    dx = np.empty_like(x)
    for n in range(N):
        for r in range(R):
            for c in range(C):
                dx[n, r, c] = p[n, c] * g[n, r, c] \
                    + q[n, c] * ((x[n, r, c] - mean_hi[n, c]) - mean_lo[n, c]) + s[n, c]
    return dx


@jit
def layer_norm_forward(x, gamma, beta, eps):
    """Layer norm of the rows of ``x[M, C]``; ``gamma``, ``beta`` ``[C]`` in x's dtype.

    Returns ``y`` (x's dtype) and float64 ``mean[M]``, ``var[M]`` (biased).
    Each row is read once from memory; the deviation pass and the output pass
    find it in cache.
    """
    M, C = x.shape
    y = np.empty_like(x)
    mean = np.empty(M)
    var = np.empty(M)
    for m in range(M):
        k = np.float64(x[m, 0])
        s1 = 0.0
        s2 = 0.0
        for c in range(C):
            d = x[m, c] - k
            s1 += d
            s2 += d * d
        dm = s1 / C
        mu = k + dm
        v = max(s2 - s1 * dm, 0.0) / C
        mean[m] = mu
        var[m] = v
        hi = x.dtype.type(mu)
        lo = x.dtype.type(mu - hi)
        inv = x.dtype.type(1.0 / math.sqrt(v + eps))
        for c in range(C):
            y[m, c] = ((x[m, c] - hi) - lo) * (inv * gamma[c]) + beta[c]
    return y, mean, var


@jit
def layer_norm_backward(g, x, mean, inv, gamma, need_dx):
    """Backward of layer norm over the rows of ``x[M, C]``.

    With ``xhat = (x - mean) * inv`` and ``h = g * gamma``:
    ``dx = inv * (h - mean_c(h) - xhat * mean_c(h * xhat))``,
    ``dgamma = sum_m g * xhat``, ``dbeta = sum_m g``. ``mean`` and ``inv`` are
    float64 ``[M]``, ``gamma`` ``[C]`` in x's dtype. Returns ``dx`` (x's dtype;
    zero rows when ``need_dx`` is False) and float64 ``dgamma``, ``dbeta``.
    """
    M, C = x.shape
    dx = np.empty_like(x) if need_dx else np.empty((0, C), x.dtype)
    dgamma = np.zeros(C)
    dbeta = np.zeros(C)
    for m in range(M):
        mu = mean[m]
        iv = inv[m]
        a = 0.0
        b = 0.0
        for c in range(C):
            gv = np.float64(g[m, c])
            d = x[m, c] - mu
            h = gv * gamma[c]
            a += h
            b += h * d
            dgamma[c] += gv * d * iv
            dbeta[c] += gv
        if need_dx:
            hi = x.dtype.type(mu)
            lo = x.dtype.type(mu - hi)
            p = x.dtype.type(iv)
            q = x.dtype.type(-iv * iv * iv * b / C)
            s = x.dtype.type(-iv * a / C)
            for c in range(C):
                dx[m, c] = (g[m, c] * gamma[c]) * p + ((x[m, c] - hi) - lo) * q + s
    return dx, dgamma, dbeta
