"""The reduce names of the array interpreter (yscv/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node."""
from __future__ import annotations

import numpy as np  # noqa: F401


class ArrayReduce:
    """Reduce ops on arrays, for the rules of backward/."""

    __slots__ = ()

    pass


# ------------------------------------------------------------------ sum_to
# ``ns.sum_to(x, shape)``: Graph.sum_to's forward (yscv/ops/reduce.py) on an
# array, the function every walk sums broadcast gradients with.
from ..compute.arrays import sum_to_shape as _sum_to_shape  # noqa: E402


def _array_sum_to(x, shape):
    """``x`` summed over the axes along which ``shape`` broadcasts to it."""
    return _sum_to_shape(x, tuple(shape))


ArrayReduce.sum_to = staticmethod(_array_sum_to)
