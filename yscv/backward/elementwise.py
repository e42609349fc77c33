"""Elementwise ops (backward). Gradients are returned at the broadcast shape;
the walk in graph.py reduces them to each input's shape."""
from __future__ import annotations

import math

import numpy as np

from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import recorded_binary, recorded_linear, recorded_unary
from ._rules import binary, linear, unary


linear(Op.ADD, 1, 1)
linear(Op.SUB, 1, -1)


@register_backward(Op.MUL)
def mul_backward(g, inputs, out, attrs, saved, needs):
    """(``g*b``, ``g*a``). Written out rather than through ``binary``: mul is on the
    per-node hot path and the helper's extra call per rule measured ~2%
    on the scalar chain (docs/engine.md)."""
    a, b = inputs
    return (g * b if needs[0] else None), (g * a if needs[1] else None)


def _quiet(fn):
    """``fn`` with NumPy's divide/invalid/overflow warnings off: the
    derivatives at a domain edge (``1/x`` at 0, ``1/(2 sqrt x)`` at 0) are
    inf or nan silently, as in PyTorch and as the forwards
    (yscv/ops/_common.py ``ufunc_forward(..., quiet=True)``)."""

    def quiet(*args):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*args)

    return quiet


binary(Op.DIV, _quiet(lambda g, a, b, y, at: g / b),
       _quiet(lambda g, a, b, y, at: np.negative(g) * y / b))


@register_backward(Op.POW)
def pow_backward(g, inputs, out, attrs, saved, needs):
    base, e = inputs
    gbase = gexp = None
    if needs[0]:
        with np.errstate(divide="ignore", invalid="ignore"):
            d = e * np.power(base, e - 1)
        d = np.where(e == 0, 0, d).astype(out.dtype, copy=False)
        gbase = g * d
    if needs[1]:
        with np.errstate(divide="ignore", invalid="ignore"):
            d = out * np.log(base)
        d = np.where((base == 0) & (e >= 0), 0, d).astype(out.dtype, copy=False)
        gexp = g * d
    return gbase, gexp


linear(Op.NEG, -1)
unary(Op.ABS, lambda g, x, y, a: g * np.sign(x))
unary(Op.EXP, lambda g, x, y, a: g * y)
unary(Op.LOG, _quiet(lambda g, x, y, a: g / x))
unary(Op.SQRT, _quiet(lambda g, x, y, a: g / (y + y)))
unary(Op.CLAMP, lambda g, x, y, a: g * _inside(x, a.lo, a.hi))


def _inside(x, lo, hi):
    """lo <= x <= hi (bounds inclusive, as PyTorch; None: unbounded)."""
    mask = np.ones(x.shape, dtype=bool)
    if lo is not None:
        mask &= x >= lo
    if hi is not None:
        mask &= x <= hi
    return mask


def _minmax_backward(g, a, b, a_loses, b_loses, needs):
    """PyTorch's rule: a tie splits g in halves; otherwise each operand gets
    g unless it strictly loses. A NaN operand makes both comparisons false,
    so BOTH operands get the whole g there (as torch.maximum/minimum)."""
    tie = a == b
    half = g * np.asarray(0.5, dtype=g.dtype)
    ga = gb = None
    if needs[0]:
        ga = np.where(tie, half, np.where(a_loses, 0, g)).astype(g.dtype, copy=False)
    if needs[1]:
        gb = np.where(tie, half, np.where(b_loses, 0, g)).astype(g.dtype, copy=False)
    return ga, gb


@register_backward(Op.MAXIMUM)
def maximum_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    return _minmax_backward(g, a, b, a < b, a > b, needs)


@register_backward(Op.MINIMUM)
def minimum_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    return _minmax_backward(g, a, b, a > b, a < b, needs)


binary(Op.WHERE, lambda g, a, b, y, cond: np.where(cond, g, g.dtype.type(0)),
       lambda g, a, b, y, cond: np.where(cond, g.dtype.type(0), g))


# ------------------------------------------------------------ math
# PyTorch's formulas (derivatives.yaml), so the values at domain edges agree:
# asin'(1) = inf, atan2's at (0, 0) = nan, remainder's at b = 0 = inf/nan.
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

unary(Op.SIN, lambda g, x, y, a: g * np.cos(x))
unary(Op.COS, lambda g, x, y, a: np.negative(g) * np.sin(x))
unary(Op.TAN, _quiet(lambda g, x, y, a: g * (y * y + 1.0)))
unary(Op.ASIN, _quiet(lambda g, x, y, a: g / np.sqrt(1.0 - x * x)))
unary(Op.ACOS, _quiet(lambda g, x, y, a: np.negative(g) / np.sqrt(1.0 - x * x)))
unary(Op.ATAN, _quiet(lambda g, x, y, a: g / (x * x + 1.0)))
unary(Op.SINH, _quiet(lambda g, x, y, a: g * np.cosh(x)))
unary(Op.COSH, _quiet(lambda g, x, y, a: g * np.sinh(x)))
unary(Op.ERF, lambda g, x, y, a: g * (np.exp(-(x * x)) * _TWO_OVER_SQRT_PI))
unary(Op.ERFC, lambda g, x, y, a: g * (np.exp(-(x * x)) * -_TWO_OVER_SQRT_PI))
for _op in (Op.SIGN, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC):
    unary(_op, lambda g, x, y, a: np.zeros_like(g))     # PyTorch: zeros, not None
unary(Op.RECIPROCAL, _quiet(lambda g, x, y, a: np.negative(g) * (y * y)))
unary(Op.RSQRT, _quiet(lambda g, x, y, a: g * (y * y * y * -0.5)))
unary(Op.SQUARE, _quiet(lambda g, x, y, a: g * (x + x)))
unary(Op.LOG1P, _quiet(lambda g, x, y, a: g / (x + 1.0)))
unary(Op.EXPM1, _quiet(lambda g, x, y, a: g * (y + 1.0)))
unary(Op.LOG2, _quiet(lambda g, x, y, a: g / (x * _LN2)))
unary(Op.LOG10, _quiet(lambda g, x, y, a: g / (x * _LN10)))


@register_backward(Op.ATAN2)
def atan2_backward(g, inputs, out, attrs, saved, needs):
    """(``g*x``, ``-g*y``) / (x^2 + y^2) for atan2(y, x); where 1/(x^2 + y^2) is inf
    (at (0, 0), or x^2 + y^2 underflowing) PyTorch uses 0 instead: zero
    gradients there."""
    y, x = inputs
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        recip = np.reciprocal(y * y + x * x)
        recip[np.isinf(recip)] = 0
        gy = g * x * recip if needs[0] else None
        gx = np.negative(g) * y * recip if needs[1] else None
    return gy, gx


binary(Op.REMAINDER, lambda g, a, b, y, at: g,
       _quiet(lambda g, a, b, y, at: np.negative(g) * np.floor_divide(a, b)))


# --------------------------------------------------------------- recorded
# The same rules in graph ops, for create_graph=True (docs/higher_order.md). Masks
# (kinks, ties, where's condition) are constants, as in PyTorch's double
# backward; each mask is the one the array rule above uses.

recorded_linear(Op.ADD, 1, 1)
recorded_linear(Op.SUB, 1, -1)
recorded_linear(Op.NEG, -1)
recorded_binary(Op.MUL, lambda G, gy, a, b, y, at: G.mul(gy, b),
                lambda G, gy, a, b, y, at: G.mul(gy, a))
recorded_binary(Op.DIV, lambda G, gy, a, b, y, at: G.div(gy, b),
                lambda G, gy, a, b, y, at: G.neg(G.div(G.mul(gy, a), G.mul(b, b))))


@register_recorded(Op.POW)
def pow_recorded(G, gy, xs, y, attrs, saved, needs):
    """grad * e * base^(e-1) (0 where e == 0) and grad * y * log(base) (0
    where base == 0 and e >= 0), as PyTorch's pow_backward."""
    base, e = xs
    vb, ve = G.value(base), G.value(e)
    gbase = gexp = None
    if needs[0]:
        d = G.mul(e, G.pow(base, G.sub(e, 1.0)))
        gbase = G.mul(gy, G.where(np.broadcast_to(ve == 0, G.value(y).shape), 0.0, d))
    if needs[1]:
        d = G.mul(y, G.log(base))
        gexp = G.mul(gy, G.where((vb == 0) & (ve >= 0), 0.0, d))
    return gbase, gexp


recorded_unary(Op.ABS, lambda G, gy, x, y, a: G.mul(gy, G.constant(np.sign(G.value(x)))))
recorded_unary(Op.EXP, lambda G, gy, x, y, a: G.mul(gy, y))
recorded_unary(Op.LOG, lambda G, gy, x, y, a: G.div(gy, x))
recorded_unary(Op.SQRT, lambda G, gy, x, y, a: G.div(gy, G.add(y, y)))
recorded_unary(Op.CLAMP, lambda G, gy, x, y, a: G.where(
    _inside(G.value(x), a.lo, a.hi), gy, 0.0))


def _minmax_recorded(G, gy, a, b, a_loses, b_loses, needs):
    """The array rule's split, with its masks as constants."""
    tie = G.value(a) == G.value(b)
    half = G.mul(gy, 0.5)
    ga = gb = None
    if needs[0]:
        ga = G.where(tie, half, G.where(a_loses, 0.0, gy))
    if needs[1]:
        gb = G.where(tie, half, G.where(b_loses, 0.0, gy))
    return ga, gb


@register_recorded(Op.MAXIMUM)
def maximum_recorded(G, gy, xs, y, attrs, saved, needs):
    a, b = xs
    va, vb = G.value(a), G.value(b)
    return _minmax_recorded(G, gy, a, b, va < vb, va > vb, needs)


@register_recorded(Op.MINIMUM)
def minimum_recorded(G, gy, xs, y, attrs, saved, needs):
    a, b = xs
    va, vb = G.value(a), G.value(b)
    return _minmax_recorded(G, gy, a, b, va > vb, va < vb, needs)


recorded_binary(Op.WHERE, lambda G, gy, a, b, y, cond: G.where(cond, gy, 0.0),
                lambda G, gy, a, b, y, cond: G.where(cond, 0.0, gy))


# ------------------------------------------------------------ math
def _zero_gradient(G, gy, x, y, a):
    """sign, floor, ceil, round, trunc: a constant zero (PyTorch's zeros_like)."""
    return G.constant(np.zeros(G.value(gy).shape, dtype=G.dtype))


recorded_unary(Op.SIN, lambda G, gy, x, y, a: G.mul(gy, G.cos(x)))
recorded_unary(Op.COS, lambda G, gy, x, y, a: G.mul(G.neg(gy), G.sin(x)))
recorded_unary(Op.TAN, lambda G, gy, x, y, a: G.mul(gy, G.add(G.mul(y, y), 1.0)))
recorded_unary(Op.ASIN, lambda G, gy, x, y, a: G.mul(gy, G.rsqrt(G.sub(1.0, G.mul(x, x)))))
recorded_unary(Op.ACOS, lambda G, gy, x, y, a: G.mul(G.neg(gy),
                                                     G.rsqrt(G.sub(1.0, G.mul(x, x)))))
recorded_unary(Op.ATAN, lambda G, gy, x, y, a: G.div(gy, G.add(G.mul(x, x), 1.0)))
recorded_unary(Op.SINH, lambda G, gy, x, y, a: G.mul(gy, G.cosh(x)))
recorded_unary(Op.COSH, lambda G, gy, x, y, a: G.mul(gy, G.sinh(x)))
recorded_unary(Op.ERF, lambda G, gy, x, y, a: G.mul(
    gy, G.mul(G.exp(G.neg(G.square(x))), _TWO_OVER_SQRT_PI)))
recorded_unary(Op.ERFC, lambda G, gy, x, y, a: G.mul(
    gy, G.mul(G.exp(G.neg(G.square(x))), -_TWO_OVER_SQRT_PI)))
for _op in (Op.SIGN, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC):
    recorded_unary(_op, _zero_gradient)
recorded_unary(Op.RECIPROCAL, lambda G, gy, x, y, a: G.mul(G.neg(gy), G.square(y)))
recorded_unary(Op.RSQRT, lambda G, gy, x, y, a: G.mul(gy, G.mul(G.mul(G.square(y), y), -0.5)))
recorded_unary(Op.SQUARE, lambda G, gy, x, y, a: G.mul(gy, G.mul(x, 2.0)))
recorded_unary(Op.LOG1P, lambda G, gy, x, y, a: G.div(gy, G.add(x, 1.0)))
recorded_unary(Op.EXPM1, lambda G, gy, x, y, a: G.mul(gy, G.add(y, 1.0)))
recorded_unary(Op.LOG2, lambda G, gy, x, y, a: G.div(gy, G.mul(x, _LN2)))
recorded_unary(Op.LOG10, lambda G, gy, x, y, a: G.div(gy, G.mul(x, _LN10)))


@register_recorded(Op.ATAN2)
def atan2_recorded(G, gy, xs, out, attrs, saved, needs):
    y, x = xs
    recip = G.reciprocal(G.add(G.square(y), G.square(x)))
    recip = G.where(np.isinf(G.value(recip)), 0.0, recip)   # as the array rule
    gyn = G.mul(G.mul(gy, x), recip) if needs[0] else None
    gxn = G.mul(G.mul(G.neg(gy), y), recip) if needs[1] else None
    return gyn, gxn


recorded_binary(Op.REMAINDER, lambda G, gy, a, b, y, at: gy,
                lambda G, gy, a, b, y, at: G.mul(G.neg(gy), G.constant(
                    _quiet(np.floor_divide)(G.value(a), G.value(b)))))
