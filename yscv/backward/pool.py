"""Pooling ops (backward), NHWC (and NLC / NDHWC for the 1-d / 3-d pools).

Max pools: one rule against the namespace ``ns`` (yscv/engine/namespace/__init__.py):
``g`` scattered (``scatter_add`` into zeros) to the argmax positions the
forward saved (one flat spatial index per output element and channel: ``ih*W
+ iw``; ``(id*H + ih)*W + iw`` for max_pool3d), a constant routing
(PyTorch's first maximum), so the recorded derivative gathers. The array
walks run a written-out copy on the pool kernels (`P.max_scatter`: the 2 x 2,
stride-2 windows of a CNN write dx in one pass), held to the rule's bits by
tests/test_rule_flags.py.

Average pools spread ``g / divisor`` over each window, recomputing the bins
(yscv/compute/pool.py) from the attributes (the named records of
yscv/ops/pool.py) and the input shape: nothing is saved. Their array rules
call the scatter kernel; for ``create_graph`` they declare composites (the
forward as bin-matrix products, ``out = A x B^T / divisor`` per (n, c)), so
each recorded gradient is an Op.VJP node with the array rule's bits.
global_avg_pool2d's rule is three ops (``g / (H*W)`` broadcast).
"""
from __future__ import annotations

import math

import numpy as np

from ..compute import pool as P
from ..node import Op
from ..registry import register_composite, register_rule


# --------------------------------------------------------------- max pools
def max_pool_rule(ns, g, inputs, out, attrs, saved, needs):
    """dx [x shape]: g added at the saved argmax (flat spatial positions)."""
    if not needs[0]:
        return (None,)
    shape = inputs[0].shape
    n, c = shape[0], shape[-1]
    size = math.prod(shape[1:-1])
    p = math.prod(g.shape[1:-1])
    index = np.asarray(saved, dtype=np.int64).reshape(n, p, c)
    zeros = ns.const(np.zeros((n, size, c), dtype=ns.value(g).dtype))
    flat = ns.scatter_add(zeros, 1, index, ns.reshape(g, (n, p, c)))
    return (ns.reshape(flat, shape),)


def max_pool2d_array(ns, g, inputs, out, attrs, saved, needs):
    """`max_pool_rule` written out for arrays: 2 x 2 windows with stride 2,
    no padding (the usual pool) write dx in one pass (the rule's bits, but
    for the sign of a zero: a -0.0 cotangent stays -0.0 here, ``0 + -0.0``
    is +0.0 through scatter_add); others scatter-add into zeros (the
    kernel of ``scatter_add``)."""
    if not needs[0]:
        return (None,)
    return (P.max_scatter(g, inputs[0].shape, saved, P.two_by_two(attrs)),)


def max_pool_nd_array(ns, g, inputs, out, attrs, saved, needs):
    """`max_pool_rule` written out for arrays: the scatter kernel on the
    flattened spatial axes."""
    if not needs[0]:
        return (None,)
    shape = inputs[0].shape
    n, c = shape[0], shape[-1]
    p = math.prod(g.shape[1:-1])
    gx = P.max_scatter(g.reshape(n, 1, p, c), (n, 1, math.prod(shape[1:-1]), c),
                       saved.reshape(n, 1, p, c))
    return (gx.reshape(shape),)


register_rule(Op.MAX_POOL2D, array=max_pool2d_array)(max_pool_rule)
for _op in (Op.MAX_POOL1D, Op.MAX_POOL3D, Op.ADAPTIVE_MAX_POOL2D):
    register_rule(_op, array=max_pool_nd_array)(max_pool_rule)


# --------------------------------------------------------------- average pools
def _plan2d(h, w, attrs, dtype):
    return P.window_plan(h, w, *attrs, dtype)


def _adaptive2d(h, w, attrs, dtype):
    return P.adaptive_plan(h, w, *attrs, dtype)


def _avg_array_with(plan_of):
    """The array rule of a 2-d average pool whose bins are ``plan_of(h, w,
    attrs, dtype)`` (1-d pools: the 2-d rule on [N, 1, L, C])."""
    def rule(ns, g, inputs, out, attrs, saved, needs):
        if not needs[0]:
            return (None,)
        shape = inputs[0].shape
        x4 = shape if len(shape) == 4 else (shape[0], 1) + tuple(shape[1:])
        g4 = g if g.ndim == 4 else g.reshape(g.shape[0], 1, *g.shape[1:])
        plan = plan_of(x4[1], x4[2], attrs, g.dtype)
        return (P.avg_scatter(g4, x4, plan).reshape(shape),)
    return rule


register_rule(Op.AVG_POOL2D)(_avg_array_with(_plan2d))
register_rule(Op.ADAPTIVE_AVG_POOL2D)(_avg_array_with(_adaptive2d))
register_rule(Op.AVG_POOL1D)(_avg_array_with(_plan2d))
register_rule(Op.ADAPTIVE_AVG_POOL1D)(_avg_array_with(_adaptive2d))


def _plans3d(shape, attrs, dtype):
    return P.plans3d(shape, attrs.kernel, attrs.stride, attrs.padding,
                     bool(attrs.count_include_pad), dtype)


@register_rule(Op.AVG_POOL3D)
def avg_pool3d_array_rule(ns, g, inputs, out, attrs, saved, needs):
    """The forward's two passes transposed: over D, then over (H, W)."""
    if not needs[0]:
        return (None,)
    n, d, h, w, c = inputs[0].shape
    _, od, oh, ow, _ = g.shape
    hw, depth = _plans3d(inputs[0].shape, attrs, g.dtype)
    g1 = P.avg_scatter(g.reshape(n, od, oh * ow, c), (n, d, oh * ow, c), depth)
    gx = P.avg_scatter(g1.reshape(n * d, oh, ow, c), (n * d, h, w, c), hw)
    return (gx.reshape(n, d, h, w, c),)


def _bin_matrix(starts, ends, size, dtype):
    """[bins, size]: 1 where position ``i`` is in bin ``o``."""
    m = np.zeros((len(starts), size), dtype=dtype)
    for i, (s, e) in enumerate(zip(starts, ends)):
        m[i, s:e] = 1
    return m


def _avg2d_composite_with(plan_of):
    def build(G, x, attrs):
        _, h, w, _ = x.shape
        hs, he, ws, we, div = plan_of(h, w, attrs, G.dtype)
        total = G.einsum("ah,bw,nhwc->nabc", _bin_matrix(hs, he, h, G.dtype),
                         _bin_matrix(ws, we, w, G.dtype), x)
        return G.div(total, np.asarray(div, dtype=G.dtype))
    return build


def _avg1d_composite_with(plan_of):
    def build(G, x, attrs):
        length = x.shape[1]
        _, _, ws, we, div = plan_of(1, length, attrs, G.dtype)
        total = G.einsum("bw,nwc->nbc", _bin_matrix(ws, we, length, G.dtype), x)
        return G.div(total, np.asarray(div[0], dtype=G.dtype))
    return build


def _avg3d_composite(G, x, attrs):
    _, d, h, w, _ = x.shape
    (hs, he, ws, we, div_hw), (ds, de, _, _, div_d) = _plans3d(x.shape, attrs, G.dtype)
    div = div_d[:, 0, 0][:, None, None, None] * div_hw[None]
    total = G.einsum("ad,bh,cw,ndhwk->nabck", _bin_matrix(ds, de, d, G.dtype),
                     _bin_matrix(hs, he, h, G.dtype), _bin_matrix(ws, we, w, G.dtype), x)
    return G.div(total, np.asarray(div, dtype=G.dtype))


register_composite(Op.AVG_POOL2D, _avg2d_composite_with(_plan2d))
register_composite(Op.ADAPTIVE_AVG_POOL2D, _avg2d_composite_with(_adaptive2d))
register_composite(Op.AVG_POOL1D, _avg1d_composite_with(_plan2d))
register_composite(Op.ADAPTIVE_AVG_POOL1D, _avg1d_composite_with(_adaptive2d))
register_composite(Op.AVG_POOL3D, _avg3d_composite)


def global_avg_pool2d_array(ns, g, inputs, out, attrs, saved, needs):
    """`global_avg_pool2d_rule` written out for arrays (one broadcast copy)."""
    if not needs[0]:
        return (None,)
    x = inputs[0]
    n, h, w, c = x.shape
    gx = np.empty(x.shape, dtype=g.dtype)
    gx[...] = (g / float(h * w)).reshape(n, 1, 1, c)
    return (gx,)


@register_rule(Op.GLOBAL_AVG_POOL2D, array=global_avg_pool2d_array)
def global_avg_pool2d_rule(ns, g, inputs, out, attrs, saved, needs):
    """dx = g / ``(H*W)`` at every position."""
    if not needs[0]:
        return (None,)
    n, h, w, c = inputs[0].shape
    share = ns.div(ns.reshape(g, (n, 1, 1, c)), float(h * w))
    return (ns.expand(share, (n, h, w, c)),)
