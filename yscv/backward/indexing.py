"""Indexing ops (backward). Accumulating rules (gather, embedding) use the
one-pass Numba scatter kernels through `yscv.compute.indexing`; the
others are NumPy gathers and slice assignments. Attributes are the records
of `yscv.compute.indexing` (embedding's is its index array)."""
from __future__ import annotations

import numpy as np

from ..compute.indexing import (GatherAttrs, IndexSelectAttrs, MaskedFillAttrs, ScatterAddAttrs,
                                ScatterAttrs, embedding_grad, gather_along, index_add,
                                scatter_add_along, sub_block)
from ..node import Op
from ..registry import register_backward, register_recorded


@register_backward(Op.GATHER)
def gather_backward(g, inputs, out, attrs: GatherAttrs, saved, needs):
    gx = np.zeros(inputs[0].shape, dtype=g.dtype)
    scatter_add_along(gx, attrs.axis, attrs.index, g)
    return (gx,)


@register_backward(Op.SCATTER_ADD)
def scatter_add_backward(g, inputs, out, attrs: ScatterAddAttrs, saved, needs):
    gsrc = None
    if needs[1]:
        src_shape = inputs[1].shape
        picked = gather_along(g, attrs.axis, attrs.index)
        if src_shape == attrs.index.shape:
            gsrc = picked
        else:
            gsrc = np.zeros(src_shape, dtype=g.dtype)
            gsrc[sub_block(attrs.index.shape)] = picked
    return (g if needs[0] else None), gsrc


@register_backward(Op.SCATTER)
def scatter_backward(g, inputs, out, attrs: ScatterAttrs, saved, needs):
    gx = gsrc = None
    if needs[0]:
        gx = g.copy()
        gx[attrs.rows] = 0
    if needs[1]:
        if attrs.win is None:
            gsrc = g[attrs.index]
        else:
            gsrc = np.zeros(inputs[1].shape, dtype=g.dtype)
            gsrc[attrs.win] = g[attrs.rows]
    return gx, gsrc


@register_backward(Op.EMBEDDING)
def embedding_backward(g, inputs, out, idx, saved, needs):
    return (embedding_grad(g, idx, inputs[0].shape[0]),)


@register_backward(Op.MASKED_FILL)
def masked_fill_backward(g, inputs, out, attrs: MaskedFillAttrs, saved, needs):
    # the broadcast shape; the walk sums it back to x's shape
    return (np.where(attrs.mask, g.dtype.type(0), g),)


@register_backward(Op.INDEX_SELECT)
def index_select_backward(g, inputs, out, attrs: IndexSelectAttrs, saved, needs):
    return (index_add(g, attrs.axis, attrs.index, inputs[0].shape[attrs.axis]),)


# --------------------------------------------------------------- recorded
# The same rules in graph ops, for create_graph=True (docs/higher_order.md): gather
# and scatter_add are each other's transpose, and scatter and embedding are
# said with them (the index arrays are constants, as in PyTorch).
@register_recorded(Op.GATHER)
def gather_recorded(G, gy, xs, y, attrs: GatherAttrs, saved, needs):
    """g scatter-added into zeros of x's shape."""
    zeros = np.zeros(xs[0].shape, dtype=G.dtype)
    return (G.scatter_add(zeros, attrs.axis, attrs.index, gy),)


@register_recorded(Op.SCATTER_ADD)
def scatter_add_recorded(G, gy, xs, y, attrs: ScatterAddAttrs, saved, needs):
    """g to x; gather(g, axis, index) to src's leading block (zeros outside)."""
    gsrc = None
    if needs[1]:
        src_shape = xs[1].shape
        gsrc = G.gather(gy, attrs.axis, attrs.index)
        if src_shape != attrs.index.shape:
            gsrc = G.pad(gsrc, [(0, s - i) for s, i in zip(src_shape, attrs.index.shape)])
    return (gy if needs[0] else None), gsrc


def _take_rows(G, g, rows):
    """g[rows] for an int array ``rows`` [M]: a gather along axis 0."""
    shape = g.shape
    index = np.broadcast_to(rows.reshape((-1,) + (1,) * (len(shape) - 1)),
                            (rows.shape[0],) + tuple(shape[1:]))
    return G.gather(g, 0, index)


@register_recorded(Op.SCATTER)
def scatter_recorded(G, gy, xs, y, attrs: ScatterAttrs, saved, needs):
    """g with the written rows zeroed to x; g[indices] to src (0 for the rows
    a later duplicate overwrote)."""
    gx = gsrc = None
    if needs[0]:
        written = np.zeros(xs[0].shape, dtype=bool)
        written[attrs.rows] = True
        gx = G.where(written, 0.0, gy)
    if needs[1]:
        if attrs.win is None:
            gsrc = _take_rows(G, gy, attrs.index)
        else:
            zeros = np.zeros(xs[1].shape, dtype=G.dtype)
            gsrc = G.scatter(zeros, attrs.win, _take_rows(G, gy, attrs.rows))
    return gx, gsrc


@register_recorded(Op.EMBEDDING)
def embedding_recorded(G, gy, xs, y, idx, saved, needs):
    """The rows of g scatter-added into a [V, D] table of zeros."""
    v, d = xs[0].shape
    rows = G.reshape(gy, (idx.size, d))
    index = np.broadcast_to(idx.reshape(-1, 1), (idx.size, d))
    return (G.scatter_add(np.zeros((v, d), dtype=G.dtype), 0, index, rows),)


@register_recorded(Op.MASKED_FILL)
def masked_fill_recorded(G, gy, xs, y, attrs: MaskedFillAttrs, saved, needs):
    """g with the filled positions zeroed (the mask is a constant)."""
    return (G.where(np.broadcast_to(attrs.mask, gy.shape), 0.0, gy),)


@register_recorded(Op.INDEX_SELECT)
def index_select_recorded(G, gy, xs, y, attrs: IndexSelectAttrs, saved, needs):
    """The gradient's slabs scatter-added into zeros of x's shape."""
    shape = gy.shape
    a = attrs.axis
    index = np.broadcast_to(attrs.index.reshape((-1,) + (1,) * (len(shape) - a - 1)), shape)
    return (G.scatter_add(np.zeros(xs[0].shape, dtype=G.dtype), a, index, gy),)
