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


def _ones_vector(n: int, dtype) -> np.ndarray:
    """A read-only ``ones[n]`` of ``dtype``, made once per (n, dtype)."""
    key = (n, dtype)
    ones = _ones.get(key)
    if ones is None:
        ones = np.ones(n, dtype=dtype)
        ones.flags.writeable = False
        _ones[key] = ones
    return ones


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
        return np.dot(_ones_vector(n, grad.dtype), grad)
    return np.add.reduce(grad, axis=0)


def broadcasts_to(gshape: tuple, shape: tuple) -> bool:
    """Whether an array of ``shape`` broadcasts to ``gshape`` (so a gradient
    of ``gshape`` sums back to ``shape``)."""
    extra = len(gshape) - len(shape)
    return extra >= 0 and all(s == 1 or s == gs for s, gs in zip(shape, gshape[extra:]))


def sum_to_shape(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """``grad`` summed over the axes along which ``shape`` was broadcast to
    ``grad.shape`` (leading axes, and size-1 axes of ``shape``), as an array
    of ``shape``: a broadcast operand's gradient. The caller checks
    `broadcasts_to` first. Every walk (array and recorded, through the
    ``sum_to`` op whose forward this is) sums with this one function."""
    gshape = grad.shape
    if gshape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra == 1 and gshape[1:] == shape:  # a bias [C] added to rows [N, C]
        return sum_rows(grad)
    axes = tuple(range(extra)) + tuple(
        extra + k for k, s in enumerate(shape) if s == 1 and gshape[extra + k] != 1)
    if not axes:
        return grad.reshape(shape)
    if (axes[0] > 0 and axes[-1] - axes[0] == len(axes) - 1 and axes[-1] < grad.ndim - 1
            and grad.dtype.kind == "f" and grad.flags.c_contiguous):
        summed = _sum_middle(grad, axes[0], axes[-1] + 1)
        if summed is not None:
            return summed.reshape(shape)
    return np.add.reduce(grad, axis=axes).reshape(shape)


def _sum_middle(grad: np.ndarray, a0: int, a1: int):
    """C-contiguous ``grad`` summed over its axes ``a0:a1`` (neither the
    first nor the last: a per-sample bias ``[B, 1, C]`` added to ``[B, L,
    C]``) as ``ones[n] @ grad[pre, n, post]``: one matrix-vector product per
    leading index, each below `SUM_ROWS_GEMV_MAX` elements (so on the
    calling thread, in an order fixed by the shape). NumPy's reduction over
    a middle axis with a short contiguous tail runs 5-13x slower. None when
    the blocks are larger."""
    gshape = grad.shape
    pre = int(np.prod(gshape[:a0]))
    n = int(np.prod(gshape[a0:a1]))
    post = int(np.prod(gshape[a1:]))
    if n * post >= SUM_ROWS_GEMV_MAX or not n:
        return None
    return np.matmul(_ones_vector(n, grad.dtype), grad.reshape(pre, n, post))
