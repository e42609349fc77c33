"""Layer-norm kernels: statistics per row of ``x[M, C]`` over the last axis.

Each kernel works on a range of rows ``[r0, r1)`` and writes into
caller-allocated outputs, so the caller can run disjoint row ranges on
several threads (yscv/kernels/norm_regions.py). Precision as the grouped
kernels (yscv/kernels/norm.py): reductions accumulate in float64 and
statistics are float64; the elementwise passes run in the data dtype with
the mean split as ``(x - mean_hi) - mean_lo``; the variance is a shifted
sum around the row's first value (relative error of M2 about
``eps64 * C``).

Row sums are written with independent accumulators in float64 vector
registers (yscv/kernels/f64x4.py): without fast-math LLVM keeps a sum in
source order and will not split it into SIMD lanes, so the lanes are
written out. The forward's row sums use four vectors (16 lanes: element
``c`` goes to lane ``c % 16``), the backward's two (8 lanes); lanes combine
as ``hsum((v0 + v1) + (v2 + v3))``, then the last ``C % 16`` (``C % 8``)
elements are added in order. The order is fixed by the source: identical
on every machine and compiler (timings in docs/ops/norm.md).
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .f64x4 import hsum, vadd, vload, vmul, vsplat, vstore, vsub, vzero


@jit
def layer_norm_forward(x, gamma, beta, eps, y, mean, var, r0, r1):
    """Layer norm of rows ``[r0, r1)`` of ``x[M, C]`` into ``y`` (x's dtype)
    and float64 ``mean[M]``, ``var[M]`` (biased); ``gamma``, ``beta`` ``[C]``
    in x's dtype.

    Row sums: 16 float64 lanes in four vectors (element ``c`` of the first
    ``C - C % 16`` goes to lane ``c % 16``), combined as
    ``hsum((v0 + v1) + (v2 + v3))``, then the last ``C % 16`` elements in
    order. Each row is read once from memory; the output pass finds it in
    cache.
    """
    M, C = x.shape
    C16 = C - C % 16
    for m in range(r0, r1):
        row = x[m]
        k = np.float64(row[0])
        kv = vsplat(k)
        a0 = vzero()
        a1 = vzero()
        a2 = vzero()
        a3 = vzero()
        b0 = vzero()
        b1 = vzero()
        b2 = vzero()
        b3 = vzero()
        for c in range(0, C16, 16):
            d0 = vsub(vload(row, c), kv)
            d1 = vsub(vload(row, c + 4), kv)
            d2 = vsub(vload(row, c + 8), kv)
            d3 = vsub(vload(row, c + 12), kv)
            a0 = vadd(a0, d0)
            a1 = vadd(a1, d1)
            a2 = vadd(a2, d2)
            a3 = vadd(a3, d3)
            b0 = vadd(b0, vmul(d0, d0))
            b1 = vadd(b1, vmul(d1, d1))
            b2 = vadd(b2, vmul(d2, d2))
            b3 = vadd(b3, vmul(d3, d3))
        s1 = hsum(vadd(vadd(a0, a1), vadd(a2, a3)))
        s2 = hsum(vadd(vadd(b0, b1), vadd(b2, b3)))
        for c in range(C16, C):
            d = row[c] - k
            s1 += d
            s2 += d * d
        dm = s1 / C
        mu = k + dm
        m2 = s2 - s1 * dm
        v = (0.0 if 0.0 > m2 else m2) / C   # max(m2, 0.0), without the builtin's helper
        mean[m] = mu
        var[m] = v
        hi = x.dtype.type(mu)
        lo = x.dtype.type(mu - hi)
        inv = x.dtype.type(1.0 / math.sqrt(v + eps))
        yr = y[m]
        for c in range(C):
            yr[c] = ((row[c] - hi) - lo) * (inv * gamma[c]) + beta[c]


@jit
def layer_norm_backward(g, x, mean, inv, gamma, gamma64, dx, dgamma_out, dbeta_out, i,
                        r0, r1, need_dx, need_affine):
    """Backward of layer norm over rows ``[r0, r1)`` of ``x[M, C]``.

    With ``xhat = (x - mean) * inv`` and ``h = g * gamma``:
    ``dx = inv * (h - mean_c(h) - xhat * mean_c(h * xhat))`` (into ``dx``,
    x's dtype, when ``need_dx``), and the float64 partial sums over the range
    ``dgamma_out[i] = sum_m g * xhat``, ``dbeta_out[i] = sum_m g`` (when
    ``need_affine``; column sums, in row order). ``mean``, ``inv`` are float64
    ``[M]``; ``gamma`` is ``[C]`` in x's dtype and ``gamma64`` the same values
    in float64 (``g * gamma64`` is exact for float32 data).

    The row sums ``sum h`` and ``sum h * (x - mean)`` use 8 float64 lanes in
    two vectors (element ``c`` of the first ``C - C % 8`` to lane ``c % 8``),
    combined as ``hsum(v0 + v1)``, then the last ``C % 8`` in order; one pass
    over the row feeds them and the column sums, a second (in cache) writes
    ``dx``.
    """
    M, C = x.shape
    C8 = C - C % 8
    dg = dgamma_out[i]
    db = dbeta_out[i]
    if need_affine:
        dg[:] = 0.0
        db[:] = 0.0
    for m in range(r0, r1):
        mu = mean[m]
        iv = inv[m]
        grow = g[m]
        xrow = x[m]
        muv = vsplat(mu)
        ivv = vsplat(iv)
        a0 = vzero()
        a1 = vzero()
        b0 = vzero()
        b1 = vzero()
        for c in range(0, C8, 8):
            g0 = vload(grow, c)
            g1 = vload(grow, c + 4)
            d0 = vsub(vload(xrow, c), muv)
            d1 = vsub(vload(xrow, c + 4), muv)
            if need_dx:
                h0 = vmul(g0, vload(gamma64, c))
                h1 = vmul(g1, vload(gamma64, c + 4))
                a0 = vadd(a0, h0)
                a1 = vadd(a1, h1)
                b0 = vadd(b0, vmul(h0, d0))
                b1 = vadd(b1, vmul(h1, d1))
            if need_affine:
                vstore(dg, c, vadd(vload(dg, c), vmul(vmul(g0, d0), ivv)))
                vstore(dg, c + 4, vadd(vload(dg, c + 4), vmul(vmul(g1, d1), ivv)))
                vstore(db, c, vadd(vload(db, c), g0))
                vstore(db, c + 4, vadd(vload(db, c + 4), g1))
        sa = hsum(vadd(a0, a1))
        sb = hsum(vadd(b0, b1))
        for c in range(C8, C):
            gv = np.float64(grow[c])
            d = xrow[c] - mu
            h = gv * gamma64[c]
            sa += h
            sb += h * d
            if need_affine:
                dg[c] += gv * d * iv
                db[c] += gv
        if need_dx:
            hi = x.dtype.type(mu)
            lo = x.dtype.type(mu - hi)
            p = x.dtype.type(iv)
            q = x.dtype.type(-iv * iv * iv * sb / C)
            s = x.dtype.type(-iv * sa / C)
            dr = dx[m]
            for c in range(C):
                dr[c] = (grow[c] * gamma[c]) * p + ((xrow[c] - hi) - lo) * q + s
