"""Argument checks shared by the reductions of ``yscv.ops.reduce``: bools,
``correction``, and PyTorch's spellings ``dim`` / ``keepdim`` beside
``axis`` / ``keepdims`` (one argument each, two names)."""
from __future__ import annotations

import numbers

import numpy as np


def _check_bool(v, op: str, arg: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: {arg} must be a bool, got {v!r}")
    return bool(v)


def _check_correction(c, op: str, arg: str) -> float:
    if isinstance(c, bool) or not isinstance(c, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {c!r}")
    if not c >= 0:
        raise ValueError(f"{op}: {arg} must be >= 0, got {c!r}")
    return float(c)


def _torch_dims(op: str, axis, keepdims, dim, keepdim):
    """``(axis, keepdims)`` from PyTorch's names ``dim`` / ``keepdim`` (one
    meaning each); giving both spellings of one argument is a TypeError
    (``axis`` given means not None, ``keepdims`` given means True)."""
    if dim is not None:
        if axis is not None and axis is not _REQUIRED:
            raise TypeError(f"{op}: got axis={axis!r} and dim={dim!r}; they are one "
                            "argument (dim is PyTorch's name), give one of them")
        axis = dim
    if keepdim is not None:
        if keepdims is not False:
            raise TypeError(f"{op}: got keepdims={keepdims!r} and keepdim={keepdim!r}; they "
                            "are one argument (keepdim is PyTorch's name), give one of them")
        keepdims = keepdim
    return axis, keepdims


class _Required:
    """The default of an axis that must be given (as ``axis`` or ``dim``)."""

    def __repr__(self) -> str:
        return "<required>"


_REQUIRED = _Required()


def _required_axis(op: str, axis):
    if axis is _REQUIRED:
        raise TypeError(f"{op}: missing the axis to work along (axis= or dim=)")
    return axis
