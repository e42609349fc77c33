"""Elementwise ops (backward). Gradients are returned at the broadcast shape;
the walk in graph.py reduces them to each input's shape."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_backward
from ._rules import binary, linear, unary


linear(Op.ADD, 1, 1)
linear(Op.SUB, 1, -1)


@register_backward(Op.MUL)
def mul_backward(g, inputs, out, attrs, saved, needs):
    """(g*b, g*a). Written out rather than through ``binary``: mul is on the
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
