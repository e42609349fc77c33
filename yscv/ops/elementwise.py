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
from ..registry import register_forward, register_ufunc
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


# operands of one ndim: the forwards above are these ufuncs (registry.UFUNC)
register_ufunc(Op.ADD, np.add)
register_ufunc(Op.SUB, np.subtract)
register_ufunc(Op.MUL, np.multiply)


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
    return ew.where(cond, a, b), None


# ------------------------------------------------------------ math
# Outside a function's domain or range (asin(2), log2(0), tan's overflow,
# sinh(1000)) the values are IEEE's nan/inf without NumPy's warning, as above.
for _op, _ufunc in ((Op.SIN, np.sin), (Op.COS, np.cos), (Op.TAN, np.tan),
                    (Op.ASIN, np.arcsin), (Op.ACOS, np.arccos), (Op.ATAN, np.arctan),
                    (Op.ATAN2, np.arctan2), (Op.SINH, np.sinh), (Op.COSH, np.cosh),
                    (Op.FLOOR, np.floor), (Op.CEIL, np.ceil), (Op.ROUND, np.rint),
                    (Op.TRUNC, np.trunc), (Op.RECIPROCAL, np.reciprocal),
                    (Op.SQUARE, np.square), (Op.LOG1P, np.log1p), (Op.EXPM1, np.expm1),
                    (Op.LOG2, np.log2), (Op.LOG10, np.log10)):
    ufunc_forward(_op, _ufunc, quiet=True)


@register_forward(Op.ERF)
def erf_forward(attrs, x):
    return ew.erf(x), None


@register_forward(Op.ERFC)
def erfc_forward(attrs, x):
    return ew.erfc(x), None


@register_forward(Op.SIGN)
def sign_forward(attrs, x):
    """``(x > 0) - (x < 0)``, as PyTorch: 0 for NaN and for -0 (np.sign
    gives NaN and -0 there)."""
    return np.subtract(x > 0, x < 0, dtype=x.dtype), None


@register_forward(Op.RSQRT)
def rsqrt_forward(attrs, x):
    """``1 / sqrt(x)``, two roundings as PyTorch's CPU kernel."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.reciprocal(np.sqrt(x)), None


@register_forward(Op.REMAINDER)
def remainder_forward(attrs, a, b):
    """``a - b * floor(a / b)`` with b's sign, computed as PyTorch does:
    ``fmod(a, b)``, plus ``b`` where that is non-zero and its sign differs
    from b's (so remainder(-0, 2) = -0 as in PyTorch; np.remainder gives +0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.fmod(a, b)
        fix = (r != 0) & ((r < 0) != (b < 0))
        return np.where(fix, r + b, r), None


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
(_SIN, _COS, _TAN, _ASIN, _ACOS, _ATAN, _ATAN2, _SINH, _COSH, _ERF, _ERFC, _SIGN, _FLOOR,
 _CEIL, _ROUND, _TRUNC, _RECIPROCAL, _RSQRT, _SQUARE, _LOG1P, _EXPM1, _LOG2, _LOG10,
 _REMAINDER) = (
    Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.ATAN2, Op.SINH, Op.COSH, Op.ERF,
    Op.ERFC, Op.SIGN, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC, Op.RECIPROCAL, Op.RSQRT,
    Op.SQUARE, Op.LOG1P, Op.EXPM1, Op.LOG2, Op.LOG10, Op.REMAINDER)


class ElementwiseOps:
    """Graph methods of the elementwise category."""

    def add(self, a, b):
        """``a + b`` with broadcasting. Backward: (g, g)."""
        return self._apply2(_ADD, a, b)

    def sub(self, a, b):
        """``a - b`` with broadcasting. Backward: (g, -g)."""
        return self._apply2(_SUB, a, b)

    def mul(self, a, b):
        """``a * b`` with broadcasting. Backward: (``g*b``, ``g*a``)."""
        return self._apply2(_MUL, a, b)

    def div(self, a, b):
        """``a / b`` with broadcasting. Backward: (g/b, ``-g*out/b``)."""
        return self._apply2(_DIV, a, b)

    def pow(self, base, exponent):
        """``base ** exponent``. Backward: ``g*e*base**(e-1)`` (0 where e == 0) and
        ``g*out*log(base)`` (0 where base == 0 and e >= 0), as PyTorch."""
        return self._apply2(_POW, base, exponent)

    def neg(self, x):
        """``-x``."""
        return self._apply1(_NEG, x)

    def abs(self, x):
        """``|x|``; gradient sign(x), 0 at 0."""
        return self._apply1(_ABS, x)

    def exp(self, x):
        """``exp(x)``; backward ``g*out``."""
        return self._apply1(_EXP, x)

    def log(self, x):
        """Natural log; backward g/x."""
        return self._apply1(_LOG, x)

    def sqrt(self, x):
        """Square root; backward ``g/(2*out)``."""
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

    # -------------------------------------------------------- math
    def sin(self, x):
        """``sin(x)``; backward ``g*cos(x)``."""
        return self._apply1(_SIN, x)

    def cos(self, x):
        """``cos(x)``; backward ``-g*sin(x)``."""
        return self._apply1(_COS, x)

    def tan(self, x):
        """``tan(x)``; backward ``g*(1 + out^2)``."""
        return self._apply1(_TAN, x)

    def asin(self, x):
        """``arcsin(x)`` (nan outside [-1, 1]); backward g/sqrt(1 - x^2)."""
        return self._apply1(_ASIN, x)

    def acos(self, x):
        """``arccos(x)`` (nan outside [-1, 1]); backward -g/sqrt(1 - x^2)."""
        return self._apply1(_ACOS, x)

    def atan(self, x):
        """``arctan(x)``; backward g/(1 + x^2)."""
        return self._apply1(_ATAN, x)

    def atan2(self, y, x):
        """The angle of the point (x, y), in [-pi, pi], with broadcasting
        (``torch.atan2(y, x)``). Backward: (``g*x``, ``-g*y``) / (x^2 + y^2)."""
        return self._apply2(_ATAN2, y, x)

    def sinh(self, x):
        """``sinh(x)``; backward ``g*cosh(x)``."""
        return self._apply1(_SINH, x)

    def cosh(self, x):
        """``cosh(x)``; backward ``g*sinh(x)``."""
        return self._apply1(_COSH, x)

    def erf(self, x):
        """The error function; backward g * 2/sqrt(pi) * exp(-x^2)."""
        return self._apply1(_ERF, x)

    def erfc(self, x):
        """``1 - erf(x)``, without cancellation for large x; backward
        -g * 2/sqrt(pi) * exp(-x^2)."""
        return self._apply1(_ERFC, x)

    def sign(self, x):
        """-1, 0 or 1 (0 for NaN, as PyTorch); zero gradient."""
        return self._apply1(_SIGN, x)

    def floor(self, x):
        """Round down; zero gradient."""
        return self._apply1(_FLOOR, x)

    def ceil(self, x):
        """Round up; zero gradient."""
        return self._apply1(_CEIL, x)

    def round(self, x):
        """Round to the nearest integer, halves to even (as torch.round);
        zero gradient."""
        return self._apply1(_ROUND, x)

    def trunc(self, x):
        """Round toward zero; zero gradient."""
        return self._apply1(_TRUNC, x)

    def reciprocal(self, x):
        """``1 / x``; backward ``-g*out^2``."""
        return self._apply1(_RECIPROCAL, x)

    def rsqrt(self, x):
        """``1 / sqrt(x)``; backward ``-g*out^3/2``."""
        return self._apply1(_RSQRT, x)

    def square(self, x):
        """``x * x``; backward ``2*g*x``."""
        return self._apply1(_SQUARE, x)

    def log1p(self, x):
        """``log(1 + x)``, accurate for small x; backward g/(1 + x)."""
        return self._apply1(_LOG1P, x)

    def expm1(self, x):
        """``exp(x) - 1``, accurate for small x; backward ``g*(out + 1)``."""
        return self._apply1(_EXPM1, x)

    def log2(self, x):
        """Base-2 log; backward g/(x ln 2)."""
        return self._apply1(_LOG2, x)

    def log10(self, x):
        """Base-10 log; backward g/(x ln 10)."""
        return self._apply1(_LOG10, x)

    def remainder(self, a, b):
        """``a - b * floor(a / b)``, with broadcasting: the result has b's sign
        (Python's ``%`` and torch.remainder; nan where b = 0). Backward: g and
        -g * floor(a / b), as PyTorch."""
        return self._apply2(_REMAINDER, a, b)
