"""Array helpers shared by the drivers, the forwards and the backward rules."""
from __future__ import annotations

import numpy as np

__all__ = ["readonly"]


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only C-contiguous array: a view, or a copy when ``a``
    is not C-contiguous. Kernels get their inputs this way: Numba compiles a
    separate specialisation per writeable flag, and graph values may carry
    either, so this keeps one specialisation per dtype."""
    v = np.ascontiguousarray(a).view()
    v.flags.writeable = False
    return v
