"""Loss ops (backward). See yscv/registry.py for the op contract.

``g`` is the 0-d upstream gradient; every rule scales by ``g / n`` (mean
reduction) as a scalar of the graph dtype.
"""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..ops.activation import sigmoid_values
from ..ops.loss import K, ro
from ..registry import register_backward


def _scale(g: np.ndarray, n: int, factor: float = 1.0):
    """``factor * g / n`` as a scalar of g's dtype."""
    return g.dtype.type(factor * float(g) / n) if n else g.dtype.type(0.0)


def _pair(gp, needs):
    """(grad pred, grad target) from the pred gradient, target's being -gp."""
    return (gp if needs[0] else None), (np.negative(gp) if needs[1] else None)


@register_backward(Op.MSE_LOSS)
def mse_loss_backward(g, inputs, out, attrs, saved, needs):
    pred, target = inputs
    return _pair((pred - target) * _scale(g, pred.size, 2.0), needs)


@register_backward(Op.L1_LOSS)
def l1_loss_backward(g, inputs, out, attrs, saved, needs):
    pred, target = inputs
    return _pair(np.sign(pred - target) * _scale(g, pred.size), needs)


@register_backward(Op.HUBER_LOSS)
def huber_loss_backward(g, inputs, out, delta, saved, needs):
    pred, target = inputs
    d = np.clip(pred - target, -delta, delta).astype(pred.dtype, copy=False)
    return _pair(d * _scale(g, pred.size), needs)


@register_backward(Op.BCE_WITH_LOGITS)
def bce_with_logits_backward(g, inputs, out, attrs, saved, needs):
    x, t = inputs
    s = _scale(g, x.size)
    gx = gt = None
    if needs[0]:
        gx = sigmoid_values(x)
        gx -= t
        gx *= s
    if needs[1]:
        gt = x * -s
    return gx, gt


@register_backward(Op.CROSS_ENTROPY)
def cross_entropy_backward(g, inputs, out, attrs, lse, needs):
    labels, smoothing = attrs
    x = inputs[0]
    n = x.shape[0]
    scale = float(g) / n if n else 0.0
    return (K.cross_entropy_backward(ro(x), labels, lse, smoothing, scale),)


@register_backward(Op.NLL_LOSS)
def nll_loss_backward(g, inputs, out, labels, saved, needs):
    lp = inputs[0]
    n = lp.shape[0]
    gx = np.zeros_like(lp)
    if n:
        gx[np.arange(n), labels] = -float(g) / n
    return (gx,)
