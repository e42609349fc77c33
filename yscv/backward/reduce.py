"""Reductions (backward). See yscv/registry.py for the op contract.

The cotangent ``g`` has the output shape; ``g.reshape(attrs.kshape)`` puts
size-1 axes back where the input was reduced, so it broadcasts against the
input. Returned gradients are materialised (fresh, C-contiguous) arrays, not
zero-stride broadcast views: they may end up as a leaf's stored gradient or
be handed to a Numba kernel, and both want an ordinary array.
"""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_backward


def _broadcast_back(gk: np.ndarray, shape: tuple) -> np.ndarray:
    out = np.empty(shape, dtype=gk.dtype)
    out[...] = gk
    return out


@register_backward(Op.SUM)
def sum_backward(g, inputs, out, attrs, saved, needs):
    return (_broadcast_back(g.reshape(attrs.kshape), inputs[0].shape),)


@register_backward(Op.MEAN)
def mean_backward(g, inputs, out, attrs, saved, needs):
    gk = g.reshape(attrs.kshape)
    with np.errstate(divide="ignore", invalid="ignore"):
        gk = gk / attrs.count if attrs.count else gk * np.nan
    return (_broadcast_back(gk, inputs[0].shape),)


def _extremum_backward(g, x, out, attrs):
    """Split the cotangent evenly among the elements equal to the extremum
    (PyTorch amax/amin). A NaN extremum routes the gradient to the NaNs."""
    outk = out.reshape(attrs.kshape)
    mask = x == outk
    nan_out = np.isnan(outk)
    if nan_out.any():
        mask |= np.isnan(x) & nan_out
    count = np.add.reduce(mask, axis=attrs.axes, keepdims=True, dtype=x.dtype)
    share = g.reshape(attrs.kshape) / count
    return np.multiply(mask, share, dtype=x.dtype)


@register_backward(Op.MAX)
def max_backward(g, inputs, out, attrs, saved, needs):
    return (_extremum_backward(g, inputs[0], out, attrs),)


@register_backward(Op.MIN)
def min_backward(g, inputs, out, attrs, saved, needs):
    return (_extremum_backward(g, inputs[0], out, attrs),)


@register_backward(Op.VAR)
def var_backward(g, inputs, out, attrs, saved, needs):
    """d var / dx = 2 (x - mean) / (N - ddof); ``saved`` is the mean."""
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    d = inputs[0] - saved
    with np.errstate(invalid="ignore"):
        d *= g.reshape(attrs.kshape) * scale
    return (d,)


@register_backward(Op.LOGSUMEXP)
def logsumexp_backward(g, inputs, out, attrs, saved, needs):
    """Cotangent times softmax: g * exp(x - logsumexp(x))."""
    e = inputs[0] - out.reshape(attrs.kshape)
    e = np.exp(e, out=e) if type(e) is np.ndarray else np.exp(e)
    return (np.multiply(e, g.reshape(attrs.kshape)),)
