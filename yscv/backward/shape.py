"""Shape ops (backward). Each is a reshape, a flip, a slice, a slice
assignment into zeros, or a sum over the copies the forward made; no Python
loop over elements. Gradients may be views of ``g`` (the walk never writes
into a gradient in place). Attributes are the records of
`yscv.compute.shape`."""
from __future__ import annotations

import numpy as np

from ..compute.shape import (CatAttrs, DiagonalAttrs, FlipAttrs, IndexAttrs, InterpolateAttrs,
                             PadAttrs, PixelShuffleAttrs, RepeatAttrs, RollAttrs, StackAttrs,
                             UpsampleAttrs, WindowAttrs, diagonal_positions, diagonal_scatter,
                             fold, interp_along_adjoint, pad_interior, pixel_unshuffle, unfold)
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


@register_backward(Op.TRIL)
def tril_backward(g, inputs, out, k, saved, needs):
    return (np.tril(g, k),)


@register_backward(Op.TRIU)
def triu_backward(g, inputs, out, k, saved, needs):
    return (np.triu(g, k),)


def _unroll(attrs: RollAttrs) -> RollAttrs:
    return RollAttrs(tuple(-s for s in attrs.shifts), attrs.axes)


@register_backward(Op.ROLL)
def roll_backward(g, inputs, out, attrs: RollAttrs, saved, needs):
    back = _unroll(attrs)
    if back.axes is None:
        return (np.roll(g.reshape(-1), back.shifts[0]).reshape(g.shape),)
    return (np.roll(g, back.shifts, back.axes),)


@register_backward(Op.DIAGONAL)
def diagonal_backward(g, inputs, out, attrs: DiagonalAttrs, saved, needs):
    return (diagonal_scatter(g, inputs[0].shape, attrs),)


@register_backward(Op.OUTER)
def outer_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    return (g @ b if needs[0] else None), (a @ g if needs[1] else None)


@register_backward(Op.UNFOLD)
def unfold_backward(g, inputs, out, attrs: WindowAttrs, saved, needs):
    return (fold(g, attrs),)


@register_backward(Op.FOLD)
def fold_backward(g, inputs, out, attrs: WindowAttrs, saved, needs):
    return (unfold(g, attrs),)


@register_backward(Op.INTERPOLATE)
def interpolate_backward(g, inputs, out, attrs: InterpolateAttrs, saved, needs):
    _, h, w, _ = inputs[0].shape
    ah, aw = attrs.axes
    return (interp_along_adjoint(interp_along_adjoint(g, 2, aw, w), 1, ah, h),)


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
    """pixel_unshuffle of g: [N, ``H*r``, ``W*r``, C] -> [N, H, r, W, r, C] ->
    [N, H, W, C, r, r] -> [N, H, W, ``C*r*r``]."""
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


@register_recorded(Op.TRIL)
def tril_recorded(G, gy, xs, y, k, saved, needs):
    return (G.tril(gy, k),)


@register_recorded(Op.TRIU)
def triu_recorded(G, gy, xs, y, k, saved, needs):
    return (G.triu(gy, k),)


@register_recorded(Op.ROLL)
def roll_recorded(G, gy, xs, y, attrs: RollAttrs, saved, needs):
    back = _unroll(attrs)
    return (G.roll(gy, back.shifts if back.axes is not None else back.shifts[0], back.axes),)


@register_recorded(Op.DIAGONAL)
def diagonal_recorded(G, gy, xs, y, attrs: DiagonalAttrs, saved, needs):
    """g scatter-added into the flattened (axis1, axis2) plane of zeros, which
    is then reshaped and transposed back to x's layout."""
    shape = xs[0].shape
    a1, a2 = attrs.axis1, attrs.axis2
    n1, n2 = shape[a1], shape[a2]
    rest = [k for k in range(len(shape)) if k not in (a1, a2)]
    rest_shape = tuple(shape[k] for k in rest)
    i, j = diagonal_positions(n1, n2, attrs.offset)
    index = np.broadcast_to(i * n2 + j, rest_shape + (i.size,))
    plane = G.scatter_add(np.zeros(rest_shape + (n1 * n2,), dtype=G.dtype), len(rest), index, gy)
    plane = G.reshape(plane, rest_shape + (n1, n2))
    return (G.transpose(plane, tuple(int(p) for p in np.argsort(rest + [a1, a2]))),)


@register_recorded(Op.OUTER)
def outer_recorded(G, gy, xs, y, attrs, saved, needs):
    a, b = xs
    return (G.matmul(gy, b) if needs[0] else None), (G.matmul(a, gy) if needs[1] else None)


@register_recorded(Op.UNFOLD)
def unfold_recorded(G, gy, xs, y, attrs: WindowAttrs, saved, needs):
    return (G.fold(gy, attrs.size, attrs.kernel, attrs.dilation, attrs.padding, attrs.stride),)


@register_recorded(Op.FOLD)
def fold_recorded(G, gy, xs, y, attrs: WindowAttrs, saved, needs):
    return (G.unfold(gy, attrs.kernel, attrs.dilation, attrs.padding, attrs.stride),)


def _interp_adjoint_recorded(G, g, axis: int, ax, n_in: int):
    """The adjoint of one interpolated axis in graph ops: the weighted
    gradient rows scatter-added onto ``n_in`` rows."""
    shape = g.shape
    zeros = np.zeros(shape[:axis] + (n_in,) + shape[axis + 1:], dtype=G.dtype)
    tail = (1,) * (len(shape) - axis - 1)
    total = zeros
    for idx, w in ((ax.i0, ax.w0), (ax.i1, ax.w1)):
        if idx is None:
            continue
        part = g if w is None else G.mul(g, w.reshape((-1,) + tail).astype(G.dtype))
        index = np.broadcast_to(idx.reshape((-1,) + tail), shape)
        total = G.scatter_add(total, axis, index, part)
    return total


@register_recorded(Op.INTERPOLATE)
def interpolate_recorded(G, gy, xs, y, attrs: InterpolateAttrs, saved, needs):
    _, h, w, _ = xs[0].shape
    ah, aw = attrs.axes
    gw = _interp_adjoint_recorded(G, gy, 2, aw, w)
    return (_interp_adjoint_recorded(G, gw, 1, ah, h),)
