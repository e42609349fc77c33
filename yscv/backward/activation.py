"""Activation ops (backward): one rule per op against the namespace ``ns``
(yscv/engine/namespace/__init__.py), run on arrays by the first-order walks and on
the graph by ``create_graph=True``. See yscv/registry.py for the op contract.

Nothing is saved by the activation forwards except dropout's packed mask:
every rule reads the input ``x`` and/or the output ``y`` (sigmoid and tanh
read only the output). Masks at kinks (relu, leaky_relu, hardtanh, elu's 0,
hardswish's -3 and 3) and dropout's mask are constants, as in PyTorch's
double backward.

* tanh and sigmoid reach their fused kernels through the backward ops
  ``tanh_backward(grad, y)`` / ``sigmoid_backward(grad, y)``, whose own rules
  are again one each; gelu_backward's rule needs only ``gelu''``
  (elementary for all three forms, `gelu_second`).
* relu, leaky_relu, tanh and sigmoid are on the per-node hot path, and the
  elu family's masked exponential is slow in NumPy: their array walks call a
  written-out copy of the rule (``array=``), held bit for bit to it by
  tests/test_rule_flags.py; so do hardswish and hardsigmoid, whose copies
  run large arrays (MobileNetV3's activations) in one threaded pass.
* gelu, silu, mish, softplus, prelu, softmax and log_softmax keep their fused
  backward kernels (gelu's erf form reads ``Phi(x) = y / x`` from the output),
  glu its views and one concatenate:
  each has an array rule calling the kernel and a composite, its forward
  restated in primitive ops (at the end of this module), from which
  ``create_graph=True`` takes the derivatives of that gradient.
"""
from __future__ import annotations

import math

import numpy as np

from ..compute import elementwise as ew
from ..compute.activation import (
    GELU_ERF,
    GELU_KINDS,
    GELU_TANH,
    MISH,
    SILU,
    SOFTPLUS,
    gelu_grad,
    halves,
    hard_activation_grad,
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
from ..registry import register_composite, register_rule
from ._rules import unary


# ------------------------------------------------------------ hot rules
def relu_array(ns, g, inputs, out, attrs, saved, needs):
    """`relu_rule` written out for arrays (the per-node hot path;
    docs/engine.md): `yscv.compute.activation.relu_grad` gives the bits of
    ``np.where(x <= 0, 0, g)`` at every size."""
    return (relu_grad(g, inputs[0]),)


@register_rule(Op.RELU, array=relu_array)
def relu_rule(ns, g, inputs, out, attrs, saved, needs):
    """g where not x <= 0, else 0 (PyTorch's threshold_backward: a NaN input
    passes its gradient on, a dropped element is +0.0 whatever g is there)."""
    return (ns.where(~(ns.value(inputs[0]) <= 0), g, 0.0),)


def leaky_relu_array(ns, g, inputs, out, slope, saved, needs):
    """`leaky_relu_rule` in one branch-free select pass (``g * slope`` rounds
    the slope to g's dtype, as NumPy's weak Python-float operand does)."""
    return (piecewise(g, inputs[0], np.full(1, slope, dtype=g.dtype)),)


@register_rule(Op.LEAKY_RELU, array=leaky_relu_array)
def leaky_relu_rule(ns, g, inputs, out, slope, saved, needs):
    """g where x > 0, else g * slope (the slope at 0 and at NaN, as PyTorch)."""
    return (ns.where(ns.value(inputs[0]) > 0, g, ns.mul(g, slope)),)


def sigmoid_array(ns, g, inputs, out, attrs, saved, needs):
    """`sigmoid_rule` written out: sigmoid_backward's forward, called directly."""
    return (sigmoid_grad(g, out),)


@register_rule(Op.SIGMOID, array=sigmoid_array)
def sigmoid_rule(ns, g, inputs, out, attrs, saved, needs):
    """g y (1 - y), from the output y."""
    return (ns.sigmoid_backward(g, out),)


def tanh_array(ns, g, inputs, out, attrs, saved, needs):
    """`tanh_rule` written out: tanh_backward's forward, called directly."""
    return (tanh_grad(g, out),)


@register_rule(Op.TANH, array=tanh_array)
def tanh_rule(ns, g, inputs, out, attrs, saved, needs):
    """g (1 - y^2), from the output y."""
    return (ns.tanh_backward(g, out),)


# ------------------------------------------- fused kernels (+ composites)
# These rules run on arrays only: under create_graph=True each input gradient
# is one Op.VJP node (its value this rule's, its derivative the composite's).
unary(Op.GELU, lambda ns, g, x, y, kind: gelu_grad(g, x, y, kind))   # erf: Phi = y / x
unary(Op.SILU, lambda ns, g, x, y, a: unary_backward(g, x, x, SILU))
unary(Op.MISH, lambda ns, g, x, y, a: unary_backward(g, x, x, MISH))
unary(Op.SOFTPLUS, lambda ns, g, x, y, a: unary_backward(g, x, x, SOFTPLUS, a.beta, a.threshold))
unary(Op.SOFTMAX, lambda ns, g, x, y, axis: softmax_backward(g, y, axis, False))  # y (g - sum g y)
unary(Op.LOG_SOFTMAX, lambda ns, g, x, y, axis: softmax_backward(g, y, axis, True))  # g - e^y sum g


@register_rule(Op.PRELU)
def prelu_rule(ns, g, inputs, out, attrs, saved, needs):
    """One fused pass: the x gradient and per-channel sums of ``g*x`` where
    x <= 0 (reduced to one number for a shared alpha [1])."""
    x, alpha = inputs
    gx, sums = prelu_pass(g, x, alpha, needs[0])
    if not needs[1]:
        return gx, None
    galpha = sums if alpha.shape[0] != 1 else np.sum(sums, dtype=g.dtype).reshape(1)
    return gx, galpha


# ------------------------------------------------------------ elementary
def elu_array(ns, g, inputs, out, attrs, saved, needs):
    """`elu_rule` written out for arrays: ``min(x, 0)`` instead of the
    masked x (np.where on a random mask is slow); the two differ only in
    the sign of a zero, which exp maps to the same 1."""
    x = inputs[0]
    z = np.minimum(x, 0.0)
    if attrs.input_scale != 1.0:
        z *= attrs.input_scale
    c = attrs.alpha * attrs.scale * attrs.input_scale
    if attrs.input_scale < 0.0:   # a negative celu alpha: exp(x / alpha) may overflow, as PyTorch's
        with np.errstate(over="ignore", invalid="ignore"):
            neg = g * (np.exp(z) * c)
    else:
        neg = g * (np.exp(z) * c)
    return (ew.where(x > 0, g if attrs.scale == 1.0 else g * attrs.scale, neg),)


@register_rule(Op.ELU, array=elu_array)
def elu_rule(ns, g, inputs, out, attrs, saved, needs):
    """g scale where x > 0, else ``g alpha scale input_scale exp(input_scale x)``:
    alpha scale input_scale at x = 0 and NaN at NaN, as PyTorch's vectorised
    kernel. The exponential sees x only where x < 0 (and at NaN), else 0: no
    overflow on the unused side, and at x = 0 the slope is a constant
    (PyTorch's double backward masks with x < 0)."""
    x = inputs[0]
    xv = ns.value(x)
    z = ns.where(~(xv >= 0), x, 0.0)
    if attrs.input_scale != 1.0:
        z = ns.mul(z, attrs.input_scale)
    with np.errstate(over="ignore", invalid="ignore"):   # a negative celu alpha may overflow
        neg = ns.mul(g, ns.mul(ns.exp(z), attrs.alpha * attrs.scale * attrs.input_scale))
    pos = g if attrs.scale == 1.0 else ns.mul(g, attrs.scale)
    return (ns.where(xv > 0, pos, neg),)


register_rule(Op.SELU, array=elu_array)(elu_rule)
register_rule(Op.CELU, array=elu_array)(elu_rule)


def hardtanh_mask(x, lo, hi):
    """Where the gradient passes: ``lo < x < hi`` (the bounds and NaN
    excluded, as PyTorch's vectorised hardtanh_backward)."""
    return (x > lo) & (x < hi)


unary(Op.HARDTANH, lambda ns, g, x, y, a: ns.where(
    hardtanh_mask(ns.value(x), a.min_val, a.max_val), g, 0.0))
unary(Op.RELU6, lambda ns, g, x, y, a: ns.where(hardtanh_mask(ns.value(x), 0.0, 6.0), g, 0.0))
def hardsigmoid_array(ns, g, inputs, out, attrs, saved, needs):
    """`hardsigmoid_rule` written out for arrays: large arrays in one
    threaded pass (`yscv.compute.activation.hard_activation_grad`), the
    rule's bits."""
    gx = hard_activation_grad(g, inputs[0], False)
    return (gx,) if gx is not None else hardsigmoid_rule(ns, g, inputs, out, attrs, saved, needs)


@register_rule(Op.HARDSIGMOID, array=hardsigmoid_array)
def hardsigmoid_rule(ns, g, inputs, out, attrs, saved, needs):
    """g / 6 on (-3, 3), else 0 (NaN: 0)."""
    return (ns.where(hardtanh_mask(ns.value(inputs[0]), -3.0, 3.0), ns.div(g, 6.0), 0.0),)
unary(Op.LOGSIGMOID, lambda ns, g, x, y, a: ns.mul(g, ns.sigmoid(ns.neg(x))))


@register_rule(Op.SOFTSIGN)
def softsign_rule(ns, g, inputs, out, attrs, saved, needs):
    """g / (1 + |x|)^2, divided twice (no overflow of the square): exact at
    any |x|, 0 at +-inf (PyTorch's composite x / (|x| + 1) cancels there:
    NaN at +-inf, noise at 1e30); abs's derivative at 0 is 0."""
    d = ns.add(ns.abs(inputs[0]), 1.0)
    return (ns.div(ns.div(g, d), d),)


def hardswish_array(ns, g, inputs, out, attrs, saved, needs):
    """`hardswish_rule` written out for arrays: large arrays in one threaded
    pass (`yscv.compute.activation.hard_activation_grad`; MobileNetV3's
    activations), the rule's bits."""
    gx = hard_activation_grad(g, inputs[0], True)
    return (gx,) if gx is not None else hardswish_rule(ns, g, inputs, out, attrs, saved, needs)


@register_rule(Op.HARDSWISH, array=hardswish_array)
def hardswish_rule(ns, g, inputs, out, attrs, saved, needs):
    """0 where x <= -3, g (x/3 + 1/2) on (-3, 3), g from 3 (PyTorch's sides).
    NaN falls in the middle piece and gives a NaN gradient, as PyTorch's
    vectorised kernel; x enters only there (second derivative 1/3)."""
    x = inputs[0]
    xv = ns.value(x)
    low = xv <= -3.0
    mid = ~(low | (xv >= 3.0))
    slope = ns.where(mid, ns.add(ns.div(x, 3.0), 0.5), 1.0)
    return (ns.where(low, 0.0, ns.mul(g, slope)),)


@register_rule(Op.GLU)
def glu_rule(ns, g, inputs, out, axis, saved, needs):
    """y = a s, s = sigmoid(b): (g s, g y sigmoid(-b)), joined along
    ``axis``. ``sigmoid(-b)`` rather than ``1 - s``, which cancels where s is
    near 1 (float32 at b = 13: 3% off; PyTorch's float32 kernel is). On
    arrays only (a composite; the halves and the join are views and one
    concatenate)."""
    _, b = halves(inputs[0], axis)
    ga = g * sigmoid(b)
    gb = g * out
    gb *= sigmoid(np.negative(b))
    return (np.concatenate([ga, gb], axis=axis),)


@register_rule(Op.DROPOUT)
def dropout_rule(ns, g, inputs, out, attrs, packed, needs):
    """g * mask / (1 - p), the mask (unpacked from the saved bits) a constant."""
    p = attrs.p
    if not attrs.training or p == 0.0:
        return (g,)
    if p == 1.0:
        return (ns.zeros_like(g),)
    gv = ns.value(g)
    mask = unpack_mask(packed, gv.shape)
    return (ns.mul(ns.mul(g, gv.dtype.type(1.0 / (1.0 - p))), ns.const(mask)),)


# ------------------------------------------------------------ backward ops
@register_rule(Op.TANH_BACKWARD)
def tanh_backward_rule(ns, c, inputs, out, attrs, saved, needs):
    """out = grad (1 - y^2): (c (1 - y^2), -2 c grad y)."""
    grad, y = inputs
    return (ns.tanh_backward(c, y) if needs[0] else None,
            ns.mul(ns.mul(ns.mul(c, grad), y), -2.0) if needs[1] else None)


@register_rule(Op.SIGMOID_BACKWARD)
def sigmoid_backward_rule(ns, c, inputs, out, attrs, saved, needs):
    """out = grad y (1 - y): (c y (1 - y), c grad (1 - 2 y))."""
    grad, y = inputs
    return (ns.sigmoid_backward(c, y) if needs[0] else None,
            ns.mul(ns.mul(c, grad), ns.sub(1.0, ns.mul(y, 2.0))) if needs[1] else None)


def gelu_second(ns, x, kind):
    """gelu''(x) for the three forms. erf: phi(x) (2 - x^2); tanh, with
    u = b (x + k x^3): (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2), t = tanh(u);
    sigmoid, with s = sigmoid(1.702 x): 1.702 s (1 - s) (2 + 1.702 x (1 - 2 s))."""
    if kind == GELU_ERF:
        x2 = ns.mul(x, x)
        return ns.mul(ns.mul(ns.exp(ns.mul(x2, -0.5)), _INV_SQRT_2PI), ns.sub(2.0, x2))
    if kind == GELU_TANH:
        x2 = ns.mul(x, x)
        du = ns.mul(ns.add(ns.mul(x2, 3.0 * _GELU_KAPPA), 1.0), _SQRT_2_OVER_PI)
        t = ns.tanh(ns.mul(ns.mul(ns.add(ns.mul(x2, _GELU_KAPPA), 1.0), x), _SQRT_2_OVER_PI))
        d2u = ns.mul(x, 6.0 * _GELU_KAPPA * _SQRT_2_OVER_PI)
        inner = ns.sub(d2u, ns.mul(ns.mul(ns.mul(t, du), du), 2.0))
        return ns.mul(ns.sub(1.0, ns.mul(t, t)), ns.add(du, ns.mul(ns.mul(x, inner), 0.5)))
    s = ns.sigmoid(ns.mul(x, _GELU_SIGMOID_K))
    ds = ns.mul(ns.mul(s, ns.sub(1.0, s)), _GELU_SIGMOID_K)
    return ns.mul(ds, ns.add(ns.mul(ns.mul(x, ns.sub(1.0, ns.mul(s, 2.0))), _GELU_SIGMOID_K), 2.0))


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)   # Python floats: they keep float32 arrays float32
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_KAPPA = 0.044715
_GELU_SIGMOID_K = 1.702
_GELU_NAMES = {kind: name for name, kind in GELU_KINDS.items()}


@register_rule(Op.GELU_BACKWARD)
def gelu_backward_rule(ns, c, inputs, out, kind, saved, needs):
    """out = grad * gelu'(x): (c gelu'(x), c grad gelu''(x))."""
    grad, x = inputs
    ggrad = ns.gelu_backward(c, x, _GELU_NAMES[kind]) if needs[0] else None
    gx = None
    if needs[1]:
        with np.errstate(over="ignore", invalid="ignore"):
            gx = ns.mul(ns.mul(c, grad), gelu_second(ns, x, kind))
    return ggrad, gx


# ------------------------------------------------------------ composites
# The fused ops' forwards in primitive graph ops, for the derivatives of
# their gradients (registry.COMPOSITES). Masks from the values are constants,
# at the kinks on PyTorch's side.
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


def _gelu_composite(G, x, kind):
    """erf: ``x erfc(-x / sqrt 2) / 2``; tanh: ``x (1 + tanh(b (x + k x^3))) / 2``;
    sigmoid: ``x sigmoid(1.702 x)``."""
    if kind == GELU_ERF:
        return G.mul(G.mul(x, 0.5), G.erfc(G.mul(x, -_INV_SQRT_2)))
    if kind == GELU_TANH:
        u = G.mul(G.add(G.mul(G.mul(x, x), _GELU_KAPPA), 1.0), G.mul(x, _SQRT_2_OVER_PI))
        return G.mul(G.mul(x, 0.5), G.add(G.tanh(u), 1.0))
    return G.mul(x, G.sigmoid(G.mul(x, _GELU_SIGMOID_K)))


def _softplus_exact(G, z):
    """``log(1 + exp(z))`` as ``-logsigmoid(-z)``: stable for any z, its
    derivatives those of sigmoid."""
    return G.neg(G.logsigmoid(G.neg(z)))


def _softplus_composite(G, x, a):
    """``x`` where ``beta x > threshold``, else ``softplus(beta x) / beta``.
    Exactly at the threshold the slope sigmoid(threshold) is a constant
    (PyTorch's double backward masks its derivative with beta x < threshold):
    a line of that slope through the value."""
    z = G.value(x) * a.beta
    sp = _softplus_exact(G, x if a.beta == 1.0 else G.mul(x, a.beta))
    if a.beta != 1.0:
        sp = G.div(sp, a.beta)
    at = z == a.threshold
    if at.any():
        slope = G.constant(sigmoid(z))
        line = G.add(G.mul(G.sub(x, G.constant(G.value(x))), slope), G.constant(G.value(sp)))
        sp = G.where(at, line, sp)
    return G.where(z > a.threshold, x, sp)


def _prelu_composite(G, x, alpha, attrs):
    """``x`` where x > 0, else ``alpha x``. At x == 0 alpha enters as a
    constant (PyTorch's double backward: its masks are x >= 0), so alpha's
    gradient there (0) does not depend on x, nor x's (alpha) on alpha."""
    xv = G.value(x)
    if xv.ndim == 0:
        alpha = G.reshape(alpha, ())
    zero = xv == 0
    slope = G.where(zero, G.constant(G.value(alpha)), alpha) if zero.any() else alpha
    return G.where(xv > 0, x, G.mul(x, slope))


def _glu_composite(G, x, axis):
    """``a sigmoid(b)``, a and b the halves of x along ``axis``."""
    h = G.value(x).shape[axis] // 2
    return G.mul(G.narrow(x, axis, 0, h), G.sigmoid(G.narrow(x, axis, h, h)))


def _softmax_parts(G, x, axis):
    m = G.constant(np.max(G.value(x), axis=axis, keepdims=True, initial=-np.inf))
    return G.sub(x, m)


def _softmax_composite(G, x, axis):
    """``e / sum(e)``, ``e = exp(x - max)`` (the max a constant: softmax is
    shift-invariant); a 0-d x: ``exp(x - x)``."""
    if G.value(x).ndim == 0:
        return G.exp(G.sub(x, x))
    e = G.exp(_softmax_parts(G, x, axis))
    return G.div(e, G.sum(e, axis=axis, keepdims=True))


def _log_softmax_composite(G, x, axis):
    """``s - log(sum(exp(s)))``, ``s = x - max``; a 0-d x: ``x - x``."""
    if G.value(x).ndim == 0:
        return G.sub(x, x)
    s = _softmax_parts(G, x, axis)
    return G.sub(s, G.log(G.sum(G.exp(s), axis=axis, keepdims=True)))


register_composite(Op.GELU, _gelu_composite)
register_composite(Op.SILU, lambda G, x, a: G.mul(x, G.sigmoid(x)))
register_composite(Op.MISH, lambda G, x, a: G.mul(x, G.tanh(_softplus_exact(G, x))))
register_composite(Op.SOFTPLUS, _softplus_composite)
register_composite(Op.PRELU, _prelu_composite)
register_composite(Op.GLU, _glu_composite)
register_composite(Op.SOFTMAX, _softmax_composite)
register_composite(Op.LOG_SOFTMAX, _log_softmax_composite)
