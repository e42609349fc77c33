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
from ..registry import register_backward, register_recorded
from ._recorded import recorded_unary
from ._rules import unary


def _broadcast_back(gk: np.ndarray, shape: tuple) -> np.ndarray:
    out = np.empty(shape, dtype=gk.dtype)
    out[...] = gk
    return out


def _mean_share(g, a):
    """g / count at the kept-dims shape; NaN for an empty reduction (as the forward)."""
    gk = g.reshape(a.kshape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return gk / a.count if a.count else gk * np.nan


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


def _softmax_times(g, x, y, a):
    """Cotangent times softmax: g * exp(x - logsumexp(x))."""
    e = x - y.reshape(a.kshape)
    e = np.exp(e, out=e) if type(e) is np.ndarray else np.exp(e)
    return np.multiply(e, g.reshape(a.kshape))


unary(Op.SUM, lambda g, x, y, a: _broadcast_back(g.reshape(a.kshape), x.shape))
unary(Op.MEAN, lambda g, x, y, a: _broadcast_back(_mean_share(g, a), x.shape))
unary(Op.MAX, _extremum_backward)
unary(Op.MIN, _extremum_backward)
unary(Op.LOGSUMEXP, _softmax_times)


@register_backward(Op.VAR)
def var_backward(g, inputs, out, attrs, saved, needs):
    """d var / dx = 2 (x - mean) / (N - ddof); ``saved`` is the mean."""
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    d = inputs[0] - saved
    with np.errstate(invalid="ignore"):
        d *= g.reshape(attrs.kshape) * scale
    return (d,)


# --------------------------------------------------------------- recorded
def _sum_recorded(G, gy, x, y, a):
    return G.expand(G.reshape(gy, a.kshape), G.value(x).shape)


def _mean_recorded(G, gy, x, y, a):
    gk = G.reshape(gy, a.kshape)
    gk = G.div(gk, float(a.count)) if a.count else G.mul(gk, np.nan)
    return G.expand(gk, G.value(x).shape)


def _extremum_recorded(G, gy, x, y, a):
    """The array rule's even split among the extremal elements, its
    mask / count a constant (PyTorch's amax/amin double backward)."""
    xv = G.value(x)
    outk = G.value(y).reshape(a.kshape)
    mask = xv == outk
    nan_out = np.isnan(outk)
    if nan_out.any():
        mask |= np.isnan(xv) & nan_out
    count = np.add.reduce(mask, axis=a.axes, keepdims=True, dtype=xv.dtype)
    return G.mul(G.reshape(gy, a.kshape), G.constant(mask / count))


@register_recorded(Op.VAR)
def var_recorded(G, gy, xs, y, attrs, saved, needs):
    """grad * 2 (x - mean(x)) / (N - ddof), the mean a node of x."""
    x = xs[0]
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    d = G.sub(x, G.mean(x, axis=attrs.axes, keepdims=True))
    return (G.mul(d, G.mul(G.reshape(gy, attrs.kshape), scale)),)


recorded_unary(Op.SUM, _sum_recorded)
recorded_unary(Op.MEAN, _mean_recorded)
recorded_unary(Op.MAX, _extremum_recorded)
recorded_unary(Op.MIN, _extremum_recorded)
recorded_unary(Op.LOGSUMEXP, lambda G, gy, x, y, a: G.mul(
    G.reshape(gy, a.kshape), G.exp(G.sub(x, G.reshape(y, a.kshape)))))
