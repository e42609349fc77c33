"""Handlers of elementwise math ONNX operators: trigonometric and hyperbolic
functions, Mod, the activations Swish, ThresholdedRelu and Shrink, Mean,
the reductions ReduceL1 and ReduceLogSum, the scans CumSum and CumProd, the
normalizations MeanVarianceNormalization and LpNormalization, and the
integer-only BitShift and Bitwise* operators.

Float data records ordinary graph ops (so gradients flow through them);
static values (constants, integer tensors) are computed with NumPy and keep
their dtype. Unary elementwise ops keep a channel-last value channel-last.
"""
from __future__ import annotations

import math

import numpy as np

from ._import_ops import _reduce_axes, _static_unary, _unary
from ._import_registry import HANDLERS, handler

__all__ = ["STATIC_SLOTS"]

# inputs that are static arguments (see yscv.onnx._import_table.STATIC_SLOTS)
STATIC_SLOTS = {"CumSum": {1}, "CumProd": {1}, "ReduceL1": {1}, "ReduceLogSum": {1}}


def _odd_sign(g, x):
    """-1 where x < 0, else 1 (a constant): odd functions computed on |x|."""
    return np.where(np.asarray(g.value(x)) < 0, -1.0, 1.0).astype(g.dtype)


def _asinh(g, x):
    """sign(x) * log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|: accurate for
    small |x| and for large negative x."""
    s = _odd_sign(g, x)
    a = x * s   # |x|, with the gradient 1 at x = 0 (abs has 0 there)
    a2 = a * a
    return g.log1p(a + g.div(a2, g.sqrt(a2 + 1.0) + 1.0)) * s


def _acosh(g, x):
    """log1p(t + sqrt(t * (x + 1))), t = x - 1 (x >= 1): accurate near 1."""
    t = x - 1.0
    return g.log1p(t + g.sqrt(t * (x + 1.0)))


def _atanh(g, x):
    """sign(x) * 0.5 * log1p(2a / (1 - a)), a = |x| < 1: accurate near 0 and +-1."""
    s = _odd_sign(g, x)
    a = x * s
    return g.log1p(g.div(a * 2.0, g.neg(a) + 1.0)) * (s * 0.5)


_ERF = np.vectorize(math.erf, otypes=[np.float64])

_MATH = {
    "Erf": (lambda a: _ERF(a).astype(a.dtype), lambda r, n, x: r.g.erf(x)),
    "Sin": (np.sin, lambda r, n, x: r.g.sin(x)),
    "Cos": (np.cos, lambda r, n, x: r.g.cos(x)),
    "Tan": (np.tan, lambda r, n, x: r.g.tan(x)),
    "Asin": (np.arcsin, lambda r, n, x: r.g.asin(x)),
    "Acos": (np.arccos, lambda r, n, x: r.g.acos(x)),
    "Atan": (np.arctan, lambda r, n, x: r.g.atan(x)),
    "Sinh": (np.sinh, lambda r, n, x: r.g.sinh(x)),
    "Cosh": (np.cosh, lambda r, n, x: r.g.cosh(x)),
    "Asinh": (np.arcsinh, lambda r, n, x: _asinh(r.g, x)),
    "Acosh": (np.arccosh, lambda r, n, x: _acosh(r.g, x)),
    "Atanh": (np.arctanh, lambda r, n, x: _atanh(r.g, x)),
    "Swish": (None, lambda r, n, x: x * r.g.sigmoid(x * float(n.attrs.get("alpha", 1.0)))),
    "ThresholdedRelu": (None, lambda r, n, x: _thresholded_relu(r.g, x,
                                                                float(n.attrs.get("alpha", 1.0)))),
}


def _thresholded_relu(g, x, alpha):
    """x where x > alpha, else 0 (the mask is taken from the values)."""
    return g.where(np.asarray(g.value(x)) > alpha, x, 0.0)


for _op, (_np_fn, _graph_fn) in _MATH.items():
    HANDLERS[_op] = (_static_unary(_np_fn, _graph_fn) if _np_fn is not None
                     else _unary(_graph_fn))


@handler("Shrink")
def _shrink(run, node):
    """x - bias where x > lambd, x + bias where x < -lambd, else 0; integer
    inputs keep their dtype."""
    lambd = float(node.attrs.get("lambd", 0.5))
    bias = float(node.attrs.get("bias", 0.0))
    name = node.inputs[0]
    v = run.arr(name)
    if run.is_static(name):
        y = np.where(v < -lambd, v + bias, np.where(v > lambd, v - bias, 0))
        return [y.astype(v.dtype)]
    g, x = run.g, run.node(name)
    return [g.where(v > lambd, x - bias, g.where(v < -lambd, x + bias, 0.0))]


@handler("Mean")
def _mean(run, node):
    """The elementwise mean of the inputs (broadcast)."""
    names = [n for n in node.inputs if n]
    if all(run.is_static(n) for n in names):
        out = run.arr(names[0])
        for n in names[1:]:
            out = out + run.arr(n)
        return [np.asarray(out / len(names)).astype(run.arr(names[0]).dtype)]
    g = run.g
    out = run.node(names[0])
    for n in names[1:]:
        out = g.add(out, run.node(n))
    return [out * (1.0 / len(names)) if len(names) > 1 else out]


# ------------------------------------------------------------------- Mod
def _np_mod(a, b, fmod):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b) if fmod else np.mod(a, b)


@handler("Mod")
def _mod(run, node):
    """fmod=0: the result has the divisor's sign (Python's %, g.remainder);
    fmod=1: the dividend's sign (C's fmod). Integers are computed with NumPy
    and keep their dtype; float data records ``a - b * q`` with the integer
    quotient ``q`` taken from the values (so da = g, db = -q g)."""
    fmod = int(node.attrs.get("fmod", 0))
    a, b = node.inputs[:2]
    if run.is_static(a) and run.is_static(b):
        x, y = run.arr(a), run.arr(b)
        return [np.asarray(_np_mod(x, y, fmod)).astype(np.result_type(x, y))]
    g = run.g
    xa, xb = run.node(a), run.node(b)
    if not fmod:
        return [g.remainder(xa, xb)]
    va, vb = np.asarray(run.arr(a), np.float64), np.asarray(run.arr(b), np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.round((va - np.fmod(va, vb)) / vb)
    q = np.where(np.isfinite(q), q, 0.0).astype(g.dtype)
    out = g.sub(xa, g.mul(xb, q))
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(np.fmod(va, vb))  # b = 0 or an infinite a: nan, as fmod
    return [g.where(bad, g.constant(np.full(bad.shape, np.nan, g.dtype)), out) if bad.any()
            else out]


# ------------------------------------------------------------ reductions
@handler("ReduceL1", "ReduceLogSum")
def _reduce_more(run, node):
    """ReduceL1: sum |x|; ReduceLogSum: log(sum x) (over the empty set:
    0 and -inf)."""
    name = node.inputs[0]
    keep = bool(node.attrs.get("keepdims", 1))
    ndim = len(run.shape(name))
    axes = _reduce_axes(run, node, ndim)
    if run.is_static(name):
        a = run.arr(name)
        if axes == ():
            return [np.abs(a) if node.op == "ReduceL1" else np.log(a)]
        s = np.sum(np.abs(a) if node.op == "ReduceL1" else a, axis=axes, keepdims=keep)
        with np.errstate(divide="ignore"):
            return [np.asarray(s if node.op == "ReduceL1" else np.log(s)).astype(a.dtype)]
    g, x = run.g, run.node(name)
    if node.op == "ReduceL1":
        x = g.abs(x)
    if axes != ():
        x = g.sum(x, axis=axes, keepdims=keep)
    return [x if node.op == "ReduceL1" else g.log(x)]


# ------------------------------------------------------------------ scans
def _scan_axis(run, node, ndim):
    return int(run.arr(node.inputs[1]).reshape(-1)[0]) % max(ndim, 1)


@handler("CumSum", "CumProd")
def _scan(run, node):
    """Running sum / product along the axis input; ``reverse`` runs from the
    end, ``exclusive`` leaves out the element itself (starting at 0 / 1).
    Integer inputs keep their dtype."""
    name = node.inputs[0]
    shape = run.shape(name)
    axis = _scan_axis(run, node, len(shape))
    rev = bool(node.attrs.get("reverse", 0))
    excl = bool(node.attrs.get("exclusive", 0))
    prod = node.op == "CumProd"
    ident = 1.0 if prod else 0.0
    if run.is_static(name):
        a = run.arr(name)
        if rev:
            a = np.flip(a, axis)
        y = (np.cumprod if prod else np.cumsum)(a, axis=axis, dtype=a.dtype)
        if excl:
            y = np.concatenate([np.full_like(np.take(y, [0], axis), ident),
                                np.take(y, np.arange(y.shape[axis] - 1), axis)], axis)
        return [np.flip(y, axis) if rev else y]
    g, x = run.g, run.node(name)
    if rev:
        x = g.flip(x, axis)
    n = shape[axis]
    if excl:
        widths = [(0, 0)] * len(shape)
        widths[axis] = (1, 0)
        x = g.narrow(g.pad(x, widths, ident), axis, 0, n)
    y = g.cumprod(x, axis) if prod else g.cumsum(x, axis)
    return [g.flip(y, axis) if rev else y]


# ---------------------------------------------------------- normalizations
@handler("MeanVarianceNormalization")
def _mvn(run, node):
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over ``axes`` (default
    0, 2, 3), as ONNX's function body."""
    g, x = run.g, run.node(node.inputs[0])
    ndim = len(x.shape)
    axes = tuple(sorted(int(a) % ndim for a in node.attrs.get("axes", [0, 2, 3])))
    mean = g.mean(x, axis=axes, keepdims=True)
    var = g.mean(x * x, axis=axes, keepdims=True) - mean * mean
    return [g.div(x - mean, g.sqrt(var) + 1e-9)]


@handler("LpNormalization")
def _lp_normalization(run, node):
    """x / ||x||_p along ``axis`` (default -1), p = 1 or 2."""
    p = int(node.attrs.get("p", 2))
    g, x = run.g, run.node(node.inputs[0])
    axis = int(node.attrs.get("axis", -1)) % len(x.shape)
    if p == 1:
        norm = g.sum(g.abs(x), axis=axis, keepdims=True)
    else:
        norm = g.sqrt(g.sum(x * x, axis=axis, keepdims=True))
    zero = np.asarray(g.value(norm)) == 0   # a zero norm gives 0 (ONNX), not 0/0
    if zero.any():
        norm = g.where(zero, 1.0, norm)
    return [g.div(x, norm)]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    at, fail = node.attrs, node.fail
    if node.op == "LpNormalization" and int(at.get("p", 2)) not in (1, 2):
        raise fail(f"p={at['p']} is not supported (1 or 2)")
    if node.op == "Mod" and int(at.get("fmod", 0)) not in (0, 1):
        raise fail(f"fmod={at['fmod']} is not supported (0 or 1)")
    if node.op == "BitShift" and at.get("direction") not in ("LEFT", "RIGHT"):
        raise fail(f"direction={at.get('direction')!r} is not supported (LEFT or RIGHT)")


# --------------------------------------------------------- integer bit ops
def _bits(run, node, slot):
    a = run.arr(node.inputs[slot])
    if a.dtype.kind not in "iub":
        raise node.fail(f"input {slot} must hold integers, got {a.dtype}")
    return a


@handler("BitShift")
def _bit_shift(run, node):
    """x << s or x >> s (unsigned integers; shifts past the width give 0)."""
    x, s = _bits(run, node, 0), _bits(run, node, 1)
    dt = np.result_type(x, s)
    x, s = x.astype(dt), s.astype(dt)
    width = dt.itemsize * 8
    wide = (s < 0) | (s >= width)
    safe = np.where(wide, 0, s).astype(dt)
    if node.attrs["direction"] == "LEFT":   # on the unsigned bits: wraps, as ONNX
        u = np.dtype(f"u{dt.itemsize}")
        y = np.left_shift(x.view(u) if x.ndim else x.astype(u), safe.astype(u)).astype(u)
        y = y.view(dt) if y.ndim else y.astype(dt)
    else:
        y = np.right_shift(x, safe)
    if dt.kind == "i" and node.attrs["direction"] == "RIGHT":
        fill = np.where(x < 0, -1, 0).astype(dt)   # arithmetic shift past the width
    else:
        fill = np.zeros((), dt)
    return [np.where(wide, fill, y).astype(dt)]


_BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
            "BitwiseXor": np.bitwise_xor}


@handler(*_BITWISE)
def _bitwise(run, node):
    a, b = _bits(run, node, 0), _bits(run, node, 1)
    return [np.asarray(_BITWISE[node.op](a, b))]


@handler("BitwiseNot")
def _bitwise_not(run, node):
    return [np.invert(_bits(run, node, 0))]
