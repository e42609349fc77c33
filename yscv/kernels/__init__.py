"""Numba-jitted kernels, one module per category.

Kernel modules import numba at their top, so nothing here is imported by
``import yscv``: compute modules and the optimizers reach kernels through
`yscv.kernels.lazy`, which imports the kernel module on first use.
Kernels never import the rest of the package (only math, numpy, numba and
``._jit``, which asks ``yscv.runtime`` for the per-user cache directory).

Kernels write ``b if b < a else a`` rather than the ``min(a, b)`` builtin
(and ``b if b > a else a`` for ``max(a, b)``: the same selection, NaN
included), and take scratch from their caller or allocate it once: Numba
compiles the builtins and each ``np.empty`` / ``np.zeros`` as a helper of
its own, per type, on a kernel's first call (~0.02-0.08 s apiece; the cold
start of docs/engine.md).
"""
from __future__ import annotations

import contextlib
import importlib
import time


class _LazyModule:
    """Attribute access imports ``yscv.kernels.<name>`` once, then is a plain
    instance-dict lookup."""

    def __init__(self, name: str):
        self.__dict__["_name"] = name

    def __getattr__(self, attr):
        mod = importlib.import_module(f"yscv.kernels.{self._name}")
        self.__dict__.update(
            {k: v for k, v in vars(mod).items() if not k.startswith("__")}
        )
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"yscv.kernels.{self._name} has no attribute {attr!r}") from None


def lazy(name: str) -> _LazyModule:
    """A lazily imported kernel module: ``K = lazy("softmax"); K.softmax_rows(x)``."""
    return _LazyModule(name)


# ------------------------------------------------ compilations in this process
# Filled by the ``numba:compile`` listener of ``._jit`` (which imports numba);
# kept here so that reading them, or watching for them, imports nothing.
_compile_totals = {"count": 0, "seconds": 0.0, "started": None}
_compile_watchers: list = []


def compile_stats() -> tuple:
    """``(count, seconds)``: how many yscv kernels (one per compiled signature)
    this process has compiled so far, and the wall seconds spent compiling
    them. Kernels loaded from the on-disk cache are not counted: a run with
    a warm cache reports ``(0, 0.0)``."""
    return _compile_totals["count"], _compile_totals["seconds"]


@contextlib.contextmanager
def watch_compiles(fn):
    """Within the block, ``fn(True)`` is called when a yscv kernel starts
    compiling and ``fn(False)`` when it is done (error or not), from the
    compiling thread. A progress bar uses it to say it is compiling."""
    _compile_watchers.append(fn)
    try:
        yield fn
    finally:
        _compile_watchers.remove(fn)


def _compile_event(started: bool) -> None:
    """Called by ``._jit`` at the start and end of each outermost compile of
    a kernel it made."""
    if started:
        _compile_totals["started"] = time.perf_counter()
    else:
        t0, _compile_totals["started"] = _compile_totals["started"], None
        _compile_totals["count"] += 1
        if t0 is not None:
            _compile_totals["seconds"] += time.perf_counter() - t0
    for fn in list(_compile_watchers):
        try:
            fn(started)
        except Exception:  # a display hook must never break a compile
            pass
