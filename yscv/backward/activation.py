"""Activation ops (backward). See yscv/registry.py for the op contract.

Nothing is saved by the activation forwards except dropout's packed mask:
every rule reads the input ``x`` and/or the output ``y`` (sigmoid and tanh
read only the output). How each derivative is computed (NumPy on tiny arrays,
fused kernels otherwise) is `yscv.compute.activation`'s business.

The recorded rules (``create_graph=True``) follow the array rules, after
them. gelu's is ``gelu_backward(grad, x)``, an op whose own rules need only
``gelu''`` (elementary for all three forms), so no erf is needed in graph
ops: `gelu_second` is written once for arrays and for nodes.
"""
from __future__ import annotations

import math

import numpy as np

from ..compute.activation import (
    GELU_ERF,
    GELU_KINDS,
    GELU_SIGMOID,
    GELU_TANH,
    MISH,
    SILU,
    gelu_grad,
    SOFTPLUS,
    halves,
    piecewise,
    prelu_backward as prelu_pass,
    relu_grad,
    sigmoid,
    sigmoid_grad,
    softmax_backward,
    tanh_grad,
    unary_backward,
    unpack_mask,
)
from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import recorded_unary
from ._legacy_rules import unary

unary(Op.LEAKY_RELU, lambda g, x, y, slope: piecewise(g, x, np.full(1, slope, dtype=g.dtype)))
unary(Op.GELU, gelu_grad)   # erf form: Phi(x) = y / x from the output
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
    """One fused pass: the x gradient and per-channel sums of ``g*x`` where x <= 0
    (reduced to one number for a shared alpha [1])."""
    x, alpha = inputs
    gx, sums = prelu_pass(g, x, alpha, needs[0])
    if not needs[1]:
        return gx, None
    galpha = sums if alpha.shape[0] != 1 else np.sum(sums, dtype=g.dtype).reshape(1)
    return gx, galpha


def elu_slope(x, a, exp):
    """elu / selu / celu's local derivative where ``x < 0``, written once for
    arrays (``exp=np.exp``, ``x`` an array) and nodes (``exp=G.exp``):
    ``alpha scale input_scale exp(input_scale x)``. Callers pass ``min(x, 0)``
    (so exp never overflows on the unused side)."""
    z = x if a.input_scale == 1.0 else x * a.input_scale
    return exp(z) * (a.alpha * a.scale * a.input_scale)


def _elu_backward(g, inputs, out, a, saved, needs):
    """g scale where x > 0, else g elu_slope(x): alpha scale input_scale at
    x = 0 and NaN at NaN, as PyTorch's vectorised kernel."""
    x = inputs[0]
    z = np.minimum(x, 0.0)
    if a.input_scale < 0.0:    # a negative celu alpha: exp(x / alpha) may overflow, as PyTorch's
        with np.errstate(over="ignore", invalid="ignore"):
            neg = g * elu_slope(z, a, np.exp)
    else:
        neg = g * elu_slope(z, a, np.exp)
    return (np.where(x > 0, g if a.scale == 1.0 else g * a.scale, neg),)


for _op in (Op.ELU, Op.SELU, Op.CELU):
    register_backward(_op)(_elu_backward)


def hardtanh_mask(x, lo, hi):
    """Where the gradient passes: ``lo < x < hi`` (the bounds and NaN
    excluded, as PyTorch's vectorised hardtanh_backward)."""
    return (x > lo) & (x < hi)


def hardswish_slope(x, mid, where):
    """hardswish's derivative where x > -3: ``x/3 + 1/2`` where ``mid``, 1
    where x >= 3 (PyTorch's sides). ``where`` is np.where or G.where; ``x``
    an array or a node."""
    return where(mid, x / 3.0 + 0.5, 1.0)


def _hardswish_masks(xv):
    """(x <= -3, neither x <= -3 nor x >= 3): NaN falls in the middle piece
    and gives a NaN gradient, as PyTorch's vectorised kernel."""
    low = xv <= -3.0
    return low, ~(low | (xv >= 3.0))


unary(Op.HARDTANH, lambda g, x, y, a: np.where(hardtanh_mask(x, a.min_val, a.max_val), g, 0.0))
unary(Op.RELU6, lambda g, x, y, a: np.where(hardtanh_mask(x, 0.0, 6.0), g, 0.0))
unary(Op.HARDSIGMOID, lambda g, x, y, a: np.where((x > -3.0) & (x < 3.0), g / 6.0, 0.0))
unary(Op.LOGSIGMOID, lambda g, x, y, a: g * sigmoid(np.negative(x)))


@register_backward(Op.SOFTSIGN)
def softsign_backward(g, inputs, out, attrs, saved, needs):
    """g / (1 + |x|)^2, divided twice (no overflow of the square): exact at
    any |x|, 0 at +-inf (PyTorch's composite x / (|x| + 1) cancels there:
    NaN at +-inf, noise at 1e30)."""
    d = np.abs(inputs[0]) + 1.0
    gx = g / d
    gx /= d
    return (gx,)


@register_backward(Op.HARDSWISH)
def hardswish_backward(g, inputs, out, attrs, saved, needs):
    """g hardswish'(x), 0 where x <= -3."""
    x = inputs[0]
    low, mid = _hardswish_masks(x)
    return (np.where(low, 0.0, g * hardswish_slope(x, mid, np.where)),)


@register_backward(Op.GLU)
def glu_backward(g, inputs, out, axis, saved, needs):
    """y = a s, s = sigmoid(b): (g s, g y sigmoid(-b)), joined along
    ``axis``. ``sigmoid(-b)`` rather than ``1 - s``, which cancels where s is
    near 1 (float32 at b = 13: 3% off; PyTorch's float32 kernel is)."""
    _, b = halves(inputs[0], axis)
    ga = g * sigmoid(b)
    gb = g * out
    gb *= sigmoid(np.negative(b))
    return (np.concatenate([ga, gb], axis=axis),)


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


def gelu_second(x, kind, exp, tanh, sigm):
    """gelu''(x) for the three forms, written once for arrays (``exp=np.exp``
    ...) and for graph nodes (``exp=G.exp`` ...; the arithmetic operators
    work on both). erf: phi(x) (2 - x^2); tanh, with u = b (x + k x^3):
    (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2), t = tanh(u); sigmoid, with
    s = sigmoid(1.702 x): 1.702 s (1 - s) (2 + 1.702 x (1 - 2 s))."""
    if kind == GELU_ERF:
        return exp(x * x * -0.5) * _INV_SQRT_2PI * (2.0 - x * x)
    if kind == GELU_TANH:
        x2 = x * x
        du = (x2 * (3.0 * _GELU_KAPPA) + 1.0) * _SQRT_2_OVER_PI
        t = tanh((x2 * _GELU_KAPPA + 1.0) * x * _SQRT_2_OVER_PI)
        d2u = x * (6.0 * _GELU_KAPPA * _SQRT_2_OVER_PI)
        return (1.0 - t * t) * (du + x * (d2u - t * du * du * 2.0) * 0.5)
    s = sigm(x * _GELU_SIGMOID_K)
    ds = s * (1.0 - s) * _GELU_SIGMOID_K
    return ds * (x * (1.0 - s * 2.0) * _GELU_SIGMOID_K + 2.0)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)   # Python floats: they keep float32 arrays float32
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_KAPPA = 0.044715
_GELU_SIGMOID_K = 1.702
_GELU_NAMES = {kind: name for name, kind in GELU_KINDS.items()}


@register_backward(Op.TANH_BACKWARD)
def tanh_backward_backward(c, inputs, out, attrs, saved, needs):
    """out = grad (1 - y^2): (c (1 - y^2), -2 c grad y)."""
    grad, y = inputs
    ggrad = tanh_grad(c, y) if needs[0] else None
    gy = None
    if needs[1]:
        gy = c * grad
        gy *= y
        gy *= y.dtype.type(-2)
    return ggrad, gy


@register_backward(Op.SIGMOID_BACKWARD)
def sigmoid_backward_backward(c, inputs, out, attrs, saved, needs):
    """out = grad y (1 - y): (c y (1 - y), c grad (1 - 2 y))."""
    grad, y = inputs
    ggrad = sigmoid_grad(c, y) if needs[0] else None
    gy = None
    if needs[1]:
        gy = c * grad
        gy *= y.dtype.type(1) - y.dtype.type(2) * y
    return ggrad, gy


@register_backward(Op.GELU_BACKWARD)
def gelu_backward_backward(g, inputs, out, kind, saved, needs):
    """out = grad * gelu'(x): (g gelu'(x), g grad gelu''(x))."""
    grad, x = inputs
    ggrad = unary_backward(g, x, x, kind) if needs[0] else None
    gx = None
    if needs[1]:
        with np.errstate(over="ignore", invalid="ignore"):
            gx = g * grad * gelu_second(x, kind, np.exp, np.tanh, sigmoid)
    return ggrad, gx


# --------------------------------------------------------------- recorded
# The same rules in graph ops, for create_graph=True (docs/higher_order.md). Masks
# at kinks (relu, leaky_relu, prelu, softplus's threshold) and dropout's mask
# are constants, as in PyTorch's double backward; each is the array rule's.
recorded_unary(Op.TANH, lambda G, gy, x, y, a: G.tanh_backward(gy, y))
recorded_unary(Op.RELU, lambda G, gy, x, y, a: G.where(~(G.value(x) <= 0), gy, 0.0))
recorded_unary(Op.LEAKY_RELU, lambda G, gy, x, y, slope: G.where(
    G.value(x) > 0, gy, G.mul(gy, slope)))
recorded_unary(Op.SIGMOID, lambda G, gy, x, y, a: G.sigmoid_backward(gy, y))
recorded_unary(Op.GELU, lambda G, gy, x, y, kind: G.gelu_backward(gy, x, _GELU_NAMES[kind]))


def _silu_recorded(G, gy, x, y, a):
    """grad s (1 + x (1 - s)), s = sigmoid(x) (PyTorch's form)."""
    s = G.sigmoid(x)
    return G.mul(gy, G.mul(s, G.add(1.0, G.mul(x, G.sub(1.0, s)))))


def _mish_recorded(G, gy, x, y, a):
    """grad (t + x s (1 - t^2)), t = tanh(softplus(x)), s = sigmoid(x)
    (PyTorch's form, softplus with its default threshold)."""
    t = G.tanh(G.softplus(x))
    s = G.sigmoid(x)
    return G.mul(gy, G.add(t, G.mul(G.mul(x, s), G.sub(1.0, G.mul(t, t)))))


def _softplus_recorded(G, gy, x, y, a):
    """grad where beta x > threshold, else grad sigmoid(beta x). Exactly at
    the threshold the slope sigmoid(threshold) is a constant: PyTorch's
    double backward masks its derivative with beta x < threshold."""
    z = G.value(x) * a.beta
    below = G.mul(gy, G.sigmoid(G.mul(x, a.beta)))
    at = G.mul(gy, G.constant(sigmoid(z)))
    return G.where(z > a.threshold, gy, G.where(z < a.threshold, below, at))


recorded_unary(Op.SILU, _silu_recorded)
recorded_unary(Op.MISH, _mish_recorded)
recorded_unary(Op.SOFTPLUS, _softplus_recorded)
recorded_unary(Op.SOFTMAX, lambda G, gy, x, y, axis: G.mul(
    y, G.sub(gy, G.sum(G.mul(gy, y), axis=axis, keepdims=True))))
recorded_unary(Op.LOG_SOFTMAX, lambda G, gy, x, y, axis: G.sub(
    gy, G.mul(G.exp(y), G.sum(gy, axis=axis, keepdims=True))))


def _elu_recorded(G, gy, x, y, a):
    """gy scale where x > 0, else gy elu_slope(x). The slope's x enters only
    where x < 0 (and at NaN): at x = 0 it is a constant (alpha scale
    input_scale), as PyTorch's double backward masks with x < 0."""
    xv = G.value(x)
    z = G.where(~(xv >= 0), x, 0.0)
    pos = gy if a.scale == 1.0 else G.mul(gy, a.scale)
    return G.where(xv > 0, pos, G.mul(gy, elu_slope(z, a, G.exp)))


for _op in (Op.ELU, Op.SELU, Op.CELU):
    recorded_unary(_op, _elu_recorded)
recorded_unary(Op.HARDTANH, lambda G, gy, x, y, a: G.where(
    hardtanh_mask(G.value(x), a.min_val, a.max_val), gy, 0.0))
recorded_unary(Op.RELU6, lambda G, gy, x, y, a: G.where(
    hardtanh_mask(G.value(x), 0.0, 6.0), gy, 0.0))
recorded_unary(Op.HARDSIGMOID, lambda G, gy, x, y, a: G.where(
    (G.value(x) > -3.0) & (G.value(x) < 3.0), G.div(gy, 6.0), 0.0))
recorded_unary(Op.LOGSIGMOID, lambda G, gy, x, y, a: G.mul(gy, G.sigmoid(G.neg(x))))


def _softsign_recorded(G, gy, x, y, a):
    """gy / (1 + |x|)^2 (abs's derivative at 0 is 0, as PyTorch's composite)."""
    d = G.add(G.abs(x), 1.0)
    return G.div(G.div(gy, d), d)


def _hardswish_recorded(G, gy, x, y, a):
    """The masks are constants; x enters only on (-3, 3), where the
    second derivative is 1/3 (PyTorch's double backward)."""
    low, mid = _hardswish_masks(G.value(x))
    return G.where(low, 0.0, G.mul(gy, hardswish_slope(x, mid, G.where)))


recorded_unary(Op.SOFTSIGN, _softsign_recorded)
recorded_unary(Op.HARDSWISH, _hardswish_recorded)


@register_recorded(Op.GLU)
def glu_recorded(G, gy, xs, y, axis, saved, needs):
    """(gy s, gy a s sigmoid(-b)), s = sigmoid(b), joined along ``axis``."""
    h = G.value(xs[0]).shape[axis] // 2
    a = G.narrow(xs[0], axis, 0, h)
    b = G.narrow(xs[0], axis, h, h)
    s = G.sigmoid(b)
    ga = G.mul(gy, s)
    gb = G.mul(G.mul(gy, a), G.mul(s, G.sigmoid(G.neg(b))))
    return (G.cat([ga, gb], axis),)


@register_recorded(Op.PRELU)
def prelu_recorded(G, gy, xs, y, attrs, saved, needs):
    """grad where x > 0 else grad alpha; alpha's gradient grad x where x <= 0
    (summed to alpha's shape by the walk). At x == 0 the values are those,
    but, as PyTorch's double backward (its masks are x >= 0), alpha's slope
    there is a constant and alpha's gradient (0) does not depend on x."""
    x, alpha = xs
    xv = G.value(x)
    pos = xv > 0
    gx = galpha = None
    if needs[0]:
        slope = G.where(xv == 0, G.constant(G.value(alpha)), alpha)
        gx = G.where(pos, gy, G.mul(gy, slope))
    if needs[1]:
        galpha = G.where(~(xv >= 0), G.mul(gy, x), 0.0)
        if pos.ndim == 0:  # a 0-d x: alpha is [1]
            galpha = G.reshape(galpha, (1,))
    return gx, galpha


@register_recorded(Op.DROPOUT)
def dropout_recorded(G, gy, xs, y, attrs, packed, needs):
    """grad * mask / (1 - p), the mask a constant."""
    p = attrs.p
    if not attrs.training or p == 0.0:
        return (gy,)
    if p == 1.0:
        return (G.mul(gy, 0.0),)
    scale = unpack_mask(packed, G.value(y).shape) * (1.0 / (1.0 - p))
    return (G.mul(gy, scale.astype(G.dtype)),)


@register_recorded(Op.TANH_BACKWARD)
def tanh_backward_recorded(G, c, xs, out, attrs, saved, needs):
    grad, y = xs
    return (G.tanh_backward(c, y) if needs[0] else None,
            G.mul(G.mul(c, grad), G.mul(y, -2.0)) if needs[1] else None)


@register_recorded(Op.SIGMOID_BACKWARD)
def sigmoid_backward_recorded(G, c, xs, out, attrs, saved, needs):
    grad, y = xs
    return (G.sigmoid_backward(c, y) if needs[0] else None,
            G.mul(G.mul(c, grad), G.sub(1.0, G.mul(y, 2.0))) if needs[1] else None)


@register_recorded(Op.GELU_BACKWARD)
def gelu_backward_recorded(G, gy, xs, y, kind, saved, needs):
    grad, x = xs
    ggrad = G.gelu_backward(gy, x, _GELU_NAMES[kind]) if needs[0] else None
    gx = None
    if needs[1]:
        gx = G.mul(G.mul(gy, grad), gelu_second(x, kind, G.exp, G.tanh, G.sigmoid))
    return ggrad, gx
