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
from ..ops.pool import adaptive_bins, window_bins
from ..registry import register_backward

K = lazy("pool")


def _max_scatter(g, inputs, saved, needs):
    if not needs[0]:
        return (None,)
    _, h, w, _ = inputs[0].shape
    return (K.max_pool_backward(np.ascontiguousarray(g), saved, h, w),)


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
    kh, kw, sh, sw, ph, pw, count_include_pad = attrs
    _, h, w, _ = inputs[0].shape
    hs, he, dh = window_bins(h, kh, sh, ph, count_include_pad, g.dtype)
    ws, we, dw = window_bins(w, kw, sw, pw, count_include_pad, g.dtype)
    return (K.avg_pool_bins_backward(np.ascontiguousarray(g), hs, he, ws, we, dh, dw, h, w),)


@register_backward(Op.ADAPTIVE_AVG_POOL2D)
def adaptive_avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    oh, ow = attrs
    _, h, w, _ = inputs[0].shape
    hs, he, dh = adaptive_bins(h, oh, g.dtype)
    ws, we, dw = adaptive_bins(w, ow, g.dtype)
    return (K.avg_pool_bins_backward(np.ascontiguousarray(g), hs, he, ws, we, dh, dw, h, w),)


@register_backward(Op.GLOBAL_AVG_POOL2D)
def global_avg_pool2d_backward(g, inputs, out, attrs, saved, needs):
    if not needs[0]:
        return (None,)
    x = inputs[0]
    _, h, w, _ = x.shape
    gx = np.empty(x.shape, dtype=g.dtype)
    gx[...] = (g / (h * w))[:, None, None, :]
    return (gx,)
