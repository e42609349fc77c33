"""Indexing ops (backward): one rule per op against the namespace ``ns``
(yscv/engine/namespace/__init__.py), run on arrays by the first-order walks and on the
graph by ``create_graph=True``. gather and scatter_add are each other's
transpose; scatter is a where and an index_select; embedding and
index_select scatter-add the gradient into zeros. Index arrays are
attributes, constants for differentiation (as in PyTorch). Attributes are
the records of `yscv.compute.indexing` (embedding's is its index array).

Accumulating rules run the one-pass Numba scatter kernels in source order
(`yscv.compute.indexing`). Three have a written-out array copy on the
per-node hot path, held to their rule's bits by tests/test_rule_flags.py:
gather (the kernel into fresh zeros, without scatter_add's copy of them),
embedding and index_select (the row kernel on g's rows, without the
broadcast index array the rule's scatter_add needs); both kernels add each
destination's contributions in source order onto zero, so the bits agree.
"""
from __future__ import annotations

import numpy as np

from ..compute.indexing import (GatherAttrs, IndexSelectAttrs, MaskedFillAttrs, ScatterAddAttrs,
                                ScatterAttrs, embedding_grad, index_add, scatter_add_along)
from ..node import Op
from ..registry import register_rule


def gather_array(ns, g, inputs, out, attrs: GatherAttrs, saved, needs):
    """`gather_rule` written out for arrays: the kernel adds g into fresh zeros."""
    gx = np.zeros(inputs[0].shape, dtype=g.dtype)
    scatter_add_along(gx, attrs.axis, attrs.index, g)
    return (gx,)


@register_rule(Op.GATHER, array=gather_array)
def gather_rule(ns, g, inputs, out, attrs: GatherAttrs, saved, needs):
    """g scatter-added into zeros of x's shape."""
    return (ns.scatter_add(ns.zeros_like(inputs[0]), attrs.axis, attrs.index, g),)


@register_rule(Op.SCATTER_ADD)
def scatter_add_rule(ns, g, inputs, out, attrs: ScatterAddAttrs, saved, needs):
    """g to x; gather(g, axis, index) to src's leading block (zeros outside)."""
    gsrc = None
    if needs[1]:
        src_shape = tuple(inputs[1].shape)
        gsrc = ns.gather(g, attrs.axis, attrs.index)
        if src_shape != attrs.index.shape:
            gsrc = ns.pad(gsrc, [(0, s - i) for s, i in zip(src_shape, attrs.index.shape)])
    return (g if needs[0] else None), gsrc


@register_rule(Op.SCATTER)
def scatter_rule(ns, g, inputs, out, attrs: ScatterAttrs, saved, needs):
    """g with the written rows zeroed to x; g[indices] to src, 0 for the rows
    a later duplicate overwrote."""
    gx = gsrc = None
    if needs[0]:
        written = np.zeros(inputs[0].shape, dtype=bool)
        written[attrs.rows] = True
        gx = ns.where(written, 0.0, g)
    if needs[1]:
        gsrc = ns.index_select(g, 0, attrs.index)
        if attrs.win is not None:
            src_shape = tuple(inputs[1].shape)
            lost = np.ones(src_shape[0], dtype=bool)
            lost[attrs.win] = False
            lost = np.broadcast_to(lost.reshape((-1,) + (1,) * (len(src_shape) - 1)), src_shape)
            gsrc = ns.where(lost, 0.0, gsrc)
    return gx, gsrc


def embedding_array(ns, g, inputs, out, idx, saved, needs):
    """`embedding_rule` written out for arrays: the row kernel on g's rows."""
    return (embedding_grad(g, idx, inputs[0].shape[0]),)


@register_rule(Op.EMBEDDING, array=embedding_array)
def embedding_rule(ns, g, inputs, out, idx, saved, needs):
    """The rows of g scatter-added into a [V, D] table of zeros."""
    d = inputs[0].shape[1]
    rows = ns.reshape(g, (idx.size, d))
    index = np.broadcast_to(idx.reshape(-1, 1), (idx.size, d))
    return (ns.scatter_add(ns.zeros_like(inputs[0]), 0, index, rows),)


@register_rule(Op.MASKED_FILL)
def masked_fill_rule(ns, g, inputs, out, attrs: MaskedFillAttrs, saved, needs):
    """g with the filled positions zeroed, at the broadcast shape (the walk
    sums it back to x's shape); the mask is a constant (it broadcasts to
    g's shape, the output's)."""
    return (ns.where(attrs.mask, 0.0, g),)


def index_select_array(ns, g, inputs, out, attrs: IndexSelectAttrs, saved, needs):
    """`index_select_rule` written out for arrays: the row kernel on g's slabs."""
    return (index_add(g, attrs.axis, attrs.index, inputs[0].shape[attrs.axis]),)


@register_rule(Op.INDEX_SELECT, array=index_select_array)
def index_select_rule(ns, g, inputs, out, attrs: IndexSelectAttrs, saved, needs):
    """The gradient's slabs scatter-added into zeros of x's shape."""
    shape = tuple(g.shape)
    a = attrs.axis
    index = np.broadcast_to(attrs.index.reshape((-1,) + (1,) * (len(shape) - a - 1)), shape)
    return (ns.scatter_add(ns.zeros_like(inputs[0]), a, index, g),)
