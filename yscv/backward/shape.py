"""Shape ops (backward). Each is a reshape, a flip, a slice, a slice
assignment into zeros, or a sum over the copies the forward made; no Python
loop over elements. Gradients may be views of ``g`` (the walk never writes
into a gradient in place)."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..ops.shape import pad_interior
from ..registry import register_backward


@register_backward(Op.RESHAPE)
@register_backward(Op.FLATTEN)
@register_backward(Op.UNSQUEEZE)
@register_backward(Op.SQUEEZE)
def reshape_backward(g, inputs, out, attrs, saved, needs):
    return (g.reshape(inputs[0].shape),)


@register_backward(Op.EXPAND)
def expand_backward(g, inputs, out, attrs, saved, needs):
    shape = inputs[0].shape
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, s in enumerate(shape) if s == 1 and g.shape[lead + k] != 1)
    if axes:
        g = g.sum(axis=axes)
    return (g.reshape(shape),)


@register_backward(Op.CAT)
def cat_backward(g, inputs, out, attrs, saved, needs):
    axis, offsets = attrs
    parts = np.split(g, offsets, axis=axis)
    return tuple(p if need else None for p, need in zip(parts, needs))


@register_backward(Op.STACK)
def stack_backward(g, inputs, out, axis, saved, needs):
    lead = (slice(None),) * axis
    return tuple(g[lead + (k, Ellipsis)] if need else None for k, need in enumerate(needs))


@register_backward(Op.SELECT)
@register_backward(Op.NARROW)
@register_backward(Op.GETITEM)
def index_view_backward(g, inputs, out, key, saved, needs):
    gx = np.zeros(inputs[0].shape, dtype=g.dtype)
    gx[key] = g
    return (gx,)


@register_backward(Op.FLIP)
def flip_backward(g, inputs, out, axes, saved, needs):
    return (np.flip(g, axes),)


@register_backward(Op.PAD)
def pad_backward(g, inputs, out, attrs, saved, needs):
    widths, _ = attrs
    return (g[pad_interior(widths, inputs[0].shape)],)


@register_backward(Op.REPEAT)
def repeat_backward(g, inputs, out, reps, saved, needs):
    shape = inputs[0].shape
    full = (1,) * (len(reps) - len(shape)) + shape
    # output axis k of size reps[k]*full[k] splits into (copy, position) pairs
    split = tuple(v for r, s in zip(reps, full) for v in (r, s))
    gx = g.reshape(split).sum(axis=tuple(range(0, 2 * len(reps), 2)))
    return (gx.reshape(shape),)


@register_backward(Op.PIXEL_SHUFFLE)
def pixel_shuffle_backward(g, inputs, out, r, saved, needs):
    n, h, w, crr = inputs[0].shape
    c = crr // (r * r)
    # r*r strided copies: ~2x faster than one 6-d transpose copy, whose
    # innermost destination axis (j, length r) reads with stride C
    gx = np.empty((n, h, w, c, r, r), dtype=g.dtype)
    g6 = g.reshape(n, h, r, w, r, c)
    for i in range(r):
        for j in range(r):
            gx[..., i, j] = g6[:, :, i, :, j, :]
    return (gx.reshape(n, h, w, crr),)


@register_backward(Op.UPSAMPLE_NEAREST)
def upsample_nearest_backward(g, inputs, out, scales, saved, needs):
    n, *spatial, c = inputs[0].shape
    split = [n]
    for s, r in zip(spatial, scales):
        split += [s, r]
    gx = g.reshape(split + [c]).sum(axis=tuple(range(2, 2 * len(spatial) + 1, 2)))
    return (gx,)
