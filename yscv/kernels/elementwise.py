"""Elementwise kernels for the patterns NumPy's ufuncs run slowly.

``bias_add_rows``: a row vector added to every row, ``a[N, C] + b[C]`` (the
bias of a linear layer). NumPy's broadcasting add walks it as N inner loops
of C with the broadcast operand re-strided each time, which is slower than
this loop (timings in docs/ops/elementwise.md). The sum is
the same IEEE addition, so the results are bit-identical to NumPy's.

``erf_flat`` / ``erfc_flat``: the error function and its complement, which
NumPy has no ufunc for. ``math.erf`` / ``math.erfc`` compile to libm's
``erff`` / ``erfcf`` for float32 and ``erf`` / ``erfc`` for float64, so each
dtype is computed in itself (no promotion), to about one ulp.
"""
from __future__ import annotations

import math

from ._jit import jit


@jit
def bias_add_rows(a, b, out):
    """``out[i, j] = a[i, j] + b[j]``.

    Args:
        a: [N, C] C-contiguous (read-only); b: [C] (read-only), a's dtype.
        out: [N, C] C-contiguous, a's dtype (written here).
    """
    n, c = a.shape
    for i in range(n):
        ai = a[i]
        oi = out[i]
        for j in range(c):
            oi[j] = ai[j] + b[j]


@jit
def erf_flat(x, out):
    """``out[i] = erf(x[i])``; x 1-D (read-only), out 1-D of x's dtype."""
    for i in range(x.shape[0]):
        out[i] = math.erf(x[i])


@jit
def erfc_flat(x, out):
    """``out[i] = erfc(x[i]) = 1 - erf(x[i])``, accurate in the tail where
    ``1 - erf`` would cancel to 0."""
    for i in range(x.shape[0]):
        out[i] = math.erfc(x[i])
