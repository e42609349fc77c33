"""Elementwise drivers: ``x[..., C] + bias[C]`` by a kernel on large arrays.

NumPy's broadcasting add re-walks the bias for every row; the Numba kernel
(`yscv.kernels.elementwise`) adds it row by row and is several times
faster from `BIAS_ADD_MIN` elements on (numbers in
docs/ops/elementwise.md); below that NumPy's lower per-call cost wins. IEEE
addition commutes exactly, so either operand order gives the same bits.

``erf`` / ``erfc``: NumPy has no ufunc for them; the kernels call libm in
the array's own dtype.
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy

K = lazy("elementwise")

#: output size from which a row-vector add runs in the kernel
BIAS_ADD_MIN = 4096


def _bias_add(x, bias):
    """``x + bias`` for x [..., C] and bias [C] of x's dtype, by the kernel."""
    c = x.shape[-1]
    out = np.empty(x.shape, x.dtype)
    a = np.ascontiguousarray(x).reshape(-1, c)
    a.flags.writeable = False         # kernels see read-only inputs: one
    b = np.ascontiguousarray(bias).view()  # specialisation per dtype
    b.flags.writeable = False
    K.bias_add_rows(a, b, out.reshape(-1, c))
    return out


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b``; a row vector added to the rows of a large C-contiguous array
    of the same dtype (either order) goes to the kernel."""
    if a.ndim >= 2 and b.ndim == 1 and a.size >= BIAS_ADD_MIN:
        if b.shape[0] == a.shape[-1] and a.dtype == b.dtype and a.flags.c_contiguous:
            return _bias_add(a, b)
    elif b.ndim >= 2 and a.ndim == 1 and b.size >= BIAS_ADD_MIN:
        if a.shape[0] == b.shape[-1] and a.dtype == b.dtype and b.flags.c_contiguous:
            return _bias_add(b, a)
    return a + b


def _flat_unary(kernel, x: np.ndarray) -> np.ndarray:
    """``kernel(x_flat, out_flat)``: x made contiguous and flat, out of its shape."""
    out = np.empty(x.shape, x.dtype)
    a = np.ascontiguousarray(x).reshape(-1)
    a.flags.writeable = False
    kernel(a, out.reshape(-1))
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise (x's float dtype)."""
    return _flat_unary(K.erf_flat, x)


def erfc(x: np.ndarray) -> np.ndarray:
    """``1 - erf(x)``, elementwise, without the cancellation for large x."""
    return _flat_unary(K.erfc_flat, x)
