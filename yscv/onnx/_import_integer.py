"""Handlers of the integer-arithmetic ONNX operators: MatMulInteger,
ConvInteger, QLinearMatMul, QLinearConv, and BitCast.

The integer kernels compute exactly with NumPy in int64 (inputs minus
their zero points; ONNX defines an int32 accumulator, which these values
never leave), as ONNX's reference does: MatMulInteger and ConvInteger give
int32, QLinearMatMul and QLinearConv requantise the accumulator with the
scales (``acc * (a_scale * b_scale / y_scale) + y_zero_point``, rounded
half to even and saturated to the output's 8-bit type). Their outputs are
integers and have no gradient. ConvInteger and QLinearConv take any number
of spatial axes, ``group``, ``strides``, ``dilations``, ``pads`` and
``auto_pad``.

BitCast reinterprets the bits of a tensor as another type of the same
width (NumPy's ``view``); float data is read by value (in the width of the
target type), so the result is a static array without gradient.
"""
from __future__ import annotations

import numpy as np

from ._import_nn import _geometry, _spatial_pads
from ._import_registry import handler

__all__ = ["check"]

_FLOAT_OF_WIDTH = {2: np.float16, 4: np.float32, 8: np.float64}


def _int_input(run, node, slot):
    a = run.arr(node.inputs[slot])
    if a.dtype.kind not in "iu":
        raise node.fail(f"input {slot} must hold integers, got {a.dtype}")
    return a


def _minus_zero_point(run, node, slot, zp_slot, axis_len=None):
    """Input ``slot`` as int64 minus its zero point (input ``zp_slot``, absent:
    0); a 1-D zero point of ``axis_len`` entries is per row of axis 0."""
    a = _int_input(run, node, slot).astype(np.int64)
    if not run.has(node, zp_slot):
        return a
    zp = _int_input(run, node, zp_slot).astype(np.int64)
    if zp.ndim == 1 and zp.size > 1 and axis_len is not None:
        if zp.size != axis_len:
            raise node.fail(f"the zero point of {zp.size} entries does not match the "
                            f"{axis_len} output channels")
        zp = zp.reshape((-1,) + (1,) * (a.ndim - 1))
    elif zp.size == 1:
        zp = zp.reshape(())
    return a - zp


def _int_conv(node, x, w, group):
    """Integer N-d convolution of x [N, C, *S] with w [M, C/group, *K] (int64)."""
    nsp = x.ndim - 2
    if nsp < 1 or w.ndim != x.ndim:
        raise node.fail(f"input {x.shape} and weight {w.shape} must be [N, C, *S] and "
                        "[M, C/group, *K]")
    kernel, strides, dilations = _geometry(node, tuple(w.shape[2:]))
    if tuple(kernel) != tuple(w.shape[2:]):
        raise node.fail(f"kernel_shape {list(kernel)} disagrees with the weight {w.shape}")
    n, c = x.shape[:2]
    m = w.shape[0]
    if c % group or m % group or w.shape[1] != c // group:
        raise node.fail(f"{c} input and {m} output channels do not split into "
                        f"group={group} (weight {w.shape})")
    pads = _spatial_pads(node, x.shape[2:], kernel, strides, dilations)
    x = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads])
    out = [(x.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(nsp)]
    if min(out) < 1:
        raise node.fail(f"the kernel {list(kernel)} does not fit the padded input {x.shape}")
    y = np.zeros((n, m, *out), np.int64)
    cg, mg = c // group, m // group
    for off in np.ndindex(*kernel):
        sl = tuple(slice(o * d, o * d + (k - 1) * s + 1, s)
                   for o, d, k, s in zip(off, dilations, out, strides))
        xs = x[(slice(None), slice(None)) + sl]
        for gi in range(group):
            wk = w[(slice(gi * mg, (gi + 1) * mg), slice(None)) + off]
            y[:, gi * mg:(gi + 1) * mg] += np.einsum(
                "nc...,mc->nm...", xs[:, gi * cg:(gi + 1) * cg], wk)
    return y


@handler("MatMulInteger")
def _matmul_integer(run, node):
    """int32 (A - a_zero_point) @ (B - b_zero_point)."""
    a = _minus_zero_point(run, node, 0, 2)
    b = _minus_zero_point(run, node, 1, 3)
    return [np.matmul(a, b).astype(np.int32)]


@handler("ConvInteger")
def _conv_integer(run, node):
    """int32 convolution of (X - x_zero_point) with (W - w_zero_point)."""
    w = _minus_zero_point(run, node, 1, 3, axis_len=run.shape(node.inputs[1])[0])
    x = _minus_zero_point(run, node, 0, 2)
    return [_int_conv(node, x, w, int(node.attrs.get("group", 1))).astype(np.int32)]


def _scale(run, node, slot):
    v = run.arr(node.inputs[slot])
    if v.dtype.kind != "f":
        raise node.fail(f"input {slot} (a scale) must be a float, got {v.dtype}")
    return v


def _requantize(node, acc, factor, zp, like):
    """round(acc * factor + zp), saturated to the output's type (the zero
    point's, else ``like``'s)."""
    dt = zp.dtype if zp is not None else like
    y = acc * factor.astype(np.float64)
    if zp is not None:
        y = y + zp.astype(np.float64)
    info = np.iinfo(dt)
    return np.clip(np.rint(y), info.min, info.max).astype(dt)


@handler("QLinearMatMul")
def _qlinear_matmul(run, node):
    """Quantised matmul: the integer product of the inputs minus their zero
    points, requantised with ``a_scale * b_scale / y_scale``."""
    a = _minus_zero_point(run, node, 0, 2)
    b = _minus_zero_point(run, node, 3, 5)
    factor = _scale(run, node, 1) * _scale(run, node, 4) / _scale(run, node, 6)
    zp = _int_input(run, node, 7) if run.has(node, 7) else None
    like = run.arr(node.inputs[0]).dtype
    return [_requantize(node, np.matmul(a, b), factor.reshape(()) if factor.size == 1
                        else factor, zp, like)]


@handler("QLinearConv")
def _qlinear_conv(run, node):
    """Quantised convolution: the integer convolution (plus the int32 bias B)
    requantised with ``x_scale * w_scale / y_scale`` (``w_scale`` per tensor
    or per output channel)."""
    m = run.shape(node.inputs[3])[0]
    x = _minus_zero_point(run, node, 0, 2)
    w = _minus_zero_point(run, node, 3, 5, axis_len=m)
    acc = _int_conv(node, x, w, int(node.attrs.get("group", 1)))
    if run.has(node, 8):
        bias = _int_input(run, node, 8).astype(np.int64).reshape(-1)
        if bias.size != m:
            raise node.fail(f"the bias has {bias.size} entries for {m} output channels")
        acc = acc + bias.reshape((1, m) + (1,) * (acc.ndim - 2))
    ws = _scale(run, node, 4).reshape(-1)
    if ws.size not in (1, m):
        raise node.fail(f"w_scale has {ws.size} entries for {m} output channels")
    ws = ws.reshape(()) if ws.size == 1 else ws.reshape((1, m) + (1,) * (acc.ndim - 2))
    factor = _scale(run, node, 1).reshape(()) * ws / _scale(run, node, 6).reshape(())
    zp = _int_input(run, node, 7).reshape(()) if run.has(node, 7) else None
    return [_requantize(node, acc, factor, zp, run.arr(node.inputs[0]).dtype)]


@handler("BitCast")
def _bitcast(run, node):
    """The input's bits read as the type ``to`` (same width); float data is
    taken at the target's width (a float32 value held in a float64 graph
    gives float32's bits)."""
    to = np.dtype(node.attrs["_np_to"])
    a = np.asarray(run.arr(node.inputs[0]))
    if a.dtype.kind == "f" and a.dtype.itemsize != to.itemsize and to.itemsize in _FLOAT_OF_WIDTH:
        a = a.astype(_FLOAT_OF_WIDTH[to.itemsize])
    if a.dtype.itemsize != to.itemsize:
        raise node.fail(f"the input's type {a.dtype} and to={to} differ in width")
    return [a.copy(order="C").view(to)]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    if node.op == "BitCast":
        to = np.dtype(np_dtype_of(int(node.attrs["to"])))
        if to.kind not in "iubf":
            raise node.fail(f"to={node.attrs['to']} ({to}) is not supported (a boolean, "
                            "integer or float type)")
        node.attrs["_np_to"] = to
