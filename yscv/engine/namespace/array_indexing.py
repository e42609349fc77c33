"""The indexing names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node.

The arguments are those of the Graph method of the same name, as backward
rules pass them: valid and in bounds, so nothing is checked again. Index
arrays reach the drivers as the Graph methods hand them over (int64,
C-contiguous, read-only), so the scatter-add kernels keep one compiled
specialisation per dtype.
"""
from __future__ import annotations

import numpy as np

from ...compute.arrays import readonly
from ...compute.indexing import gather_along, scatter_add_along, sub_block


def _index(index) -> np.ndarray:
    """An index argument as the Graph methods store it: int64, C-contiguous,
    read-only (a view when it already is)."""
    if (type(index) is np.ndarray and index.dtype == np.int64 and not index.flags.writeable
            and index.flags.c_contiguous):
        return index
    return readonly(np.asarray(index, dtype=np.int64))


class ArrayIndexing:
    """Indexing ops on arrays, for the rules of backward/."""

    __slots__ = ()

    @staticmethod
    def gather(x, axis, index):
        return gather_along(x, axis % x.ndim, _index(index))

    @staticmethod
    def scatter_add(x, axis, index, src):
        """A C-contiguous copy of ``x`` with the leading ``index.shape`` block
        of ``src`` added at ``index`` along ``axis`` (the Numba kernel, in
        source order)."""
        idx = _index(index)
        out = np.asarray(x).copy(order="C")
        scatter_add_along(out, axis % out.ndim, idx, src[sub_block(idx.shape)])
        return out

    @staticmethod
    def index_select(x, axis, index):
        idx = _index(index)
        if idx.ndim == 0:
            idx = idx.reshape(1)
        return np.take(x, idx, axis=axis % x.ndim)

    @staticmethod
    def embedding(weight, indices):
        return np.take(weight, _index(indices), axis=0)

    @staticmethod
    def masked_fill(x, mask, value):
        return np.where(mask, x.dtype.type(float(value)), x)
