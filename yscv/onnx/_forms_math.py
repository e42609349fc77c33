"""ONNX forms of the elementwise math ops: trigonometric
and hyperbolic functions, erf/erfc, the rounding ops, reciprocal, rsqrt,
square, log1p, expm1, log2, log10, atan2 and remainder (one mapping
function per Op member; see `yscv.onnx._optable`).

Where ONNX has no operator the form composes one, keeping yscv's values:
``trunc`` rounds toward zero by the sign; ``log1p`` and ``expm1`` use
Kahan's corrections near 0, where ``Log(1 + x)`` and ``Exp(x) - 1`` would
lose every digit; ``atan2`` corrects ``Atan(y / x)`` by the quadrant (signed
zeros included); ``remainder`` is ``Mod(fmod=1)`` moved to the divisor's
sign, as yscv and PyTorch compute it. ``erfc`` is ``1 - Erf``: accurate
in absolute terms, not relative ones far in the right tail.
"""
from __future__ import annotations

import math

from ..node import Op
from ._registry import onnx_form


def _simple(op: Op, onnx_op: str):
    def emit(b, n):
        return b.emit(onnx_op, [n.x()])
    emit.__name__ = f"_{op.name.lower()}"
    return onnx_form(op, onnx_op)(emit)


for _op, _onnx in ((Op.SIN, "Sin"), (Op.COS, "Cos"), (Op.TAN, "Tan"), (Op.ASIN, "Asin"),
                   (Op.ACOS, "Acos"), (Op.ATAN, "Atan"), (Op.SINH, "Sinh"), (Op.COSH, "Cosh"),
                   (Op.ERF, "Erf"), (Op.FLOOR, "Floor"), (Op.CEIL, "Ceil"),
                   (Op.ROUND, "Round"), (Op.RECIPROCAL, "Reciprocal")):
    _simple(_op, _onnx)


@onnx_form(Op.ERFC, "Erf, Sub")
def _erfc(b, n):
    return b.emit("Sub", [b.scalar(1.0), b.emit("Erf", [n.x()])])


@onnx_form(Op.SIGN, "Greater, Less, Cast, Sub")
def _sign(b, n):
    """(x > 0) - (x < 0): 0 for NaN and -0, as yscv and PyTorch."""
    x, zero = n.x(), b.scalar(0.0)
    pos = b.emit("Cast", [b.emit("Greater", [x, zero])], to=b.elem_type)
    neg = b.emit("Cast", [b.emit("Less", [x, zero])], to=b.elem_type)
    return b.emit("Sub", [pos, neg])


@onnx_form(Op.TRUNC, "Less, Ceil, Floor, Where")
def _trunc(b, n):
    x = n.x()
    neg = b.emit("Less", [x, b.scalar(0.0)])
    return b.emit("Where", [neg, b.emit("Ceil", [x]), b.emit("Floor", [x])])


@onnx_form(Op.RSQRT, "Sqrt, Reciprocal")
def _rsqrt(b, n):
    return b.emit("Reciprocal", [b.emit("Sqrt", [n.x()])])


@onnx_form(Op.SQUARE, "Mul")
def _square(b, n):
    x = n.x()
    return b.emit("Mul", [x, x])


def _small(b, x):
    """|x| <= 0.5: where the Kahan-corrected branch is used."""
    return b.emit("LessOrEqual", [b.emit("Abs", [x]), b.scalar(0.5)])


@onnx_form(Op.LOG1P, "Add, Sub, Log, Mul, Div, Equal, Abs, LessOrEqual, Where")
def _log1p(b, n):
    """Near 0: u = 1 + x, log(u) * x / (u - 1) (x itself where u rounds to
    1), exact to a few ulps; elsewhere Log(1 + x), which cancels nothing."""
    x = n.x()
    u = b.emit("Add", [x, b.scalar(1.0)])
    log_u = b.emit("Log", [u])
    d = b.emit("Sub", [u, b.scalar(1.0)])
    kahan = b.emit("Mul", [log_u, b.emit("Div", [x, d])])
    kahan = b.emit("Where", [b.emit("Equal", [d, b.scalar(0.0)]), x, kahan])
    return b.emit("Where", [_small(b, x), kahan, log_u])


@onnx_form(Op.EXPM1, "Exp, Sub, Log, Mul, Div, Equal, Abs, LessOrEqual, Where")
def _expm1(b, n):
    """Near 0: u = exp(x), (u - 1) * x / log(u) (x itself where u rounds to
    1); elsewhere Exp(x) - 1 (infinities included)."""
    x = n.x()
    u = b.emit("Exp", [x])
    um1 = b.emit("Sub", [u, b.scalar(1.0)])
    kahan = b.emit("Mul", [um1, b.emit("Div", [x, b.emit("Log", [u])])])
    kahan = b.emit("Where", [b.emit("Equal", [um1, b.scalar(0.0)]), x, kahan])
    return b.emit("Where", [_small(b, x), kahan, um1])


def _log_base(op: Op, base: float):
    def emit(b, n):
        return b.emit("Div", [b.emit("Log", [n.x()]), b.scalar(math.log(base))])
    emit.__name__ = f"_{op.name.lower()}"
    return onnx_form(op, "Log, Div")(emit)


_log_base(Op.LOG2, 2.0)
_log_base(Op.LOG10, 10.0)


def _negative_or_minus_zero(b, v):
    """v < 0 or v = -0 (1 / v < 0): the sign bit, which Less cannot see."""
    return b.emit("Less", [b.emit("Div", [b.scalar(1.0), v]), b.scalar(0.0)])


@onnx_form(Op.ATAN2, "Atan, Div, Mul, Add, Less, Equal, And, Where")
def _atan2(b, n):
    """Atan(y / x), plus pi (y's sign) where x is negative or -0. Where
    both are zeros, y / x is NaN: the quotient is then y times x's sign, so
    atan2(+-0, +-0) gives +-0 or +-pi as libm (and yscv) does. Pairs of
    infinities give NaN here (libm gives +-pi/4, +-3pi/4)."""
    y, x = n.x(0), n.x(1)
    x_neg = _negative_or_minus_zero(b, x)
    y_neg = _negative_or_minus_zero(b, y)
    one = b.scalar(1.0)
    x_sign = b.emit("Where", [x_neg, b.scalar(-1.0), one])
    both_zero = b.emit("And", [b.emit("Equal", [x, b.scalar(0.0)]),
                               b.emit("Equal", [y, b.scalar(0.0)])])
    q = b.emit("Where", [both_zero, b.emit("Mul", [y, x_sign]), b.emit("Div", [y, x])])
    t = b.emit("Atan", [q])
    turn = b.emit("Where", [y_neg, b.scalar(-math.pi), b.scalar(math.pi)])
    return b.emit("Where", [x_neg, b.emit("Add", [t, turn]), t])


@onnx_form(Op.REMAINDER, "Mod, Equal, Not, Less, Xor, And, Add, Where")
def _remainder(b, n):
    """r = fmod(a, b); r + b where r is non-zero and its sign differs from b's."""
    a, d = n.x(0), n.x(1)
    r = b.emit("Mod", [a, d], fmod=1)
    zero = b.scalar(0.0)
    nonzero = b.emit("Not", [b.emit("Equal", [r, zero])])
    signs_differ = b.emit("Xor", [b.emit("Less", [r, zero]), b.emit("Less", [d, zero])])
    fix = b.emit("And", [nonzero, signs_differ])
    return b.emit("Where", [fix, b.emit("Add", [r, d]), r])
