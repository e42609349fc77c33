"""Region kernels of the normalization ops: each runs the row-range kernels
of yscv/kernels/norm.py and yscv/kernels/layer_norm.py on every chunk it claims (chunk ``c`` covers rows
``[bounds[c], bounds[c + 1])``), until none is left; the ops layer runs one
call per thread (yscv/compute/regions.py). A chunk's partial results go to
index ``c`` of the ``out`` arrays, whichever thread claims it.

The grouped normalisations with batch statistics (batch norm in training
mode, instance and group norm) run each direction as ONE region of two
phases (yscv/kernels/sync.py): the statistics (forward) or the gradient
sums (backward) of every chunk; then one participant merges the chunks'
partials in chunk order and computes the per-lane coefficients (the same
float64 operations, in the same order, as the NumPy code they replaced);
then the elementwise pass. One region instead of two, and no NumPy calls on
small arrays in between (they were a large part of a small batch-norm
step's fixed cost; docs/ops/norm.md).
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .layer_norm import layer_norm_backward, layer_norm_forward
from .norm import group_apply, group_grad_apply, group_grad_sums, group_stats
from .sync import (phase2_chunks, phase_done, region_chunks, set_ready, take_token, wait_phase,
                   wait_ready)


@jit
def group_stats_region(x, C, K, out, bounds, st):
    """`yscv.kernels.norm.group_stats` over the claimed chunks."""
    scr = np.empty((3, x.shape[2]))
    for c in region_chunks(st, bounds.shape[0] - 1):
        group_stats(x, C, K, bounds[c], bounds[c + 1], out, c, scr)


@jit
def group_apply_region(x, coef, y, bounds, st):
    """`yscv.kernels.norm.group_apply` over the claimed chunks."""
    for c in region_chunks(st, bounds.shape[0] - 1):
        group_apply(x, coef, y, bounds[c], bounds[c + 1])


@jit
def group_grad_sums_region(g, x, mean, C, out, bounds, st):
    """`yscv.kernels.norm.group_grad_sums` over the claimed chunks."""
    scr = np.empty((2, x.shape[2]))
    for c in region_chunks(st, bounds.shape[0] - 1):
        group_grad_sums(g, x, mean, C, bounds[c], bounds[c + 1], out, c, scr)


@jit
def layer_norm_forward_region(x, gamma, beta, eps, y, mean, var, bounds, st):
    """`yscv.kernels.layer_norm.layer_norm_forward` over the claimed chunks."""
    for c in region_chunks(st, bounds.shape[0] - 1):
        layer_norm_forward(x, gamma, beta, eps, y, mean, var, bounds[c], bounds[c + 1])


@jit
def layer_norm_backward_region(g, x, mean, inv, gamma, gamma64, dx, dgamma_out, dbeta_out,
                               need_x, need_affine, bounds, st):
    """`yscv.kernels.layer_norm.layer_norm_backward` over the claimed chunks."""
    for c in region_chunks(st, bounds.shape[0] - 1):
        layer_norm_backward(g, x, mean, inv, gamma, gamma64, dx, dgamma_out, dbeta_out, c,
                            bounds[c], bounds[c + 1], need_x, need_affine)


# ------------------------------------------- two-phase grouped regions
@jit
def merge_stats(parts, bounds, per_row, mean, var):
    """Chan's merge, in chunk order, of the chunks' ``(mean, M2)`` partials
    ``parts[k, 2, N, G]`` (chunk ``i`` holds ``(bounds[i+1] - bounds[i]) *
    per_row`` values per group) into ``mean[N, G]`` and the biased
    ``var[N, G]`` (nan for no values, as NumPy)."""
    N, G = mean.shape
    for n in range(N):
        for g in range(G):
            mu = parts[0, 0, n, g]
            m2 = parts[0, 1, n, g]
            count = float((bounds[1] - bounds[0]) * per_row)
            for i in range(1, parts.shape[0]):
                nb = float((bounds[i + 1] - bounds[i]) * per_row)
                total = count + nb
                delta = parts[i, 0, n, g] - mu
                mu = mu + delta * (nb / total)
                m2 = m2 + parts[i, 1, n, g] + delta * delta * (count * nb / total)
                count = total
            mean[n, g] = mu
            var[n, g] = m2 / count if count else math.nan


@jit
def _split_mean(coef, n, j, m):
    """``coef[n, 0, j]``, ``coef[n, 1, j]``: the float64 ``m`` as the
    rounded value and the rounded remainder (kernels/norm.py)."""
    hi = coef.dtype.type(m)
    coef[n, 0, j] = hi
    coef[n, 1, j] = coef.dtype.type(m - np.float64(hi))


@jit
def apply_coefficients(mean, var, eps, gamma, beta, C, K, coef):
    """``coef[N, 4, W]`` of `yscv.kernels.norm.group_apply` (lane ``j``
    is channel ``j % C`` of group ``(j % C) // K``): mean split, ``scale =
    gamma / sqrt(var + eps)``, ``shift = beta``; ``gamma`` / ``beta`` of
    length 0 are absent (scale 1/sqrt(var + eps), shift 0)."""
    N, _, W = coef.shape
    has_gamma = gamma.shape[0] > 0
    has_beta = beta.shape[0] > 0
    for n in range(N):
        for j in range(W):
            ch = j % C
            g = ch // K
            _split_mean(coef, n, j, mean[n, g])
            inv = 1.0 / np.sqrt(var[n, g] + eps)
            coef[n, 2, j] = coef.dtype.type(inv * np.float64(gamma[ch]) if has_gamma else inv)
            coef[n, 3, j] = beta[ch] if has_beta else coef.dtype.type(0)


@jit
def group_forward_region(x, C, K, eps, gamma, beta, parts, mean, var, coef, y, b1, b2, st):
    """Batch statistics then normalisation of ``x[N, R', W]`` (packed, as
    `yscv.kernels.norm.group_stats`), one two-phase region: writes the
    float64 ``mean[N, G]`` and biased ``var[N, G]`` and ``y``; ``parts[k1,
    2, N, G]`` and ``coef[N, 4, W]`` are scratch. Phase chunks: ``b1``, ``b2``."""
    n1 = b1.shape[0] - 1
    scr = np.empty((3, x.shape[2]))
    for c in region_chunks(st, n1):
        group_stats(x, C, K, b1[c], b1[c + 1], parts, c, scr)
        phase_done(st)
    wait_phase(st, n1)
    if take_token(st):
        merge_stats(parts, b1, (x.shape[2] // C) * K, mean, var)
        apply_coefficients(mean, var, eps, gamma, beta, C, K, coef)
        set_ready(st)
    else:
        wait_ready(st)
    for c in phase2_chunks(st, b2.shape[0] - 1):
        group_apply(x, coef, y, b2[c], b2[c + 1])


@jit
def grad_coefficients(sums, mean, var, eps, gamma64, K, m, coef):
    """``coef[N, 5, W]`` of `yscv.kernels.norm.group_grad_apply` from
    the merged ``sums[2, N, C]`` (``sum g``, ``sum g * (x - mean)`` per
    channel): mean split, ``p = gamma / sigma``, ``q = -sum_group(h (x -
    mean)) / (sigma^3 m)``, ``s = -sum_group(h) / (sigma m)`` with ``h = g *
    gamma`` and ``m`` values per group (yscv/backward/norm.py)."""
    N, _, W = coef.shape
    C = sums.shape[2]
    G = C // K
    q = np.empty(G)
    s = np.empty(G)
    for n in range(N):
        for g in range(G):
            grp_h = 0.0
            grp_hx = 0.0
            for ch in range(g * K, g * K + K):
                grp_h += sums[0, n, ch] * gamma64[ch]
                grp_hx += sums[1, n, ch] * gamma64[ch]
            inv = 1.0 / np.sqrt(var[n, g] + eps)
            q[g] = -(inv * inv * inv) * grp_hx / m
            s[g] = -inv * grp_h / m
        for j in range(W):
            ch = j % C
            g = ch // K
            _split_mean(coef, n, j, mean[n, g])
            coef[n, 2, j] = coef.dtype.type(gamma64[ch] * (1.0 / np.sqrt(var[n, g] + eps)))
            coef[n, 3, j] = coef.dtype.type(q[g])
            coef[n, 4, j] = coef.dtype.type(s[g])


@jit
def group_backward_region(g, x, mean_w, mean, var, eps, gamma64, C, K, m, parts, sums, coef,
                          dx, b1, b2, st):
    """The input gradient of a grouped normalisation with batch statistics,
    one two-phase region: the chunks' gradient sums (``parts[k1, 2, N, C]``,
    merged in chunk order into ``sums[2, N, C]``, which the caller also
    uses for the affine gradients), the coefficients (``coef[N, 5, W]``,
    scratch), then ``dx``. ``mean_w`` is the float64 mean per lane
    ``[N, W]``; ``m`` the values per group."""
    n1 = b1.shape[0] - 1
    scr = np.empty((2, x.shape[2]))
    for c in region_chunks(st, n1):
        group_grad_sums(g, x, mean_w, C, b1[c], b1[c + 1], parts, c, scr)
        phase_done(st)
    wait_phase(st, n1)
    if take_token(st):
        # the chunks' sums in chunk order, as yscv.compute.regions.combine (an
        # element loop: a slice assignment would compile Numba's shape-error
        # message formatting, seconds of first-call compile time)
        for k in range(2):
            for n in range(sums.shape[1]):
                for ch in range(C):
                    v = parts[0, k, n, ch]
                    for i in range(1, parts.shape[0]):
                        v = v + parts[i, k, n, ch]
                    sums[k, n, ch] = v
        grad_coefficients(sums, mean, var, eps, gamma64, K, m, coef)
        set_ready(st)
    else:
        wait_ready(st)
    for c in phase2_chunks(st, b2.shape[0] - 1):
        group_grad_apply(g, x, coef, dx, b2[c], b2[c + 1])
