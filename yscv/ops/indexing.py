"""Indexing ops (forward): gather, scatter_add, scatter, embedding.

Integer index arrays are attributes, not nodes: each Graph method converts
its index argument to a C-contiguous int64 copy, marks it read-only, and
bounds-checks it at graph-build time (IndexError naming the first bad value
and its position). Float or bool index arrays raise TypeError. Negative
indices are rejected, as ``torch.gather`` / ``torch.nn.functional.embedding``
do (no wrap-around).

Accumulation (gather's backward, scatter_add's forward, embedding's backward)
runs in the Numba kernels of :mod:`yscv.kernels.indexing`, driven from
:mod:`yscv.compute.indexing`: one pass in source order, no ``np.add.at``
(docs/ops/indexing.md). Nothing is saved for backward: the indices live in
the attributes (records of :mod:`yscv.compute.indexing`).
"""
from __future__ import annotations

import numpy as np

from ..compute.indexing import (GatherAttrs, ScatterAddAttrs, ScatterAttrs, gather_along,
                                scatter_add_along, sub_block)
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_index_array, normalize_axis, operand_shape, shape_error


# --------------------------------------------------------------- helpers
def _index_array(idx, op: str, arg: str) -> np.ndarray:
    """A read-only C-contiguous int64 copy of ``idx``; TypeError for floats,
    bools and NodeIds (an empty list is an empty int array)."""
    if type(idx) is NodeId:
        raise TypeError(f"{op}: {arg} must be an integer NumPy array, not a NodeId "
                        "(graph values are floats; keep indices as arrays)")
    if isinstance(idx, (list, tuple)) and np.size(np.asarray(idx, dtype=object)) == 0:
        arr = np.zeros(np.shape(idx), dtype=np.int64)
    else:
        try:
            arr = as_index_array(idx, op, arg)  # a fresh int64 copy
        except ValueError as exc:  # ragged nested lists
            raise TypeError(f"{op}: {arg} cannot be converted to an integer array: {exc}") from None
        if not arr.flags.c_contiguous:      # astype keeps a Fortran layout
            arr = np.ascontiguousarray(arr)
    arr.flags.writeable = False
    return arr


def _check_bounds(idx: np.ndarray, size: int, op: str, arg: str, what: str) -> None:
    """IndexError unless every entry of ``idx`` is in [0, size)."""
    if idx.size == 0:
        return
    lo = int(idx.min())
    hi = int(idx.max())
    if lo >= 0 and hi < size:
        return
    bad = (idx < 0) | (idx >= size)
    pos = np.unravel_index(int(np.argmax(bad)), idx.shape)
    value = int(idx[pos])
    where = f" at position {tuple(int(p) for p in pos)}" if idx.ndim else ""
    raise IndexError(f"{op}: {arg} holds {value}{where}, outside [0, {size}) ({what}); "
                     "negative indices are not supported")


# -------------------------------------------------------------- forwards
@register_forward(Op.GATHER)
def gather_forward(attrs: GatherAttrs, x):
    return gather_along(x, attrs.axis, attrs.index), None


@register_forward(Op.SCATTER_ADD)
def scatter_add_forward(attrs: ScatterAddAttrs, x, src):
    out = x.copy(order="C")
    scatter_add_along(out, attrs.axis, attrs.index, src[sub_block(attrs.index.shape)])
    return out, None


@register_forward(Op.SCATTER)
def scatter_forward(attrs: ScatterAttrs, x, src):
    out = x.copy(order="C")
    out[attrs.rows] = src if attrs.win is None else src[attrs.win]
    return out, None


@register_forward(Op.EMBEDDING)
def embedding_forward(idx, weight):
    return np.take(weight, idx, axis=0), None


def _last_writers(idx: np.ndarray):
    """``(win, rows)``: positions whose write survives ``out[idx] = src`` with
    the last write winning, and the rows they write; ``win`` is None when
    ``idx`` has no duplicates (every write survives, rows = idx)."""
    if idx.size == 0:
        return None, idx
    uniq, first_rev = np.unique(idx[::-1], return_index=True)
    if uniq.size == idx.size:
        return None, idx
    win = np.sort(idx.size - 1 - first_rev)
    rows = np.ascontiguousarray(idx[win])
    win.flags.writeable = False
    rows.flags.writeable = False
    return win, rows


# ----------------------------------------------------------- Graph methods
class IndexingOps:
    """Graph methods of the indexing category."""

    def gather(self, x, axis, index):
        """``torch.gather``: ``out[i][j][k] = x[index[i][j][k]][j][k]`` (axis 0).

        ``index`` is an int array with ``x``'s number of dimensions and
        ``index.shape[d] <= x.shape[d]`` for ``d != axis``; entries in
        ``[0, x.shape[axis])``. Output shape = ``index.shape``. Backward
        scatter-adds the gradient into zeros of ``x``'s shape (Numba kernel)."""
        x, shape = operand_shape(self, x, "gather")
        if len(shape) == 0:
            raise shape_error("gather", "x must have at least 1 dimension, got a 0-d input",
                              got=shape)
        a = normalize_axis(axis, len(shape), "gather")
        idx = _index_array(index, "gather", "index")
        _check_index_shape("gather", idx.shape, shape, a, "x")
        _check_bounds(idx, shape[a], "gather", "index", f"x.shape[{a}] = {shape[a]}")
        return self._apply1(Op.GATHER, x, GatherAttrs(a, idx))

    def scatter_add(self, x, axis, index, src):
        """Out-of-place ``torch.Tensor.scatter_add``: ``x`` with
        ``out[index[i][j][k]][j][k] += src[i][j][k]`` (axis 0). ``index`` has
        the inputs' number of dimensions, ``index.shape[d] <= src.shape[d]`` for
        every d and ``<= x.shape[d]`` for ``d != axis``; only the leading
        ``index.shape`` block of ``src`` is used. Gradients: ``g`` to ``x``,
        ``gather(g, axis, index)`` to ``src`` (zeros outside the block)."""
        x, shape = operand_shape(self, x, "scatter_add")
        src, sshape = operand_shape(self, src, "scatter_add", "src")
        if len(shape) == 0:
            raise shape_error("scatter_add", "x must have at least 1 dimension, got a 0-d "
                                             "input", got=shape)
        a = normalize_axis(axis, len(shape), "scatter_add")
        idx = _index_array(index, "scatter_add", "index")
        _check_index_shape("scatter_add", idx.shape, shape, a, "x")
        if len(sshape) != idx.ndim or any(i > s for i, s in zip(idx.shape, sshape)):
            raise shape_error("scatter_add", f"src shape {sshape} must have index's number of "
                                             f"dimensions and be at least index's shape "
                                             f"{idx.shape} on every axis",
                              expected=idx.shape, got=sshape)
        _check_bounds(idx, shape[a], "scatter_add", "index", f"x.shape[{a}] = {shape[a]}")
        return self._apply(Op.SCATTER_ADD, (x, src), ScatterAddAttrs(a, idx))

    def scatter(self, x, indices, src):
        """Rows of ``x`` [N, ...] at ``indices`` [M] replaced by ``src`` [M, ...]
        (out of place). With duplicate indices the last write wins (as NumPy
        assignment does in practice; here it is guaranteed). Gradients: ``g``
        with the written rows zeroed to ``x``; ``g[indices]`` to ``src``, 0 for
        the rows of ``src`` overwritten by a later duplicate."""
        x, shape = operand_shape(self, x, "scatter")
        src, sshape = operand_shape(self, src, "scatter", "src")
        if len(shape) == 0:
            raise shape_error("scatter", "x must have at least 1 dimension ([N, D]), got a "
                                         "0-d input", got=shape)
        idx = _index_array(indices, "scatter", "indices")
        if idx.ndim != 1:
            raise shape_error("scatter", f"indices must be 1-d [M], got shape {idx.shape}",
                              expected=1, got=idx.shape)
        want = idx.shape + shape[1:]
        if sshape != want:
            raise shape_error("scatter", f"src has shape {sshape}; expected {want} "
                                         f"(len(indices),) + x.shape[1:] for x of shape {shape}",
                              expected=want, got=sshape)
        _check_bounds(idx, shape[0], "scatter", "indices", f"x has {shape[0]} rows")
        win, rows = _last_writers(idx)
        return self._apply(Op.SCATTER, (x, src), ScatterAttrs(idx, win, rows))

    def embedding(self, weight, indices):
        """Rows of ``weight`` [V, D] at ``indices`` (int array of any shape)
        -> [*indices.shape, D]. Indices outside [0, V) raise IndexError naming
        the bad value. Backward accumulates gradient rows into a [V, D] zero
        table with one Numba pass (repeated indices add up)."""
        weight, wshape = operand_shape(self, weight, "embedding", "weight")
        if len(wshape) != 2:
            raise shape_error("embedding", f"weight must be 2-d [V, D], got shape {wshape}",
                              expected=2, got=wshape)
        idx = _index_array(indices, "embedding", "indices")
        _check_bounds(idx, wshape[0], "embedding", "indices",
                      f"weight has {wshape[0]} rows")
        return self._apply1(Op.EMBEDDING, weight, idx)


def _check_index_shape(op: str, ishape: tuple, shape: tuple, axis: int, arg: str) -> None:
    if len(ishape) != len(shape):
        raise shape_error(op, f"index must have {arg}'s number of dimensions ({len(shape)}), "
                              f"got shape {ishape}", expected=len(shape), got=ishape)
    for d, (i, s) in enumerate(zip(ishape, shape)):
        if d != axis and i > s:
            raise shape_error(op, f"index shape {ishape} exceeds {arg} shape {shape} on axis "
                                  f"{d} (only the gather/scatter axis {axis} may be larger)",
                              expected=shape, got=ishape)
