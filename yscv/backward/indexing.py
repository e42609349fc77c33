"""Indexing ops (backward). Accumulating rules (gather, embedding) use the
one-pass Numba scatter kernels through :mod:`yscv.ops.indexing`; the others
are NumPy gathers and slice assignments."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..ops.indexing import embedding_grad, scatter_add_along, sub_block
from ..registry import register_backward


@register_backward(Op.GATHER)
def gather_backward(g, inputs, out, attrs, saved, needs):
    axis, idx = attrs
    gx = np.zeros(inputs[0].shape, dtype=g.dtype)
    scatter_add_along(gx, axis, idx, g)
    return (gx,)


@register_backward(Op.SCATTER_ADD)
def scatter_add_backward(g, inputs, out, attrs, saved, needs):
    axis, idx = attrs
    gsrc = None
    if needs[1]:
        src_shape = inputs[1].shape
        picked = np.take_along_axis(g[sub_block(idx.shape, axis)], idx, axis=axis)
        if src_shape == idx.shape:
            gsrc = picked
        else:
            gsrc = np.zeros(src_shape, dtype=g.dtype)
            gsrc[sub_block(idx.shape)] = picked
    return (g if needs[0] else None), gsrc


@register_backward(Op.SCATTER)
def scatter_backward(g, inputs, out, attrs, saved, needs):
    idx, win, rows = attrs
    gx = gsrc = None
    if needs[0]:
        gx = g.copy()
        gx[rows] = 0
    if needs[1]:
        if win is None:
            gsrc = g[idx]
        else:
            gsrc = np.zeros(inputs[1].shape, dtype=g.dtype)
            gsrc[win] = g[rows]
    return gx, gsrc


@register_backward(Op.EMBEDDING)
def embedding_backward(g, inputs, out, idx, saved, needs):
    return (embedding_grad(g, idx, inputs[0].shape[0]),)
