"""Reductions (forward): sum, mean, max, min, var, logsumexp.

Every reduction takes ``axis`` = None (all axes), an int (negative counts
from the end) or a tuple/list of distinct ints (``()`` reduces nothing, as
NumPy), and ``keepdims``. The attributes recorded on the node are a
``ReduceAttrs`` record: the normalised axes (None or a sorted tuple), the
keepdims flag, the input shape with reduced axes set to 1 (``kshape``, used
by the backward to broadcast the cotangent back), and the number of reduced
elements per output element.

Saved for backward: nothing, except ``var`` which saves the mean (shape
``kshape``, small). max/min and logsumexp rebuild what they need from the
input and the output value.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import NamedTuple, Optional

import numpy as np

from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_graph_array, normalize_axes


class ReduceAttrs(NamedTuple):
    """Static attributes of a reduction node."""

    axes: Optional[tuple]   # None or sorted tuple of non-negative axes
    keepdims: bool
    kshape: tuple           # input shape with reduced axes set to 1
    oshape: tuple           # output shape
    count: int              # reduced elements per output element
    ddof: float = 0.0       # var only

    def __repr__(self) -> str:
        return (f"ReduceAttrs(axes={self.axes}, keepdims={self.keepdims}"
                + (f", ddof={self.ddof}" if self.ddof else "") + ")")


# ---------------------------------------------------------------- forwards
# ufunc.reduce directly: the np.sum / np.max wrappers cost a Python call layer.
_add_reduce = np.add.reduce
_max_reduce = np.maximum.reduce
_min_reduce = np.minimum.reduce


@register_forward(Op.SUM)
def sum_forward(attrs, x):
    return _add_reduce(x, axis=attrs.axes, keepdims=attrs.keepdims), None


@register_forward(Op.MEAN)
def mean_forward(attrs, x):
    """Pairwise sum (as np.mean) divided by the count; an empty reduction
    gives NaN with NumPy's RuntimeWarning."""
    s = _add_reduce(x, axis=attrs.axes, keepdims=attrs.keepdims)
    return s / attrs.count, None


@register_forward(Op.MAX)
def max_forward(attrs, x):
    return _max_reduce(x, axis=attrs.axes, keepdims=attrs.keepdims), None


@register_forward(Op.MIN)
def min_forward(attrs, x):
    return _min_reduce(x, axis=attrs.axes, keepdims=attrs.keepdims), None


@register_forward(Op.VAR)
def var_forward(attrs, x):
    """Two-pass variance (as np.var); saves the mean (shape kshape)."""
    axes = attrs.axes
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.mean(x, axis=axes, keepdims=True)
        d = np.empty(x.shape, dtype=x.dtype)  # out= keeps 0-d results arrays
        np.subtract(x, mean, out=d)
        np.multiply(d, d, out=d)
        s = np.sum(d, axis=axes, keepdims=attrs.keepdims)
        value = s / max(attrs.count - attrs.ddof, 0.0)
    return value, mean


@register_forward(Op.LOGSUMEXP)
def logsumexp_forward(attrs, x):
    """log(sum(exp(x - m))) + m with m the (finite) max: no overflow."""
    axes = attrs.axes
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)  # all -inf (or inf/nan) slices: shift by 0
    e = np.empty(x.shape, dtype=x.dtype)
    np.subtract(x, m, out=e)
    np.exp(e, out=e)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(e, axis=axes, keepdims=True))
    s = s + m
    if not attrs.keepdims:
        s = s.reshape(attrs.oshape)
    return s, None


# ------------------------------------------------------------- validation
def _reduce_attrs(shape: tuple, axis, keepdims, op: str, ddof=0.0) -> ReduceAttrs:
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"{op}: keepdims must be a bool, got {keepdims!r}")
    keepdims = bool(keepdims)
    ndim = len(shape)
    if axis is not None and not isinstance(axis, (tuple, list)):
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(
                f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}")
    axes = normalize_axes(axis, ndim, op, "axis")
    if ndim == 0 and axes is not None:
        axes = ()  # axis 0 / -1 of a 0-d input reduces nothing (as PyTorch dim=0)
    if axes is None:
        kshape = (1,) * ndim
        oshape = kshape if keepdims else ()
        count = math.prod(shape)
    else:
        kshape = tuple(1 if k in axes else s for k, s in enumerate(shape))
        oshape = kshape if keepdims else tuple(s for k, s in enumerate(shape) if k not in axes)
        count = math.prod(shape[k] for k in axes)
    return ReduceAttrs(axes, keepdims, kshape, oshape, count, ddof)


_SUM, _MEAN, _MAX, _MIN, _VAR, _LOGSUMEXP = (
    Op.SUM, Op.MEAN, Op.MAX, Op.MIN, Op.VAR, Op.LOGSUMEXP)

# (op, shape, axis, keepdims, ddof) -> ReduceAttrs for the common argument
# types (axis None or a plain int, keepdims a plain bool): a dict hit is much
# cheaper than validating and building the record. Only validated records are stored.
_ATTRS_CACHE: dict = {}
_ATTRS_CACHE_MAX = 4096


class ReduceOps:
    """Graph methods of the reduce category."""

    def _reduce_prepare(self, op: Op, x, axis, keepdims, ddof=0.0, empty_ok=True):
        """(operand, validated ReduceAttrs); raises before anything is appended."""
        if type(x) is NodeId:
            shape = self._shape(self._index(x))
        else:
            x = as_graph_array(x, self.dtype, op.name.lower(), "x", copy=False)
            shape = x.shape
        cacheable = (axis is None or type(axis) is int) and type(keepdims) is bool
        if cacheable:
            key = (op, shape, axis, keepdims, ddof)
            attrs = _ATTRS_CACHE.get(key)
            if attrs is not None:
                return x, attrs
        name = op.name.lower()
        attrs = _reduce_attrs(shape, axis, keepdims, name, ddof)
        if attrs.count == 0 and not empty_ok and math.prod(attrs.oshape) > 0:
            raise ValueError(
                f"{name}: cannot reduce over an empty axis (input shape {shape}, "
                f"axis={axis!r}); the reduction has no identity")
        if cacheable:
            if len(_ATTRS_CACHE) >= _ATTRS_CACHE_MAX:
                _ATTRS_CACHE.clear()
            _ATTRS_CACHE[key] = attrs
        return x, attrs

    def _reduce(self, op: Op, x, axis, keepdims, empty_ok=True):
        x, attrs = self._reduce_prepare(op, x, axis, keepdims, 0.0, empty_ok)
        return self._apply1(op, x, attrs)

    def sum(self, x, axis=None, keepdims=False):
        """Sum over ``axis`` (None: all). Backward: the cotangent broadcast
        back over the reduced axes."""
        return self._reduce(_SUM, x, axis, keepdims)

    def mean(self, x, axis=None, keepdims=False):
        """Mean over ``axis`` (None: all). Backward: cotangent / count,
        broadcast back. An empty reduction gives NaN (as NumPy and PyTorch)."""
        return self._reduce(_MEAN, x, axis, keepdims)

    def max(self, x, axis=None, keepdims=False):
        """Maximum over ``axis`` (None: all). The gradient is split evenly
        among tied maxima (PyTorch ``amax``). Empty reductions raise ValueError."""
        return self._reduce(_MAX, x, axis, keepdims, empty_ok=False)

    def min(self, x, axis=None, keepdims=False):
        """Minimum over ``axis`` (None: all). The gradient is split evenly
        among tied minima (PyTorch ``amin``). Empty reductions raise ValueError."""
        return self._reduce(_MIN, x, axis, keepdims, empty_ok=False)

    def var(self, x, axis=None, keepdims=False, ddof=0):
        """Variance over ``axis`` with divisor ``N - ddof`` (ddof=0: biased,
        as np.var; ddof=1: unbiased, as torch.var's default). When
        ``N - ddof <= 0`` the result is inf/NaN (as NumPy and PyTorch) and a
        RuntimeWarning is issued at build time. Saves the mean for backward."""
        if isinstance(ddof, bool) or not isinstance(ddof, numbers.Real):
            raise TypeError(f"var: ddof must be a real number, got {ddof!r}")
        if not ddof >= 0:
            raise ValueError(f"var: ddof must be >= 0, got {ddof!r}")
        x, attrs = self._reduce_prepare(_VAR, x, axis, keepdims, float(ddof))
        if attrs.count - attrs.ddof <= 0 and math.prod(attrs.oshape) > 0:
            warnings.warn(
                f"var: degrees of freedom <= 0 (N={attrs.count}, ddof={ddof}); "
                "the result is inf or NaN", RuntimeWarning, stacklevel=2)
        return self._apply1(_VAR, x, attrs)

    def logsumexp(self, x, axis, keepdims=False):
        """``log(sum(exp(x), axis))`` computed stably (the max is subtracted
        first). ``axis`` is required (None reduces all axes). An empty
        reduction gives -inf (as PyTorch). Backward: cotangent * softmax."""
        return self._reduce(_LOGSUMEXP, x, axis, keepdims)

    # seed aliases
    def sum_axis(self, x, axis):
        """Seed alias: ``sum(x, axis)``."""
        return self.sum(x, axis)

    def mean_axis(self, x, axis):
        """Seed alias: ``mean(x, axis)``."""
        return self.mean(x, axis)
