"""Element types through the importer: what keeps an integer or bool
tensor in its own dtype when the operation itself runs on float graph ops.

Integer and bool values are static NumPy arrays (see ``_import_run``); most
handlers compute them with NumPy in their own dtype. An operator that ONNX
defines on small integers as well as floats and that yscv computes with a
float graph op (MaxPool on int8 / uint8) is wrapped in
`integer_through_float`: the float result, exact for such values, is read
back as an array of the input's dtype.
"""
from __future__ import annotations

import numpy as np

from ._import_layout import channel_first_perm
from ._import_registry import ChannelLast

__all__ = ["NARROW_TYPES", "integer_through_float", "narrow_cast"]


def _as_array(run, v):
    """A handler's output as a NumPy array in the file's layout."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, ChannelLast):
        a = np.asarray(run.g.value(v.node))
        return np.transpose(a, channel_first_perm(a.ndim))
    return np.asarray(run.g.value(v))


def integer_through_float(fn):
    """Wrap handler ``fn``: when the node's first input is a static integer
    array, its outputs are static arrays of that dtype (the float graph
    computes values exactly for 8- and 16-bit integers); otherwise ``fn``
    as it is."""
    def run_op(run, node):
        name = node.inputs[0]
        if not run.is_static(name) or run.arr(name).dtype.kind not in "iu":
            return fn(run, node)
        dtype = run.arr(name).dtype
        return [_as_array(run, v).astype(dtype) for v in fn(run, node)]
    run_op.__name__ = getattr(fn, "__name__", "run_op")
    run_op.__doc__ = fn.__doc__
    return run_op


#: ONNX types a Cast may produce though yscv holds no data of them (the
#: NumPy form is ml_dtypes', as onnx.numpy_helper gives): the cast value is a
#: static array without gradient, for the Cast back that quantisation
#: graphs write. Graph inputs and initializers of these types stay refused.
NARROW_TYPES = {16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
                20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
                24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2"}

_FLOAT8 = (17, 18, 19, 20)


def narrow_cast(a, to: int, dtype, saturate: bool, round_mode: str = "up"):
    """``a`` cast to ONNX type ``to`` (one of `NARROW_TYPES`, NumPy dtype
    ``dtype``) as ONNX's Cast does: float8 targets saturate to the largest
    finite value when ``saturate`` (else out-of-range values become inf or
    NaN), FLOAT8E8M0 rounds as ``round_mode``; the others round to nearest
    even (floats) or wrap (integers) as a NumPy cast."""
    from onnx import numpy_helper

    a = np.asarray(a)
    with np.errstate(invalid="ignore", over="ignore"):  # inf / NaN where ONNX says so
        if to in _FLOAT8 and saturate:
            return numpy_helper.saturate_cast(a.astype(np.float32), dtype)
        if to == 24:
            return numpy_helper.to_float8e8m0(a.astype(np.float32), saturate,
                                              round_mode).astype(dtype)
        return a.astype(dtype)
