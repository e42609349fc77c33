"""Argument validation shared by every op category.

Each helper raises ``ValueError`` / ``TypeError`` / ``ShapeError`` with a
message naming the op and the argument, before anything is appended.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import runtime
from ..errors import ShapeError
from ..node import NodeId
from ..registry import register_forward, register_ufunc

_FLOAT_KINDS = "fiub"  # float, int, uint, bool convert to the graph dtype

#: the largest index, dimension, element count or byte count an array can
#: have (np.intp: 2**63 - 1 on 64-bit platforms). Int arguments above it
#: cannot reach the Numba kernels (which type them as int64), and NumPy
#: refuses arrays whose byte count exceeds it.
MAX_INTP = int(np.iinfo(np.intp).max)
#: arrays above this many bytes are refused up front: MAX_INTP, or the
#: machine's physical memory when known
_MEMORY_LIMIT = min(MAX_INTP, runtime.physical_memory() or MAX_INTP)


def as_graph_array(a, dtype, op: str, arg: str, copy: bool = True) -> np.ndarray:
    """``a`` as an ndarray of the graph ``dtype``; rejects complex/object/str.

    ``copy=True`` guarantees the result never aliases the caller's array.
    """
    if type(a) is np.ndarray:
        kind = a.dtype.kind
        if kind == "f" and a.dtype == dtype:
            return a.copy() if copy else a
    else:
        try:
            a = np.asarray(a)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{op}: {arg} cannot be converted to an array: {exc}") from None
        kind = a.dtype.kind
    if kind not in _FLOAT_KINDS:
        raise TypeError(
            f"{op}: {arg} has dtype {a.dtype}; expected a real numeric array "
            "(float, int or bool), not complex, object or string data"
        )
    return a.astype(dtype)  # astype always copies


def operand_shape(g, x, op: str, arg: str = "x"):
    """``(operand, shape)`` for a Graph method's input ``x``: a NodeId passes
    through (its shape read from the arena ``g``); an array-like becomes a
    graph-dtype array (a constant leaf once the op succeeds)."""
    if type(x) is NodeId:
        return x, g._shape(g._index(x))
    a = as_graph_array(x, g.dtype, op, arg, copy=True)
    return a, a.shape


def as_index_array(idx, op: str, arg: str) -> np.ndarray:
    """An integer index array (int64); rejects floats and bools."""
    arr = np.asarray(idx)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {arg} must be an integer array, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=True)


def normalize_axis(axis, ndim: int, op: str, arg: str = "axis") -> int:
    """A single axis in [-ndim, ndim) as a non-negative int."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: {arg} must be an int, got {type(axis).__name__}")
    axis = int(axis)
    if ndim == 0:  # as PyTorch: a 0-d tensor accepts dim 0 and -1
        if axis not in (0, -1):
            raise ValueError(f"{op}: {arg}={axis} is out of range for a 0-d input")
        return 0
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: {arg}={axis} is out of range for a {ndim}-d input")
    return axis % ndim


def normalize_axes(axis, ndim: int, op: str, arg: str = "axis"):
    """None (all axes) or a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        axes = tuple(normalize_axis(a, ndim, op, arg) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{op}: {arg}={tuple(axis)} repeats an axis")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim, op, arg),)


def int_tuple(v, n: int, op: str, arg: str, minimum: int = 0) -> tuple:
    """An int or a length-``n`` sequence of ints, each >= ``minimum``, as a tuple."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        out = (int(v),) * n
    elif isinstance(v, (tuple, list)) and len(v) == n and all(
        isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in v
    ):
        out = tuple(int(e) for e in v)
    else:
        raise TypeError(f"{op}: {arg} must be an int or a tuple of {n} ints, got {v!r}")
    for e in out:
        if e < minimum:
            raise ValueError(f"{op}: {arg}={v!r} must be >= {minimum}")
        if e > MAX_INTP:
            check_int_bound(e, op, arg, v)
    return out


def check_int_bound(e: int, op: str, arg: str, given=None) -> int:
    """``e`` itself if it is at most `MAX_INTP` in magnitude, else a
    ValueError naming the op and the argument (``given``: the argument as
    the user wrote it, when ``e`` is one entry of it)."""
    if -MAX_INTP <= e <= MAX_INTP:
        return e
    limit = f"(at most {MAX_INTP} = 2**{MAX_INTP.bit_length()} - 1)"
    if given is None or given == e:
        raise ValueError(f"{op}: {arg}={e!r} is too large for an array index {limit}")
    raise ValueError(f"{op}: {arg}={given!r} is too large: {e} does not fit in an array index "
                     f"{limit}")


def check_array_size(op: str, shape: tuple, itemsize: int, what: str = "an output", /,
                     **args):
    """ValueError unless an array of ``shape`` (a tuple of Python ints) with
    ``itemsize``-byte elements can exist: every dimension and the byte count
    at most `MAX_INTP` (NumPy's own limits), and the byte count at most
    this machine's physical memory (a larger allocation would only fail later
    as a MemoryError naming no op). ``args`` are the arguments that produced
    the shape, named in the message (formatted only on failure); ``what``
    names the array. Python-int arithmetic, so nothing overflows on the way.
    """
    count = math.prod(shape)
    nbytes = count * itemsize
    if nbytes <= _MEMORY_LIMIT and max(shape, default=0) <= MAX_INTP:
        return shape
    cause = ", ".join(f"{k}={v!r}" for k, v in args.items())
    if nbytes <= MAX_INTP and max(shape, default=0) <= MAX_INTP:
        limit = f"more than this machine's memory ({_MEMORY_LIMIT} bytes)"
    else:
        limit = f"larger than any array can be (at most {MAX_INTP} bytes and elements per axis)"
    raise ValueError(f"{op}: {cause} gives {what} of shape {tuple(shape)} ({count} elements, "
                     f"{nbytes} bytes), {limit}")


def check_ndim(shape: tuple, ndims, op: str, arg: str, layout: str = "") -> None:
    """ShapeError unless ``len(shape)`` is in ``ndims`` (an int or a tuple)."""
    allowed = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if len(shape) not in allowed:
        want = " or ".join(f"{d}-d" for d in allowed)
        lay = f" ({layout})" if layout else ""
        raise ShapeError(
            f"{op}: {arg} must be {want}{lay}, got shape {shape}",
            op=op, expected=allowed, got=shape,
        )


def shape_error(op: str, message: str, expected=None, got=None) -> ShapeError:
    """A ShapeError whose message starts with the op name."""
    return ShapeError(f"{op}: {message}", op=op, expected=expected, got=got)


def is_scalar(x) -> bool:
    """True for Python / NumPy real scalars."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def ufunc_forward(op, ufunc, quiet: bool = False) -> None:
    """Register ``ufunc(*input_values)`` as the forward of ``op``: no
    attributes, nothing saved (``ufunc_forward(Op.EXP, np.exp)``).

    ``quiet``: the results outside the domain or range (``log(0) = -inf``,
    ``sqrt(-1) = nan``, ``exp(1000) = inf``) come without NumPy's
    RuntimeWarning, as in PyTorch (under ``-W error`` the warning would be an
    exception). ``Graph.detect_anomaly`` still reports them."""
    if ufunc.nin == 1 and quiet:
        def forward(attrs, x):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return ufunc(x), None
    elif ufunc.nin == 1:
        def forward(attrs, x):
            return ufunc(x), None
    elif quiet:
        def forward(attrs, a, b):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return ufunc(a, b), None
    else:
        def forward(attrs, a, b):
            return ufunc(a, b), None
    forward.__name__ = forward.__qualname__ = f"{op.name.lower()}_forward"
    register_forward(op)(forward)
    if not quiet:  # the hot paths may call the ufunc itself (registry.UFUNC)
        register_ufunc(op, ufunc)
