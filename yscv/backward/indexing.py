"""Indexing ops (backward). Accumulating rules (gather, embedding) use the
one-pass Numba scatter kernels through :mod:`yscv.compute.indexing`; the
others are NumPy gathers and slice assignments. Attributes are the records
of :mod:`yscv.compute.indexing` (embedding's is its index array)."""
from __future__ import annotations

import numpy as np

from ..compute.indexing import (GatherAttrs, ScatterAddAttrs, ScatterAttrs, embedding_grad,
                                gather_along, scatter_add_along, sub_block)
from ..node import Op
from ..registry import register_backward


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
