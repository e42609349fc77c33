"""Elementwise ops (backward). Gradients are returned at the broadcast shape;
the walk in graph.py reduces them to each input's shape."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_backward


@register_backward(Op.ADD)
def add_backward(g, inputs, out, attrs, saved, needs):
    return g, g


@register_backward(Op.SUB)
def sub_backward(g, inputs, out, attrs, saved, needs):
    return g, (np.negative(g) if needs[1] else None)


@register_backward(Op.MUL)
def mul_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    return (g * b if needs[0] else None), (g * a if needs[1] else None)


@register_backward(Op.DIV)
def div_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    ga = g / b if needs[0] else None
    gb = np.negative(g) * out / b if needs[1] else None
    return ga, gb


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


@register_backward(Op.NEG)
def neg_backward(g, inputs, out, attrs, saved, needs):
    return (np.negative(g),)


@register_backward(Op.ABS)
def abs_backward(g, inputs, out, attrs, saved, needs):
    return (g * np.sign(inputs[0]),)


@register_backward(Op.EXP)
def exp_backward(g, inputs, out, attrs, saved, needs):
    return (g * out,)


@register_backward(Op.LOG)
def log_backward(g, inputs, out, attrs, saved, needs):
    return (g / inputs[0],)


@register_backward(Op.SQRT)
def sqrt_backward(g, inputs, out, attrs, saved, needs):
    return (g / (out + out),)


@register_backward(Op.CLAMP)
def clamp_backward(g, inputs, out, attrs, saved, needs):
    x = inputs[0]
    lo, hi = attrs
    mask = np.ones(x.shape, dtype=bool)
    if lo is not None:
        mask &= x >= lo
    if hi is not None:
        mask &= x <= hi
    return (g * mask,)


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


@register_backward(Op.WHERE)
def where_backward(g, inputs, out, cond, saved, needs):
    zero = np.zeros((), dtype=g.dtype)
    ga = np.where(cond, g, zero) if needs[0] else None
    gb = np.where(cond, zero, g) if needs[1] else None
    return ga, gb
