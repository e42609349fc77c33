"""Activation ops (backward). See yscv/registry.py for the op contract.

Nothing is saved by any activation forward: every rule here reads the input
value and/or the output value (sigmoid and tanh read only the output).
"""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..ops.activation import (
    MISH,
    ONE_SCALAR,
    SIGMOID,
    SILU,
    SOFTPLUS,
    TANH,
    TINY,
    ZERO,
    K,
    KS,
    piecewise,
    rows_of,
    unpack_mask,
    ro,
    softmax_layout,
    unary_kernel_backward,
)
from ..registry import register_backward


# Size-1 arrays (the scalar-chain case) skip most of the ufunc machinery: a 0-d
# gradient is computed on NumPy scalars of the graph dtype (the walk turns the
# scalar back into a 0-d array); a [1]-shaped one needs an array result, so the
# local derivative comes from ``.item()`` and one ufunc ``g * factor`` rounds it
# to the graph dtype.

@register_backward(Op.RELU)
def relu_backward(g, inputs, out, attrs, saved, needs):
    # PyTorch's threshold_backward: zero where x <= 0, else g; so a NaN input
    # passes its gradient on (x > 0 would silently drop it)
    x = inputs[0]
    if x.size == 1:
        return (np.zeros_like(g) if x.item() <= 0.0 else g,)
    keep = x <= ZERO[g.dtype]
    np.logical_not(keep, out=keep)
    return (g * keep,)


@register_backward(Op.LEAKY_RELU)
def leaky_relu_backward(g, inputs, out, slope, saved, needs):
    return (piecewise(g, inputs[0], np.full(1, slope, dtype=g.dtype)),)


@register_backward(Op.SIGMOID)
def sigmoid_backward(g, inputs, out, attrs, saved, needs):
    if g.ndim == 0:
        s = out[()]
        return (g[()] * (s * (ONE_SCALAR[g.dtype] - s)),)
    if g.size == 1:
        s = out.item()
        return (g * (s * (1.0 - s)),)
    if g.size < TINY:
        return ((g * out) * (ONE_SCALAR[g.dtype] - out),)
    return (unary_kernel_backward(g, out, out, SIGMOID),)


@register_backward(Op.TANH)
def tanh_backward(g, inputs, out, attrs, saved, needs):
    if g.ndim == 0:
        t = out[()]
        return (g[()] * (ONE_SCALAR[g.dtype] - t * t),)
    if g.size == 1:
        t = out.item()
        return (g * (1.0 - t * t),)
    if g.size < TINY:
        return (g * (ONE_SCALAR[g.dtype] - out * out),)
    return (unary_kernel_backward(g, out, out, TANH),)


@register_backward(Op.GELU)
def gelu_backward(g, inputs, out, kind, saved, needs):
    x = inputs[0]
    return (unary_kernel_backward(g, x, x, kind),)


@register_backward(Op.SILU)
def silu_backward(g, inputs, out, attrs, saved, needs):
    x = inputs[0]
    return (unary_kernel_backward(g, x, x, SILU),)


@register_backward(Op.MISH)
def mish_backward(g, inputs, out, attrs, saved, needs):
    x = inputs[0]
    return (unary_kernel_backward(g, x, x, MISH),)


@register_backward(Op.SOFTPLUS)
def softplus_backward(g, inputs, out, attrs, saved, needs):
    x = inputs[0]
    beta, threshold = attrs
    return (unary_kernel_backward(g, x, x, SOFTPLUS, beta, threshold),)


@register_backward(Op.PRELU)
def prelu_backward(g, inputs, out, attrs, saved, needs):
    """One fused pass: the x gradient and per-channel sums of g*x where x <= 0
    (reduced to one number for a shared alpha [1])."""
    x, alpha = inputs
    rows = rows_of(x)
    gx, sums = K.prelu_backward(ro(g).reshape(rows), ro(x).reshape(rows), ro(alpha),
                                bool(needs[0]))
    gx = gx.reshape(g.shape) if needs[0] else None
    if not needs[1]:
        return gx, None
    galpha = sums if alpha.shape[0] != 1 else np.sum(sums, dtype=g.dtype).reshape(1)
    return gx, galpha


def _softmax_backward(g, y, axis, log):
    """softmax: y * (g - sum(g y)); log-softmax: g - exp(y) sum(g), along axis."""
    shape = g.shape
    if g.ndim == 0:
        g = g.reshape(1)
        y = y.reshape(1)
    if g.size == 0:
        return np.zeros(shape, dtype=g.dtype)
    outer, k, inner = softmax_layout(g.shape, axis)
    if inner == 1:
        gx = KS.softmax_rows_backward(ro(g).reshape(outer, k), ro(y).reshape(outer, k), log)
    else:
        gx = KS.softmax_strided_backward(ro(g).reshape(outer, k, inner),
                                         ro(y).reshape(outer, k, inner), log)
    return gx.reshape(shape)


@register_backward(Op.SOFTMAX)
def softmax_backward(g, inputs, out, axis, saved, needs):
    return (_softmax_backward(g, out, axis, False),)


@register_backward(Op.LOG_SOFTMAX)
def log_softmax_backward(g, inputs, out, axis, saved, needs):
    return (_softmax_backward(g, out, axis, True),)


@register_backward(Op.DROPOUT)
def dropout_backward(g, inputs, out, attrs, packed, needs):
    p, training, seed = attrs
    if not training or p == 0.0:
        return (g,)
    if p == 1.0:
        return (np.zeros_like(g),)
    gx = g * g.dtype.type(1.0 / (1.0 - p))
    gx *= unpack_mask(packed, g.shape)
    return (gx,)
