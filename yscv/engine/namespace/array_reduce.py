"""The reduce names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node.

A reduction's attributes (``ReduceAttrs``: the normalised axes, kshape,
count) are built by the ops' own validation, once per (op, shape, axis,
keepdims), and handed to the op's registered forward, so ``ns.sum(x, 1)``
on arrays has the bits of ``G.sum(x, 1)``.
"""
from __future__ import annotations

import numpy as np  # noqa: F401

from ... import registry
from ...compute.arrays import sum_to_shape
from ...node import Op

_FORWARD = registry.FORWARD
_SUM, _MEAN, _MAX, _MIN, _PROD, _LOGSUMEXP = (
    int(Op.SUM), int(Op.MEAN), int(Op.MAX), int(Op.MIN), int(Op.PROD), int(Op.LOGSUMEXP))
_CUMSUM, _CUMPROD = int(Op.CUMSUM), int(Op.CUMPROD)
_VAR, _STD, _NORM = int(Op.VAR), int(Op.STD), int(Op.NORM)

# (op, shape, axis, keepdims) -> ReduceAttrs, as the Graph's own cache
_ATTRS: dict = {}
_ATTRS_MAX = 4096


def _reduce_attrs(op: int, x, axis, keepdims, ddof=0.0):
    key = (op, x.shape, tuple(axis) if isinstance(axis, list) else axis, keepdims, ddof)
    attrs = _ATTRS.get(key)
    if attrs is None:
        from ...ops.reduce import _reduce_attrs as build
        attrs = build(x.shape, axis, keepdims, Op(op).name.lower(), float(ddof))
        if len(_ATTRS) >= _ATTRS_MAX:
            _ATTRS.clear()
        _ATTRS[key] = attrs
    return attrs


def _scan_axis(x, axis: int) -> int:
    """The scan axis as the Graph method normalises it (0-d: 0)."""
    return axis % x.ndim if x.ndim else 0


def _arg_extremum(fn, x, axis, keepdims):
    """As ``Graph._arg_extremum`` on a valid operand: a 0-d input gives 0."""
    if x.ndim == 0:
        return np.zeros((), dtype=np.int64)
    return np.asarray(fn(x, axis=axis, keepdims=keepdims), dtype=np.int64)


def _reduction(op, what: str):
    """``G.<op>(x, axis=None, keepdims=False)`` on arrays: the op's forward
    with the attributes the Graph method builds."""

    def reduce(x, axis=None, keepdims=False):
        return _FORWARD[op](_reduce_attrs(op, x, axis, keepdims), x)[0]

    reduce.__name__ = Op(op).name.lower()
    reduce.__doc__ = f"``G.{reduce.__name__}``: {what}."
    return staticmethod(reduce)


class ArrayReduce:
    """Reduce ops on arrays, for the rules of backward/."""

    __slots__ = ()

    @staticmethod
    def sum_to(x, shape):
        """``G.sum_to``: ``x`` summed over the axes along which ``shape``
        broadcasts to it (its forward, the function every walk sums broadcast
        gradients with)."""
        return sum_to_shape(x, tuple(shape))

    sum = _reduction(_SUM, "the sum over ``axis`` (None: all), shape kept with ``keepdims``")
    mean = _reduction(_MEAN, "the pairwise sum divided by the count")
    max = _reduction(_MAX, "the maximum over ``axis`` (values only)")
    min = _reduction(_MIN, "the minimum over ``axis`` (values only)")
    prod = _reduction(_PROD, "the product over ``axis``")
    logsumexp = _reduction(_LOGSUMEXP, "``log(sum(exp(x)))`` over ``axis``, max-shifted")

    @staticmethod
    def var(x, axis=None, keepdims=False, ddof=0, correction=None):
        """``G.var``: the two-pass variance with divisor ``N - ddof``
        (``correction``: PyTorch's name for ddof)."""
        ddof = ddof if correction is None else correction
        return _FORWARD[_VAR](_reduce_attrs(_VAR, x, axis, keepdims, ddof), x)[0]

    @staticmethod
    def std(x, axis=None, correction=1, keepdims=False):
        """``G.std``: ``sqrt(var(x, axis, correction=correction))``."""
        return _FORWARD[_STD](_reduce_attrs(_STD, x, axis, keepdims, correction), x)[0]

    @staticmethod
    def norm(x, ord=2, axis=None, keepdims=False):
        """``G.norm``: the vector p-norm over ``axis`` (``"fro"``: the 2-norm)."""
        from ...ops.reduce import PNormAttrs
        p = 2.0 if isinstance(ord, str) else float(ord)
        a = _reduce_attrs(_NORM, x, axis, keepdims)
        return _FORWARD[_NORM](PNormAttrs(a.axes, a.keepdims, a.kshape, a.oshape, a.count, p),
                               x)[0]

    @staticmethod
    def argmax(x, axis=None, keepdims=False):
        """``G.argmax``: int64 indices of the maximum (first of ties; NaN the maximum)."""
        return _arg_extremum(np.argmax, x, axis, keepdims)

    @staticmethod
    def argmin(x, axis=None, keepdims=False):
        """``G.argmin``: int64 indices of the minimum (first of ties; NaN the minimum)."""
        return _arg_extremum(np.argmin, x, axis, keepdims)

    @staticmethod
    def cumsum(x, axis):
        """``G.cumsum``: the cumulative sum along ``axis`` (negative counts from the end)."""
        return _FORWARD[_CUMSUM](_scan_axis(x, axis), x)[0]

    @staticmethod
    def cumprod(x, axis):
        """``G.cumprod``: the cumulative product along ``axis``."""
        return _FORWARD[_CUMPROD](_scan_axis(x, axis), x)[0]
