"""Elementwise ops (backward): one rule per op against the namespace ``ns``
(yscv/engine/namespace/__init__.py), run on arrays by the first-order walks and on the
graph by ``create_graph=True``. Gradients are returned at the broadcast
shape; the walk reduces them to each input's shape. Masks (kinks, ties,
where's condition) enter as constants, as in PyTorch's double backward."""
from __future__ import annotations

import math

import numpy as np

from ..node import Op
from ..registry import register_rule
from ._rules import binary, linear, unary


linear(Op.ADD, 1, 1)
linear(Op.SUB, 1, -1)
linear(Op.NEG, -1)


def mul_array(ns, g, inputs, out, attrs, saved, needs):
    """`mul_rule` written out for arrays: mul is on the per-node hot path,
    where the namespace's attribute reads measured ~2% of the scalar chain
    (docs/engine.md); tests/test_rule_flags.py holds it to the rule's bits."""
    a, b = inputs
    return (g * b if needs[0] else None), (g * a if needs[1] else None)


@register_rule(Op.MUL, array=mul_array)
def mul_rule(ns, g, inputs, out, attrs, saved, needs):
    """(``g*b``, ``g*a``)."""
    a, b = inputs
    return (ns.mul(g, b) if needs[0] else None), (ns.mul(g, a) if needs[1] else None)


# d(a/b)/db = -g * y / b: the quotient y is reused (PyTorch's
# div_tensor_other_backward); it stays finite where b*b would overflow
binary(Op.DIV, lambda ns, g, a, b, y, at: ns.div(g, b),
       lambda ns, g, a, b, y, at: ns.div(ns.mul(ns.neg(g), y), b))


@register_rule(Op.POW)
def pow_rule(ns, g, inputs, out, attrs, saved, needs):
    """``g*e*base^(e-1)`` (0 where e == 0) and ``g*y*log(base)`` (0 where
    base == 0 and e >= 0), as PyTorch's pow_backward."""
    base, e = inputs
    vb, ve = ns.value(base), ns.value(e)
    shape = ns.value(out).shape
    gbase = gexp = None
    if needs[0]:
        d = ns.mul(e, ns.pow(base, ns.sub(e, 1.0)))
        gbase = ns.mul(g, ns.where(np.broadcast_to(ve == 0, shape), 0.0, d))
    if needs[1]:
        d = ns.mul(out, ns.log(base))
        gexp = ns.mul(g, ns.where(np.broadcast_to((vb == 0) & (ve >= 0), shape), 0.0, d))
    return gbase, gexp


unary(Op.ABS, lambda ns, g, x, y, a: ns.mul(g, ns.const(np.sign(ns.value(x)))))
unary(Op.EXP, lambda ns, g, x, y, a: ns.mul(g, y))
unary(Op.LOG, lambda ns, g, x, y, a: ns.div(g, x))
unary(Op.SQRT, lambda ns, g, x, y, a: ns.div(g, ns.add(y, y)))
unary(Op.CLAMP, lambda ns, g, x, y, a: ns.where(_inside(ns.value(x), a.lo, a.hi), g, 0.0))


def _inside(x, lo, hi):
    """lo <= x <= hi (bounds inclusive, as PyTorch; None: unbounded)."""
    mask = np.ones(x.shape, dtype=bool)
    if lo is not None:
        mask &= x >= lo
    if hi is not None:
        mask &= x <= hi
    return mask


def _minmax_rule(ns, g, a, b, a_loses, b_loses, needs):
    """PyTorch's rule: a tie splits g in halves; otherwise each operand gets
    g unless it strictly loses. A NaN operand makes both comparisons false,
    so BOTH operands get the whole g there (as torch.maximum/minimum)."""
    shape = ns.value(g).shape
    tie = np.broadcast_to(ns.value(a) == ns.value(b), shape)
    half = ns.mul(g, 0.5)
    ga = gb = None
    if needs[0]:
        ga = ns.where(tie, half, ns.where(np.broadcast_to(a_loses, shape), 0.0, g))
    if needs[1]:
        gb = ns.where(tie, half, ns.where(np.broadcast_to(b_loses, shape), 0.0, g))
    return ga, gb


@register_rule(Op.MAXIMUM)
def maximum_rule(ns, g, inputs, out, attrs, saved, needs):
    a, b = inputs
    va, vb = ns.value(a), ns.value(b)
    return _minmax_rule(ns, g, a, b, va < vb, va > vb, needs)


@register_rule(Op.MINIMUM)
def minimum_rule(ns, g, inputs, out, attrs, saved, needs):
    a, b = inputs
    va, vb = ns.value(a), ns.value(b)
    return _minmax_rule(ns, g, a, b, va > vb, va < vb, needs)


binary(Op.WHERE, lambda ns, g, a, b, y, cond: ns.where(cond, g, 0.0),
       lambda ns, g, a, b, y, cond: ns.where(cond, 0.0, g))


# ------------------------------------------------------------ math
# PyTorch's formulas (derivatives.yaml), so the values at domain edges agree:
# asin'(1) = inf, atan2's at (0, 0) = nan, remainder's at b = 0 = inf/nan.
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

unary(Op.SIN, lambda ns, g, x, y, a: ns.mul(g, ns.cos(x)))
unary(Op.COS, lambda ns, g, x, y, a: ns.mul(ns.neg(g), ns.sin(x)))
unary(Op.TAN, lambda ns, g, x, y, a: ns.mul(g, ns.add(ns.mul(y, y), 1.0)))
unary(Op.ASIN, lambda ns, g, x, y, a: ns.div(g, ns.sqrt(ns.sub(1.0, ns.mul(x, x)))))
unary(Op.ACOS, lambda ns, g, x, y, a: ns.div(ns.neg(g), ns.sqrt(ns.sub(1.0, ns.mul(x, x)))))
unary(Op.ATAN, lambda ns, g, x, y, a: ns.div(g, ns.add(ns.mul(x, x), 1.0)))
unary(Op.SINH, lambda ns, g, x, y, a: ns.mul(g, ns.cosh(x)))
unary(Op.COSH, lambda ns, g, x, y, a: ns.mul(g, ns.sinh(x)))
unary(Op.ERF, lambda ns, g, x, y, a: ns.mul(
    g, ns.mul(ns.exp(ns.neg(ns.mul(x, x))), _TWO_OVER_SQRT_PI)))
unary(Op.ERFC, lambda ns, g, x, y, a: ns.mul(
    g, ns.mul(ns.exp(ns.neg(ns.mul(x, x))), -_TWO_OVER_SQRT_PI)))
for _op in (Op.SIGN, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC):
    unary(_op, lambda ns, g, x, y, a: ns.zeros_like(g))     # PyTorch: zeros, not None
unary(Op.RECIPROCAL, lambda ns, g, x, y, a: ns.mul(ns.neg(g), ns.mul(y, y)))
unary(Op.RSQRT, lambda ns, g, x, y, a: ns.mul(g, ns.mul(ns.mul(ns.mul(y, y), y), -0.5)))
unary(Op.SQUARE, lambda ns, g, x, y, a: ns.mul(g, ns.add(x, x)))
unary(Op.LOG1P, lambda ns, g, x, y, a: ns.div(g, ns.add(x, 1.0)))
unary(Op.EXPM1, lambda ns, g, x, y, a: ns.mul(g, ns.add(y, 1.0)))
unary(Op.LOG2, lambda ns, g, x, y, a: ns.div(g, ns.mul(x, _LN2)))
unary(Op.LOG10, lambda ns, g, x, y, a: ns.div(g, ns.mul(x, _LN10)))


@register_rule(Op.ATAN2)
def atan2_rule(ns, g, inputs, out, attrs, saved, needs):
    """(``g*x``, ``-g*y``) / (x^2 + y^2) for atan2(y, x); where 1/(x^2 + y^2) is inf
    (at (0, 0), or x^2 + y^2 underflowing) PyTorch uses 0 instead: zero
    gradients there."""
    y, x = inputs
    recip = ns.reciprocal(ns.add(ns.mul(y, y), ns.mul(x, x)))
    recip = ns.where(np.isinf(ns.value(recip)), 0.0, recip)
    gy = ns.mul(ns.mul(g, x), recip) if needs[0] else None
    gx = ns.mul(ns.mul(ns.neg(g), y), recip) if needs[1] else None
    return gy, gx


binary(Op.REMAINDER, lambda ns, g, a, b, y, at: g,
       lambda ns, g, a, b, y, at: ns.mul(ns.neg(g), ns.const(_floor_divide(ns.value(a),
                                                                           ns.value(b)))))


def _floor_divide(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, b)
