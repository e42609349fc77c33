"""Numba kernels of the grouped normalizations (batch, group, instance norm).

One layout covers the three ops: ``**grouped`` ``columns**`` ``x[N, R, C]``
(C-contiguous), statistics per ``(n, group)`` over the ``R`` rows and the
``K`` consecutive channels of the group. Batch norm is ``N=1, K=1`` (rows =
every position of the batch), instance norm ``K=1`` (rows = the spatial
positions of one sample), group norm ``K = C // num_groups``. The kernels
see it *packed*: ``x[N, R/P, W]`` with ``P`` consecutive rows side by side
(``W = P * C``, lane ``j`` holds channel ``j % C``; the caller picks ``P``),
so even a narrow tensor (C = 4) has long inner loops. Layer norm's row
kernels are in yscv/kernels/layer_norm.py.

Every kernel works on a range of rows ``[r0, r1)`` and writes into
caller-allocated outputs, so disjoint row ranges can run on several threads
(yscv/kernels/norm_regions.py). Reductions write one partial result per
chunk (index ``i``); the caller merges them in chunk order.

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
``eps64 * (1 + (mean - s)^2 / var)``. The kernel walks its rows in blocks of
about ``_CHUNK`` elements; the first block is shifted by the group's first
value in the range (one value deviates from the mean by at most
``sqrt(n) * std``, so the bound is ``eps64 * n_block``, at most ~1e-11 for
the 65,536-element blocks and far less in practice), every later block by
the mean so far, and blocks (and the caller's row ranges) are merged with
Chan's pairwise update.

Reductions without fast-math (project rule, kernels/_jit.py): LLVM keeps
every floating-point sum in source order and will not split a single
accumulator into SIMD lanes. Per-channel sums over rows are independent
across the ``W`` lanes of a packed row, though, so ``s[j] += d`` in a loop
over ``j`` vectorises without reassociation; the statistics and the
gradient sums add four rows per lane update (``s[j] += (d0 + d1) + (d2 +
d3)``: the lanes' loads and stores of the sums, not the data, bound these
passes). Each lane sums its rows in order, then lanes fold onto their
channel in order. The summation order is thus fixed by the source and by
the caller's chunk split: identical on every machine and compiler, and no
less accurate than the serial loop. Timings: docs/ops/norm.md.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from . import simd as sv
from .simd import zero_run

_CHUNK = 65536  # elements per block of the grouped-column statistics (256 KB float32, in L2)
_MIN_ROWS = 16  # rows per block at least, so very wide rows still amortise the merge


@jit
def group_stats(x, C, K, r0, r1, out, i, scr):
    """Mean and sum of squared deviations per ``(n, group)`` over packed rows
    ``[r0, r1)`` of ``x[N, R', W]`` (``W = P * C``: ``P`` rows of ``C``
    channels side by side, lane ``j`` holding channel ``j % C``), written to
    ``out[i, 0]`` and ``out[i, 1]`` (float64 ``out[k, 2, N, G]``,
    ``G = C // K``; the range holds ``(r1 - r0) * P * K`` values per group).
    ``scr``: float64 scratch ``[3, >= W]`` (the caller allocates it: an
    ``np.empty`` here compiled Numba's allocation helpers on first call);
    ``out`` and ``scr`` C-contiguous (their rows are zeroed with
    ``zero_run``: a memset each, where loops compiled ~0.07 s longer).

    Groups are ``K`` consecutive channels. Blocks of rows are summed per lane
    as shifted data (``sum(x - s)``, ``sum((x - s)^2)``, ``s`` = the group's
    first value in the range for the first block, then the mean so far), the
    lanes folded onto their channel in order, and blocks merged with Chan's
    update; see the module docstring for the error bound.
    """
    N, _, W = x.shape
    G = C // K
    per_row = float((W // C) * K)        # values of a group in one packed row
    # conditional expressions, not max()/min() builtins, and no allocation:
    # each would compile a Numba helper of its own on first call (~0.03-0.08 s
    # apiece; docs/engine.md, "Cold start")
    rows = _CHUNK // W if _CHUNK // W > _MIN_ROWS else _MIN_ROWS
    P = W // C
    s1 = scr[0]
    s2 = scr[1]
    shift = scr[2]                       # per lane: the shift of its channel's group
    mean = out[i, 0]
    m2 = out[i, 1]
    for n in range(N):
        zero_run(mean, n * G, G)
        zero_run(m2, n * G, G)
        if r1 <= r0:
            continue
        for j in range(W):
            shift[j] = x[n, r0, ((j % C) // K) * K]
        count = 0.0
        for b0 in range(r0, r1, rows):
            b1 = b0 + rows if b0 + rows < r1 else r1
            zero_run(s1, 0, W)
            zero_run(s2, 0, W)
            r = b0
            while r + 4 <= b1:               # four rows per lane update
                xa = x[n, r]
                xb = x[n, r + 1]
                xc = x[n, r + 2]
                xd = x[n, r + 3]
                for j in range(W):
                    d = xa[j] - shift[j]
                    e = xb[j] - shift[j]
                    f = xc[j] - shift[j]
                    h = xd[j] - shift[j]
                    s1[j] += (d + e) + (f + h)
                    s2[j] += (d * d + e * e) + (f * f + h * h)
                r += 4
            while r < b1:
                xs = x[n, r]
                for j in range(W):
                    d = xs[j] - shift[j]
                    s1[j] += d
                    s2[j] += d * d
                r += 1
            for p in range(1, P):        # fold the lanes onto channels [0, C), in order
                for c in range(C):
                    s1[c] += s1[p * C + c]
                    s2[c] += s2[p * C + c]
            nb = (b1 - b0) * per_row
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
            for j in range(W):               # once per block: the division is cheap here
                shift[j] = mean[n, (j % C) // K]
            count = total
        for g in range(G):
            m2[n, g] = 0.0 if 0.0 > m2[n, g] else m2[n, g]   # max(m2, 0.0): NaN stays


@jit(inline="always")
def group_apply(x, coef, y, r0, r1):
    """``y = ((x - mean_hi) - mean_lo) * scale + shift`` for packed rows
    ``[r0, r1)`` of ``x[N, R', W]`` (as `group_stats`). ``coef[N, 4,
    W]`` holds ``mean_hi``, ``mean_lo``, ``scale``, ``shift`` per lane, in
    ``x``'s dtype (``mean_hi + mean_lo`` is the float64 mean split in two);
    ``y`` too. Inlined into its region kernels
    (yscv/kernels/norm_regions.py), which every size runs: one compiled
    kernel for the normalisation, not a row kernel and a region kernel.

    Explicit vectors (yscv/kernels/simd.py), the same operations in the
    same order as the scalar tail (a separate multiply and add, so the
    results are the bits of the plain loop): LLVM vectorises the plain loop
    over a packed row too, but with runtime overlap checks of the arrays on
    every row, which made it slower (docs/ops/norm.md). One vector per
    iteration: the iterations are independent, and two per round (written
    out) ran no faster but compiled ~0.1 s longer. The gradient's apply pass
    gained nothing from the same rewrite and keeps the plain loop."""
    N, R, W = x.shape
    L = sv.lanes(x)
    nv = W - W % L
    for n in range(N):
        cb = n * 4 * W
        for r in range(r0, r1):
            o = (n * R + r) * W
            for j in range(0, nv, L):
                t = sv.vsub(sv.vsub(sv.vload(x, o + j), sv.vload(coef, cb + j)),
                            sv.vload(coef, cb + W + j))
                sv.vstore(y, o + j, sv.vadd(sv.vmul(t, sv.vload(coef, cb + 2 * W + j)),
                                            sv.vload(coef, cb + 3 * W + j)))
            for j in range(nv, W):
                y[n, r, j] = ((x[n, r, j] - coef[n, 0, j]) - coef[n, 1, j]) * coef[n, 2, j] \
                    + coef[n, 3, j]


@jit
def group_grad_sums(g, x, mean, C, r0, r1, out, i, scr):
    """Per ``(n, c)`` over packed rows ``[r0, r1)`` of ``x[N, R', W]`` (as
    `group_stats`), float64: ``sum g`` and ``sum g * (x - mean)``
    (``mean[N, W]`` per lane), written to ``out[i, 0]`` and ``out[i, 1]``
    (``out[k, 2, N, C]``); lanes summed in row order, then folded in order.
    ``scr``: float64 scratch ``[2, >= W]``, C-contiguous (as `group_stats`)."""
    N, _, W = x.shape
    sg = scr[0]
    sgx = scr[1]
    for n in range(N):
        zero_run(sg, 0, W)
        zero_run(sgx, 0, W)
        mu = mean[n]
        r = r0
        while r + 4 <= r1:                   # four rows per lane update
            # indexed in place: eight row views compiled slower (~0.04 s)
            for j in range(W):
                va = np.float64(g[n, r, j])
                vb = np.float64(g[n, r + 1, j])
                vc = np.float64(g[n, r + 2, j])
                vd = np.float64(g[n, r + 3, j])
                m = mu[j]
                sg[j] += (va + vb) + (vc + vd)
                sgx[j] += ((va * (x[n, r, j] - m) + vb * (x[n, r + 1, j] - m))
                           + (vc * (x[n, r + 2, j] - m) + vd * (x[n, r + 3, j] - m)))
            r += 4
        if r < r1:                           # the last rows (at most 3), lane by lane
            for j in range(W):
                t1 = sg[j]
                t2 = sgx[j]
                m = mu[j]
                for q in range(r, r1):
                    gv = np.float64(g[n, q, j])
                    t1 += gv
                    t2 += gv * (x[n, q, j] - m)
                sg[j] = t1
                sgx[j] = t2
        for c in range(C):                   # fold the lanes onto channels, in order
            t1 = sg[c]
            t2 = sgx[c]
            for p in range(1, W // C):
                t1 += sg[p * C + c]
                t2 += sgx[p * C + c]
            out[i, 0, n, c] = t1
            out[i, 1, n, c] = t2


@jit
def group_grad_apply(g, x, coef, dx, r0, r1):
    """``dx = p * g + q * ((x - mean_hi) - mean_lo) + s`` for packed rows
    ``[r0, r1)``; ``coef[N, 5, W]`` holds ``mean_hi``, ``mean_lo``, ``p``,
    ``q``, ``s`` per lane (as `group_apply`) in ``x``'s dtype."""
    N, _, W = x.shape
    for n in range(N):
        hi = coef[n, 0]
        lo = coef[n, 1]
        p = coef[n, 2]
        q = coef[n, 3]
        s = coef[n, 4]
        for r in range(r0, r1):
            xs = x[n, r]
            gs = g[n, r]
            ds = dx[n, r]
            for j in range(W):
                ds[j] = p[j] * gs[j] + q[j] * ((xs[j] - hi[j]) - lo[j]) + s[j]
