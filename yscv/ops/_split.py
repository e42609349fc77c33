"""Split one large elementwise kernel call over two cores.

Numba kernels are compiled ``nogil``, so two Python threads can run them at
once. :func:`run_halves` calls ``fn(lo, hi)`` for the two halves of
``range(n)``: the second half on one persistent daemon worker thread, the
first on the calling thread, then waits for both. Below ``min_n`` elements,
or on a one-core machine, it is a single ``fn(0, n)`` call.

Only elementwise kernels use it (each output element depends on its own
input elements), so results are bit-identical whichever way a call is split.
Dispatching to the worker costs ~20-40 us, so callers pass a ``min_n`` at
which half the kernel's work is clearly more than that (measured per kernel
at the call site). Two Python threads calling ops at once share the one
worker: their second halves queue, which is safe, just not faster.
"""
from __future__ import annotations

import os
import threading

_worker = None
_lock = threading.Lock()
#: more than one core: worth splitting (fixed at import; tests may patch it)
ENABLED = (os.cpu_count() or 1) > 1


def _executor():
    global _worker
    if _worker is None:
        with _lock:
            if _worker is None:
                from concurrent.futures import ThreadPoolExecutor
                _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="yscv-split")
    return _worker


def run_halves(fn, n: int, min_n: int) -> None:
    """``fn(0, n)``, or ``fn(0, n // 2)`` here and ``fn(n // 2, n)`` on the
    worker thread concurrently when ``n >= min_n`` (and the machine has more
    than one core). Exceptions from either half propagate."""
    if n < min_n or not ENABLED:
        fn(0, n)
        return
    half = n // 2
    future = _executor().submit(fn, half, n)
    try:
        fn(0, half)
    finally:
        future.result()
