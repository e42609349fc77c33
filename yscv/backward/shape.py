"""Shape ops (backward): one rule per op against the namespace ``ns``
(yscv/engine/namespace/__init__.py), run on arrays by the first-order walks and on the
graph by ``create_graph=True``. Each gradient is a reshape, a flip, a slice,
g written into zeros (a pad), or a sum over the copies the forward made; no
Python loop over elements. Gradients may be views of ``g`` (the walk never
writes into a gradient in place). Attributes are the records of
`yscv.compute.shape`.

Three rules have a written-out array copy on the per-node hot path, held to
their rule's bits by tests/test_rule_flags.py: select / narrow / getitem and
diagonal (one slice assignment into zeros instead of the rule's reshape, pad
and slice steps; both write every value, so the bits are equal) and
pixel_shuffle (``r*r`` strided copies instead of one transpose copy).
Interpolate's backward is the driver's weighted row sums; its recorded
gradient comes from its composite (the forward in index_select, mul and add).
"""
from __future__ import annotations

import numpy as np

from ..compute.shape import (CatAttrs, DiagonalAttrs, IndexAttrs, InterpolateAttrs,
                             PixelShuffleAttrs, RepeatAttrs, RollAttrs, StackAttrs, UpsampleAttrs,
                             diagonal_scatter, interp_along_adjoint, pad_interior,
                             pixel_unshuffle)
from ..node import Op
from ..registry import register_composite, register_rule
from ._rules import unary

for _op in (Op.RESHAPE, Op.FLATTEN, Op.UNSQUEEZE, Op.SQUEEZE):
    unary(_op, lambda ns, g, x, y, a: ns.reshape(g, x.shape))

# the walk sums a broadcast gradient back to the input's shape
unary(Op.EXPAND, lambda ns, g, x, y, a: g)
unary(Op.FLIP, lambda ns, g, x, y, a: ns.flip(g, a.axes))
unary(Op.PAD, lambda ns, g, x, y, a: ns.getitem(g, pad_interior(a.widths, x.shape)))
unary(Op.TRIL, lambda ns, g, x, y, k: ns.tril(g, k))
unary(Op.TRIU, lambda ns, g, x, y, k: ns.triu(g, k))
unary(Op.UNFOLD, lambda ns, g, x, y, a: ns.fold(g, a.size, a.kernel, a.dilation, a.padding,
                                                 a.stride))
unary(Op.FOLD, lambda ns, g, x, y, a: ns.unfold(g, a.kernel, a.dilation, a.padding, a.stride))


@register_rule(Op.CAT)
def cat_rule(ns, g, inputs, out, attrs: CatAttrs, saved, needs):
    """Each input's slab of the gradient along the axis (views)."""
    a = attrs.axis
    starts = (0,) + attrs.offsets
    return tuple(ns.narrow(g, a, s, x.shape[a]) if need else None
                 for x, s, need in zip(inputs, starts, needs))


@register_rule(Op.STACK)
def stack_rule(ns, g, inputs, out, attrs: StackAttrs, saved, needs):
    return tuple(ns.select(g, attrs.axis, k) if need else None for k, need in enumerate(needs))


# ------------------------------------------------- g written into zeros
def _into_zeros(ns, g, key: tuple, shape: tuple):
    """Zeros of ``shape`` with ``g`` written at the canonical basic ``key``
    (`IndexAttrs`: slices, non-negative ints, None, a trailing Ellipsis):
    the adjoint of ``x[key]``, said in view ops so that it is differentiable
    again. ``g`` is reshaped to one axis per axis of ``x`` (ints as size 1,
    new axes dropped), flipped along negative steps, spread along steps > 1
    (a zero pad after each entry, merged, the tail cut), then padded with
    the leading and trailing zeros. Every value is written, none added: the
    bits are those of ``zeros[key] = g``."""
    aligned, widths, flips, strided = [], [], [], {}
    d = 0
    for k in key:
        if k is Ellipsis:
            break
        if k is None:
            continue
        n = shape[d]
        if type(k) is slice:
            start, stop, step = k.indices(n)
            m = len(range(start, stop, step))
            if m == 0:
                start = span = 0
            else:
                if step < 0:
                    start, step = start + (m - 1) * step, -step
                    if m > 1:
                        flips.append(d)
                span = (m - 1) * step + 1
                if step > 1 and m > 1:
                    strided[d] = step
        else:
            start, m, span = k, 1, 1
        aligned.append(m)
        widths.append((start, n - start - span))
        d += 1
    aligned += shape[d:]
    widths += [(0, 0)] * (len(shape) - d)
    if tuple(g.shape) != tuple(aligned):
        g = ns.reshape(g, tuple(aligned))
    if flips:
        g = ns.flip(g, tuple(flips))
    if strided:
        spread, gaps, merged, cut = [], [], [], []
        for axis, m in enumerate(aligned):
            spread.append(m)
            gaps.append((0, 0))
            step = strided.get(axis)
            if step is None:
                merged.append(m)
                cut.append(slice(None))
            else:
                spread.append(1)
                gaps.append((0, step - 1))
                merged.append(m * step)
                cut.append(slice(0, (m - 1) * step + 1))
        g = ns.getitem(ns.reshape(ns.pad(ns.reshape(g, tuple(spread)), gaps), tuple(merged)),
                       tuple(cut))
    if any(b or a for b, a in widths):
        g = ns.pad(g, widths)
    return g


def index_view_array(ns, g, inputs, out, attrs: IndexAttrs, saved, needs):
    """`index_view_rule` written out for arrays: one slice assignment into
    zeros (select, narrow and getitem are on the per-node hot path)."""
    gx = np.zeros(inputs[0].shape, dtype=g.dtype)
    gx[attrs.key] = g
    return (gx,)


def _index_view_rule(ns, g, inputs, out, attrs: IndexAttrs, saved, needs):
    """Zeros of x's shape with g written at the key."""
    return (_into_zeros(ns, g, attrs.key, tuple(inputs[0].shape)),)


for _op in (Op.SELECT, Op.NARROW, Op.GETITEM):
    register_rule(_op, array=index_view_array)(_index_view_rule)


def diagonal_array(ns, g, inputs, out, attrs: DiagonalAttrs, saved, needs):
    """`diagonal_rule` written out for arrays: one assignment on the diagonal."""
    return (diagonal_scatter(g, inputs[0].shape, attrs),)


@register_rule(Op.DIAGONAL, array=diagonal_array)
def diagonal_rule(ns, g, inputs, out, attrs: DiagonalAttrs, saved, needs):
    """Zeros with g on the diagonal: the (axis1, axis2) plane flattened to
    the last axis holds the diagonal at a strided slice (start ``offset``,
    or ``-offset * n2`` below, step ``n2 + 1``), so g is written there,
    then reshaped and transposed back to x's layout."""
    shape = tuple(inputs[0].shape)
    a1, a2 = attrs.axis1, attrs.axis2
    n1, n2 = shape[a1], shape[a2]
    rest = [k for k in range(len(shape)) if k not in (a1, a2)]
    rest_shape = tuple(shape[k] for k in rest)
    length = g.shape[-1]
    start = attrs.offset if attrs.offset >= 0 else -attrs.offset * n2
    diag = slice(start, start + (length - 1) * (n2 + 1) + 1, n2 + 1) if length else slice(0, 0)
    plane = _into_zeros(ns, g, (slice(None),) * len(rest) + (diag, Ellipsis),
                        rest_shape + (n1 * n2,))
    plane = ns.reshape(plane, rest_shape + (n1, n2))
    perm = tuple(int(p) for p in np.argsort(rest + [a1, a2]))
    if perm != tuple(range(len(shape))):
        plane = ns.transpose(plane, perm)
    return (plane,)


# ------------------------------------------------ sums over the copies
@register_rule(Op.REPEAT)
def repeat_rule(ns, g, inputs, out, attrs: RepeatAttrs, saved, needs):
    """Each output axis split into (copy, position), summed over the copies."""
    reps = attrs.reps
    shape = tuple(inputs[0].shape)
    full = (1,) * (len(reps) - len(shape)) + shape
    split = tuple(v for r, s in zip(reps, full) for v in (r, s))
    gx = ns.sum(ns.reshape(g, split), axis=tuple(range(0, 2 * len(reps), 2)))
    return (ns.reshape(gx, shape),)


@register_rule(Op.UPSAMPLE_NEAREST)
def upsample_nearest_rule(ns, g, inputs, out, attrs: UpsampleAttrs, saved, needs):
    """g summed over each input pixel's copies."""
    n, *spatial, c = inputs[0].shape
    split = [n]
    for s, r in zip(spatial, attrs.scales):
        split += [s, r]
    g = ns.reshape(g, tuple(split) + (c,))
    return (ns.sum(g, axis=tuple(range(2, 2 * len(spatial) + 1, 2))),)


def pixel_shuffle_array(ns, g, inputs, out, attrs: PixelShuffleAttrs, saved, needs):
    """`pixel_shuffle_rule` written out for arrays: ``r*r`` strided copies
    (`pixel_unshuffle`), faster than the inverse transpose's copy."""
    return (pixel_unshuffle(g, attrs.r),)


@register_rule(Op.PIXEL_SHUFFLE, array=pixel_shuffle_array)
def pixel_shuffle_rule(ns, g, inputs, out, attrs: PixelShuffleAttrs, saved, needs):
    """pixel_unshuffle of g: [N, ``H*r``, ``W*r``, C] -> [N, H, r, W, r, C] ->
    [N, H, W, C, r, r] -> [N, H, W, ``C*r*r``]."""
    n, h, w, crr = inputs[0].shape
    r = attrs.r
    g6 = ns.reshape(g, (n, h, r, w, r, crr // (r * r)))
    return (ns.reshape(ns.transpose(g6, (0, 1, 3, 5, 2, 4)), (n, h, w, crr)),)


# ------------------------------------------------------------- the rest
@register_rule(Op.ROLL)
def roll_rule(ns, g, inputs, out, attrs: RollAttrs, saved, needs):
    """g rolled back."""
    back = tuple(-s for s in attrs.shifts)
    if attrs.axes is None:
        return (ns.roll(g, back[0]),)
    return (ns.roll(g, back, attrs.axes),)


@register_rule(Op.OUTER)
def outer_rule(ns, g, inputs, out, attrs, saved, needs):
    """(``g @ b``, ``a @ g``)."""
    a, b = inputs
    return (ns.matmul(g, b) if needs[0] else None), (ns.matmul(a, g) if needs[1] else None)


# ------------------------------------------------------------ interpolate
@register_rule(Op.INTERPOLATE)
def interpolate_rule(ns, g, inputs, out, attrs: InterpolateAttrs, saved, needs):
    """g summed back onto the source rows of each axis with the forward's
    weights (the driver's sorted row sums; arrays only: the recorded
    gradient is the composite's)."""
    _, h, w, _ = inputs[0].shape
    ah, aw = attrs.axes
    return (interp_along_adjoint(interp_along_adjoint(g, 2, aw, w), 1, ah, h),)


def _interp_nodes(G, x, axis: int, ax):
    """One axis of interpolate in graph ops: the source rows taken with
    index_select, weighted and added (x is NHWC)."""
    if ax.i1 is None:
        return G.index_select(x, axis, ax.i0)
    tail = (-1,) + (1,) * (3 - axis)
    return G.add(G.mul(G.index_select(x, axis, ax.i0), ax.w0.reshape(tail)),
                 G.mul(G.index_select(x, axis, ax.i1), ax.w1.reshape(tail)))


def _interpolate_composite(G, x, attrs: InterpolateAttrs):
    ah, aw = attrs.axes
    return _interp_nodes(G, _interp_nodes(G, x, 1, ah), 2, aw)


register_composite(Op.INTERPOLATE, _interpolate_composite)
