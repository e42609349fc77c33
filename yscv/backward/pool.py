"""Pooling ops (backward), NHWC.

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
from ..registry import register_backward


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
    """dx = g / (H*W) at every position."""
    if not needs[0]:
        return (None,)
    x = inputs[0]
    _, h, w, _ = x.shape
    gx = np.empty(x.shape, dtype=g.dtype)
    gx[...] = (g / (h * w))[:, None, None, :]
    return (gx,)
