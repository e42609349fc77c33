"""Elementwise ops (forward), broadcasting like NumPy.

Binary ops take a NodeId or a Python scalar / NumPy array for either operand;
the latter becomes a constant leaf (appended only if the op succeeds).
Nothing is saved for backward: it reads the input values and the output.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..compute import elementwise as ew
from ..node import Op
from ..registry import register_forward
from ._common import is_scalar, ufunc_forward


class ClampAttrs(NamedTuple):
    """clamp: the bounds (either may be None, not both)."""

    lo: Optional[float]
    hi: Optional[float]


# where's attribute is its read-only boolean ``cond`` array; the others have none.


@register_forward(Op.ADD)
def add_forward(attrs, a, b):
    """``a + b`` (NumPy). Operands of different ndim may be a bias row added to
    a larger array, which the driver may hand to a kernel."""
    if a.ndim == b.ndim:
        return a + b, None
    return ew.add(a, b), None


@register_forward(Op.SUB)
def sub_forward(attrs, a, b):
    return a - b, None


@register_forward(Op.MUL)
def mul_forward(attrs, a, b):
    return a * b, None


ufunc_forward(Op.DIV, np.true_divide, quiet=True)   # x / 0 = inf, 0 / 0 = nan: no warning
ufunc_forward(Op.POW, np.power, quiet=True)
ufunc_forward(Op.NEG, np.negative)
ufunc_forward(Op.ABS, np.abs)
ufunc_forward(Op.EXP, np.exp, quiet=True)
ufunc_forward(Op.LOG, np.log, quiet=True)
ufunc_forward(Op.SQRT, np.sqrt, quiet=True)
ufunc_forward(Op.MAXIMUM, np.maximum)
ufunc_forward(Op.MINIMUM, np.minimum)


@register_forward(Op.CLAMP)
def clamp_forward(attrs, x):
    return np.clip(x, attrs.lo, attrs.hi).astype(x.dtype, copy=False), None


@register_forward(Op.WHERE)
def where_forward(cond, a, b):
    return np.where(cond, a, b), None


# module constants: Enum attribute access is slow on the hot path
_ABS = Op.ABS
_ADD = Op.ADD
_CLAMP = Op.CLAMP
_DIV = Op.DIV
_EXP = Op.EXP
_LOG = Op.LOG
_MAXIMUM = Op.MAXIMUM
_MINIMUM = Op.MINIMUM
_MUL = Op.MUL
_NEG = Op.NEG
_POW = Op.POW
_SQRT = Op.SQRT
_SUB = Op.SUB
_WHERE = Op.WHERE


class ElementwiseOps:
    """Graph methods of the elementwise category."""

    def add(self, a, b):
        """``a + b`` with broadcasting. Backward: (g, g)."""
        return self._apply2(_ADD, a, b)

    def sub(self, a, b):
        """``a - b`` with broadcasting. Backward: (g, -g)."""
        return self._apply2(_SUB, a, b)

    def mul(self, a, b):
        """``a * b`` with broadcasting. Backward: (g*b, g*a)."""
        return self._apply2(_MUL, a, b)

    def div(self, a, b):
        """``a / b`` with broadcasting. Backward: (g/b, -g*out/b)."""
        return self._apply2(_DIV, a, b)

    def pow(self, base, exponent):
        """``base ** exponent``. Backward: g*e*base**(e-1) (0 where e == 0) and
        g*out*log(base) (0 where base == 0 and e >= 0), as PyTorch."""
        return self._apply2(_POW, base, exponent)

    def neg(self, x):
        """``-x``."""
        return self._apply1(_NEG, x)

    def abs(self, x):
        """``|x|``; gradient sign(x), 0 at 0."""
        return self._apply1(_ABS, x)

    def exp(self, x):
        """``exp(x)``; backward g*out."""
        return self._apply1(_EXP, x)

    def log(self, x):
        """Natural log; backward g/x."""
        return self._apply1(_LOG, x)

    def sqrt(self, x):
        """Square root; backward g/(2*out)."""
        return self._apply1(_SQRT, x)

    def clamp(self, x, min=None, max=None):
        """Clip to [min, max] (either may be None). The gradient passes where
        min <= x <= max (bounds inclusive, as PyTorch)."""
        for name, bound in (("min", min), ("max", max)):
            if bound is not None and not is_scalar(bound):
                raise TypeError(f"clamp: {name} must be a real number or None, got {bound!r}")
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        if min is not None and max is not None and min > max:
            raise ValueError(f"clamp: min={min} is greater than max={max}")
        lo = None if min is None else float(min)
        hi = None if max is None else float(max)
        return self._apply1(_CLAMP, x, ClampAttrs(lo, hi))

    def maximum(self, a, b):
        """Elementwise max; ties split the gradient evenly (as PyTorch)."""
        return self._apply2(_MAXIMUM, a, b)

    def minimum(self, a, b):
        """Elementwise min; ties split the gradient evenly (as PyTorch)."""
        return self._apply2(_MINIMUM, a, b)

    def where(self, cond, a, b):
        """``cond ? a : b`` with broadcasting; ``cond`` is a boolean array
        (an attribute, not a node)."""
        c = np.asarray(cond)
        if c.dtype != np.bool_:
            raise TypeError(f"where: cond must be a boolean array, got dtype {c.dtype}")
        c = c.copy()
        c.flags.writeable = False
        return self._apply2(_WHERE, a, b, c)
