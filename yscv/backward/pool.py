"""Pooling ops (backward), NHWC (and NLC / NDHWC for the 1-d / 3-d pools).

Max pools scatter ``g`` to the argmax positions saved by the forward (one
int32 flat index ``ih*W + iw`` per output element and channel); average pools
spread ``g / divisor`` over each window, recomputing the bins
(yscv/compute/pool.py) from the attributes (the named records of
yscv/ops/pool.py) and the input shape: nothing is saved for them.
"""
from __future__ import annotations

import numpy as np

from ..compute import pool as P
from ..node import Op
from ..registry import register_backward, register_recorded


@register_backward(Op.MAX_POOL2D)
def max_pool2d_backward(g, inputs, out, attrs, saved, needs):
    """2 x 2 windows with stride 2, no padding (the usual pool) write dx in
    one pass; others scatter-add into zeros."""
    if not needs[0]:
        return (None,)
    return (P.max_scatter(g, inputs[0].shape, saved, P.two_by_two(attrs)),)


@register_backward(Op.ADAPTIVE_MAX_POOL2D)
def adaptive_max_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    return (P.max_scatter(g, inputs[0].shape, saved),)


@register_backward(Op.AVG_POOL2D)
def avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    _, h, w, _ = inputs[0].shape
    plan = P.window_plan(h, w, attrs.kh, attrs.kw, attrs.sh, attrs.sw, attrs.ph, attrs.pw,
                         attrs.count_include_pad, g.dtype)
    return (P.avg_scatter(g, inputs[0].shape, plan),)


@register_backward(Op.ADAPTIVE_AVG_POOL2D)
def adaptive_avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    _, h, w, _ = inputs[0].shape
    plan = P.adaptive_plan(h, w, attrs.oh, attrs.ow, g.dtype)
    return (P.avg_scatter(g, inputs[0].shape, plan),)


@register_backward(Op.GLOBAL_AVG_POOL2D)
def global_avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    """dx = g / ``(H*W)`` at every position."""
    if not needs[0]:
        return (None,)
    x = inputs[0]
    _, h, w, _ = x.shape
    gx = np.empty(x.shape, dtype=g.dtype)
    gx[...] = (g / (h * w))[:, None, None, :]
    return (gx,)


# 1-d pools: the 2-d rules on [N, 1, L, C]
def _on_lifted(rule):
    def lifted(g, inputs, out, attrs, saved, needs):
        if not needs[0]:
            return (None,)
        x = inputs[0]
        x4 = x.reshape(x.shape[0], 1, x.shape[1], x.shape[2])
        g4 = g.reshape(g.shape[0], 1, g.shape[1], g.shape[2])
        s4 = None if saved is None else saved[:, None]
        (gx,) = rule(g4, (x4,), None, attrs, s4, needs)
        return (gx.reshape(x.shape),)
    return lifted


register_backward(Op.MAX_POOL1D)(_on_lifted(max_pool2d_backward))
register_backward(Op.AVG_POOL1D)(_on_lifted(avg_pool2d_backward))
register_backward(Op.ADAPTIVE_AVG_POOL1D)(_on_lifted(adaptive_avg_pool2d_backward))


@register_backward(Op.MAX_POOL3D)
def max_pool3d_backward(g, inputs, out, attrs, saved, needs):
    """g added at the saved flat positions ``(id*H + ih)*W + iw``."""
    if not needs[0]:
        return (None,)
    n, d, h, w, c = inputs[0].shape
    _, od, oh, ow, _ = g.shape
    gx = P.max_scatter(g.reshape(n, od * oh, ow, c), (n, d * h, w, c),
                       saved.reshape(n, od * oh, ow, c))
    return (gx.reshape(n, d, h, w, c),)


@register_backward(Op.AVG_POOL3D)
def avg_pool3d_backward(g, inputs, out, attrs, saved, needs):
    """The forward's two passes transposed: over D, then over (H, W)."""
    if not needs[0]:
        return (None,)
    n, d, h, w, c = inputs[0].shape
    _, od, oh, ow, _ = g.shape
    hw, depth = _plans3d(inputs[0].shape, attrs, g.dtype)
    g1 = P.avg_scatter(g.reshape(n, od, oh * ow, c), (n, d, oh * ow, c), depth)
    gx = P.avg_scatter(g1.reshape(n * d, oh, ow, c), (n * d, h, w, c), hw)
    return (gx.reshape(n, d, h, w, c),)


def _plans3d(shape, attrs, dtype):
    return P.plans3d(shape, attrs.kernel, attrs.stride, attrs.padding,
                     bool(attrs.count_include_pad), dtype)


# --------------------------------------------------------------- recorded
# Max pools: the gradient is scattered to the saved argmax (a constant
# routing, PyTorch's choice of the first maximum), so the recorded rule is a
# scatter_add of gy, whose own derivative gathers. Average pools are
# separable: out = A x B^T per (n, c) with A[oh, h] = 1 inside row bin oh
# (B likewise), divided by the plan's divisor; the recorded rule is the
# transposed product.
def _max_recorded(G, gy, xs, y, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    n, h, w, c = xs[0].shape
    _, oh, ow, _ = y.shape
    index = np.asarray(saved, dtype=np.int64).reshape(n, oh * ow, c)
    zeros = G.constant(np.zeros((n, h * w, c), dtype=G.dtype))
    flat = G.scatter_add(zeros, 1, index, G.reshape(gy, (n, oh * ow, c)))
    return (G.reshape(flat, (n, h, w, c)),)


def _bin_matrix(starts, ends, size, dtype):
    m = np.zeros((len(starts), size), dtype=dtype)
    for i, (s, e) in enumerate(zip(starts, ends)):
        m[i, s:e] = 1
    return m


def _avg_recorded_with(plan_of):
    def rule(G, gy, xs, y, attrs, saved, needs):
        if not needs[0]:
            return (None,)
        _, h, w, _ = xs[0].shape
        hs, he, ws, we, div = plan_of(h, w, attrs, G.dtype)
        a = _bin_matrix(hs, he, h, G.dtype)
        b = _bin_matrix(ws, we, w, G.dtype)
        share = G.div(gy, np.asarray(div, dtype=G.dtype))
        return (G.einsum("ah,bw,nabc->nhwc", a, b, share),)
    return rule


register_recorded(Op.MAX_POOL2D)(_max_recorded)
register_recorded(Op.ADAPTIVE_MAX_POOL2D)(_max_recorded)
register_recorded(Op.AVG_POOL2D)(_avg_recorded_with(
    lambda h, w, at, dt: P.window_plan(h, w, at.kh, at.kw, at.sh, at.sw, at.ph, at.pw,
                                       at.count_include_pad, dt)))
register_recorded(Op.ADAPTIVE_AVG_POOL2D)(_avg_recorded_with(
    lambda h, w, at, dt: P.adaptive_plan(h, w, at.oh, at.ow, dt)))


@register_recorded(Op.GLOBAL_AVG_POOL2D)
def global_avg_pool2d_recorded(G, gy, xs, y, attrs, saved, needs):
    n, h, w, c = xs[0].shape
    share = G.div(G.reshape(gy, (n, 1, 1, c)), float(h * w))
    return (G.expand(share, (n, h, w, c)),)


# 1-d and 3-d pools. Max: a scatter_add of gy into the flattened spatial
# positions of the saved argmax (as the 2-d rule). Average: the transposed
# bin products, one bin matrix per axis, divided by the plan's divisors.
@register_recorded(Op.MAX_POOL1D)
@register_recorded(Op.MAX_POOL3D)
def max_pool_nd_recorded(G, gy, xs, y, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    shape = xs[0].shape
    n, c = shape[0], shape[-1]
    size, out = int(np.prod(shape[1:-1])), int(np.prod(y.shape[1:-1]))
    index = np.asarray(saved, dtype=np.int64).reshape(n, out, c)
    zeros = G.constant(np.zeros((n, size, c), dtype=G.dtype))
    flat = G.scatter_add(zeros, 1, index, G.reshape(gy, (n, out, c)))
    return (G.reshape(flat, shape),)


def _avg1d_recorded_with(plan_of):
    def rule(G, gy, xs, y, attrs, saved, needs):
        if not needs[0]:
            return (None,)
        length = xs[0].shape[1]
        _, _, ws, we, div = plan_of(length, attrs, G.dtype)
        share = G.div(gy, np.asarray(div[0], dtype=G.dtype))
        return (G.einsum("bw,nbc->nwc", _bin_matrix(ws, we, length, G.dtype), share),)
    return rule


register_recorded(Op.AVG_POOL1D)(_avg1d_recorded_with(
    lambda n, at, dt: P.window_plan(1, n, 1, at.kw, 1, at.sw, 0, at.pw,
                                    at.count_include_pad, dt)))
register_recorded(Op.ADAPTIVE_AVG_POOL1D)(_avg1d_recorded_with(
    lambda n, at, dt: P.adaptive_plan(1, n, 1, at.ow, dt)))


@register_recorded(Op.AVG_POOL3D)
def avg_pool3d_recorded(G, gy, xs, y, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    _, d, h, w, _ = xs[0].shape
    (hs, he, ws, we, div_hw), (ds, de, _, _, div_d) = _plans3d(xs[0].shape, attrs, G.dtype)
    oh, ow = len(hs), len(ws)
    div = div_d[:, 0, 0][:, None, None, None] * div_hw[None]
    share = G.div(gy, np.asarray(div, dtype=G.dtype))
    return (G.einsum("ad,bh,cw,nabck->ndhwk", _bin_matrix(ds, de, d, G.dtype),
                     _bin_matrix(hs, he, h, G.dtype), _bin_matrix(ws, we, w, G.dtype),
                     share),)
