"""The project's one JIT decorator, holding the Numba flags.

``cache=True`` writes compiled code next to the module; when that folder is
read-only Numba quietly falls back to a per-user cache directory (override it
with the ``NUMBA_CACHE_DIR`` environment variable). No ``fastmath`` (it would
delete NaN checks), ``error_model="numpy"`` (division by zero gives inf/nan as
NumPy does, and no exception-check branches in inner loops), and no eager
signatures: functions compile on first call, for the dtypes actually used.
"""
from __future__ import annotations

import numba


def jit(fn=None, **overrides):
    """``@jit`` / ``@jit(parallel=True)``: numba.njit with the project flags."""
    opts = dict(cache=True, nogil=True, error_model="numpy")
    opts.update(overrides)
    if fn is None:
        return lambda f: numba.njit(**opts)(f)
    return numba.njit(**opts)(fn)
