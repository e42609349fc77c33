"""What the indexing forwards (``yscv/ops/indexing.py``) and backward rules
(``yscv/backward/indexing.py``) share: the attributes each op stores on its
node, the sub-block layout of torch-style gather/scatter, and the drivers of
the scatter-add kernels (`yscv.kernels.indexing`).

Index arrays reach this module validated: C-contiguous, int64, read-only and
in bounds (the Graph methods check them at graph-build time).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from ..kernels import lazy
from .arrays import readonly

K = lazy("indexing")

__all__ = ["GatherAttrs", "ScatterAddAttrs", "ScatterAttrs", "sub_block", "gather_along",
           "scatter_add_along", "embedding_grad", "MaskedFillAttrs", "IndexSelectAttrs",
           "index_add"]


# ------------------------------------------------------------ attributes
class GatherAttrs(NamedTuple):
    """gather: the non-negative axis and the index array (``x``'s rank)."""

    axis: int
    index: np.ndarray


class ScatterAddAttrs(NamedTuple):
    """scatter_add: the non-negative axis and the index array (the inputs' rank)."""

    axis: int
    index: np.ndarray


class ScatterAttrs(NamedTuple):
    """scatter: the row ``index`` [M]; ``win``, the positions of ``index``
    whose write survives when it repeats a row (None when every row is
    distinct), and ``rows``, the rows they write (``index`` itself when
    ``win`` is None)."""

    index: np.ndarray
    win: Optional[np.ndarray]
    rows: np.ndarray


# embedding stores its read-only index array itself as the attribute.


# --------------------------------------------------------------- layouts
def sub_block(shape: tuple, axis=None) -> tuple:
    """Slices ``[0, shape[d])`` on every axis (``axis`` kept whole)."""
    return tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(shape))


def gather_along(x: np.ndarray, axis: int, index: np.ndarray) -> np.ndarray:
    """``torch.gather``: ``np.take_along_axis`` on the leading ``index.shape``
    block of ``x`` (``index.shape[d] <= x.shape[d]`` off the axis)."""
    return np.take_along_axis(x[sub_block(index.shape, axis)], index, axis=axis)


# --------------------------------------------------------------- drivers
def scatter_add_along(out: np.ndarray, axis: int, index: np.ndarray, src: np.ndarray) -> None:
    """In place on a fresh C-contiguous ``out``, as ``torch.Tensor.scatter_add_``:
    ``out[..., index[i, k, j], ...] += src[i, k, j]`` along ``axis``. ``src`` has
    ``index``'s shape; ``out.shape[d] >= index.shape[d]`` for ``d != axis``."""
    ish = index.shape
    if index.size == 0:
        return
    outer = math.prod(ish[:axis])
    inner = math.prod(ish[axis + 1:])
    idx3 = index.reshape(outer, ish[axis], inner)
    src3 = readonly(np.ascontiguousarray(src).reshape(outer, ish[axis], inner))
    n_axis = out.shape[axis]
    if all(out.shape[d] == ish[d] for d in range(out.ndim) if d != axis):
        K.scatter_add_axis(out.reshape(outer, n_axis, inner), idx3, src3)
    else:  # index covers a sub-block: accumulate into a compact block, then add it
        block = np.zeros(ish[:axis] + (n_axis,) + ish[axis + 1:], dtype=out.dtype)
        K.scatter_add_axis(block.reshape(outer, n_axis, inner), idx3, src3)
        out[sub_block(ish, axis)] += block


def embedding_grad(g: np.ndarray, idx: np.ndarray, n_rows: int) -> np.ndarray:
    """[V, D] gradient of an embedding table: rows of ``g`` ([..., D])
    accumulated at ``idx`` (``g.shape[:-1] == idx.shape``)."""
    d = g.shape[-1]
    out = np.zeros((n_rows, d), dtype=g.dtype)
    if idx.size:
        src = readonly(np.ascontiguousarray(g).reshape(idx.size, d))
        K.index_add_rows(out, idx.reshape(-1), src)
    return out


class MaskedFillAttrs(NamedTuple):
    """masked_fill: the read-only boolean mask and the fill value."""

    mask: np.ndarray
    value: float


class IndexSelectAttrs(NamedTuple):
    """index_select: the non-negative axis and the 1-d index array."""

    axis: int
    index: np.ndarray


def index_add(g: np.ndarray, axis: int, index: np.ndarray, n: int) -> np.ndarray:
    """The adjoint of ``np.take(x, index, axis)`` for ``x.shape[axis] == n``:
    slabs of ``g`` along ``axis`` accumulated at ``index`` (repeats add up),
    with the one-pass row kernel of `embedding_grad`."""
    shape = g.shape
    outer = math.prod(shape[:axis])
    inner = math.prod(shape[axis + 1:])
    rows = g.reshape(outer, shape[axis], inner).transpose(1, 0, 2).reshape(shape[axis],
                                                                           outer * inner)
    out = embedding_grad(rows, index, n).reshape(n, outer, inner).transpose(1, 0, 2)
    return np.ascontiguousarray(out).reshape(shape[:axis] + (n,) + shape[axis + 1:])
