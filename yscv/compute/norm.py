"""How the normalisations are computed: row layouts, lane packing, row
chunks on two cores, and the drivers of the region kernels
(yscv/kernels/norm_regions.py) for both directions.

Shared by yscv/ops/norm.py (forwards) and yscv/backward/norm.py (backward
rules), which only say which statistics and which formula. Layouts are
channel-last: ``x[..., C]`` seen as ``[N, R, C]`` (`group_layout`),
with narrow rows packed side by side (`packed_layout`).

Kernel calls on large inputs run as a fixed split of row chunks on the
calling thread and the region pool's helpers (`yscv.compute.regions`,
grains below); chunk results are merged in chunk order, so values are the
same bits with one thread or several. docs/ops/norm.md has the measurements
behind the grains, the packing width and the partial-sum padding.

Two size tiers, decided by `row_chunks` alone: a call whose every
phase is one chunk (fewer than two grains of work: the normalisations of
small networks, such as the README's CNN) calls the row kernels of
yscv/kernels/norm.py and yscv/kernels/layer_norm.py directly, with the
merges and per-lane coefficients between the phases done in NumPy on the
tiny ``[N, C]`` statistics (the same float64 operations in the same order
as the region kernels' single-chunk path, so both tiers give the same
bits); larger calls run the region kernels of yscv/kernels/norm_regions.py.
The small tier never compiles the two-phase region kernels and their
synchronisation (about 2 s of first-call compile time; docs/engine.md,
"Cold start"). The normalisation pass alone (`group_normalize`) runs
its one-phase region kernel at every size (one chunk: on the caller alone):
the row kernel is inlined there, so one kernel compiles, not two.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..kernels import lazy
from . import regions as par
from .arrays import readonly

KR = lazy("norm_regions")
KN = lazy("norm")
KL = lazy("layer_norm")

# Work (elements of x) per chunk when a kernel call is split over threads: a
# call of ``work`` elements runs as ``min(4, work // grain)`` chunks, so from
# two grains on it uses two cores. Handing chunks to a helper thread has a
# fixed cost per call, so the grains sit where the split measured a clear
# gain (float32, op-level forward / backward, 2 cores).
GRAIN_LN_FORWARD = 1 << 18   # layer_norm_forward
GRAIN_LN_BACKWARD = 1 << 18  # layer_norm_backward
GRAIN_STATS = 1 << 19        # group_stats
GRAIN_APPLY = 1 << 19        # group_apply, group_grad_apply
GRAIN_GRAD_SUMS = 1 << 19    # group_grad_sums

#: grouped kernels: rows of a narrow tensor are packed side by side into
#: rows of up to this many values, so each inner loop is long enough to
#: vectorise (wider packed rows measured slower inside a training step)
PACK_WIDTH = 64

#: Padding (float64 elements) of each layer-norm partial-sum row: rows a
#: multiple of 4 KB apart (c = 512 exactly) alias in the cache between the
#: two threads' accumulators; 64 doubles off the 4 KB grid they do not.
PART_PAD = 64


# ------------------------------------------------------------- layouts
def group_layout(shape: tuple, per_sample: bool) -> tuple:
    """``(N, R, C)`` view of a channel-last shape: ``N`` samples (1 when the
    statistics pool the batch), ``R`` rows each, ``C`` channels."""
    C = shape[-1]
    if per_sample:
        return shape[0], math.prod(shape[1:-1]), C
    return 1, math.prod(shape[:-1]), C


@functools.lru_cache(maxsize=512)
def packed_layout(shape: tuple, per_sample: bool) -> tuple:
    """``(N, R // P, P * C)``: `group_layout` with ``P`` consecutive
    rows side by side (lane ``j`` of a packed row holds channel ``j % C``);
    ``P`` is the largest divisor of ``R`` with ``P * C <= max(C, PACK_WIDTH)``."""
    n, r, c = group_layout(shape, per_sample)
    p = max(1, PACK_WIDTH // c)
    while r % p:
        p -= 1
    return n, r // p, p * c


def as_rows3(a: np.ndarray, layout: tuple) -> np.ndarray:
    """``a`` as a read-only C-contiguous ``[N, R, C]`` array (a view when
    ``a`` is already contiguous)."""
    return readonly(np.ascontiguousarray(a).reshape(layout))


def expand_groups(a: np.ndarray, k: int) -> np.ndarray:
    """``[N, G]`` per-group values as ``[N, G*k]`` per-channel values."""
    return a if k == 1 else np.repeat(a, k, axis=1)


def per_lane(a: np.ndarray, width: int) -> np.ndarray:
    """``[..., C]`` per-channel values repeated over ``width`` lanes (a
    multiple of C): ``[..., width]``, lane ``j`` holding channel ``j % C``."""
    c = a.shape[-1]
    if width == c:
        return a
    out = np.empty(a.shape[:-1] + (width // c, c), a.dtype)
    out[...] = a[..., None, :]
    return out.reshape(a.shape[:-1] + (width,))


def lane_coefficients(dtype, width: int, mean_c, rest) -> np.ndarray:
    """``[N, 2 + len(rest), width]`` coefficients of the grouped elementwise
    kernels in ``dtype``: the float64 per-channel mean ``[N, C]`` split as
    ``hi``, ``lo`` (see kernels/norm.py), then each of ``rest`` (``[N, C]``,
    ``[C]`` or a scalar), repeated over the ``width`` lanes of a packed row
    (lane j is channel j % C). Writeable, as the coefficients the training
    forward's region computes in place: one compiled ``group_apply`` serves
    both (a read-only array would compile a second variant)."""
    n, c = mean_c.shape
    coef = np.empty((n, len(rest) + 2, c), dtype)
    coef[:, 0] = mean_c                    # rounded: mean_hi
    coef[:, 1] = mean_c - coef[:, 0]       # float64 remainder, rounded: mean_lo
    for j, a in enumerate(rest):
        coef[:, 2 + j] = a
    return per_lane(coef, width)


def row_chunks(rows: int, work: int, grain: int) -> list:
    """The fixed split of ``rows`` rows holding ``work`` elements (see
    `yscv.compute.regions`); one chunk (below two grains) takes the
    small tier (the row kernels called directly)."""
    if work < 2 * grain:
        return [(0, rows)]
    return par.split(rows, par.num_chunks(rows, work, grain))


def _one_chunk(*splits) -> bool:
    """The small tier: every phase's split is a single chunk."""
    return all(len(r) == 1 for r in splits)


def _merged_stats(parts, values: int):
    """float64 ``(mean, var)`` of a single chunk's ``(mean, M2)`` partials
    ``parts[1, 2, N, G]`` holding ``values`` values per group: what
    ``merge_stats`` (yscv/kernels/norm_regions.py) gives for one chunk (nan
    for no values)."""
    mean = parts[0, 0].copy()
    if values == 0:
        return mean, np.full_like(mean, np.nan)
    return mean, parts[0, 1] / float(values)


def _grad_coefficients(sums, mean, var, eps, gamma64, k: int, m: float, dtype, width: int):
    """``coef[N, 5, width]`` of ``group_grad_apply`` from one chunk's
    ``sums[2, N, C]``: NumPy with the float64 operations, in the order, of
    ``grad_coefficients`` (yscv/kernels/norm_regions.py; group sums added
    channel by channel from 0.0, as ``cumsum`` does)."""
    n, c = sums.shape[1:]
    inv = 1.0 / np.sqrt(var + eps)                                 # [N, G]
    h = sums * gamma64                                             # [2, N, C]
    grp = (h if k == 1 else np.cumsum(h.reshape(2, n, c // k, k), axis=3)[..., -1]) + 0.0
    q = -(inv * inv * inv) * grp[1] / m
    s = -inv * grp[0] / m
    p = gamma64 * expand_groups(inv, k)
    return lane_coefficients(dtype, width, expand_groups(mean, k),
                             (p, expand_groups(q, k), expand_groups(s, k)))


# ------------------------------------------------------------- grouped forwards
def group_normalize(x, gamma, beta, mean, var, eps: float, per_sample: bool, k: int):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` with ``[N, G]`` float64 stats."""
    layout = packed_layout(x.shape, per_sample)
    inv = expand_groups(1.0 / np.sqrt(var + eps), k)
    scale = inv if gamma is None else inv * gamma
    mean_c = expand_groups(mean, k)
    coef = lane_coefficients(x.dtype, layout[2], mean_c,
                             (scale, 0.0 if beta is None else beta))
    x3 = as_rows3(x, layout)
    y = np.empty(layout, x.dtype)
    # every size runs the region kernel (one chunk: on the caller alone), so
    # the normalisation compiles one kernel, not a row kernel and a region one
    ranges = row_chunks(layout[1], x.size, GRAIN_APPLY)
    b = par.bounds(ranges)
    if _one_chunk(ranges):
        KR.group_apply_region(x3, coef, y, b, par.new_state())
        return y.reshape(x.shape)
    par.run_region(lambda st: KR.group_apply_region(x3, coef, y, b, st), len(ranges))
    return y.reshape(x.shape)


def group_train_forward(x, gamma, beta, eps: float, per_sample: bool, k: int):
    """``(y, (mean[N, G], var[N, G]))``: batch statistics (float64, biased
    variance) and the normalisation of ``x`` with them, in one two-phase
    region (yscv/kernels/norm_regions.py)."""
    c = x.shape[-1]
    layout = packed_layout(x.shape, per_sample)
    n, r, w = layout
    dt = x.dtype
    x3 = as_rows3(x, layout)
    r1 = row_chunks(r, x.size, GRAIN_STATS)
    r2 = row_chunks(r, x.size, GRAIN_APPLY)
    parts = np.empty((len(r1), 2, n, c // k))
    if _one_chunk(r1, r2):                      # small tier: statistics, then normalise
        KN.group_stats(x3, c, k, 0, r, parts, 0, np.empty((3, w)))
        mean, var = _merged_stats(parts, r * (w // c) * k)
        return group_normalize(x, gamma, beta, mean, var, eps, per_sample, k), (mean, var)
    b1, b2 = par.bounds(r1), par.bounds(r2)
    mean = np.empty((n, c // k))
    var = np.empty((n, c // k))
    coef = np.empty((n, 4, w), dt)
    y = np.empty(layout, dt)
    gamma = readonly(np.empty(0, dt) if gamma is None else gamma)
    beta = readonly(np.empty(0, dt) if beta is None else beta)
    par.run_region(lambda st: KR.group_forward_region(x3, c, k, eps, gamma, beta, parts, mean,
                                                      var, coef, y, b1, b2, st),
                   max(len(r1), len(r2)))
    return y.reshape(x.shape), (mean, var)


def group_statistics(x, per_sample: bool, k: int):
    """float64 ``(mean[N, G], var[N, G])`` of ``x`` (biased variance): row
    chunks summed separately (possibly on several threads) and merged in
    chunk order with Chan's update (yscv/kernels/norm_regions.py)."""
    c = x.shape[-1]
    layout = packed_layout(x.shape, per_sample)
    n, r, w = layout
    x3 = as_rows3(x, layout)
    ranges = row_chunks(r, x.size, GRAIN_STATS)
    parts = np.empty((len(ranges), 2, n, c // k))       # per chunk: mean, M2
    if _one_chunk(ranges):
        KN.group_stats(x3, c, k, 0, r, parts, 0, np.empty((3, w)))
        return _merged_stats(parts, r * (w // c) * k)
    b = par.bounds(ranges)
    par.run_region(lambda st: KR.group_stats_region(x3, c, k, parts, b, st), len(ranges))
    mean = np.empty((n, c // k))
    var = np.empty((n, c // k))
    KR.merge_stats(parts, b, (w // c) * k, mean, var)
    return mean, var


# ------------------------------------------------------------- grouped backward
def group_backward(g, x, gamma, mean, var, eps, per_sample, k, batch_stats,
                   need_x, need_gamma, need_beta):
    """(dx, dgamma, dbeta) of the grouped-column normalisations (batch,
    instance, group norm); float64 dgamma/dbeta, dx in x's dtype."""
    layout = group_layout(x.shape, per_sample)
    n, r, c = layout
    dt = x.dtype
    inv = 1.0 / np.sqrt(var + eps)                       # [N, G]
    inv_c = expand_groups(inv, k)                        # [N, C]
    gamma64 = np.ones(c) if gamma is None else gamma.astype(np.float64)
    dx = dgamma = dbeta = None
    if not (need_x or need_gamma or need_beta):
        return dx, dgamma, dbeta
    if not batch_stats:
        if need_x:
            dx = g * (gamma64 * inv_c[0]).astype(dt)
        if not (need_gamma or need_beta):
            return dx, None, None
    layout = packed_layout(x.shape, per_sample)
    w = layout[2]
    g3 = as_rows3(g, layout)
    x3 = as_rows3(x, layout)
    mean_c = expand_groups(mean, k)
    mean_w = readonly(per_lane(mean_c, w))
    rows = layout[1]
    r1 = row_chunks(rows, x.size, GRAIN_GRAD_SUMS)
    b1 = par.bounds(r1)
    parts = np.empty((len(r1), 2, n, c))        # per chunk: sum g, sum g (x - mean)
    r2 = row_chunks(rows, x.size, GRAIN_APPLY)
    if _one_chunk(r1, r2):                      # small tier: the row kernels directly
        KN.group_grad_sums(g3, x3, mean_w, c, 0, rows, parts, 0, np.empty((2, w)))
        sg, sgx = parts[0]
        if need_x and batch_stats:
            coef = _grad_coefficients(parts[0], mean, var, eps, gamma64, k, float(r * k), dt, w)
            dx = np.empty(layout, dt)
            KN.group_grad_apply(g3, x3, coef, dx, 0, rows)
            dx = dx.reshape(x.shape)
    elif need_x and batch_stats:                # sums, coefficients and dx in one region
        b2 = par.bounds(r2)
        sums = np.empty((2, n, c))
        coef = np.empty((n, 5, w), dt)
        dx = np.empty(layout, dt)
        m = float(r * k)
        mean_r, var_r, gamma_r = readonly(mean), readonly(var), readonly(gamma64)
        par.run_region(lambda st: KR.group_backward_region(
            g3, x3, mean_w, mean_r, var_r, eps, gamma_r, c, k, m, parts, sums, coef, dx,
            b1, b2, st), max(len(r1), len(r2)))
        dx = dx.reshape(x.shape)
        sg, sgx = sums
    else:                                       # the affine gradients only
        par.run_region(lambda st: KR.group_grad_sums_region(g3, x3, mean_w, c, parts, b1, st),
                       len(r1))
        sg, sgx = par.combine(parts)
    if need_gamma:
        dgamma = (sgx * inv_c).sum(axis=0)
    if need_beta:
        dbeta = sg.sum(axis=0)
    return dx, dgamma, dbeta


# ------------------------------------------------------------- layer norm
def layer_norm_forward(x, gamma, beta, eps: float):
    """``(y, (mean[M], var[M]))`` over the last axis of ``x`` ([M, C] rows);
    gamma/beta [C] or None."""
    c = x.shape[-1]
    dt = x.dtype
    gamma = np.ones(c, dt) if gamma is None else gamma
    beta = np.zeros(c, dt) if beta is None else beta
    x2 = readonly(np.ascontiguousarray(x).reshape(-1, c))
    gamma, beta = readonly(gamma), readonly(beta)
    m = x2.shape[0]
    y = np.empty((m, c), dt)
    mean = np.empty(m)
    var = np.empty(m)
    ranges = row_chunks(m, x2.size, GRAIN_LN_FORWARD)
    if _one_chunk(ranges):
        KL.layer_norm_forward(x2, gamma, beta, eps, y, mean, var, 0, m)
        return y.reshape(x.shape), (mean, var)
    b = par.bounds(ranges)
    par.run_region(lambda st: KR.layer_norm_forward_region(x2, gamma, beta, eps, y, mean, var,
                                                           b, st), len(ranges))
    return y.reshape(x.shape), (mean, var)


def layer_norm_backward(g, x, gamma, mean, var, eps, need_x, need_gamma, need_beta):
    """(dx or None, dgamma or None, dbeta or None) of `layer_norm_forward`;
    float64 dgamma/dbeta, dx in x's dtype. gamma [C] or None."""
    c = x.shape[-1]
    dt = x.dtype
    need_affine = need_gamma or need_beta
    if gamma is None:
        gamma = np.ones(c, dt)
    inv = readonly(1.0 / np.sqrt(var + eps))
    g2 = readonly(np.ascontiguousarray(g).reshape(-1, c))
    x2 = readonly(np.ascontiguousarray(x).reshape(-1, c))
    m = x2.shape[0]
    mean = readonly(mean)
    gamma = readonly(gamma)
    gamma64 = gamma if dt == np.float64 else readonly(gamma.astype(np.float64))
    dx = np.empty((m, c) if need_x else (0, c), dt)
    ranges = row_chunks(m, x2.size, GRAIN_LN_BACKWARD)
    k = len(ranges)
    # the chunks' float64 partial sums, one block, every row PART_PAD
    # doubles longer than c (the kernel fills and reads the first c)
    parts = np.empty((2 * k, c + PART_PAD))
    dg_parts, db_parts = parts[:k], parts[k:]
    if _one_chunk(ranges):
        KL.layer_norm_backward(g2, x2, mean, inv, gamma, gamma64, dx, dg_parts, db_parts, 0,
                               0, m, bool(need_x), bool(need_affine))
    else:
        b = par.bounds(ranges)
        par.run_region(lambda st: KR.layer_norm_backward_region(
            g2, x2, mean, inv, gamma, gamma64, dx, dg_parts, db_parts, bool(need_x),
            bool(need_affine), b, st), len(ranges))
    dgamma = par.combine(dg_parts[:, :c]) if need_gamma else None
    dbeta = par.combine(db_parts[:, :c]) if need_beta else None
    return (dx.reshape(x.shape) if need_x else None), dgamma, dbeta
