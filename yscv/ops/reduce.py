"""Reductions and scans (forward): sum, mean, max, min, var, logsumexp,
prod, std, norm; cumsum, cumprod; topk, sort (values; their indices and
argmax/argmin are int64 arrays, not nodes).

Every reduction takes ``axis`` = None (all axes), an int or a tuple/list of
distinct ints (``()`` reduces nothing, as NumPy), and ``keepdims``;
PyTorch's ``dim=`` / ``keepdim=`` are accepted beside them (keyword-only;
both spellings of one argument is a TypeError), also by the scans,
argmax/argmin, topk and sort. The node's attributes are a ``ReduceAttrs``
record: the normalised axes (None or a sorted tuple), keepdims, the input
shape with reduced axes set to 1 (``kshape``: the backward broadcasts the
cotangent back to it), and the reduced elements per output element.

Saved for backward: nothing but ``var``'s and ``std``'s mean (``kshape``);
max/min, logsumexp, prod and norm rebuild what they need from x and y.

Scans (``cumsum``, ``cumprod``) record their axis as an int. ``topk`` and
``sort`` gather along one axis the indices the Graph method chose (a stable
sort, NaN largest, as PyTorch; ``SortAttrs``) with ``take_along_axis``.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import NamedTuple, Optional

import numpy as np

from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_graph_array, normalize_axes, normalize_axis
from ._reduce_args import _REQUIRED, _check_bool, _check_correction, _required_axis, _torch_dims


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


class PNormAttrs(NamedTuple):
    """Static attributes of a ``norm`` node: a reduction's plus the order."""

    axes: Optional[tuple]
    keepdims: bool
    kshape: tuple
    oshape: tuple
    count: int
    ord: float              # 2.0 for "fro"; inf / -inf / 0 / any real


class SortAttrs(NamedTuple):
    """``topk`` / ``sort``: the axis, the chosen int64 indices along it
    (the output's shape, fixed when the node is built) and the order
    (``descending``: largest first; topk's ``largest``)."""

    axis: int
    index: np.ndarray
    descending: bool

    def __repr__(self) -> str:
        return (f"SortAttrs(axis={self.axis}, index shape={self.index.shape}, "
                f"descending={self.descending})")


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


def _variance(attrs, x):
    """Two-pass variance (as np.var) and the mean (shape kshape)."""
    axes = attrs.axes
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.mean(x, axis=axes, keepdims=True)
        d = np.empty(x.shape, dtype=x.dtype)  # out= keeps 0-d results arrays
        np.subtract(x, mean, out=d)
        np.multiply(d, d, out=d)
        s = np.sum(d, axis=axes, keepdims=attrs.keepdims)
        value = s / max(attrs.count - attrs.ddof, 0.0)
    return value, mean


@register_forward(Op.VAR)
def var_forward(attrs, x):
    """Two-pass variance (as np.var); saves the mean (shape kshape)."""
    return _variance(attrs, x)


@register_forward(Op.STD)
def std_forward(attrs, x):
    """sqrt of the two-pass variance; saves the mean (shape kshape)."""
    value, mean = _variance(attrs, x)
    return np.sqrt(np.asarray(value)), mean


@register_forward(Op.PROD)
def prod_forward(attrs, x):
    return np.multiply.reduce(x, axis=attrs.axes, keepdims=attrs.keepdims), None


@register_forward(Op.NORM)
def norm_forward(attrs, x):
    """torch.linalg.vector_norm: (sum |x|^p)^(1/p); p = inf / -inf: max /
    min |x|; p = 0: the number of nonzeros; p = 2 is sqrt(sum x^2)."""
    p, axes, kd = attrs.ord, attrs.axes, attrs.keepdims
    if p == 2.0:
        return np.sqrt(np.asarray(_add_reduce(x * x, axis=axes, keepdims=kd))), None
    if p == 0.0:
        return _add_reduce((x != 0).astype(x.dtype), axis=axes, keepdims=kd), None
    a = np.abs(x)
    if p == 1.0:
        return _add_reduce(a, axis=axes, keepdims=kd), None
    if p == math.inf:
        return _max_reduce(a, axis=axes, keepdims=kd), None
    if p == -math.inf:
        return _min_reduce(a, axis=axes, keepdims=kd), None
    with np.errstate(divide="ignore", over="ignore"):
        s = np.asarray(_add_reduce(a ** p, axis=axes, keepdims=kd))
        return s ** (1.0 / p), None


@register_forward(Op.CUMSUM)
def cumsum_forward(axis, x):
    return (np.cumsum(x, axis=axis) if x.ndim else x.copy()), None


@register_forward(Op.CUMPROD)
def cumprod_forward(axis, x):
    return (np.cumprod(x, axis=axis) if x.ndim else x.copy()), None


def _take_sorted(attrs, x):
    if x.ndim == 0:
        return x.copy(), None
    return np.take_along_axis(x, attrs.index, attrs.axis), None


register_forward(Op.TOPK)(_take_sorted)
register_forward(Op.SORT)(_take_sorted)


def _stable_order(v: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """int64 indices ordering ``v`` along ``axis``; equal values keep their
    input order (also descending) and NaN counts as the largest value, as
    PyTorch's ``sort(stable=True)``."""
    if not descending:
        return np.argsort(v, axis=axis, kind="stable").astype(np.int64, copy=False)
    n = v.shape[axis]
    o = np.argsort(np.flip(v, axis), axis=axis, kind="stable")
    return ((n - 1) - np.flip(o, axis)).astype(np.int64)


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
_PROD, _STD, _NORM, _CUMSUM, _CUMPROD, _TOPK, _SORT = (
    Op.PROD, Op.STD, Op.NORM, Op.CUMSUM, Op.CUMPROD, Op.TOPK, Op.SORT)


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

    def sum(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Sum over ``axis`` (None: all). Backward: the cotangent broadcast
        back over the reduced axes."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('sum', axis, keepdims, dim, keepdim)
        return self._reduce(_SUM, x, axis, keepdims)

    def mean(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Mean over ``axis`` (None: all). Backward: cotangent / count,
        broadcast back. An empty reduction gives NaN (as NumPy and PyTorch)."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('mean', axis, keepdims, dim, keepdim)
        return self._reduce(_MEAN, x, axis, keepdims)

    def max(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Maximum over ``axis`` (None: all). The gradient is split evenly
        among tied maxima (PyTorch ``amax``). Empty reductions raise ValueError."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('max', axis, keepdims, dim, keepdim)
        return self._reduce(_MAX, x, axis, keepdims, empty_ok=False)

    def min(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Minimum over ``axis`` (None: all). The gradient is split evenly
        among tied minima (PyTorch ``amin``). Empty reductions raise ValueError."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('min', axis, keepdims, dim, keepdim)
        return self._reduce(_MIN, x, axis, keepdims, empty_ok=False)

    def var(self, x, axis=None, keepdims=False, ddof=0, correction=None, *, dim=None,
            keepdim=None):
        """Variance over ``axis`` with divisor ``N - ddof`` (ddof=0: biased,
        as np.var; ddof=1: unbiased, as torch.var's default). ``correction``
        is PyTorch's name for ``ddof``; give one of them (both only when
        equal). When ``N - ddof <= 0`` the result is inf/NaN (as NumPy and
        PyTorch) and a RuntimeWarning is issued at build time. Saves the mean
        for backward."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('var', axis, keepdims, dim, keepdim)
        ddof = _check_correction(ddof, "var", "ddof")
        if correction is not None:
            c = _check_correction(correction, "var", "correction")
            if ddof != 0.0 and ddof != c:
                raise ValueError(f"var: ddof={ddof!r} and correction={correction!r} "
                                 "disagree; give one of them")
            ddof = c
        return self._variance(_VAR, x, axis, keepdims, ddof)

    def _variance(self, op, x, axis, keepdims, ddof):
        x, attrs = self._reduce_prepare(op, x, axis, keepdims, ddof)
        if attrs.count - attrs.ddof <= 0 and math.prod(attrs.oshape) > 0:
            name = op.name.lower()
            warnings.warn(
                f"{name}: degrees of freedom <= 0 (N={attrs.count}, correction={ddof:g}); "
                "the result is inf or NaN", RuntimeWarning, stacklevel=3)
        return self._apply1(op, x, attrs)

    def std(self, x, axis=None, correction=1, keepdims=False, *, dim=None, keepdim=None):
        """Standard deviation, ``sqrt(var(x, axis, correction=correction))``
        (torch.std: ``correction=1`` by default, the unbiased variance).
        Backward: ``g (x - mean) / ((N - correction) std)``, 0 where std is 0
        (PyTorch's choice). Saves the mean for backward."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('std', axis, keepdims, dim, keepdim)
        c = _check_correction(correction, "std", "correction")
        return self._variance(_STD, x, axis, keepdims, c)

    def prod(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Product over ``axis`` (None: all; an int or a tuple). Backward:
        ``g * out / x`` when ``x`` has no zero, else the product of the other
        elements (exclusive cumulative products), exact at zeros as PyTorch."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('prod', axis, keepdims, dim, keepdim)
        return self._reduce(_PROD, x, axis, keepdims)

    def norm(self, x, ord=2, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Vector p-norm over ``axis`` (None: every element), as
        ``torch.linalg.vector_norm``: ``ord`` a real number (``(sum |x|^ord)^(1/ord)``),
        ``inf`` / ``-inf`` (max / min of ``|x|``), ``0`` (the number of
        nonzeros; zero gradient) or ``"fro"`` (the 2-norm, as ``torch.norm``:
        ``axis`` None, an int or two axes). Gradients as PyTorch's, including
        0 for a zero vector; ties of the inf-norms split the gradient evenly."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('norm', axis, keepdims, dim, keepdim)
        if isinstance(ord, str):
            if ord != "fro":
                raise ValueError(f"norm: ord={ord!r} is not a vector norm (use a number, "
                                 "inf, -inf or 'fro')")
            if isinstance(axis, (tuple, list)) and len(axis) > 2:
                raise ValueError(f"norm: ord='fro' takes at most two axes, got axis={axis!r}")
            p = 2.0
        elif isinstance(ord, bool) or not isinstance(ord, numbers.Real):
            raise TypeError(f"norm: ord must be a real number, inf, -inf or 'fro', got {ord!r}")
        else:
            p = float(ord)
            if math.isnan(p):
                raise ValueError(f"norm: ord={ord!r} is NaN")
        x, a = self._reduce_prepare(_NORM, x, axis, keepdims, 0.0,
                                    empty_ok=not (p < 0 or p == math.inf))
        return self._apply1(_NORM, x, PNormAttrs(a.axes, a.keepdims, a.kshape, a.oshape,
                                                 a.count, p))

    def _scan(self, op, x, axis):
        name = op.name.lower()
        if type(x) is NodeId:
            shape = self._shape(self._index(x))
        else:
            x = as_graph_array(x, self.dtype, name, "x", copy=False)
            shape = x.shape
        return self._apply1(op, x, normalize_axis(axis, len(shape), name))

    def cumsum(self, x, axis=_REQUIRED, *, dim=None):
        """Cumulative sum along ``axis`` (required, as torch.cumsum's dim).
        Backward: the reversed cumulative sum of the gradient."""
        if dim is not None:
            axis, _ = _torch_dims('cumsum', axis, False, dim, None)
        return self._scan(_CUMSUM, x, _required_axis('cumsum', axis))

    def cumprod(self, x, axis=_REQUIRED, *, dim=None):
        """Cumulative product along ``axis`` (required). Backward as
        PyTorch's, exact where ``x`` has zeros (no division by them)."""
        if dim is not None:
            axis, _ = _torch_dims('cumprod', axis, False, dim, None)
        return self._scan(_CUMPROD, x, _required_axis('cumprod', axis))

    def _operand_value(self, x, op: str):
        """(operand, its value) for a method that must look at the values."""
        if type(x) is NodeId:
            return x, self.value(x)
        x = as_graph_array(x, self.dtype, op, "x", copy=False)
        return x, x

    def _arg_extremum(self, x, axis, keepdims, op: str, fn):
        keepdims = _check_bool(keepdims, op, "keepdims")
        if axis is not None and (isinstance(axis, bool) or not isinstance(axis, numbers.Integral)):
            raise TypeError(f"{op}: axis must be None or an int, got {axis!r}")
        _, v = self._operand_value(x, op)
        if axis is not None:
            axis = normalize_axis(axis, v.ndim, op)
        if v.ndim == 0:
            return np.zeros((), dtype=np.int64)
        if (v.size if axis is None else v.shape[axis]) == 0:
            raise ValueError(f"{op}: cannot take the {op} of an empty "
                             f"{'input' if axis is None else f'axis={axis}'} "
                             f"(input shape {v.shape})")
        return np.asarray(fn(v, axis=axis, keepdims=keepdims), dtype=np.int64)

    def argmax(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Index of the maximum along ``axis`` (None: of the flattened input)
        as an int64 array, not a node (nothing is appended). The first
        occurrence wins ties; NaN counts as the maximum (as torch.argmax)."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('argmax', axis, keepdims, dim, keepdim)
        return self._arg_extremum(x, axis, keepdims, "argmax", np.argmax)

    def argmin(self, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        """Index of the minimum along ``axis`` (None: of the flattened input)
        as an int64 array, not a node. The first occurrence wins ties; NaN
        counts as the minimum (as torch.argmin)."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('argmin', axis, keepdims, dim, keepdim)
        return self._arg_extremum(x, axis, keepdims, "argmin", np.argmin)

    def _sorted_node(self, op, x, axis, descending, k=None):
        name = op.name.lower()
        if type(x) is NodeId:
            shape = self._shape(self._index(x))
        else:
            x = as_graph_array(x, self.dtype, name, "x", copy=False)
            shape = x.shape
        a = normalize_axis(axis, len(shape), name)
        n = shape[a] if shape else 1
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, numbers.Integral):
                raise TypeError(f"{name}: k must be an int, got {k!r}")
            if not 0 <= k <= n or (not shape and k == 0):
                raise ValueError(f"{name}: k={k} is out of range for axis {a} of size {n}")
        _, v = self._operand_value(x, name)
        if v.ndim == 0:
            idx = np.zeros((), dtype=np.int64)
        else:
            idx = _stable_order(v, a, descending)
            if k is not None and k < n:
                idx = np.ascontiguousarray(idx.take(np.arange(int(k)), axis=a))
        idx.flags.writeable = False
        return self._apply1(op, x, SortAttrs(a, idx, descending)), idx.copy()

    def topk(self, x, k, axis=-1, largest=True, sorted=True, *, dim=None):
        """The ``k`` largest (``largest=False``: smallest) elements along
        ``axis`` -> ``(values, indices)``: values a node, indices an int64
        array. Values come in sorted order (``sorted=False`` gives the same
        order; PyTorch leaves it unspecified); equal values are taken lower
        index first and NaN counts as the largest. Backward: the gradient
        scattered back to the chosen positions."""
        if dim is not None:
            axis, _ = _torch_dims("topk", None if axis == -1 else axis, False, dim, None)
        _check_bool(largest, "topk", "largest")
        _check_bool(sorted, "topk", "sorted")
        return self._sorted_node(_TOPK, x, axis, bool(largest), k)

    def sort(self, x, axis=-1, descending=False, stable=False, *, dim=None):
        """``x`` sorted along ``axis`` -> ``(values, indices)``: values a
        node, indices an int64 array with ``values = take_along_axis(x,
        indices, axis)``. Always stable (``stable=False`` too): equal values
        keep their input order, also descending; NaN sorts as the largest.
        Backward: the gradient scattered back through the permutation."""
        if dim is not None:
            axis, _ = _torch_dims("sort", None if axis == -1 else axis, False, dim, None)
        _check_bool(descending, "sort", "descending")
        _check_bool(stable, "sort", "stable")
        return self._sorted_node(_SORT, x, axis, bool(descending))

    def logsumexp(self, x, axis=_REQUIRED, keepdims=False, *, dim=None, keepdim=None):
        """``log(sum(exp(x), axis))`` computed stably (the max is subtracted
        first). ``axis`` is required (None reduces all axes). An empty
        reduction gives -inf (as PyTorch). Backward: cotangent * softmax."""
        if dim is not None or keepdim is not None:
            axis, keepdims = _torch_dims('logsumexp', axis, keepdims, dim, keepdim)
        return self._reduce(_LOGSUMEXP, x, _required_axis("logsumexp", axis), keepdims)

    def sum_axis(self, x, axis):
        """``sum(x, axis)`` under another name."""
        return self.sum(x, axis)

    def mean_axis(self, x, axis):
        """``mean(x, axis)`` under another name."""
        return self.mean(x, axis)
