"""Normalization ops (backward). See yscv/registry.py for the op contract.

Saved data is the float64 ``(mean, var)`` the forward normalised with; the
kernels recompute ``x - mean`` from the input value instead of keeping the
normalised activations. For statistics groups of ``m`` elements with
``xhat = (x - mean) * inv``, ``inv = 1 / sqrt(var + eps)`` and upstream ``g``:

* ``dbeta_c = sum g``, ``dgamma_c = sum g * xhat`` (over everything but c);
* batch statistics: ``dx = inv * (h - mean_group(h) - xhat * mean_group(h * xhat))``
  with ``h = g * gamma_c``;
* fixed statistics (batch norm in eval mode): ``dx = gamma_c * inv * g``.

Running statistics (the last two batch-norm inputs, when tracked) never
receive a gradient. Large calls run as row chunks on two threads (see
yscv/ops/norm.py); the per-chunk column sums are added in chunk order.
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from ..node import Op
from ..compute import regions as par
from ..ops import norm as fwd
from ..ops.norm import (as_rows3, expand_groups, group_layout,
                        packed_layout, per_lane, readonly, row_chunks)
from ..registry import register_backward

KR = lazy("norm_regions")


#: Padding (float64 elements) of each layer-norm partial-sum row. With rows
#: a multiple of 4 KB apart (c = 512 exactly) the two threads' accumulator
#: rows alias in the cache and the two-chunk backward of 4096x512 took
#: 1.2 ms, no faster than one chunk; 64 doubles (512 bytes) off the 4 KB grid
#: it takes 0.72 ms (measured 2026-11-24, Intel Xeon, 2 cores; pads of
#: 64-520 all gave 0.71-0.75 ms, 0 and 8 gave 1.0-1.2 ms).
_PART_PAD = 64


def _affine_grads(grads_x, dgamma, dbeta, has_gamma, has_beta, dtype, extra=0) -> tuple:
    out = [grads_x]
    if has_gamma:
        out.append(None if dgamma is None else dgamma.astype(dtype))
    if has_beta:
        out.append(None if dbeta is None else dbeta.astype(dtype))
    return tuple(out) + (None,) * extra


def _needs(needs, has_gamma, has_beta):
    need_gamma = has_gamma and needs[1]
    need_beta = has_beta and needs[1 + has_gamma]
    return needs[0], need_gamma, need_beta


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
    r1 = row_chunks(layout[1], x.size, fwd.GRAIN_GRAD_SUMS)
    b1 = par.bounds(r1)
    parts = np.empty((len(r1), 2, n, c))        # per chunk: sum g, sum g (x - mean)
    if need_x and batch_stats:                  # sums, coefficients and dx in one region
        r2 = row_chunks(layout[1], x.size, fwd.GRAIN_APPLY)
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


@register_backward(Op.BATCH_NORM)
def batch_norm_backward(g, inputs, out, attrs, saved, needs):
    training, _momentum, eps, has_gamma, has_beta = attrs
    x = inputs[0]
    gamma = inputs[1] if has_gamma else None
    mean, var = saved
    need_x, need_gamma, need_beta = _needs(needs, has_gamma, has_beta)
    dx, dgamma, dbeta = group_backward(g, x, gamma, mean, var, eps, False, 1, training,
                                       need_x, need_gamma, need_beta)
    stats = len(inputs) - 1 - has_gamma - has_beta   # running statistics: no gradient
    return _affine_grads(dx, dgamma, dbeta, has_gamma, has_beta, x.dtype, extra=stats)


@register_backward(Op.INSTANCE_NORM)
def instance_norm_backward(g, inputs, out, attrs, saved, needs):
    eps, has_gamma, has_beta = attrs
    x = inputs[0]
    gamma = inputs[1] if has_gamma else None
    mean, var = saved
    need_x, need_gamma, need_beta = _needs(needs, has_gamma, has_beta)
    dx, dgamma, dbeta = group_backward(g, x, gamma, mean, var, eps, True, 1, True,
                                       need_x, need_gamma, need_beta)
    return _affine_grads(dx, dgamma, dbeta, has_gamma, has_beta, x.dtype)


@register_backward(Op.GROUP_NORM)
def group_norm_backward(g, inputs, out, attrs, saved, needs):
    groups, eps, has_gamma, has_beta = attrs
    x = inputs[0]
    gamma = inputs[1] if has_gamma else None
    mean, var = saved
    need_x, need_gamma, need_beta = _needs(needs, has_gamma, has_beta)
    dx, dgamma, dbeta = group_backward(g, x, gamma, mean, var, eps, True,
                                       x.shape[-1] // groups, True,
                                       need_x, need_gamma, need_beta)
    return _affine_grads(dx, dgamma, dbeta, has_gamma, has_beta, x.dtype)


@register_backward(Op.LAYER_NORM)
def layer_norm_backward(g, inputs, out, attrs, saved, needs):
    eps, has_gamma, has_beta = attrs
    x = inputs[0]
    c = x.shape[-1]
    dt = x.dtype
    gamma = inputs[1] if has_gamma else np.ones(c, dt)
    mean, var = saved
    need_x, need_gamma, need_beta = _needs(needs, has_gamma, has_beta)
    need_affine = need_gamma or need_beta
    if not (need_x or need_affine):
        return _affine_grads(None, None, None, has_gamma, has_beta, dt)
    inv = readonly(1.0 / np.sqrt(var + eps))
    g2 = readonly(np.ascontiguousarray(g).reshape(-1, c))
    x2 = readonly(np.ascontiguousarray(x).reshape(-1, c))
    m = x2.shape[0]
    mean = readonly(mean)
    gamma = readonly(gamma)
    gamma64 = gamma if dt == np.float64 else readonly(gamma.astype(np.float64))
    dx = np.empty((m, c) if need_x else (0, c), dt)
    ranges = row_chunks(m, x2.size, fwd.GRAIN_LN_BACKWARD)
    k = len(ranges)
    # the chunks' float64 partial sums, one block, every row _PART_PAD
    # doubles longer than c (the kernel fills and reads the first c)
    parts = np.empty((2 * k, c + _PART_PAD))
    dg_parts, db_parts = parts[:k], parts[k:]

    b = par.bounds(ranges)
    par.run_region(lambda st: KR.layer_norm_backward_region(
        g2, x2, mean, inv, gamma, gamma64, dx, dg_parts, db_parts, bool(need_x),
        bool(need_affine), b, st), len(ranges))
    dgamma = par.combine(dg_parts[:, :c]) if need_gamma else None
    dbeta = par.combine(db_parts[:, :c]) if need_beta else None
    return _affine_grads(dx.reshape(x.shape) if need_x else None, dgamma, dbeta,
                         has_gamma, has_beta, dt)
