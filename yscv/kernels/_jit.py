"""The project's one JIT decorator, holding the Numba flags.

``cache=True`` keeps compiled code on disk, in the first of these that is
writable: ``NUMBA_CACHE_DIR`` when set; ``__pycache__`` next to the module;
the per-user `yscv.runtime.kernel_cache_dir` (``~/.cache/yscv/numba``:
a read-only installation still compiles each kernel once per user, not once
per process). When none is writable a kernel is not cached (it compiles in
every process) and one ``RuntimeWarning`` says so.
No ``fastmath`` (it would delete NaN checks), ``error_model="numpy"``
(division by zero gives inf/nan as NumPy does, and no exception-check
branches in inner loops), and no eager signatures: functions compile on first
call, for the dtypes actually used. ``no_cfunc_wrapper``: Numba would also
build and optimise a C-callable wrapper of every kernel (for ``cfunc``
addresses and first-class function values, which yscv never uses); skipping
it trims first-call compile time (docs/engine.md, "Cold start").

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

Python's cyclic garbage collector is paused while Numba compiles a kernel
made here (`_PauseGCWhileCompiling`, a ``numba:compile`` event
listener): compiling allocates hundreds of thousands of short-lived
objects, and the collections they trigger, full ones included, walk every
object Numba and LLVM keep alive (measured: docs/engine.md, "Cold start").
Collection resumes when the outermost compile ends, error or not, and only
if it was enabled when that compile started; loading from the cache is not
paused, nor is compiling a function not made here. The same listener counts
the compiles and their seconds (`yscv.kernels.compile_stats`) and
tells watchers (`yscv.kernels.watch_compiles`: the fit loop's progress
bar) when one starts and ends.
"""
from __future__ import annotations

import gc
import hashlib
import os
import warnings

import numba

from . import _compile_event  # counters and watchers, in the package (no numba there)
from ..runtime import kernel_cache_dir

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
    with `package_stamp`, or None if Numba's classes are not there.
    Locators, first usable wins: ``NUMBA_CACHE_DIR``, the module's
    ``__pycache__``, `yscv.runtime.kernel_cache_dir`."""
    try:
        from numba.core import caching

        class UserCacheLocator(caching.UserWideCacheLocator):
            """Numba's per-user locator, in yscv's own per-user directory."""

            def __init__(self, py_func, py_file):
                super().__init__(py_func, py_file)
                self._cache_path = os.path.join(kernel_cache_dir(),
                                                self.get_suitable_cache_subpath(py_file))

        bases = (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, UserCacheLocator)

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


_warned_uncached = []


def _pause_gc_listener():
    """A ``numba:compile`` listener pausing the cyclic GC while a yscv kernel
    compiles (see the module docstring), or None without Numba's event API."""
    try:
        from numba.core import event
    except ImportError:
        return None

    class _PauseGCWhileCompiling(event.Listener):
        """Counts nested compiles; the outermost one, when it compiles a
        kernel made by `jit` with the GC enabled, disables the GC until
        it ends. Numba compiles under its global lock, so the events of
        different threads never interleave."""

        def __init__(self):
            self.depth = 0
            self.paused = False
            self.kernel = False   # the outermost compile is of a kernel made here

        def on_start(self, ev):
            self.depth += 1
            if self.depth == 1:
                disp = (ev.data or {}).get("dispatcher")
                self.kernel = bool(getattr(disp, "_yscv_kernel", False))
                if self.kernel and gc.isenabled():
                    gc.disable()
                    self.paused = True
                if self.kernel:
                    _compile_event(True)

        def on_end(self, ev):
            self.depth -= 1
            if self.depth == 0 and self.paused:
                self.paused = False
                gc.enable()
            if self.depth == 0 and self.kernel:
                self.kernel = False
                _compile_event(False)

    listener = _PauseGCWhileCompiling()
    try:
        event.register("numba:compile", listener)
    except (AttributeError, ValueError, AssertionError):
        return None
    return listener


_GC_PAUSE = _pause_gc_listener()


def _njit(fn, opts):
    opts = dict(opts)
    cache = opts.pop("cache", True)
    disp = numba.njit(**opts)(fn)
    disp._yscv_kernel = True   # the compile listener above pauses the GC for it
    if cache:
        try:
            try:
                disp._cache = _FunctionCache(disp.py_func)
            except TypeError:  # no package cache classes in this Numba
                disp.enable_caching()
        except RuntimeError:  # no writable cache directory: compile in every process
            if not _warned_uncached:
                _warned_uncached.append(True)
                warnings.warn(
                    "yscv: no writable kernel cache (the package folder, "
                    f"{kernel_cache_dir()} and NUMBA_CACHE_DIR are not writable); "
                    "kernels compile in every process", RuntimeWarning, stacklevel=3)
    return disp


def jit(fn=None, **overrides):
    """``@jit`` / ``@jit(inline="always")``: numba.njit with the project flags."""
    opts = dict(cache=True, nogil=True, error_model="numpy", no_cfunc_wrapper=True)
    opts.update(overrides)
    if fn is None:
        return lambda f: _njit(f, opts)
    return _njit(fn, opts)
