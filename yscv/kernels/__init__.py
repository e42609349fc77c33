"""Numba-jitted kernels, one module per category.

Kernel modules import numba at their top, so nothing here is imported by
``import yscv``: compute modules and the optimizers reach kernels through
:func:`yscv.kernels.lazy`, which imports the kernel module on first use.
Kernels never import the rest of the package (only math, numpy, numba and
``._jit``, which asks ``yscv.runtime`` for the per-user cache directory).
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
