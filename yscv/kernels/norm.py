"""Numba kernels of the normalization ops (batch, layer, group, instance norm).

Two layouts cover the four ops:

* **grouped columns** ``x[N, R, C]`` (C-contiguous): statistics per
  ``(n, group)`` over the ``R`` rows and the ``K`` consecutive channels of the
  group. Batch norm is ``N=1, K=1`` (rows = every position of the batch),
  instance norm ``K=1`` (rows = the spatial positions of one sample), group
  norm ``K = C // num_groups``.
* **rows** ``x[M, C]``: layer norm, statistics per row over the last axis.

Every kernel works on a range of rows ``[r0, r1)`` (of ``R`` or ``M``) and
writes into caller-allocated outputs, so the ops layer can run disjoint row
ranges on several threads (``yscv/ops/_parallel.py``). Reductions write one
partial result per chunk (index ``i``); the caller merges them in chunk order.

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
``eps64 * (1 + (mean - s)^2 / var)``. The grouped-column kernel walks its rows
in blocks of about ``_CHUNK`` elements; the first block is shifted by the
group's first value in the range (one value deviates from the mean by at
most ``sqrt(n) * std``, so the bound is ``eps64 * n_block``, at most ~1e-11
for the 65,536-element blocks and far less in practice), every later block
by the mean so far, and blocks (and the caller's row ranges) are merged with
Chan's pairwise update. Layer-norm rows use the row's first value (bound
``eps64 * C``).

Reductions without fast-math. No fast-math flags (project rule,
kernels/_jit.py), so LLVM keeps every floating-point sum in source order and
a plain ``s += d`` loop runs at one add per FP-add latency. The sums are
therefore written with independent accumulators in the source:

* **lanes** (layer norm, per row): ``L`` accumulators ``a[j]`` (``L`` = the
  largest power of two <= min(C, ``_LANES``)); element ``c`` of the row goes
  to lane ``c % L`` for ``c < C - C % L``, the lanes are then folded pairwise
  (``a[j] += a[j + L/2]``, halving ``L``), and the last ``C % L`` elements
  are added in order. The loop over ``j`` has no dependence between
  iterations, so LLVM vectorises it without reassociating anything (Numba
  runs no SLP vectoriser, so 8 scalar accumulators would stay scalar: 1.37
  ms against 0.53 ms for 64 lanes in memory, summing 4096x512 float32 rows;
  the serial loop took 1.93 ms). ``L`` is a runtime value (it depends on
  ``C``), which keeps LLVM from unrolling the lane loop into scalar code.
* **columns** (grouped kernels): per-channel sums are already independent
  across channels; rows are packed ``P = max(1, _MIN_WIDTH // C)`` at a time
  into lanes of width ``W = P * C`` (lane ``j`` holds channel ``j % C``), so
  a narrow tensor (C = 4) still gets a vectorised inner loop of 64 lanes
  (2.1 -> 0.4 ms for 2^21 float32 values); lanes fold per channel in order.

The summation order is thus fixed by the source (and by the caller's chunk
split), identical on every machine and compiler, and no less accurate than
the serial loop (lanes shorten each running sum ``L``-fold).
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit

_CHUNK = 65536  # elements per block of the grouped-column statistics (256 KB float32, in L2)
_MIN_ROWS = 16  # rows per block at least, so very wide rows still amortise the merge
_LANES = 64     # most accumulators per layer-norm row sum
_MIN_WIDTH = 256  # grouped kernels: pack rows so an inner loop covers at least this many values


@jit
def group_stats(x, K, r0, r1, mean_out, m2_out, i):
    """Mean and sum of squared deviations per ``(n, group)`` of rows
    ``[r0, r1)`` of ``x[N, R, C]``, written to ``mean_out[i]`` and
    ``m2_out[i]`` (float64 ``[k, N, G]``, ``G = C // K``; the range holds
    ``(r1 - r0) * K`` values per group).

    Groups are ``K`` consecutive channels. Blocks of rows are summed as
    shifted data (``sum(x - s)``, ``sum((x - s)^2)``, ``s`` = the group's
    first value in the range for the first block, then the mean so far) and
    merged with Chan's update; see the module docstring for the error bound.
    """
    N, R, C = x.shape
    G = C // K
    P = max(1, _MIN_WIDTH // C)          # rows per packed lane row
    W = P * C
    rows = max(_MIN_ROWS, _CHUNK // max(C, 1))
    rows += (-rows) % P                  # whole packed rows per block
    xf = x.reshape((N, R * C))
    s1 = np.empty(W)
    s2 = np.empty(W)
    shift = np.empty(W)                  # per lane: the shift of its channel's group
    mean = mean_out[i]
    m2 = m2_out[i]
    for n in range(N):
        mean[n, :] = 0.0
        m2[n, :] = 0.0
        if r1 <= r0:
            continue
        for j in range(W):
            c = j % C
            shift[j] = x[n, r0, (c // K) * K]
        count = 0.0
        for b0 in range(r0, r1, rows):
            b1 = min(b0 + rows, r1)
            nb = float((b1 - b0) * K)
            s1[:] = 0.0
            s2[:] = 0.0
            full = b1 - (b1 - b0) % P
            for r in range(b0, full, P):
                seg = xf[n, r * C:r * C + W]
                for j in range(W):
                    d = seg[j] - shift[j]
                    s1[j] += d
                    s2[j] += d * d
            for r in range(full, b1):    # fewer than P rows left: lanes [0, C)
                seg = xf[n, r * C:r * C + C]
                for j in range(C):
                    d = seg[j] - shift[j]
                    s1[j] += d
                    s2[j] += d * d
            for p in range(1, P):        # fold the packed rows onto lanes [0, C)
                for c in range(C):
                    s1[c] += s1[p * C + c]
                    s2[c] += s2[p * C + c]
            total = count + nb
            w_new = nb / total
            w_cross = count * w_new
            for g in range(G):
                t1 = 0.0
                t2 = 0.0
                for k in range(g * K, g * K + K):
                    t1 += s1[k]
                    t2 += s2[k]
                bmean = t1 / nb
                delta = (shift[g * K] + bmean) - mean[n, g]
                mean[n, g] += delta * w_new
                m2[n, g] += (t2 - t1 * bmean) + delta * delta * w_cross
            for j in range(W):
                shift[j] = mean[n, (j % C) // K]
            count = total
        for g in range(G):
            m2[n, g] = max(m2[n, g], 0.0)


@jit
def group_apply(x, mean_hi, mean_lo, scale, shift, y, r0, r1):
    """``y = ((x - mean_hi) - mean_lo) * scale + shift`` for rows ``[r0, r1)``
    of ``x[N, R, C]``; coefficients ``[N, C]``, all in ``x``'s dtype
    (``mean_hi + mean_lo`` is the float64 mean split in two), ``y`` too."""
    N, R, C = x.shape
    P = max(1, _MIN_WIDTH // C)
    W = P * C
    xf = x.reshape((N, R * C))
    yf = y.reshape((N, R * C))
    hi = np.empty(W, x.dtype)
    lo = np.empty(W, x.dtype)
    sc = np.empty(W, x.dtype)
    sh = np.empty(W, x.dtype)
    for n in range(N):
        for j in range(W):
            hi[j] = mean_hi[n, j % C]
            lo[j] = mean_lo[n, j % C]
            sc[j] = scale[n, j % C]
            sh[j] = shift[n, j % C]
        full = r1 - (r1 - r0) % P
        for r in range(r0, full, P):
            xs = xf[n, r * C:r * C + W]
            ys = yf[n, r * C:r * C + W]
            for j in range(W):
                ys[j] = ((xs[j] - hi[j]) - lo[j]) * sc[j] + sh[j]
        for r in range(full, r1):
            xs = xf[n, r * C:r * C + C]
            ys = yf[n, r * C:r * C + C]
            for j in range(C):
                ys[j] = ((xs[j] - hi[j]) - lo[j]) * sc[j] + sh[j]


@jit
def group_grad_sums(g, x, mean, r0, r1, sg_out, sgx_out, i):
    """Per ``(n, c)`` over rows ``[r0, r1)``, float64: ``sum g`` and
    ``sum g * (x - mean[n, c])``, written to ``sg_out[i]``, ``sgx_out[i]``
    (``[k, N, C]``)."""
    N, R, C = x.shape
    P = max(1, _MIN_WIDTH // C)
    W = P * C
    xf = x.reshape((N, R * C))
    gf = g.reshape((N, R * C))
    sg = np.empty(W)
    sgx = np.empty(W)
    mu = np.empty(W)
    for n in range(N):
        sg[:] = 0.0
        sgx[:] = 0.0
        for j in range(W):
            mu[j] = mean[n, j % C]
        full = r1 - (r1 - r0) % P
        for r in range(r0, full, P):
            xs = xf[n, r * C:r * C + W]
            gs = gf[n, r * C:r * C + W]
            for j in range(W):
                gv = np.float64(gs[j])
                sg[j] += gv
                sgx[j] += gv * (xs[j] - mu[j])
        for r in range(full, r1):
            xs = xf[n, r * C:r * C + C]
            gs = gf[n, r * C:r * C + C]
            for j in range(C):
                gv = np.float64(gs[j])
                sg[j] += gv
                sgx[j] += gv * (xs[j] - mu[j])
        for p in range(1, P):
            for c in range(C):
                sg[c] += sg[p * C + c]
                sgx[c] += sgx[p * C + c]
        for c in range(C):
            sg_out[i, n, c] = sg[c]
            sgx_out[i, n, c] = sgx[c]


@jit
def group_grad_apply(g, x, mean_hi, mean_lo, p, q, s, dx, r0, r1):
    """``dx = p * g + q * ((x - mean_hi) - mean_lo) + s`` for rows
    ``[r0, r1)``; coefficients ``[N, C]`` in ``x``'s dtype."""
    N, R, C = x.shape
    P = max(1, _MIN_WIDTH // C)
    W = P * C
    xf = x.reshape((N, R * C))
    gf = g.reshape((N, R * C))
    df = dx.reshape((N, R * C))
    hi = np.empty(W, x.dtype)
    lo = np.empty(W, x.dtype)
    pw = np.empty(W, x.dtype)
    qw = np.empty(W, x.dtype)
    sw = np.empty(W, x.dtype)
    for n in range(N):
        for j in range(W):
            hi[j] = mean_hi[n, j % C]
            lo[j] = mean_lo[n, j % C]
            pw[j] = p[n, j % C]
            qw[j] = q[n, j % C]
            sw[j] = s[n, j % C]
        full = r1 - (r1 - r0) % P
        for r in range(r0, full, P):
            xs = xf[n, r * C:r * C + W]
            gs = gf[n, r * C:r * C + W]
            ds = df[n, r * C:r * C + W]
            for j in range(W):
                ds[j] = pw[j] * gs[j] + qw[j] * ((xs[j] - hi[j]) - lo[j]) + sw[j]
        for r in range(full, r1):
            xs = xf[n, r * C:r * C + C]
            gs = gf[n, r * C:r * C + C]
            ds = df[n, r * C:r * C + C]
            for j in range(C):
                ds[j] = pw[j] * gs[j] + qw[j] * ((xs[j] - hi[j]) - lo[j]) + sw[j]


@jit
def layer_norm_forward(x, gamma, beta, eps, y, mean, var, r0, r1):
    """Layer norm of rows ``[r0, r1)`` of ``x[M, C]`` into ``y`` (x's dtype)
    and float64 ``mean[M]``, ``var[M]`` (biased); ``gamma``, ``beta`` ``[C]``
    in x's dtype.

    Each row is read once from memory: the statistics pass (lanes, see the
    module docstring) and the output pass find it in cache.
    """
    M, C = x.shape
    L = 1
    while 2 * L <= min(C, _LANES):
        L *= 2
    CL = C - C % L
    a = np.empty(L)
    b = np.empty(L)
    for m in range(r0, r1):
        row = x[m]
        k = np.float64(row[0])
        a[:] = 0.0
        b[:] = 0.0
        for c in range(0, CL, L):
            blk = row[c:c + L]
            for j in range(L):
                d = blk[j] - k
                a[j] += d
                b[j] += d * d
        h = L
        while h > 1:
            h //= 2
            for j in range(h):
                a[j] += a[j + h]
                b[j] += b[j + h]
        s1 = a[0]
        s2 = b[0]
        for c in range(CL, C):
            d = row[c] - k
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
    ``need_affine``). ``mean``, ``inv`` are float64 ``[M]``; ``gamma`` is
    ``[C]`` in x's dtype and ``gamma64`` the same values in float64 (``g *
    gamma64`` is exact for float32 data).
    """
    M, C = x.shape
    L = 1
    while 2 * L <= min(C, _LANES):
        L *= 2
    CL = C - C % L
    a = np.empty(L)
    b = np.empty(L)
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
        if need_affine:
            for c in range(C):
                gv = np.float64(grow[c])
                dg[c] += gv * (xrow[c] - mu) * iv
                db[c] += gv
        if need_dx:
            a[:] = 0.0
            b[:] = 0.0
            for c in range(0, CL, L):
                gb = grow[c:c + L]
                xb = xrow[c:c + L]
                wb = gamma64[c:c + L]
                for j in range(L):
                    h = np.float64(gb[j]) * wb[j]
                    a[j] += h
                    b[j] += h * (xb[j] - mu)
            hh = L
            while hh > 1:
                hh //= 2
                for j in range(hh):
                    a[j] += a[j + hh]
                    b[j] += b[j + hh]
            sa = a[0]
            sb = b[0]
            for c in range(CL, C):
                h = np.float64(grow[c]) * gamma64[c]
                sa += h
                sb += h * (xrow[c] - mu)
            hi = x.dtype.type(mu)
            lo = x.dtype.type(mu - hi)
            p = x.dtype.type(iv)
            q = x.dtype.type(-iv * iv * iv * sb / C)
            s = x.dtype.type(-iv * sa / C)
            dr = dx[m]
            for c in range(C):
                dr[c] = (grow[c] * gamma[c]) * p + ((xrow[c] - hi) - lo) * q + s
