"""The elementwise names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node."""
from __future__ import annotations

import numpy as np  # noqa: F401

from ...compute import elementwise as ew


class ArrayElementwise:
    """Elementwise ops on arrays, for the rules of backward/."""

    __slots__ = ()

    add = staticmethod(np.add)
    sub = staticmethod(np.subtract)
    mul = staticmethod(np.multiply)
    div = staticmethod(np.divide)
    neg = staticmethod(np.negative)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sqrt = staticmethod(np.sqrt)
    abs = staticmethod(np.abs)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    sinh = staticmethod(np.sinh)
    cosh = staticmethod(np.cosh)
    square = staticmethod(np.square)
    reciprocal = staticmethod(np.reciprocal)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    sign = staticmethod(np.sign)
    pow = staticmethod(np.power)

    @staticmethod
    def where(cond, a, b):
        """``np.where`` (`yscv.compute.elementwise.where`: a select on the
        bits for large masks); a Python scalar operand does not promote
        (NumPy 2's weak scalars), so the result has the array operand's
        dtype."""
        return ew.where(cond, a, b)
