"""ONNX forms of the tensor ops: elementwise, activations, reductions,
linear algebra, shape and indexing (one mapping function per Op member;
see `yscv.onnx._optable`)."""
from __future__ import annotations

import math

import numpy as np

from ..node import Op
from ._builder import INT64_MAX, INT64_MIN
from ._forms_scan import _VARIANCE_OPS, variance
from ._registry import NO_ONNX, onnx_form


# ------------------------------------------------------------ elementwise
def _simple(op: Op, onnx_op: str):
    def emit(b, n):
        return b.emit(onnx_op, [n.x(k) for k in range(len(n.inputs))])
    emit.__name__ = f"_{op.name.lower()}"
    return onnx_form(op, onnx_op)(emit)


for _op, _onnx in ((Op.ADD, "Add"), (Op.SUB, "Sub"), (Op.MUL, "Mul"), (Op.DIV, "Div"),
                   (Op.POW, "Pow"), (Op.NEG, "Neg"), (Op.ABS, "Abs"), (Op.EXP, "Exp"),
                   (Op.LOG, "Log"), (Op.SQRT, "Sqrt"), (Op.MAXIMUM, "Max"),
                   (Op.MINIMUM, "Min"), (Op.RELU, "Relu"), (Op.SIGMOID, "Sigmoid"),
                   (Op.TANH, "Tanh"), (Op.MATMUL, "MatMul")):
    _simple(_op, _onnx)


@onnx_form(Op.CLAMP, "Clip")
def _clamp(b, n):
    lo = "" if n.attrs.lo is None else b.scalar(n.attrs.lo)
    hi = "" if n.attrs.hi is None else b.scalar(n.attrs.hi)
    return b.emit("Clip", [n.x(), lo, hi])


@onnx_form(Op.WHERE, "Where")
def _where(b, n):
    cond = b.const(np.asarray(n.attrs, dtype=np.bool_), "cond")
    return b.emit("Where", [cond, n.x(0), n.x(1)])


# ------------------------------------------------------------ activations
@onnx_form(Op.LEAKY_RELU, "LeakyRelu (float64: Mul, Max)")
def _leaky_relu(b, n):
    if b.exact_float_attributes:
        return b.emit("LeakyRelu", [n.x()], alpha=float(n.attrs))
    x = n.x()   # max(x, s x) (s <= 1) or min(x, s x), as yscv computes it
    return b.emit("Max" if n.attrs <= 1.0 else "Min", [x, b.emit("Mul", [x, b.scalar(n.attrs)])])


def _softplus_stable(b, x):
    """log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), no overflow."""
    pos = b.emit("Relu", [x])
    e = b.emit("Exp", [b.emit("Neg", [b.emit("Abs", [x])])])
    return b.emit("Add", [pos, b.emit("Log", [b.emit("Add", [e, b.scalar(1.0)])])])


# gelu's input gradient as an op: it is appended only by a recorded backward
# (create_graph=True), never by a model's inference
for _op in (Op.GELU_BACKWARD, Op.TANH_BACKWARD, Op.SIGMOID_BACKWARD):
    NO_ONNX[_op] = ("a backward op, recorded only by create_graph=True; "
                    "export the model's forward instead")


@onnx_form(Op.GELU, "Erf, Tanh or Sigmoid, Mul, Add")
def _gelu(b, n):
    from ..compute.activation import GELU_KINDS
    kind = {v: k for k, v in GELU_KINDS.items()}[n.attrs]
    x = n.x()
    if kind == "none":
        t = b.emit("Erf", [b.emit("Mul", [x, b.scalar(1.0 / math.sqrt(2.0))])])
        t = b.emit("Add", [t, b.scalar(1.0)])
        return b.emit("Mul", [b.emit("Mul", [x, t]), b.scalar(0.5)])
    if kind == "tanh":
        x3 = b.emit("Mul", [b.emit("Mul", [x, x]), x])
        inner = b.emit("Add", [x, b.emit("Mul", [x3, b.scalar(0.044715)])])
        t = b.emit("Tanh", [b.emit("Mul", [inner, b.scalar(math.sqrt(2.0 / math.pi))])])
        t = b.emit("Add", [t, b.scalar(1.0)])
        return b.emit("Mul", [b.emit("Mul", [x, t]), b.scalar(0.5)])
    return b.emit("Mul", [x, b.emit("Sigmoid", [b.emit("Mul", [x, b.scalar(1.702)])])])


@onnx_form(Op.SILU, "Sigmoid, Mul")
def _silu(b, n):
    x = n.x()
    return b.emit("Mul", [x, b.emit("Sigmoid", [x])])


@onnx_form(Op.MISH, "Tanh, Exp, Log, Relu, Abs, Neg, Add, Mul")
def _mish(b, n):
    x = n.x()
    return b.emit("Mul", [x, b.emit("Tanh", [_softplus_stable(b, x)])])


@onnx_form(Op.SOFTPLUS, "Exp, Log, Relu, Abs, Neg, Add, Mul, Div, Greater, Where")
def _softplus(b, n):
    x = n.x()
    beta, threshold = n.attrs.beta, n.attrs.threshold
    bx = x if beta == 1.0 else b.emit("Mul", [x, b.scalar(beta)])
    sp = _softplus_stable(b, bx)
    if beta != 1.0:
        sp = b.emit("Div", [sp, b.scalar(beta)])
    big = b.emit("Greater", [bx, b.scalar(threshold)])
    return b.emit("Where", [big, x, sp])


@onnx_form(Op.PRELU, "PRelu")
def _prelu(b, n):
    return b.emit("PRelu", [n.x(0), n.x(1)])


@onnx_form(Op.SOFTMAX, "Softmax")
def _softmax(b, n):
    return b.emit("Softmax", [n.x()], axis=int(n.attrs))


@onnx_form(Op.LOG_SOFTMAX, "LogSoftmax")
def _log_softmax(b, n):
    return b.emit("LogSoftmax", [n.x()], axis=int(n.attrs))


@onnx_form(Op.DROPOUT, "Identity")
def _dropout(b, n):
    return b.emit("Identity", [n.x()])


# ------------------------------------------------------------- reductions
def _reduction(op: Op, onnx_op: str):
    def emit(b, n):
        return b.reduce(onnx_op, n.x(), n.attrs.axes, n.attrs.keepdims)
    emit.__name__ = f"_{op.name.lower()}"
    return onnx_form(op, onnx_op)(emit)


for _op, _onnx in ((Op.SUM, "ReduceSum"), (Op.MEAN, "ReduceMean"), (Op.MAX, "ReduceMax"),
                   (Op.MIN, "ReduceMin")):
    _reduction(_op, _onnx)


@onnx_form(Op.SUM_TO, "ReduceSum")
def _sum_to(b, n):
    """ReduceSum over the leading axes (dropped), then over the axes where
    the target shape has size 1 (kept): the target shape, no Reshape."""
    a = n.attrs
    x = n.x()
    extra = len(a.in_shape) - len(a.shape)
    keep = tuple(k for k, s in enumerate(a.shape) if s == 1 and a.in_shape[extra + k] != 1)
    if not extra and not keep:
        return b.emit("Identity", [x])
    if extra:
        x = b.reduce("ReduceSum", x, tuple(range(extra)), False)
    if keep:
        x = b.reduce("ReduceSum", x, keep, True)
    return x


@onnx_form(Op.VAR, _VARIANCE_OPS)
def _var(b, n):
    return variance(b, n)


@onnx_form(Op.LOGSUMEXP, "ReduceMax, ReduceSum, Sub, Exp, Log, Add, IsInf, Where")
def _logsumexp(b, n):
    """log(sum(exp(x - m))) + m with m the max (0 where it is infinite)."""
    a = n.attrs
    x = n.x()
    m = b.reduce("ReduceMax", x, a.axes, True)
    m = b.emit("Where", [b.emit("IsInf", [m]), b.scalar(0.0), m])
    s = b.reduce("ReduceSum", b.emit("Exp", [b.emit("Sub", [x, m])]), a.axes, a.keepdims)
    if not a.keepdims:   # drop the kept axes (a max over size-1 axes)
        m = b.reduce("ReduceMax", m, a.axes, False)
    return b.emit("Add", [b.emit("Log", [s]), m])


# --------------------------------------------------------- linear algebra
@onnx_form(Op.TRANSPOSE, "Transpose")
def _transpose(b, n):
    return b.emit("Transpose", [n.x()], perm=list(n.attrs.perm))


@onnx_form(Op.EINSUM, "Einsum")
def _einsum(b, n):
    return b.emit("Einsum", [n.x(k) for k in range(len(n.inputs))],
                  equation=n.attrs.subscripts)


# ------------------------------------------------------------------ shape
def _reshape_like(op: Op):
    def emit(b, n):
        return b.emit("Reshape", [n.x(), b.target_shape(n.index, n.inputs[0], n.name)])
    emit.__name__ = f"_{op.name.lower()}"
    return onnx_form(op, "Reshape")(emit)


for _op in (Op.RESHAPE, Op.FLATTEN, Op.UNSQUEEZE, Op.SQUEEZE):
    _reshape_like(_op)


@onnx_form(Op.EXPAND, "Expand")
def _expand(b, n):
    return b.emit("Expand", [n.x(), b.target_shape(n.index, n.inputs[0], n.name, expand=True)])


@onnx_form(Op.CAT, "Concat")
def _cat(b, n):
    return b.emit("Concat", [n.x(k) for k in range(len(n.inputs))], axis=n.attrs.axis)


@onnx_form(Op.STACK, "Unsqueeze, Concat")
def _stack(b, n):
    axes = b.ints([n.attrs.axis])
    parts = [b.emit("Unsqueeze", [n.x(k), axes]) for k in range(len(n.inputs))]
    return b.emit("Concat", parts, axis=n.attrs.axis)


def _basic_index(b, x: str, key: tuple) -> str:
    """``x[key]`` for a canonical basic-slicing key (ints, slices, None, a
    trailing Ellipsis): Slice, then Squeeze the int axes, Unsqueeze the Nones."""
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    dim = 0
    out_dim = 0
    for k in key:
        if k is Ellipsis:
            continue
        if k is None:
            unsqueeze.append(out_dim)
            out_dim += 1
            continue
        if isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if k.start is None and k.stop is None and step == 1:
                dim += 1
                out_dim += 1
                continue
            start = k.start if k.start is not None else (0 if step > 0 else INT64_MAX)
            stop = k.stop if k.stop is not None else (INT64_MAX if step > 0 else INT64_MIN)
            starts.append(start)
            ends.append(stop)
            steps.append(step)
            axes.append(dim)
            out_dim += 1
        else:
            starts.append(k)
            ends.append(k + 1)
            steps.append(1)
            axes.append(dim)
            squeeze.append(dim)
        dim += 1
    y = x
    if axes:
        y = b.emit("Slice", [y, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if squeeze:
        y = b.emit("Squeeze", [y, b.ints(squeeze)])
    if unsqueeze:
        y = b.emit("Unsqueeze", [y, b.ints(unsqueeze)])
    if y is x:
        y = b.emit("Identity", [x])
    return y


def _index_view(op: Op):
    def emit(b, n):
        return _basic_index(b, n.x(), n.attrs.key)
    emit.__name__ = f"_{op.name.lower()}"
    return onnx_form(op, "Slice, Squeeze, Unsqueeze")(emit)


for _op in (Op.SELECT, Op.NARROW, Op.GETITEM):
    _index_view(_op)


@onnx_form(Op.FLIP, "Slice")
def _flip(b, n):
    axes = list(n.attrs.axes)
    if not axes:
        return b.emit("Identity", [n.x()])
    k = len(axes)
    return b.emit("Slice", [n.x(), b.ints([-1] * k), b.ints([INT64_MIN] * k), b.ints(axes),
                            b.ints([-1] * k)])


@onnx_form(Op.PAD, "Pad")
def _pad(b, n):
    widths = n.attrs.widths
    pads = [w[0] for w in widths] + [w[1] for w in widths]
    if not any(pads):
        return b.emit("Identity", [n.x()])
    return b.emit("Pad", [n.x(), b.ints(pads), b.scalar(n.attrs.value)], mode="constant")


@onnx_form(Op.REPEAT, "Unsqueeze, Tile")
def _repeat(b, n):
    x = n.x()
    reps = list(n.attrs.reps)
    extra = len(reps) - len(n.in_shape())
    if extra:
        x = b.emit("Unsqueeze", [x, b.ints(range(extra))])
    return b.emit("Tile", [x, b.ints(reps)])


@onnx_form(Op.PIXEL_SHUFFLE, "Transpose, DepthToSpace (CRD)")
def _pixel_shuffle(b, n):
    y = b.emit("DepthToSpace", [b.to_channels_first(n.x(), 4)], blocksize=n.attrs.r,
               mode="CRD")
    return b.to_channels_last(y, 4)


@onnx_form(Op.UPSAMPLE_NEAREST, "Reshape, Expand")
def _upsample_nearest(b, n):
    shape = n.in_shape()
    scales = n.attrs.scales
    inter, full, out = [0], [1], [0]
    for s, r in zip(shape[1:-1], scales):
        inter += [s, 1]
        full += [s, r]
        out += [s * r]
    inter.append(shape[-1])
    full.append(shape[-1])
    out.append(shape[-1])
    b.fixed_axes(n.inputs[0], range(1, len(shape)), n.name, n.index)
    y = b.emit("Reshape", [n.x(), b.ints(inter)])
    y = b.emit("Expand", [y, b.ints(full)])
    return b.emit("Reshape", [y, b.ints(out)])


# --------------------------------------------------------------- indexing
@onnx_form(Op.GATHER, "Slice, GatherElements")
def _gather(b, n):
    a = n.attrs
    x = n.x()
    shape = n.in_shape()
    cut = [d for d in range(len(shape)) if d != a.axis and a.index.shape[d] < shape[d]]
    if cut:
        x = b.emit("Slice", [x, b.ints([0] * len(cut)), b.ints([a.index.shape[d] for d in cut]),
                             b.ints(cut)])
    return b.emit("GatherElements", [x, b.index_tensor(a.index)], axis=a.axis)


@onnx_form(Op.SCATTER_ADD, "Slice, ScatterElements (add)")
def _scatter_add(b, n):
    a = n.attrs
    src = n.x(1)
    sshape = n.in_shape(1)
    cut = [d for d in range(len(sshape)) if a.index.shape[d] < sshape[d]]
    if cut:
        src = b.emit("Slice", [src, b.ints([0] * len(cut)),
                               b.ints([a.index.shape[d] for d in cut]), b.ints(cut)])
    return b.emit("ScatterElements", [n.x(0), b.index_tensor(a.index), src], axis=a.axis,
                  reduction="add")


@onnx_form(Op.SCATTER, "Gather, ScatterND")
def _scatter(b, n):
    a = n.attrs
    src = n.x(1)
    if a.win is not None:   # duplicate rows: only the last write of each survives
        src = b.emit("Gather", [src, b.const(np.asarray(a.win, np.int64), "win")], axis=0)
    rows = b.const(np.asarray(a.rows, np.int64).reshape(-1, 1), "rows")
    return b.emit("ScatterND", [n.x(0), rows, src])


@onnx_form(Op.EMBEDDING, "Gather")
def _embedding(b, n):
    return b.emit("Gather", [n.x(), b.index_tensor(n.attrs, "indices")], axis=0)
