"""Activation ops (backward). See yscv/registry.py for the op contract.

Nothing is saved by the activation forwards except dropout's packed mask:
every rule reads the input ``x`` and/or the output ``y`` (sigmoid and tanh
read only the output). How each derivative is computed (NumPy on tiny arrays,
fused kernels otherwise) is :mod:`yscv.compute.activation`'s business.
"""
from __future__ import annotations

import numpy as np

from ..compute.activation import (
    MISH,
    SILU,
    SOFTPLUS,
    piecewise,
    prelu_backward as prelu_pass,
    relu_grad,
    sigmoid_grad,
    softmax_backward,
    tanh_grad,
    unary_backward,
    unpack_mask,
)
from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import recorded_unary
from ._rules import unary

unary(Op.LEAKY_RELU, lambda g, x, y, slope: piecewise(g, x, np.full(1, slope, dtype=g.dtype)))
unary(Op.GELU, lambda g, x, y, kind: unary_backward(g, x, x, kind))
unary(Op.SILU, lambda g, x, y, a: unary_backward(g, x, x, SILU))
unary(Op.MISH, lambda g, x, y, a: unary_backward(g, x, x, MISH))
unary(Op.SOFTPLUS, lambda g, x, y, a: unary_backward(g, x, x, SOFTPLUS, a.beta, a.threshold))
unary(Op.SOFTMAX, lambda g, x, y, axis: softmax_backward(g, y, axis, False))  # y (g - sum g y)
unary(Op.LOG_SOFTMAX, lambda g, x, y, axis: softmax_backward(g, y, axis, True))  # g - e^y sum g


# The three most common activations are written out rather than through
# ``unary``: they are on the per-node hot path, where the helper's extra call
# per rule measured ~2% on the scalar chain (docs/engine.md).
@register_backward(Op.RELU)
def relu_backward(g, inputs, out, attrs, saved, needs):
    """g where x > 0 (a NaN input passes its gradient, as PyTorch)."""
    return (relu_grad(g, inputs[0]),)


@register_backward(Op.SIGMOID)
def sigmoid_backward(g, inputs, out, attrs, saved, needs):
    """g y (1 - y), from the output y."""
    return (sigmoid_grad(g, out),)


@register_backward(Op.TANH)
def tanh_backward(g, inputs, out, attrs, saved, needs):
    """g (1 - y^2), from the output y."""
    return (tanh_grad(g, out),)


@register_backward(Op.PRELU)
def prelu_backward(g, inputs, out, attrs, saved, needs):
    """One fused pass: the x gradient and per-channel sums of g*x where x <= 0
    (reduced to one number for a shared alpha [1])."""
    x, alpha = inputs
    gx, sums = prelu_pass(g, x, alpha, needs[0])
    if not needs[1]:
        return gx, None
    galpha = sums if alpha.shape[0] != 1 else np.sum(sums, dtype=g.dtype).reshape(1)
    return gx, galpha


@register_backward(Op.DROPOUT)
def dropout_backward(g, inputs, out, attrs, packed, needs):
    """g * mask / (1 - p), the mask unpacked from the saved bits."""
    p = attrs.p
    if not attrs.training or p == 0.0:
        return (g,)
    if p == 1.0:
        return (np.zeros_like(g),)
    gx = g * g.dtype.type(1.0 / (1.0 - p))
    gx *= unpack_mask(packed, g.shape)
    return (gx,)


# --------------------------------------------------------------- recorded
recorded_unary(Op.TANH, lambda G, gy, x, y, a: G.mul(gy, G.sub(1.0, G.mul(y, y))))
