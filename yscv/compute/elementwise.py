"""Elementwise drivers: ``x[..., C] + bias[C]`` by a kernel on large arrays.

NumPy's broadcasting add re-walks the bias for every row; the Numba kernel
(`yscv.kernels.elementwise`) adds it row by row and is several times
faster from `BIAS_ADD_MIN` elements on (numbers in
docs/ops/elementwise.md); below that NumPy's lower per-call cost wins. IEEE
addition commutes exactly, so either operand order gives the same bits.

``erf`` / ``erfc``: NumPy has no ufunc for them; the kernels call libm in
the array's own dtype.

``where``: ``np.where`` branches on every element and is slow on a random
mask (a leaky ReLU's gradient: 39 µs for 32,768 float32 elements, where a
multiply takes 3 µs); from `SELECT_MIN` elements the same select runs on
the bits in two to four branch-free integer passes, with np.where's values
and dtype.
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


#: elements from which `where` selects on the bits
SELECT_MIN = 1024
_BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def where(cond, a, b):
    """``np.where(cond, a, b)``: the same values (bit for bit: NaN payloads,
    signed zeros) and dtype. A boolean ``cond`` of `SELECT_MIN` elements or
    more, with ``a`` and ``b`` C-contiguous float32/float64 arrays of its
    shape and one dtype (or one of them a Python number, cast to the
    other's dtype as NumPy 2 casts a weak scalar), selects on the bits: a
    mask of all ones where ``cond`` holds, then ``b ^ ((a ^ b) & mask)``
    (``a & mask`` when ``b`` is +0.0). Anything else is np.where's."""
    if type(cond) is np.ndarray and cond.dtype == np.bool_ and cond.size >= SELECT_MIN:
        out = _select(cond, a, b)
        if out is not None:
            return out
    return np.where(cond, a, b)


def _select(cond, a, b):
    """`where` on the bits, or None when the operands do not qualify."""
    arr = a if type(a) is np.ndarray else b
    if type(arr) is not np.ndarray:
        return None
    bits_t = _BITS.get(arr.dtype)
    if bits_t is None:
        return None
    ab = _bits(a, arr.dtype, bits_t, cond.shape)
    bb = _bits(b, arr.dtype, bits_t, cond.shape)
    if ab is None or bb is None:
        return None
    mask = np.subtract(0, cond, dtype=bits_t)        # -1 (all ones) where cond, else 0
    if type(bb) is not np.ndarray and bb == 0:       # b is +0.0: a & mask
        return np.bitwise_and(ab, mask, out=mask).view(arr.dtype)
    out = np.bitwise_xor(ab, bb)
    np.bitwise_and(out, mask, out=out)
    np.bitwise_xor(out, bb, out=out)
    return out.view(arr.dtype)


def _bits(v, dtype, bits_t, shape):
    """``v``'s bits as ``bits_t``: a C-contiguous array of ``dtype`` and
    ``shape`` as a view, a Python number (or a NumPy scalar of ``dtype``)
    as one integer; None otherwise."""
    if type(v) is np.ndarray:
        ok = v.dtype == dtype and v.shape == shape and v.flags.c_contiguous
        return v.view(bits_t) if ok else None
    if type(v) in (float, int) or (isinstance(v, np.generic) and v.dtype == dtype):
        return np.array(v, dtype=dtype).view(bits_t)[()]
    return None
