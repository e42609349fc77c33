"""Numba-jitted kernels, one module per category.

Kernel modules import numba at their top, so nothing here is imported by
``import yscv``: compute modules and the optimizers reach kernels through
:func:`yscv.kernels.lazy`, which imports the kernel module on first use.
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

import importlib


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
