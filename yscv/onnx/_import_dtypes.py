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

__all__ = ["integer_through_float"]


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
