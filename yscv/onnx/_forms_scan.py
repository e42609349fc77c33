"""ONNX forms of the reductions and scans beyond sum/mean/max/min/var/logsumexp: prod, std,
norm, cumsum, topk and sort (cumprod has none). One mapping function per Op
member; see `yscv.onnx._optable`. ``topk`` and ``sort`` emit ``TopK``
(equal values lower index first, as yscv), so the exported model orders its
own inputs rather than replaying the indices recorded on the example."""
from __future__ import annotations

import math

import numpy as np

from ..node import Op
from ._registry import NO_ONNX, onnx_form


def _scaled(b, n, s_of, op_type: str, c: str) -> str:
    """``op_type(reduce(keepdims), c)`` with ``c`` a [1]-shaped tensor (the
    builder's scalars are [1]-shaped), which would give a 0-d result rank 1:
    a 0-d result is reduced with keepdims, scaled, then its size-1 axes
    dropped (ReduceMax)."""
    a = n.attrs
    if n.shape != ():
        return b.emit(op_type, [s_of(a.keepdims), c])
    kept = b.emit(op_type, [s_of(True), c])
    return b.reduce("ReduceMax", kept, a.axes, False)


@onnx_form(Op.PROD, "ReduceProd")
def _prod(b, n):
    return b.reduce("ReduceProd", n.x(), n.attrs.axes, n.attrs.keepdims)


def _dof(b, n, x: str) -> str:
    """max(N - correction, 0) as a [1] tensor; N read from the input's
    shape at run time when a reduced axis is dynamic."""
    a = n.attrs
    rank = len(n.in_shape())
    axes = list(range(rank)) if a.axes is None else list(a.axes)
    if not b.dynamic_axes_of(n.inputs[0]) & set(axes):
        return b.scalar(max(a.count - a.ddof, 0.0))
    sizes = b.emit("Gather", [b.emit("Shape", [x]), b.ints(axes)], axis=0)
    count = b.emit("Cast", [b.emit("ReduceProd", [sizes], keepdims=1)], to=b.elem_type)
    return b.emit("Max", [b.emit("Sub", [count, b.scalar(a.ddof)]), b.scalar(0.0)])


_VARIANCE_OPS = ("ReduceMean, ReduceSum, Sub, Mul, Div, ReduceMax (0-d); Shape, Gather, "
                 "ReduceProd, Cast, Max (N of a dynamic axis)")


def variance(b, n) -> str:
    """var's (and std's) ONNX form: the mean of the squared deviations, or
    their sum over max(N - correction, 0) (N from the run-time shape when
    a reduced axis is dynamic)."""
    a = n.attrs
    x = n.x()
    d = b.emit("Sub", [x, b.reduce("ReduceMean", x, a.axes, True)])
    d2 = b.emit("Mul", [d, d])
    if a.ddof == 0.0:
        return b.reduce("ReduceMean", d2, a.axes, a.keepdims)
    return _scaled(b, n, lambda kd: b.reduce("ReduceSum", d2, a.axes, kd), "Div",
                   _dof(b, n, x))


@onnx_form(Op.STD, _VARIANCE_OPS.replace("Div,", "Div, Sqrt,"))
def _std(b, n):
    return b.emit("Sqrt", [variance(b, n)])


@onnx_form(Op.NORM, "Mul, ReduceSum, Sqrt (ord 2); Abs, ReduceSum / ReduceMax / ReduceMin, "
                    "Pow, ReduceMax (other ords); Equal, Not, Cast, ReduceSum (ord 0)")
def _norm(b, n):
    a = n.attrs
    p = a.ord
    x = n.x()
    if p == 2.0:
        return b.emit("Sqrt", [b.reduce("ReduceSum", b.emit("Mul", [x, x]), a.axes, a.keepdims)])
    if p == 0.0:
        nz = b.emit("Not", [b.emit("Equal", [x, b.scalar(0.0)])])
        return b.reduce("ReduceSum", b.emit("Cast", [nz], to=b.elem_type), a.axes, a.keepdims)
    ax = b.emit("Abs", [x])
    if p == 1.0:
        return b.reduce("ReduceSum", ax, a.axes, a.keepdims)
    if math.isinf(p):
        return b.reduce("ReduceMax" if p > 0 else "ReduceMin", ax, a.axes, a.keepdims)
    powed = b.emit("Pow", [ax, b.scalar(p)])
    return _scaled(b, n, lambda kd: b.reduce("ReduceSum", powed, a.axes, kd), "Pow",
                   b.scalar(1.0 / p))


@onnx_form(Op.CUMSUM, "CumSum")
def _cumsum(b, n):
    if not n.in_shape():
        return b.emit("Identity", [n.x()])
    return b.emit("CumSum", [n.x(), b.const(np.asarray(n.attrs, dtype=np.int64), "axis")])


@onnx_form(Op.CUMPROD, "CumProd", min_opset=26)
def _cumprod(b, n):
    """ONNX's CumProd (opset 26; before it ONNX has no cumulative product,
    and exp(cumsum(log x)) fails on zeros and negative values)."""
    if not n.in_shape():
        return b.emit("Identity", [n.x()])
    axis = b.emit("Constant", [], value_int=int(n.attrs))   # a 0-d axis, as CumProd asks
    return b.emit("CumProd", [n.x(), axis])


def _top(b, n, k: str, largest: bool) -> str:
    values, _ = b.emit("TopK", [n.x(), k], outputs=2, axis=int(n.attrs.axis),
                       largest=int(largest), sorted=1)
    return values


@onnx_form(Op.TOPK, "TopK")
def _topk(b, n):
    if not n.in_shape():
        return b.emit("Identity", [n.x()])
    k = n.attrs.index.shape[n.attrs.axis]
    return _top(b, n, b.ints([k]), _descending(n))


@onnx_form(Op.SORT, "TopK (k = the axis length)")
def _sort(b, n):
    if not n.in_shape():
        return b.emit("Identity", [n.x()])
    axis = n.attrs.axis
    if axis in b.dynamic_axes_of(n.inputs[0]):   # the length is the input's, at run time
        k = b.emit("Gather", [b.emit("Shape", [n.x()]), b.ints([axis])], axis=0)
    else:
        k = b.ints([n.in_shape()[axis]])
    return _top(b, n, k, _descending(n))


def _descending(n) -> bool:
    """Whether the recorded order is largest first (read from the node:
    the values are monotone along the axis)."""
    return bool(n.attrs.descending)
