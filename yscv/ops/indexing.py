"""Indexing ops (forward): gather, scatter_add, scatter, embedding,
masked_fill, index_select; take_along_axis (an expand and a gather) and
one_hot (an int64 array, no node).

Integer index arrays are attributes, not nodes: each Graph method converts
its index argument to a C-contiguous int64 copy, marks it read-only, and
bounds-checks it at graph-build time (IndexError naming the first bad value
and its position). Float or bool index arrays raise TypeError. Negative
indices are rejected, as ``torch.gather`` / ``torch.nn.functional.embedding``
do (no wrap-around).

Accumulation (gather's backward, scatter_add's forward, embedding's backward)
runs in the Numba kernels of `yscv.kernels.indexing`, driven from
`yscv.compute.indexing`: one pass in source order, no ``np.add.at``
(docs/ops/indexing.md). Nothing is saved for backward: the indices live in
the attributes (records of `yscv.compute.indexing`).
"""
from __future__ import annotations

import numpy as np

from ..compute.indexing import (GatherAttrs, IndexSelectAttrs, MaskedFillAttrs, ScatterAddAttrs,
                                ScatterAttrs, gather_along, scatter_add_along, sub_block)
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import (as_index_array, check_array_size, is_scalar, normalize_axis,
                      operand_shape, shape_error)


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


@register_forward(Op.MASKED_FILL)
def masked_fill_forward(attrs: MaskedFillAttrs, x):
    return np.where(attrs.mask, x.dtype.type(attrs.value), x), None


@register_forward(Op.INDEX_SELECT)
def index_select_forward(attrs: IndexSelectAttrs, x):
    return np.take(x, attrs.index, axis=attrs.axis), None


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
        -> [``*indices.shape``, D]. Indices outside [0, V) raise IndexError naming
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


    def masked_fill(self, x, mask, value):
        """``torch.masked_fill``: ``value`` where the boolean ``mask`` is True,
        ``x`` elsewhere; ``mask`` (an array, not a node) broadcasts with ``x``
        and the result has the broadcast shape. ``value`` is a real number.
        Backward: ``g`` with the filled positions zeroed (summed back to
        ``x``'s shape)."""
        x, shape = operand_shape(self, x, "masked_fill")
        if type(mask) is NodeId:
            raise TypeError("masked_fill: mask must be a boolean NumPy array, not a NodeId")
        m = np.asarray(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"masked_fill: mask must be a boolean array, got dtype {m.dtype}")
        if not is_scalar(value):
            raise TypeError(f"masked_fill: value must be a real number, got {value!r}")
        try:
            np.broadcast_shapes(shape, m.shape)
        except ValueError:
            raise shape_error("masked_fill", f"mask of shape {m.shape} does not broadcast with "
                                             f"x of shape {shape}", expected=shape,
                              got=m.shape) from None
        m = m.copy()
        m.flags.writeable = False
        return self._apply1(Op.MASKED_FILL, x, MaskedFillAttrs(m, float(value)))

    def index_select(self, x, axis, index):
        """``torch.index_select``: the slabs of ``x`` at ``index`` (an int
        array, 1-d or 0-d; repeats allowed; entries in ``[0, x.shape[axis])``)
        along ``axis``, whose size becomes ``len(index)``. Backward: the
        gradient's slabs added up at ``index`` (one Numba pass)."""
        x, shape = operand_shape(self, x, "index_select")
        if len(shape) == 0:
            raise shape_error("index_select", "x must have at least 1 dimension, got a 0-d "
                                              "input", got=shape)
        a = normalize_axis(axis, len(shape), "index_select")
        idx = _index_array(index, "index_select", "index")
        if idx.ndim > 1:
            raise shape_error("index_select", f"index must be 1-d (or 0-d), got shape "
                                              f"{idx.shape}", expected=1, got=idx.shape)
        _check_bounds(idx, shape[a], "index_select", "index", f"x.shape[{a}] = {shape[a]}")
        if idx.ndim == 0:
            idx = idx.reshape(1)
        return self._apply1(Op.INDEX_SELECT, x, IndexSelectAttrs(a, idx))

    def take_along_axis(self, x, index, axis):
        """``torch.take_along_dim`` / ``np.take_along_axis``: ``out[..., i, ...]
        = x[..., index[..., i, ...], ...]`` along ``axis``. ``index`` is an int
        array with ``x``'s number of dimensions; off the axis, ``x`` and
        ``index`` broadcast against each other; negative entries count from
        the end (as PyTorch). ``axis=None``: on the flattened ``x`` with a 1-d
        ``index``. No op of its own: an ``expand`` (only when ``x`` is
        broadcast) and a ``gather`` node."""
        x, shape = operand_shape(self, x, "take_along_axis")
        idx = _index_array(index, "take_along_axis", "index")
        if axis is None:
            if idx.ndim != 1:
                raise shape_error("take_along_axis", f"index must be 1-d when axis is None, got "
                                                     f"shape {idx.shape}", got=idx.shape)
            shape, a = (int(np.prod(shape)),), 0
        else:
            if len(shape) == 0:
                raise shape_error("take_along_axis", "x must have at least 1 dimension, got a "
                                                     "0-d input", got=shape)
            a = normalize_axis(axis, len(shape), "take_along_axis")
            if idx.ndim != len(shape):
                raise shape_error("take_along_axis", f"index must have x's number of dimensions "
                                                     f"({len(shape)}), got shape {idx.shape}",
                                  expected=len(shape), got=idx.shape)
        n = shape[a]
        if idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
            bad = (idx < -n) | (idx >= n)
            pos = tuple(int(p) for p in np.unravel_index(int(np.argmax(bad)), idx.shape))
            raise IndexError(f"take_along_axis: index holds {int(idx[pos])} at position {pos}, "
                             f"outside [-{n}, {n}) (x.shape[{a}] = {n})")
        try:
            common = np.broadcast_shapes(shape[:a] + shape[a + 1:], idx.shape[:a] + idx.shape[a + 1:])
        except ValueError:
            raise shape_error("take_along_axis", f"index of shape {idx.shape} does not broadcast "
                                                 f"with x of shape {shape} off axis {a}",
                              expected=shape, got=idx.shape) from None
        x_shape = common[:a] + (n,) + common[a:]
        idx = np.broadcast_to(np.where(idx < 0, idx + n, idx), common[:a] + (idx.shape[a],) + common[a:])
        if axis is None:
            x = self.reshape(x, (-1,))
        if x_shape != shape:
            x = self.expand(x, x_shape)
        return self.gather(x, a, idx)

    def one_hot(self, labels, num_classes=-1) -> np.ndarray:
        """``torch.nn.functional.one_hot``: an int64 array of shape
        ``labels.shape + (num_classes,)`` with a 1 at each label (no node:
        the result is an integer array). ``labels`` are ints in
        ``[0, num_classes)``; ``num_classes=-1`` uses ``labels.max() + 1``."""
        idx = _index_array(labels, "one_hot", "labels")
        if isinstance(num_classes, (bool, np.bool_)) or not isinstance(num_classes,
                                                                       (int, np.integer)):
            raise TypeError(f"one_hot: num_classes must be an int, got {num_classes!r}")
        c = int(num_classes)
        if c == -1:
            if idx.size == 0:
                raise ValueError("one_hot: cannot infer num_classes from empty labels; pass it")
            c = max(int(idx.max()) + 1, 0)
        elif c < 0:
            raise ValueError(f"one_hot: num_classes={num_classes} must be >= 0 (or -1 to infer)")
        _check_bounds(idx, c, "one_hot", "labels", f"num_classes = {c}")
        check_array_size("one_hot", idx.shape + (c,), 8, num_classes=num_classes)
        out = np.zeros(idx.shape + (c,), dtype=np.int64)
        np.put_along_axis(out, idx[..., None], 1, axis=-1)
        return out


def _check_index_shape(op: str, ishape: tuple, shape: tuple, axis: int, arg: str) -> None:
    if len(ishape) != len(shape):
        raise shape_error(op, f"index must have {arg}'s number of dimensions ({len(shape)}), "
                              f"got shape {ishape}", expected=len(shape), got=ishape)
    for d, (i, s) in enumerate(zip(ishape, shape)):
        if d != axis and i > s:
            raise shape_error(op, f"index shape {ishape} exceeds {arg} shape {shape} on axis "
                                  f"{d} (only the gather/scatter axis {axis} may be larger)",
                              expected=shape, got=ishape)
