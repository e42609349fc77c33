"""Pooling ops (backward), NHWC.

Max pools scatter ``g`` to the argmax positions saved by the forward (one
int32 flat index ``ih*W + iw`` per output element and channel); average pools
spread ``g / divisor`` over each window, recomputing the bins from the
attributes and the input shape (nothing is saved for them).
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from ..node import Op
from ..ops.pool import adaptive_plan, window_plan
from ..registry import register_backward

K = lazy("pool")


def _max_scatter(g, inputs, saved, needs):
    if not needs[0]:
        return (None,)
    n, h, w, c = inputs[0].shape
    p = g.shape[1] * g.shape[2]
    gx = np.zeros((n, h * w, c), dtype=g.dtype)
    K.max_pool_backward(np.ascontiguousarray(g).reshape(n, p, c), saved.reshape(n, p, c), gx)
    return (gx.reshape(n, h, w, c),)


def _avg_scatter(g, x, plan):
    hs, he, ws, we, div = plan
    gx = np.zeros(x.shape, dtype=g.dtype)
    K.window_scatter_add(np.ascontiguousarray(g / div), hs, he, ws, we, gx)
    return (gx,)


@register_backward(Op.MAX_POOL2D)
def max_pool2d_backward(g, inputs, out, attrs, saved, needs):
    return _max_scatter(g, inputs, saved, needs)


@register_backward(Op.ADAPTIVE_MAX_POOL2D)
def adaptive_max_pool2d_backward(g, inputs, out, attrs, saved, needs):
    return _max_scatter(g, inputs, saved, needs)


@register_backward(Op.AVG_POOL2D)
def avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    _, h, w, _ = inputs[0].shape
    return _avg_scatter(g, inputs[0], window_plan(h, w, *attrs, g.dtype))


@register_backward(Op.ADAPTIVE_AVG_POOL2D)
def adaptive_avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    _, h, w, _ = inputs[0].shape
    return _avg_scatter(g, inputs[0], adaptive_plan(h, w, *attrs, g.dtype))


@register_backward(Op.GLOBAL_AVG_POOL2D)
def global_avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    x = inputs[0]
    _, h, w, _ = x.shape
    gx = np.empty(x.shape, dtype=g.dtype)
    gx[...] = (g / (h * w))[:, None, None, :]
    return (gx,)
