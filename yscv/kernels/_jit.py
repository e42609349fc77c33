"""The project's one JIT decorator, holding the Numba flags.

``cache=True`` keeps compiled code on disk: next to the module
(``__pycache__``), or, when that folder is read-only, in a per-user cache
directory (override both with the ``NUMBA_CACHE_DIR`` environment variable).
No ``fastmath`` (it would delete NaN checks), ``error_model="numpy"``
(division by zero gives inf/nan as NumPy does, and no exception-check
branches in inner loops), and no eager signatures: functions compile on first
call, for the dtypes actually used.

Cache freshness. Numba stamps a cached function with the contents of the one
file that defines it, so a kernel that calls a helper from another module
(``simd``, ``gemm``, the fast ``exp`` ...) would keep running the helper's
old code after an edit. Kernels made here are stamped instead with the
contents of every ``.py`` file in ``yscv/kernels``: editing any kernel file
recompiles every yscv kernel once (on first call), never runs stale code,
and kernels can share helper modules. This uses Numba's cache-locator classes
(``numba.core.caching``, stable across the 0.68 series the project pins);
should they ever be missing, the decorator falls back to Numba's own
per-file caching.
"""
from __future__ import annotations

import hashlib
import os

import numba

KERNELS_DIR = os.path.dirname(os.path.abspath(__file__))
_stamp_memo: dict = {}


def package_stamp() -> bytes:
    """sha256 over the names and contents of the ``.py`` files in
    ``yscv/kernels`` (re-read only when a file's mtime or size changes)."""
    files = sorted(f for f in os.listdir(KERNELS_DIR) if f.endswith(".py"))
    key = []
    for f in files:
        st = os.stat(os.path.join(KERNELS_DIR, f))
        key.append((f, st.st_mtime_ns, st.st_size))
    key = tuple(key)
    stamp = _stamp_memo.get(key)
    if stamp is None:
        h = hashlib.sha256()
        for f in files:
            h.update(f.encode() + b"\0")
            with open(os.path.join(KERNELS_DIR, f), "rb") as fh:
                h.update(fh.read())
            h.update(b"\0")
        stamp = h.digest()
        _stamp_memo.clear()
        _stamp_memo[key] = stamp
    return stamp


def _package_function_cache():
    """A ``numba.core.caching.FunctionCache`` subclass whose locators stamp
    with :func:`package_stamp`, or None if Numba's classes are not there."""
    try:
        from numba.core import caching

        bases = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                 caching.UserWideCacheLocator)

        class _Stamp:
            def get_source_stamp(self):
                return package_stamp()

        locators = [type("Package" + b.__name__, (_Stamp, b), {}) for b in bases]
        impl = type("PackageCacheImpl", (caching.CompileResultCacheImpl,),
                    {"_locator_classes": locators})
        return type("PackageFunctionCache", (caching.FunctionCache,), {"_impl_class": impl})
    except (ImportError, AttributeError, TypeError):
        return None


_FunctionCache = _package_function_cache()


def _njit(fn, opts):
    opts = dict(opts)
    cache = opts.pop("cache", True)
    disp = numba.njit(**opts)(fn)
    if cache:
        try:
            disp._cache = _FunctionCache(disp.py_func)
        except (TypeError, RuntimeError):  # no package cache, or no locator for this file
            disp.enable_caching()
    return disp


def jit(fn=None, **overrides):
    """``@jit`` / ``@jit(inline="always")``: numba.njit with the project flags."""
    opts = dict(cache=True, nogil=True, error_model="numpy")
    opts.update(overrides)
    if fn is None:
        return lambda f: _njit(f, opts)
    return _njit(fn, opts)
