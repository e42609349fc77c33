"""The linalg names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node."""
from __future__ import annotations

import functools

import numpy as np  # noqa: F401

from ... import registry
from ...compute.linalg import dot, matmul as _stacked_matmul
from ...node import Op

_FORWARD = registry.FORWARD
_INV, _SOLVE, _DET, _EINSUM = int(Op.INV), int(Op.SOLVE), int(Op.DET), int(Op.EINSUM)


@functools.lru_cache(maxsize=1024)
def _einsum_spec(subscripts: str, shapes: tuple):
    """The EinsumSpec ``G.einsum`` records for these subscripts and shapes."""
    from ...ops.linalg import parse_einsum
    return parse_einsum(subscripts, list(shapes))


class ArrayLinalg:
    """Linalg ops on arrays, for the rules of backward/."""

    __slots__ = ()

    @staticmethod
    def matmul(a, b):
        """``G.matmul``: NumPy matmul semantics; 2-d @ 2-d through the GEMM
        driver (``dot``), the rest through the stacked-rows driver."""
        if a.ndim == 2 and b.ndim == 2:
            return dot(a, b)
        return _stacked_matmul(a, b)

    @staticmethod
    def transpose(x, axes=None):
        """``G.transpose``: the axes permuted (None: reversed), a view."""
        return np.transpose(x, axes)

    @staticmethod
    def einsum(subscripts, *operands):
        """``G.einsum``: the subscripts parsed as the Graph method does, then
        its forward (a cached contraction path when it pays)."""
        spec = _einsum_spec(subscripts, tuple(o.shape for o in operands))
        return _FORWARD[_EINSUM](spec, *operands)[0]

    @staticmethod
    def inv(a):
        """``G.inv``: the inverse of each matrix of a [..., n, n]."""
        return _FORWARD[_INV](None, a)[0]

    @staticmethod
    def solve(a, b):
        """``G.solve``: x with ``a @ x = b``; b a batch of vectors [..., n]
        when it is 1-d or has a's shape without its last axis."""
        sa, sb = a.shape, b.shape
        vector = len(sb) == 1 or (len(sb) == len(sa) - 1 and sb == sa[:-1])
        return _FORWARD[_SOLVE](vector, a, b)[0]

    @staticmethod
    def det(a):
        """``G.det``: the determinant of each matrix of a [..., n, n]."""
        return _FORWARD[_DET](None, a)[0]
