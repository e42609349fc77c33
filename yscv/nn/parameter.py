"""``Parameter``: an array a layer keeps across training steps, plus its gradient.

A parameter enters a graph through ``g.param(p)``: the graph binds it once as
a variable leaf whose value is a view of ``p.data`` (no copy), and after
``g.backward`` it adds the leaf's gradient into ``p.grad``. Optimizers update
``p.data`` IN PLACE, so a graph reused across steps (``g.truncate``) keeps
seeing the current values. Replacing ``p.data`` by a new array is allowed but
detaches graphs that already bound the parameter.

``grad_slot`` (None by default) is where a gradient arriving on a parameter
without one is written: data-parallel training sets it to the parameter's
slice of the gradient bucket, so backward writes straight into the buffer
the allreduce sends (PyTorch's ``gradient_as_bucket_view``): no copy per
step. The next step then overwrites the array ``p.grad`` pointed to.
``grad_scale`` (1.0 by default) multiplies every contribution written
through the slot: data-parallel training sets it to ``1 / world`` for a
synced backward, so the allreduce's sum is already the mean (no division
pass over the bucket). Both are ignored while ``grad_slot`` is None.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Parameter", "cast_problem"]


def cast_problem(value: np.ndarray, dtype):
    """Why casting ``value`` to ``dtype`` would not keep its values, or None.

    Loading state casts each array to its target's dtype (as PyTorch's
    ``copy_``); a finite value that the cast turns into inf (1e300 into
    float32), or a value outside an integer dtype's range (or not finite),
    would load as something else with at most a ``RuntimeWarning``. Float
    rounding and the truncation of fractions into integers are kept, as in
    PyTorch."""
    dt = np.dtype(dtype)
    src = value.dtype
    if src == dt or src.kind not in "fiu" or dt.kind not in "fiu":
        return None
    if dt.kind == "f":
        if src.kind != "f" or src.itemsize <= dt.itemsize:
            return None  # widening, or an integer (int64's range fits float32's)
        with np.errstate(over="ignore", invalid="ignore"):
            bad = np.isfinite(value) & ~np.isfinite(value.astype(dt))
        if not bad.any():
            return None
        first = value[bad].flat[0].item()
        return f"value {first!r} overflows {dt} (it would load as inf)"
    info = np.iinfo(dt)
    if src.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(value) | (value < info.min) | (value >= float(info.max) + 1)
    else:
        if np.can_cast(src, dt):
            return None
        bad = (value < info.min) | (value > info.max)
    if not np.any(bad):
        return None
    first = np.asarray(value)[np.asarray(bad)].flat[0].item()
    return f"value {first!r} does not fit {dt}"


class Parameter:
    """A trainable array: ``.data`` (np.ndarray) and ``.grad`` (np.ndarray or None).

    Args:
        data: array-like; copied and converted to ``dtype``.
        dtype: float32 (default) or float64.
        requires_grad: False freezes it: layers then bind it as a constant
            leaf and optimizers skip it (its ``grad`` stays None).
    """

    __slots__ = ("data", "grad", "requires_grad", "grad_slot", "grad_scale", "__weakref__")

    def __init__(self, data, dtype=np.float32, requires_grad: bool = True):
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"Parameter: dtype must be float32 or float64, got {dt}")
        arr = np.asarray(data)
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"Parameter: data has dtype {arr.dtype}; expected real numbers")
        self.data = np.array(arr, dtype=dt, copy=True, order="C")
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.grad_slot = None
        self.grad_scale = 1.0

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def zero_grad(self) -> None:
        """``grad`` back to None."""
        self.grad = None

    def numpy(self) -> np.ndarray:
        """A copy of the value."""
        return self.data.copy()

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self.data, dtype=dtype, copy=True)
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        frozen = "" if self.requires_grad else ", requires_grad=False"
        return f"Parameter(shape={self.data.shape}, dtype={self.data.dtype}{frozen})"
