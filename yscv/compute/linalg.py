"""Linear-algebra drivers: matmul layouts and the einsum contraction path.

* A batched ``(..., m, k) @ (k, n)`` with a C-contiguous left operand is ONE
  GEMM over the stacked rows ``[prod(...) * m, k]``, not one per batch
  element; its backward likewise (through `yscv.compute.gemm.dot`,
  yscv's tiles or np.dot).
* ``np.einsum`` with two or more operands takes NumPy's greedy contraction
  path (cached per subscripts and shapes) once the label space reaches
  `OPTIMIZE_MIN_WORK` multiply-adds; below it np.einsum's own loop beats
  the path search and tensordot dispatch (docs/ops/linalg.md).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..kernels import lazy
from . import regions as par
from .arrays import readonly
from .gemm import dot, stacked_matmul

_KG = lazy("gemm")

__all__ = ["dot", "matmul", "outer", "stacked_matmul_grads", "einsum", "OPTIMIZE_MIN_WORK"]

#: label-space size (multiply-adds) from which einsum takes an optimised path
OPTIMIZE_MIN_WORK = 1 << 16
#: batched outer products from this many elements take the threaded kernel
#: (one chunk per this many elements)
OUTER_BIG = 1 << 16


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)`` for operands that are not both 2-d; a C-contiguous
    (..., m, k) times a 2-d (k, n) is one GEMM over the stacked rows, and so
    is a times a (..., k, n) that is one matrix repeated along its batch axes
    (stride 0: an expand, as vmap's per-sample weights are)."""
    if (b.ndim > 2 and b.size and a.ndim >= b.ndim and not any(b.strides[:-2])
            and a.shape[:-2] == np.broadcast_shapes(a.shape[:-2], b.shape[:-2])):
        b = b[(0,) * (b.ndim - 2)]
    if a.ndim > 2 and b.ndim > 2 and a.shape[-1] == 1 and b.shape[-2] == 1:
        # k = 1: a batch of outer products (vmap's per-sample weight
        # gradients x^T g), one product per element instead of a GEMM each
        return outer(a, b)
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        # the row count is explicit: reshape(-1, 0) is ambiguous for NumPy
        k = a.shape[-1]
        rows = math.prod(a.shape[:-1])
        return dot(a.reshape(rows, k), b).reshape(a.shape[:-1] + (b.shape[1],))
    if a.ndim > 2 and b.ndim > 2:
        return stacked_matmul(a, b)
    return np.matmul(a, b)


def outer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for ``a`` (..., m, 1) and ``b`` (..., 1, n): the batch of
    outer products ``np.multiply(a, b)``. Equal batch shapes of one float
    dtype from `OUTER_BIG` elements run as one threaded kernel (NumPy's
    broadcast loop runs a short inner loop per row: several times slower
    when n is small); the same bits either way."""
    lead = a.shape[:-2]
    m, n = a.shape[-2], b.shape[-1]
    rows = math.prod(lead)
    if (lead != b.shape[:-2] or a.dtype != b.dtype or a.dtype.kind != "f"
            or rows * m * n < OUTER_BIG):
        return np.multiply(a, b)
    a2 = readonly(a.reshape(rows, m))
    b2 = readonly(b.reshape(rows, n))
    out = np.empty(lead + (m, n), dtype=a.dtype)   # owns its data (callers test that)
    o3 = out.reshape(rows, m, n)
    bounds = par.bounds(par.split(rows, par.num_chunks(rows, rows * m * n, OUTER_BIG)))
    par.run_region(lambda st: _KG.outer_rows_region(a2, b2, o3, bounds, st), len(bounds) - 1)
    return out


def stacked_matmul_grads(g, a, b, need_a: bool, need_b: bool):
    """(ga, gb) of ``(..., m, k) @ (k, n)``: the batch stacked into rows, one
    GEMM each (``g @ b^T`` and ``a^T @ g``)."""
    # explicit row count: reshape(-1, 0) fails on the empty arrays a zero-sized
    # k or n gives (NumPy's matmul returns zeros there)
    k, n = b.shape
    rows = math.prod(a.shape[:-1])
    g2 = g.reshape(rows, n)
    ga = dot(g2, b.T).reshape(a.shape) if need_a else None
    gb = dot(a.reshape(rows, k).T, g2) if need_b else None
    return ga, gb


@functools.lru_cache(maxsize=512)
def _einsum_path(subscripts: str, shapes: tuple):
    """NumPy's greedy contraction path for ``subscripts`` on ``shapes``."""
    dummies = [np.broadcast_to(np.zeros((), dtype=np.float32), s) for s in shapes]
    path, _ = np.einsum_path(subscripts, *dummies, optimize="greedy")
    return tuple(path)


def einsum(subscripts: str, sizes: dict, *operands):
    """``np.einsum`` with a cached contraction path when the work pays for it
    (two or more operands whose label space reaches OPTIMIZE_MIN_WORK);
    ``sizes`` maps each label to its (broadcast) size."""
    if len(operands) >= 2:
        labels = set(subscripts.replace(",", "").replace("->", ""))
        work = 1
        for c in labels:
            work *= sizes[c]
        if work >= OPTIMIZE_MIN_WORK:
            path = _einsum_path(subscripts, tuple(o.shape for o in operands))
            return np.einsum(subscripts, *operands, optimize=list(path))
    return np.einsum(subscripts, *operands)
