"""Handlers of elementwise, activation, reduction and matrix ONNX operators.

A handler is ``handler(run, node) -> list of output values`` (see
``_import_run``): static inputs give static outputs computed with NumPy
(shape arithmetic), data gives graph ops. Unary elementwise ops keep a
channel-last value channel-last.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import HANDLERS, ChannelLast, handler


def _unary(graph_fn):
    """A unary elementwise op on data; channel-last values stay channel-last."""
    def run_unary(run, node):
        name = node.inputs[0]
        v = run.raw(name)
        if isinstance(v, ChannelLast):
            return [ChannelLast(graph_fn(run, node, v.node))]
        return [graph_fn(run, node, run.node(name))]
    return run_unary


def _static_unary(np_fn, graph_fn):
    unary = _unary(graph_fn)

    def run_op(run, node):
        if run.is_static(node.inputs[0]):
            return [np.asarray(np_fn(run.arr(node.inputs[0])))]
        return unary(run, node)
    return run_op


_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875

_UNARY = {
    "Relu": (lambda a: np.maximum(a, 0), lambda r, n, x: r.g.relu(x)),
    "Sigmoid": (lambda a: 1 / (1 + np.exp(-a)), lambda r, n, x: r.g.sigmoid(x)),
    "Tanh": (np.tanh, lambda r, n, x: r.g.tanh(x)),
    "Neg": (np.negative, lambda r, n, x: r.g.neg(x)),
    "Exp": (np.exp, lambda r, n, x: r.g.exp(x)),
    "Log": (np.log, lambda r, n, x: r.g.log(x)),
    "Sqrt": (np.sqrt, lambda r, n, x: r.g.sqrt(x)),
    "Abs": (np.abs, lambda r, n, x: r.g.abs(x)),
    "Reciprocal": (lambda a: 1 / a, lambda r, n, x: r.g.div(1.0, x)),
    "Softplus": (lambda a: np.logaddexp(0, a), lambda r, n, x: r.g.softplus(x)),
    "Identity": (lambda a: a, lambda r, n, x: x),
    "LeakyRelu": (None, lambda r, n, x: r.g.leaky_relu(x, float(n.attrs.get("alpha", 0.01)))),
    "HardSigmoid": (None, lambda r, n, x: _hardsigmoid(r.g, x, float(n.attrs.get("alpha", 0.2)),
                                                        float(n.attrs.get("beta", 0.5)))),
    "HardSwish": (None, lambda r, n, x: r.g.hardswish(x)),
    "Gelu": (None, lambda r, n, x: r.g.gelu(x, n.attrs.get("approximate", "none"))),
    "Mish": (None, lambda r, n, x: r.g.mish(x)),
    "Softsign": (None, lambda r, n, x: x / (r.g.abs(x) + 1.0)),
    "Elu": (None, lambda r, n, x: _elu(r.g, x, float(n.attrs.get("alpha", 1.0)))),
    "Celu": (None, lambda r, n, x: _celu(r.g, x, float(n.attrs.get("alpha", 1.0)))),
    "Selu": (None, lambda r, n, x: _elu(r.g, x, float(n.attrs.get("alpha", _SELU_ALPHA)))
             * float(n.attrs.get("gamma", _SELU_GAMMA))),
    "_GeluErf": (None, lambda r, n, x: r.g.gelu(x, "none")),
}


#: HardSigmoid's alpha as exporters write PyTorch's hardsigmoid (1/6 in float32)
_ONE_SIXTH_F32 = float(np.float32(1.0 / 6.0))


def _hardsigmoid(g, x, alpha, beta):
    """``clamp(alpha x + beta, 0, 1)``; PyTorch's hardsigmoid (alpha 1/6,
    in float32 or float64, and beta 1/2) as the one op ``g.hardsigmoid``
    (``relu6(x + 3) / 6``: the same function, PyTorch's rounding)."""
    if beta == 0.5 and alpha in (1.0 / 6.0, _ONE_SIXTH_F32):
        return g.hardsigmoid(x)
    return g.clamp(x * alpha + beta, 0.0, 1.0)


def _elu(g, x, alpha):
    """relu(x) + alpha * (exp(min(x, 0)) - 1): the exponential never sees a
    large positive x, and the gradient at 0 is alpha (PyTorch's)."""
    return g.relu(x) + (g.exp(g.clamp(x, max=0.0)) - 1.0) * alpha


def _celu(g, x, alpha):
    """relu(x) + alpha * (exp(min(x, 0) / alpha) - 1)."""
    return g.relu(x) + (g.exp(g.clamp(x, max=0.0) * (1.0 / alpha)) - 1.0) * alpha


for _op, (_np_fn, _graph_fn) in _UNARY.items():
    HANDLERS[_op] = (_static_unary(_np_fn, _graph_fn) if _np_fn is not None
                     else _unary(_graph_fn))


# ----------------------------------------------------------- binary ops
def _int_div(a, b):
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return np.trunc(a / b).astype(np.result_type(a, b))
    return a / b


_BINARY = {
    "Add": (np.add, lambda g, a, b: g.add(a, b)),
    "Sub": (np.subtract, lambda g, a, b: g.sub(a, b)),
    "Mul": (np.multiply, lambda g, a, b: g.mul(a, b)),
    "Div": (_int_div, lambda g, a, b: g.div(a, b)),
    "Pow": (np.power, lambda g, a, b: g.pow(a, b)),
    "Max": (np.maximum, lambda g, a, b: g.maximum(a, b)),
    "Min": (np.minimum, lambda g, a, b: g.minimum(a, b)),
    "Sum": (np.add, lambda g, a, b: g.add(a, b)),
}


def _operand(run, name):
    """A data NodeId, or a static array / Python scalar the binary op takes as is."""
    if run.is_static(name):
        a = run.arr(name).astype(run.g.dtype)
        return float(a) if a.ndim == 0 else a
    return run.node(name)


def _binary(run, node):
    np_fn, graph_fn = _BINARY[node.op]
    names = [n for n in node.inputs if n]
    if node.op == "Pow" and run.is_static(names[0]) and run.arr(names[0]).dtype.kind in "iu":
        # ONNX: the result has the base's type (an integer power has no gradient)
        base, exp = run.arr(names[0]), run.arr(names[1])
        if exp.dtype.kind in "iu" and np.all(exp >= 0):  # exact in integers
            return [np.asarray(np.power(base, exp.astype(base.dtype)))]
        out = np.power(base.astype(np.float64), exp.astype(np.float64))
        return [np.asarray(out).astype(base.dtype)]
    if all(run.is_static(n) for n in names):
        out = run.arr(names[0])
        for n in names[1:]:
            out = np_fn(out, run.arr(n))
        return [np.asarray(out)]
    cl = _channel_last_pair(run, names)
    if cl is not None:
        out = cl[0]
        for b in cl[1:]:
            out = graph_fn(run.g, out, b)
        return [ChannelLast(out)]
    out = _operand(run, names[0])
    for n in names[1:]:
        out = graph_fn(run.g, out, _operand(run, n))
    return [out]


def _channel_last_pair(run, names):
    """Operands in channel-last form when every data operand is channel-last
    with one shape and the static ones are scalars; else None."""
    vals = [run.raw(n) for n in names]
    data = [v for v in vals if not isinstance(v, np.ndarray)]
    if not data or not all(isinstance(v, ChannelLast) for v in data):
        return None
    if len({tuple(v.node.shape) for v in data}) != 1:
        return None
    out = []
    for v in vals:
        if isinstance(v, np.ndarray):
            if v.size != 1:
                return None
            out.append(float(v.reshape(())))
        else:
            out.append(v.node)
    return out


for _op in _BINARY:
    HANDLERS[_op] = _binary


_COMPARE = {
    "Equal": np.equal, "Less": np.less, "Greater": np.greater,
    "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
}


@handler(*_COMPARE)
def _compare(run, node):
    """Comparisons give boolean arrays (no gradient): evaluated on values."""
    return [np.asarray(_COMPARE[node.op](run.arr(node.inputs[0]), run.arr(node.inputs[1])))]


@handler("Not")
def _not(run, node):
    return [np.logical_not(run.arr(node.inputs[0]))]


@handler("Floor", "Ceil", "Round", "Sign")
def _step_functions(run, node):
    """Piecewise-constant ops (zero gradient): evaluated on values."""
    fn = {"Floor": np.floor, "Ceil": np.ceil, "Round": np.round, "Sign": np.sign}[node.op]
    return [np.asarray(fn(run.arr(node.inputs[0])))]


@handler("Where")
def _where(run, node):
    cond = run.arr(node.inputs[0]).astype(bool)
    a, b = node.inputs[1], node.inputs[2]
    if run.is_static(a) and run.is_static(b):
        return [np.where(cond, run.arr(a), run.arr(b))]
    return [run.g.where(cond, run.node(a), run.node(b))]


def _clip_bound(run, node, slot, attr):
    """A Clip bound: input ``slot`` (opset 11+, kept in its own dtype) or
    attribute ``attr`` (before opset 11); None when absent."""
    if run.has(node, slot):
        return run.arr(node.inputs[slot]).reshape(())
    v = node.attrs.get(attr)
    return None if v is None else np.asarray(v)


@handler("Clip")
def _clip(run, node):
    """min(max(x, lo), hi) as ONNX defines it: without bounds the identity,
    with lo > hi every value is hi. Static (integer) inputs keep their dtype."""
    lo, hi = _clip_bound(run, node, 1, "min"), _clip_bound(run, node, 2, "max")
    name = node.inputs[0]
    if run.is_static(name):
        a = run.arr(name)
        out = a if lo is None else np.maximum(a, lo.astype(a.dtype))
        out = out if hi is None else np.minimum(out, hi.astype(a.dtype))
        return [np.asarray(out).astype(a.dtype, copy=False)]
    if lo is None and hi is None:
        return [run.raw(name)]
    lo = None if lo is None else float(lo)
    hi = None if hi is None else float(hi)
    if lo is not None and hi is not None and lo > hi:
        lo = hi
    return _unary(lambda r, n, x: r.g.clamp(x, lo, hi))(run, node)


@handler("PRelu")
def _prelu(run, node):
    """max(x, 0) + slope * min(x, 0), the slope broadcast as ONNX does: from
    opset 7 unidirectionally (NumPy rules); before, a 1-D slope of C values
    is one slope per channel (axis 1)."""
    g = run.g
    x = run.node(node.inputs[0])
    slope = run.node(node.inputs[1])
    shape, sshape = tuple(x.shape), tuple(slope.shape)
    if (run.m.opset < 7 and len(sshape) == 1 and sshape[0] > 1 and len(shape) > 2
            and shape[1] == sshape[0]):
        slope = g.reshape(slope, (sshape[0],) + (1,) * (len(shape) - 2))
    return [g.relu(x) - g.relu(g.neg(x)) * slope]


# ------------------------------------------------------------ softmax
def _softmax_like(run, node, fn):
    x = run.node(node.inputs[0])
    ndim = len(x.shape)
    if run.m.opset >= 13:
        return [fn(x, int(node.attrs.get("axis", -1)))]
    axis = int(node.attrs.get("axis", 1)) % ndim  # before opset 13: over a flattened tail
    shape = tuple(x.shape)
    flat = run.g.reshape(x, (int(np.prod(shape[:axis], dtype=np.int64)), -1))
    return [run.g.reshape(fn(flat, -1), shape)]


@handler("Softmax")
def _softmax(run, node):
    return _softmax_like(run, node, run.g.softmax)


@handler("LogSoftmax")
def _log_softmax(run, node):
    return _softmax_like(run, node, run.g.log_softmax)


# ---------------------------------------------------------- reductions
def _reduce_axes(run, node, ndim):
    axes = node.attrs.get("axes")
    if run.has(node, 1):
        axes = run.arr(node.inputs[1]).reshape(-1).tolist()
    if axes is None or len(axes) == 0:
        if axes is not None and node.attrs.get("noop_with_empty_axes", 0):
            return ()
        return None
    return tuple(sorted(int(a) % ndim for a in axes))


_REDUCE_NP = {
    "ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min,
    "ReduceProd": np.prod,
    "ReduceSumSquare": lambda a, axis, keepdims: np.sum(a * a, axis=axis, keepdims=keepdims),
    "ReduceL2": lambda a, axis, keepdims: np.sqrt(
        np.sum(np.square(a, dtype=np.float64), axis=axis, keepdims=keepdims)),
    "ReduceLogSumExp": lambda a, axis, keepdims: np.log(
        np.sum(np.exp(a, dtype=np.float64), axis=axis, keepdims=keepdims)),
}


def _empty_identity(op, dtype):
    """What a reduction over an empty axis gives (ONNX opset 18): the
    identity of the operation, in ``dtype``; None where NumPy's own result
    stands (sum 0, mean nan)."""
    dtype = np.dtype(dtype)
    if op in ("ReduceMax", "ReduceLogSumExp"):
        low = True
    elif op == "ReduceMin":
        low = False
    elif op == "ReduceProd":
        return np.array(1, dtype)
    else:
        return None
    if dtype.kind == "b":
        return np.array(not low)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array(info.min if low else info.max, dtype)
    return np.array(-np.inf if low else np.inf, dtype)


def _reduced_shape(shape, axes, keep):
    axes = range(len(shape)) if axes is None else axes
    if keep:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


@handler("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
         "ReduceLogSumExp", "ReduceProd", "ReduceL2")
def _reduce(run, node):
    """The reductions; static values keep their dtype. Over an empty axis
    max / logsumexp give -inf, min +inf and prod 1 (ONNX's identities); for
    data that is sum(x) + identity, so x stays in the graph."""
    name = node.inputs[0]
    keep = bool(node.attrs.get("keepdims", 1))
    shape = tuple(run.shape(name))
    ndim = len(shape)
    axes = _reduce_axes(run, node, ndim)
    if axes == ():
        return [run.raw(name) if run.is_static(name) else run.node(name)]
    empty = any(shape[a] == 0 for a in (range(ndim) if axes is None else axes))
    if run.is_static(name):
        a = run.arr(name)
        ident = _empty_identity(node.op, a.dtype) if empty else None
        if ident is not None:
            return [np.full(_reduced_shape(shape, axes, keep), ident, dtype=ident.dtype)]
        out = np.asarray(_REDUCE_NP[node.op](a, axis=axes, keepdims=keep))
        return [out.astype(a.dtype, copy=False)]  # ONNX: the input's type (ints truncate)
    g = run.g
    x = run.node(name)
    ident = _empty_identity(node.op, g.dtype) if empty else None
    if ident is not None:
        return [g.sum(x, axis=axes, keepdims=keep) + float(ident)]
    if node.op == "ReduceSumSquare":
        return [g.sum(x * x, axis=axes, keepdims=keep)]
    if node.op == "ReduceL2":
        return [g.sqrt(g.sum(x * x, axis=axes, keepdims=keep))]
    if node.op == "ReduceLogSumExp":
        return [g.logsumexp(x, axis=tuple(range(ndim)) if axes is None else axes, keepdims=keep)]
    fn = {"ReduceSum": g.sum, "ReduceMean": g.mean, "ReduceMax": g.max, "ReduceMin": g.min,
          "ReduceProd": g.prod}
    return [fn[node.op](x, axis=axes, keepdims=keep)]


# ------------------------------------------------------------ matrices
@handler("MatMul")
def _matmul(run, node):
    a, b = node.inputs[:2]
    if run.is_static(a) and run.is_static(b):
        return [np.matmul(run.arr(a), run.arr(b))]
    return [run.g.matmul(run.node(a), run.node(b))]


@handler("Gemm")
def _gemm(run, node):
    """alpha * A' B' + beta * C (A' = A.T when transA, B' = B.T when transB)."""
    g = run.g
    at = node.attrs
    a, b = run.node(node.inputs[0]), run.node(node.inputs[1])
    if at.get("transA", 0):
        a = g.transpose(a)
    if at.get("transB", 0):
        b = g.transpose(b)
    y = g.matmul(a, b)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if run.has(node, 2):
        c = run.node(node.inputs[2])
        y = y + (c if beta == 1.0 else c * beta)
    return [y]


@handler("Einsum")
def _einsum(run, node):
    eq = node.attrs["equation"].replace(" ", "")
    return [run.g.einsum(eq, *[run.node(n) for n in node.inputs])]
