"""Array helpers shared by the drivers, the forwards and the backward rules."""
from __future__ import annotations

import numpy as np

__all__ = ["readonly", "sum_rows"]

#: ``sum_rows`` of a 2-d gradient below this many elements is one BLAS
#: product with a ones vector; OpenBLAS runs a matrix-vector product below
#: 2304 * 4 elements on the calling thread, so its summation order does not
#: depend on the thread count.
SUM_ROWS_GEMV_MAX = 2304 * 4
_ones: dict = {}


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only C-contiguous array: a view, or a copy when ``a``
    is not C-contiguous. Kernels get their inputs this way: Numba compiles a
    separate specialisation per writeable flag, and graph values may carry
    either, so this keeps one specialisation per dtype."""
    v = np.ascontiguousarray(a).view()
    v.flags.writeable = False
    return v


def sum_rows(grad: np.ndarray) -> np.ndarray:
    """``grad`` summed over its first axis (the gradient of a bias ``[C]``
    added to the rows of ``[N, C]``), a new array of ``grad.shape[1:]``.

    A float 2-d ``grad`` below `SUM_ROWS_GEMV_MAX` elements is
    ``ones[N] @ grad`` (one small BLAS call: 0.5 us against 1.1 us for
    ``np.add.reduce`` at 32x64; docs/engine.md); it sums each column in
    another order than ``np.add.reduce`` for some shapes, within rounding.
    Anything else is ``np.add.reduce(grad, axis=0)``."""
    if grad.ndim == 2 and grad.size < SUM_ROWS_GEMV_MAX and grad.dtype.kind == "f":
        n = grad.shape[0]
        key = (n, grad.dtype)
        ones = _ones.get(key)
        if ones is None:
            ones = np.ones(n, dtype=grad.dtype)
            ones.flags.writeable = False
            _ones[key] = ones
        return np.dot(ones, grad)
    return np.add.reduce(grad, axis=0)
