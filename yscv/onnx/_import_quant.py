"""Handlers of the linear quantisation ONNX operators: QuantizeLinear,
DequantizeLinear and DynamicQuantizeLinear.

Scales and zero points are per tensor (a scalar or a 1-element vector), per
axis (a vector along ``axis``, opset 13+) or blocked (``block_size``, opset
21+: the scale has the input's shape except along ``axis``, where each entry
covers ``block_size`` consecutive elements).

QuantizeLinear's output is an integer (or float8 / 4-bit) NumPy array,
computed in float as ONNX defines it: ``x / scale`` rounded half to even,
plus the zero point, saturated to the output type's range. It has no
gradient. DequantizeLinear of a float scale that is data (a Parameter, an
input) records ``(x - zero_point) * scale`` as graph ops, so gradients reach
the scale; with static inputs its float output is static.
"""
from __future__ import annotations

import numpy as np

from ._import_dtypes import narrow_cast
from ._import_registry import handler

__all__ = ["check"]

#: Integer output types: ONNX type -> (min, max) (uint8, int8, uint16, int16,
#: uint4, int4, uint2, int2).
_INT_RANGES = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767),
               21: (0, 15), 22: (-8, 7), 25: (0, 3), 26: (-2, 1)}
_FLOAT8 = (17, 18, 19, 20)
_NP_TO_ONNX = {"uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "uint4": 21, "int4": 22,
               "uint2": 25, "int2": 26, "float8_e4m3fn": 17, "float8_e4m3fnuz": 18,
               "float8_e5m2": 19, "float8_e5m2fnuz": 20}
_PRECISIONS = {1: np.float32, 10: np.float16, 11: np.float64}


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    at, fail = node.attrs, node.fail
    if node.op not in ("QuantizeLinear", "DequantizeLinear"):
        return
    out = int(at.get("output_dtype", 0))
    if node.op == "QuantizeLinear" and out and out not in _INT_RANGES and out not in _FLOAT8:
        raise fail(f"output_dtype={out} is not supported (an 8-, 16-, 4- or 2-bit integer "
                   "or a float8 type)")
    if node.op == "DequantizeLinear" and out not in (0, 1):
        raise fail(f"output_dtype={out} is not supported (float)")
    if int(at.get("precision", 0)) not in (0, *_PRECISIONS):
        raise fail(f"precision={at['precision']} is not supported (float, float16 or double)")
    if int(at.get("block_size", 0)) < 0:
        raise fail(f"block_size={at['block_size']} must be positive")
    if node.op == "QuantizeLinear" and out:
        at["_np_out"] = np_dtype_of(out)


def _spread_index(node, shape, vshape, axis, block):
    """How a scale / zero point of shape ``vshape`` reaches every element of
    an input of ``shape``: ``(how, arg, axis)`` with ``how`` "scalar" (per
    tensor: a scalar broadcasts), "axis" (per axis: reshaped to the dims
    ``arg``) or "block" (blocked: entries repeated along ``axis`` by the
    index array ``arg``); ``axis`` made non-negative."""
    if len(vshape) == 0 or int(np.prod(vshape)) == 1 and not block:
        return "scalar", None, axis
    if not -len(shape) <= axis < len(shape):
        raise node.fail(f"axis={axis} is out of range for an input of rank {len(shape)}")
    axis %= len(shape)
    if not block:
        if len(vshape) != 1 or vshape[0] != shape[axis]:
            raise node.fail(f"the scale / zero point of shape {tuple(vshape)} does not match "
                            f"axis {axis} of the input of shape {tuple(shape)}")
        dims = [1] * len(shape)
        dims[axis] = vshape[0]
        return "axis", tuple(dims), axis
    want = list(shape)
    want[axis] = -(-shape[axis] // block)
    if list(vshape) != want:
        raise node.fail(f"blocked scale / zero point of shape {tuple(vshape)} does not fit the "
                        f"input of shape {tuple(shape)} with block_size={block} on axis {axis}")
    return "block", np.arange(shape[axis]) // block, axis


def _spread_arr(v, how, arg, axis):
    if how == "scalar":
        return v.reshape(())
    if how == "axis":
        return v.reshape(arg)
    return np.take(v, arg, axis=axis)


def _spread_node(g, v, how, arg, axis):
    if how == "scalar":
        return g.reshape(v, ())
    if how == "axis":
        return g.reshape(v, arg)
    return g.index_select(v, axis, arg)


def _layout(run, node, name):
    """The input's shape, ``axis`` (as given) and ``block_size``."""
    return run.shape(name), int(node.attrs.get("axis", 1)), int(node.attrs.get("block_size", 0))


def quantize(x, scale, zp, onnx_type, np_dtype, saturate=True):
    """``x / scale`` (already spread to ``x``'s shape) rounded half to even,
    plus ``zp``, saturated to ONNX type ``onnx_type`` (NumPy ``np_dtype``);
    float8 outputs saturate to their largest finite value when ``saturate``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = x / scale
    if onnx_type in _FLOAT8:
        return narrow_cast(q, onnx_type, np_dtype, saturate)
    lo, hi = _INT_RANGES[onnx_type]
    q = np.rint(q.astype(np.float64))
    if zp is not None:
        q = q + zp.astype(np.float64)
    q = np.clip(np.nan_to_num(q, nan=0.0), lo, hi)
    return q.astype(np.int64).astype(np_dtype)


@handler("QuantizeLinear")
def _quantize_linear(run, node):
    """y = saturate(round_half_even(x / scale) + zero_point), an integer array
    of the zero point's type (or ``output_dtype``; uint8 when neither)."""
    at = node.attrs
    shape, axis, block = _layout(run, node, node.inputs[0])
    x = run.arr(node.inputs[0])
    scale = run.arr(node.inputs[1])
    how, arg, axis = _spread_index(node, shape, scale.shape, axis, block)
    zp = run.arr(node.inputs[2]) if run.has(node, 2) else None
    if zp is not None:
        onnx_type, np_dtype = _NP_TO_ONNX.get(zp.dtype.name), zp.dtype
        if onnx_type is None:
            raise node.fail(f"zero point of dtype {zp.dtype} is not supported (an 8-, 16-, "
                            "4- or 2-bit integer or a float8 type)")
        if onnx_type in _FLOAT8:
            zp = None   # float8 zero points are 0 (ONNX)
    elif "_np_out" in at:
        onnx_type, np_dtype = int(at["output_dtype"]), np.dtype(at["_np_out"])
    else:
        onnx_type, np_dtype = 2, np.dtype(np.uint8)
    precision = _PRECISIONS.get(int(at.get("precision", 0)))
    if precision is not None:
        x, scale = x.astype(precision), scale.astype(precision)
    elif x.dtype != scale.dtype:
        scale = scale.astype(x.dtype)
    s = _spread_arr(scale, how, arg, axis)
    z = None if zp is None else _spread_arr(zp, how, arg, axis)
    return [quantize(x, s, z, onnx_type, np_dtype, bool(at.get("saturate", 1)))]


@handler("DequantizeLinear")
def _dequantize_linear(run, node):
    """y = (x - zero_point) * scale in float (float8 / 4-bit inputs read as
    their values). With data scales, graph ops: gradients reach the scale."""
    g = run.g
    shape, axis, block = _layout(run, node, node.inputs[0])
    x = run.arr(node.inputs[0])
    how, arg, axis = _spread_index(node, shape, run.shape(node.inputs[1]), axis, block)
    dx = x.astype(np.float64 if x.dtype.kind in "iu" and x.itemsize >= 4 else np.float32)
    if run.has(node, 2) and not x.dtype.name.startswith(("float8", "float4")):
        zp = run.arr(node.inputs[2])
        if zp.dtype != x.dtype:
            raise node.fail(f"zero point dtype {zp.dtype} differs from the input's {x.dtype}")
        dx = dx - _spread_arr(zp.astype(dx.dtype), how, arg, axis)
    scale_name = node.inputs[1]
    if run.is_static(scale_name):
        scale = run.arr(scale_name)
        y = dx * _spread_arr(scale.astype(dx.dtype), how, arg, axis)
        return [y.astype(scale.dtype if scale.dtype.kind == "f" else np.float32)]
    s = _spread_node(g, run.node(scale_name), how, arg, axis)
    return [g.mul(g.constant(dx.astype(g.dtype)), s)]


@handler("DynamicQuantizeLinear")
def _dynamic_quantize_linear(run, node):
    """uint8 quantisation with scale and zero point from the data's range
    (widened to include 0): y, y_scale (float32), y_zero_point (uint8)."""
    x = run.arr(node.inputs[0]).astype(np.float32)
    hi = np.float32(np.maximum(0, x.max())) if x.size else np.float32(0)
    lo = np.float32(np.minimum(0, x.min())) if x.size else np.float32(0)
    scale = np.float32(1.0 if hi == lo else hi - lo) / np.float32(255)
    zp = np.array(np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)), dtype=np.uint8)
    y = quantize(x, scale, zp, 2, np.dtype(np.uint8))
    return [y, np.array(scale, dtype=np.float32), zp]

