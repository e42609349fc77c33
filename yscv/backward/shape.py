"""Shape ops (backward). Each is a reshape, a flip, a slice, a slice
assignment into zeros, or a sum over the copies the forward made; no Python
loop over elements. Gradients may be views of ``g`` (the walk never writes
into a gradient in place). Attributes are the records of
:mod:`yscv.compute.shape`."""
from __future__ import annotations

import numpy as np

from ..compute.shape import (CatAttrs, FlipAttrs, IndexAttrs, PadAttrs, PixelShuffleAttrs,
                             RepeatAttrs, StackAttrs, UpsampleAttrs, pad_interior,
                             pixel_unshuffle)
from ..node import Op
from ..registry import register_backward, register_recorded


@register_backward(Op.RESHAPE)
@register_backward(Op.FLATTEN)
@register_backward(Op.UNSQUEEZE)
@register_backward(Op.SQUEEZE)
def reshape_backward(g, inputs, out, attrs, saved, needs):
    return (g.reshape(inputs[0].shape),)


@register_backward(Op.EXPAND)
def expand_backward(g, inputs, out, attrs, saved, needs):
    # the walk sums a broadcast gradient back to the input's shape
    return (g,)


@register_backward(Op.CAT)
def cat_backward(g, inputs, out, attrs: CatAttrs, saved, needs):
    parts = np.split(g, attrs.offsets, axis=attrs.axis)
    return tuple(p if need else None for p, need in zip(parts, needs))


@register_backward(Op.STACK)
def stack_backward(g, inputs, out, attrs: StackAttrs, saved, needs):
    lead = (slice(None),) * attrs.axis
    return tuple(g[lead + (k, Ellipsis)] if need else None for k, need in enumerate(needs))


@register_backward(Op.SELECT)
@register_backward(Op.NARROW)
@register_backward(Op.GETITEM)
def index_view_backward(g, inputs, out, attrs: IndexAttrs, saved, needs):
    gx = np.zeros(inputs[0].shape, dtype=g.dtype)
    gx[attrs.key] = g
    return (gx,)


@register_backward(Op.FLIP)
def flip_backward(g, inputs, out, attrs: FlipAttrs, saved, needs):
    return (np.flip(g, attrs.axes),)


@register_backward(Op.PAD)
def pad_backward(g, inputs, out, attrs: PadAttrs, saved, needs):
    return (g[pad_interior(attrs.widths, inputs[0].shape)],)


@register_backward(Op.REPEAT)
def repeat_backward(g, inputs, out, attrs: RepeatAttrs, saved, needs):
    reps = attrs.reps
    shape = inputs[0].shape
    full = (1,) * (len(reps) - len(shape)) + shape
    # output axis k of size reps[k]*full[k] splits into (copy, position) pairs
    split = tuple(v for r, s in zip(reps, full) for v in (r, s))
    gx = g.reshape(split).sum(axis=tuple(range(0, 2 * len(reps), 2)))
    return (gx.reshape(shape),)


@register_backward(Op.PIXEL_SHUFFLE)
def pixel_shuffle_backward(g, inputs, out, attrs: PixelShuffleAttrs, saved, needs):
    return (pixel_unshuffle(g, attrs.r),)


@register_backward(Op.UPSAMPLE_NEAREST)
def upsample_nearest_backward(g, inputs, out, attrs: UpsampleAttrs, saved, needs):
    n, *spatial, c = inputs[0].shape
    split = [n]
    for s, r in zip(spatial, attrs.scales):
        split += [s, r]
    gx = g.reshape(split + [c]).sum(axis=tuple(range(2, 2 * len(spatial) + 1, 2)))
    return (gx,)


# --------------------------------------------------------------- recorded
@register_recorded(Op.RESHAPE)
@register_recorded(Op.FLATTEN)
@register_recorded(Op.UNSQUEEZE)
@register_recorded(Op.SQUEEZE)
def reshape_recorded(G, gy, xs, y, attrs, saved, needs):
    return (G.reshape(gy, xs[0].shape),)


@register_recorded(Op.EXPAND)
def expand_recorded(G, gy, xs, y, attrs, saved, needs):
    return (gy,)  # the walk sums the broadcast axes


@register_recorded(Op.CAT)
def cat_recorded(G, gy, xs, y, attrs: CatAttrs, saved, needs):
    """Each input's slab of the gradient along the axis."""
    starts = (0,) + tuple(attrs.offsets)
    return tuple(G.narrow(gy, attrs.axis, start, x.shape[attrs.axis]) if need else None
                 for x, start, need in zip(xs, starts, needs))


@register_recorded(Op.STACK)
def stack_recorded(G, gy, xs, y, attrs: StackAttrs, saved, needs):
    return tuple(G.select(gy, attrs.axis, k) if need else None for k, need in enumerate(needs))


@register_recorded(Op.SELECT)
@register_recorded(Op.NARROW)
@register_recorded(Op.GETITEM)
def index_view_recorded(G, gy, xs, y, attrs: IndexAttrs, saved, needs):
    """zeros of x's shape with ``gx[key] = g``: g scatter-added into the flat
    positions ``key`` picks (distinct positions, so the adds are writes)."""
    shape = xs[0].shape
    size = int(np.prod(shape))
    positions = np.arange(size, dtype=np.int64).reshape(shape)[attrs.key]
    flat = G.scatter_add(np.zeros(size, dtype=G.dtype), 0, np.ravel(positions),
                         G.reshape(gy, (-1,)))
    return (G.reshape(flat, shape),)


@register_recorded(Op.FLIP)
def flip_recorded(G, gy, xs, y, attrs: FlipAttrs, saved, needs):
    return (G.flip(gy, attrs.axes),)


@register_recorded(Op.PAD)
def pad_recorded(G, gy, xs, y, attrs: PadAttrs, saved, needs):
    return (G.getitem(gy, pad_interior(attrs.widths, xs[0].shape)),)


@register_recorded(Op.REPEAT)
def repeat_recorded(G, gy, xs, y, attrs: RepeatAttrs, saved, needs):
    """The array rule: each output axis split into (copy, position), summed over the copies."""
    reps = attrs.reps
    shape = xs[0].shape
    full = (1,) * (len(reps) - len(shape)) + shape
    split = tuple(v for r, s in zip(reps, full) for v in (r, s))
    gx = G.sum(G.reshape(gy, split), axis=tuple(range(0, 2 * len(reps), 2)))
    return (G.reshape(gx, shape),)


@register_recorded(Op.PIXEL_SHUFFLE)
def pixel_shuffle_recorded(G, gy, xs, y, attrs: PixelShuffleAttrs, saved, needs):
    """pixel_unshuffle of g: [N, H*r, W*r, C] -> [N, H, r, W, r, C] ->
    [N, H, W, C, r, r] -> [N, H, W, C*r*r]."""
    n, h, w, crr = xs[0].shape
    r = attrs.r
    g6 = G.reshape(gy, (n, h, r, w, r, crr // (r * r)))
    return (G.reshape(G.transpose(g6, (0, 1, 3, 5, 2, 4)), (n, h, w, crr)),)


@register_recorded(Op.UPSAMPLE_NEAREST)
def upsample_nearest_recorded(G, gy, xs, y, attrs: UpsampleAttrs, saved, needs):
    """The array rule: g summed over each input pixel's copies."""
    n, *spatial, c = xs[0].shape
    split = [n]
    for s, r in zip(spatial, attrs.scales):
        split += [s, r]
    g = G.reshape(gy, tuple(split) + (c,))
    return (G.sum(g, axis=tuple(range(2, 2 * len(spatial) + 1, 2))),)
