"""The reduce names of the array interpreter (yscv/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node.

A reduction's attributes (``ReduceAttrs``: the normalised axes, kshape,
count) are built by the ops' own validation, once per (op, shape, axis,
keepdims), and handed to the op's registered forward, so ``ns.sum(x, 1)``
on arrays has the bits of ``G.sum(x, 1)``.
"""
from __future__ import annotations

import numpy as np  # noqa: F401

from .. import registry
from ..node import Op

_FORWARD = registry.FORWARD
_SUM, _MEAN, _MAX, _MIN, _PROD, _LOGSUMEXP = (
    int(Op.SUM), int(Op.MEAN), int(Op.MAX), int(Op.MIN), int(Op.PROD), int(Op.LOGSUMEXP))
_CUMSUM, _CUMPROD = int(Op.CUMSUM), int(Op.CUMPROD)

# (op, shape, axis, keepdims) -> ReduceAttrs, as the Graph's own cache
_ATTRS: dict = {}
_ATTRS_MAX = 4096


def _reduce_attrs(op: int, x, axis, keepdims):
    key = (op, x.shape, tuple(axis) if isinstance(axis, list) else axis, keepdims)
    attrs = _ATTRS.get(key)
    if attrs is None:
        from ..ops.reduce import _reduce_attrs as build
        attrs = build(x.shape, axis, keepdims, Op(op).name.lower())
        if len(_ATTRS) >= _ATTRS_MAX:
            _ATTRS.clear()
        _ATTRS[key] = attrs
    return attrs


def _scan_axis(x, axis: int) -> int:
    """The scan axis as the Graph method normalises it (0-d: 0)."""
    return axis % x.ndim if x.ndim else 0


class ArrayReduce:
    """Reduce ops on arrays, for the rules of backward/."""

    __slots__ = ()

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        """``G.sum``: the sum over ``axis`` (None: all), shape kept with ``keepdims``."""
        return _FORWARD[_SUM](_reduce_attrs(_SUM, x, axis, keepdims), x)[0]

    @staticmethod
    def mean(x, axis=None, keepdims=False):
        """``G.mean``: the pairwise sum divided by the count."""
        return _FORWARD[_MEAN](_reduce_attrs(_MEAN, x, axis, keepdims), x)[0]

    @staticmethod
    def max(x, axis=None, keepdims=False):
        """``G.max``: the maximum over ``axis`` (values only)."""
        return _FORWARD[_MAX](_reduce_attrs(_MAX, x, axis, keepdims), x)[0]

    @staticmethod
    def min(x, axis=None, keepdims=False):
        """``G.min``: the minimum over ``axis`` (values only)."""
        return _FORWARD[_MIN](_reduce_attrs(_MIN, x, axis, keepdims), x)[0]

    @staticmethod
    def prod(x, axis=None, keepdims=False):
        """``G.prod``: the product over ``axis``."""
        return _FORWARD[_PROD](_reduce_attrs(_PROD, x, axis, keepdims), x)[0]

    @staticmethod
    def logsumexp(x, axis=None, keepdims=False):
        """``G.logsumexp``: ``log(sum(exp(x)))`` over ``axis``, max-shifted."""
        return _FORWARD[_LOGSUMEXP](_reduce_attrs(_LOGSUMEXP, x, axis, keepdims), x)[0]

    @staticmethod
    def cumsum(x, axis):
        """``G.cumsum``: the cumulative sum along ``axis`` (negative counts from the end)."""
        return _FORWARD[_CUMSUM](_scan_axis(x, axis), x)[0]

    @staticmethod
    def cumprod(x, axis):
        """``G.cumprod``: the cumulative product along ``axis``."""
        return _FORWARD[_CUMPROD](_scan_axis(x, axis), x)[0]
