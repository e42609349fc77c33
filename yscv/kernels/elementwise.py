"""Elementwise kernels for the patterns NumPy's ufuncs run slowly.

``bias_add_rows``: a row vector added to every row, ``a[N, C] + b[C]`` (the
bias of a linear layer). NumPy's broadcasting add walks it as N inner loops
of C with the broadcast operand re-strided each time, which is slower than
this loop (timings in docs/ops/elementwise.md). The sum is
the same IEEE addition, so the results are bit-identical to NumPy's.
"""
from __future__ import annotations

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
