"""Activation ops (forward). See yscv/registry.py for the op contract.

* relu and leaky_relu: one or two NumPy ufuncs (``max(x, s x)`` / ``min(x, s x)``
  select the right side without a per-element branch).
* sigmoid, tanh, silu, gelu (three forms), mish, softplus: fused one-pass
  kernels or, on tiny arrays, NumPy ufuncs -- chosen in
  `yscv.compute.activation` (the size tiers are there).
* prelu: one branch-free select pass, alpha [C] along the last axis or [1].
* gelu_backward(grad, x): gelu's input gradient ``grad * gelu'(x)`` as an op
  (the fused backward kernel), which gelu's recorded backward appends.
* softmax / log_softmax along any axis without a transpose.
* dropout draws its mask from ``np.random.default_rng(seed)``; the seed is an
  attribute (drawn from the library generator by the Graph method when not
  given), so the forward is pure and replays the same mask. The mask is saved
  packed to one bit per element.

* elu, selu, celu: one formula, PyTorch's elu with ``scale`` and
  ``input_scale`` (`EluAttrs`); the exponential is taken of
  ``min(x, 0)`` only, so a large positive x never overflows.
* hardtanh, relu6, hardsigmoid, hardswish: clips (``np.clip``, NaN passes).
* softsign ``x / (1 + |x|)``, logsigmoid ``min(x, 0) - log1p(exp(-|x|))``
  (stable for any x), glu ``a * sigmoid(b)`` on the two halves of ``axis``.

Nothing else is saved: the backward rules read the input and/or the output.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple, Optional

import numpy as np

from .. import random as _random
from ..compute import activation as act
from ..compute import elementwise as ew
from ..compute.activation import GELU_KINDS, MISH, SILU, SOFTPLUS
from ..node import Op
from ..registry import register_forward, register_ufunc
from ._common import normalize_axis, shape_error

# plain module constants: Enum attribute access is slow on the per-node path
_RELU, _LEAKY_RELU, _SIGMOID, _TANH, _GELU, _SILU, _MISH, _SOFTPLUS = (
    Op.RELU, Op.LEAKY_RELU, Op.SIGMOID, Op.TANH, Op.GELU, Op.SILU, Op.MISH, Op.SOFTPLUS)
_PRELU, _SOFTMAX, _LOG_SOFTMAX, _DROPOUT = Op.PRELU, Op.SOFTMAX, Op.LOG_SOFTMAX, Op.DROPOUT
_ELU, _SELU, _CELU, _HARDTANH, _RELU6 = Op.ELU, Op.SELU, Op.CELU, Op.HARDTANH, Op.RELU6
_HARDSIGMOID, _HARDSWISH, _SOFTSIGN, _LOGSIGMOID, _GLU = (
    Op.HARDSIGMOID, Op.HARDSWISH, Op.SOFTSIGN, Op.LOGSIGMOID, Op.GLU)


class SoftplusAttrs(NamedTuple):
    """softplus: ``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``."""

    beta: float
    threshold: float


class DropoutAttrs(NamedTuple):
    """dropout: drop probability, training flag, mask seed (None when no mask is drawn)."""

    p: float
    training: bool
    seed: Optional[int]


class EluAttrs(NamedTuple):
    """elu, selu, celu (PyTorch's elu): ``scale x`` where x > 0, else
    ``alpha scale (exp(input_scale x) - 1)``."""

    alpha: float
    scale: float
    input_scale: float


class HardtanhAttrs(NamedTuple):
    """hardtanh: the bounds, ``min_val <= max_val``."""

    min_val: float
    max_val: float


#: PyTorch's selu constants (torch.nn.functional.selu)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ATTRS = EluAttrs(SELU_ALPHA, SELU_SCALE, 1.0)

# Attributes of the others: leaky_relu its slope (a float), gelu its kernel
# kind (an int of yscv.compute.activation), softmax / log_softmax / glu the
# axis; relu6, hardsigmoid, hardswish, softsign and logsigmoid have none.


# ---------------------------------------------------------------- forwards
@register_forward(Op.RELU)
def relu_forward(attrs, x):
    return act.relu(x), None


@register_forward(Op.LEAKY_RELU)
def leaky_relu_forward(slope, x):
    # max(x, s x) for s <= 1 and min(x, s x) for s > 1 select the right side
    # without np.where (which branches per element)
    pick = np.maximum if slope <= 1.0 else np.minimum
    return pick(x, x * slope), None


@register_forward(Op.SIGMOID)
def sigmoid_forward(attrs, x):
    return act.sigmoid(x), None


@register_forward(Op.TANH)
def tanh_forward(attrs, x):
    return act.tanh(x), None


if act.NUMPY_SIMD_TANH:  # act.tanh is np.tanh at every size (registry.UFUNC)
    register_ufunc(Op.TANH, np.tanh)


@register_forward(Op.GELU)
def gelu_forward(kind, x):
    return act.unary_forward(x, kind), None


@register_forward(Op.GELU_BACKWARD)
def gelu_backward_forward(kind, grad, x):
    return act.unary_backward(grad, x, x, kind), None


@register_forward(Op.TANH_BACKWARD)
def tanh_backward_forward(attrs, grad, y):
    return act.tanh_grad(grad, y), None


@register_forward(Op.SIGMOID_BACKWARD)
def sigmoid_backward_forward(attrs, grad, y):
    return act.sigmoid_grad(grad, y), None


@register_forward(Op.SILU)
def silu_forward(attrs, x):
    return act.unary_forward(x, SILU), None


@register_forward(Op.MISH)
def mish_forward(attrs, x):
    return act.unary_forward(x, MISH), None


@register_forward(Op.SOFTPLUS)
def softplus_forward(attrs, x):
    return act.unary_forward(x, SOFTPLUS, attrs.beta, attrs.threshold), None


@register_forward(Op.PRELU)
def prelu_forward(attrs, x, alpha):
    return act.piecewise(x, x, alpha), None   # x where x > 0, else alpha x


@register_forward(Op.SOFTMAX)
def softmax_forward(axis, x):
    return act.softmax(x, axis, False), None


@register_forward(Op.LOG_SOFTMAX)
def log_softmax_forward(axis, x):
    return act.softmax(x, axis, True), None


@register_forward(Op.DROPOUT)
def dropout_forward(attrs, x):
    """``x * mask / (1 - p)``. Saved for backward: the keep-mask packed to one
    BIT per element, 1/32 of a float32 value (redrawing it from the seed or
    keeping bools costs more; docs/ops/activation.md)."""
    p = attrs.p
    if not attrs.training or p == 0.0:
        return x, None
    if p == 1.0:
        return np.zeros_like(x), None
    mask = act.dropout_mask(attrs.seed, x.shape, p)
    y = x * x.dtype.type(1.0 / (1.0 - p))
    y *= mask
    return y, act.pack_mask(mask)


def elu_family(attrs, x):
    """``scale x`` where x > 0, else ``alpha scale expm1(input_scale x)``
    (NaN stays NaN). The exponential sees ``min(x, 0)``: no overflow from
    the unused side. A negative celu alpha (``input_scale < 0``) may
    overflow to -inf, as PyTorch."""
    z = np.minimum(x, 0.0)
    if attrs.input_scale != 1.0:
        z *= attrs.input_scale
    with np.errstate(over="ignore"):
        neg = np.expm1(z)
        neg *= attrs.alpha * attrs.scale
    pos = x if attrs.scale == 1.0 else x * attrs.scale
    return ew.where(x > 0, pos, neg), None


register_forward(Op.ELU)(elu_family)
register_forward(Op.SELU)(elu_family)
register_forward(Op.CELU)(elu_family)


@register_forward(Op.HARDTANH)
def hardtanh_forward(attrs, x):
    return np.clip(x, attrs.min_val, attrs.max_val).astype(x.dtype, copy=False), None


@register_forward(Op.RELU6)
def relu6_forward(attrs, x):
    return np.clip(x, 0.0, 6.0).astype(x.dtype, copy=False), None


@register_forward(Op.HARDSIGMOID)
def hardsigmoid_forward(attrs, x):
    """``relu6(x + 3) / 6``."""
    return act.hard_activation(x, False), None


@register_forward(Op.HARDSWISH)
def hardswish_forward(attrs, x):
    """``x relu6(x + 3) / 6``, in PyTorch's order (``-inf * 0``: NaN)."""
    return act.hard_activation(x, True), None


@register_forward(Op.SOFTSIGN)
def softsign_forward(attrs, x):
    with np.errstate(invalid="ignore"):   # inf / inf: NaN, as PyTorch
        return x / (np.abs(x) + 1.0), None


@register_forward(Op.LOGSIGMOID)
def logsigmoid_forward(attrs, x):
    """``log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))``: exp of a
    non-positive number only, so stable for any x."""
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x))), None


@register_forward(Op.GLU)
def glu_forward(axis, x):
    a, b = act.halves(x, axis)
    return a * act.sigmoid(b), None


# ------------------------------------------------------------ graph methods
def _real(value, op: str, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {value!r}")
    v = float(value)
    if v != v:
        raise ValueError(f"{op}: {arg} must not be NaN")
    return v


class ActivationOps:
    """Graph methods of the activation category."""

    def relu(self, x):
        """``max(x, 0)``; gradient 1 where x > 0, else 0 (0 at 0, as PyTorch)."""
        return self._apply1(_RELU, x)

    def leaky_relu(self, x, negative_slope=0.01):
        """``x`` where x > 0, else ``negative_slope * x``; the gradient at 0 is
        ``negative_slope`` (as PyTorch)."""
        slope = _real(negative_slope, "leaky_relu", "negative_slope")
        return self._apply1(_LEAKY_RELU, x, slope)

    def sigmoid(self, x):
        """``1 / (1 + exp(-x))``, stable for any x; backward ``g*y*(1-y)``."""
        return self._apply1(_SIGMOID, x)

    def tanh(self, x):
        """``tanh(x)``; backward ``g*(1-y*y)``."""
        return self._apply1(_TANH, x)

    def gelu(self, x, approximate="none"):
        """Gaussian error linear unit.

        ``approximate="none"``: ``x * Phi(x)`` with the exact normal CDF (erf);
        ``"tanh"``: PyTorch's ``0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))``;
        ``"sigmoid"``: ``x * sigmoid(1.702x)``.
        """
        kind = GELU_KINDS.get(approximate) if isinstance(approximate, str) else None
        if kind is None:
            raise ValueError(
                f"gelu: approximate must be 'none', 'tanh' or 'sigmoid', got {approximate!r}")
        return self._apply1(_GELU, x, kind)

    def _output_backward(self, op, name, grad, y):
        _, gv, _ = self._operand(grad, name, "grad")
        _, yv, _ = self._operand(y, name, "y")
        if gv.shape != yv.shape:
            raise shape_error(name, f"grad has shape {gv.shape}, y has {yv.shape}; "
                              "they must be equal", expected=yv.shape, got=gv.shape)
        return self._apply(op, (grad, y), None)

    def tanh_backward(self, grad, y):
        """``grad * (1 - y**2)``: tanh's input gradient from its OUTPUT ``y``,
        as an op of its own (PyTorch's ``tanh_backward``), on the fused
        kernel. The recorded backward of tanh (``create_graph=True``) appends
        it: one node where the same math in elementwise ops takes three, and
        its own rules are short. ``grad`` and ``y`` have the same shape."""
        return self._output_backward(Op.TANH_BACKWARD, "tanh_backward", grad, y)

    def sigmoid_backward(self, grad, y):
        """``grad * y * (1 - y)``: sigmoid's input gradient from its output
        ``y``, as an op of its own (PyTorch's ``sigmoid_backward``); see
        `tanh_backward`."""
        return self._output_backward(Op.SIGMOID_BACKWARD, "sigmoid_backward", grad, y)

    def gelu_backward(self, grad, x, approximate="none"):
        """``grad * gelu'(x)``, the input gradient of `gelu` as an op of
        its own (PyTorch's ``gelu_backward``): the recorded backward of gelu
        (``create_graph=True``) appends it, and its own rules, again short,
        give gelu's derivatives of any order. ``grad`` and ``x`` have the same
        shape."""
        kind = GELU_KINDS.get(approximate) if isinstance(approximate, str) else None
        if kind is None:
            raise ValueError("gelu_backward: approximate must be 'none', 'tanh' or 'sigmoid', "
                             f"got {approximate!r}")
        _, gv, _ = self._operand(grad, "gelu_backward", "grad")
        _, xv, _ = self._operand(x, "gelu_backward", "x")
        if gv.shape != xv.shape:
            raise shape_error("gelu_backward", f"grad has shape {gv.shape}, x has {xv.shape}; "
                              "they must be equal", expected=xv.shape, got=gv.shape)
        return self._apply(Op.GELU_BACKWARD, (grad, x), kind)

    def silu(self, x):
        """``x * sigmoid(x)`` (swish)."""
        return self._apply1(_SILU, x)

    def mish(self, x):
        """``x * tanh(softplus(x))``."""
        return self._apply1(_MISH, x)

    def softplus(self, x, beta=1.0, threshold=20.0):
        """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``
        (PyTorch's defaults beta=1, threshold=20). beta must be > 0."""
        b = _real(beta, "softplus", "beta")
        t = _real(threshold, "softplus", "threshold")
        if b <= 0.0:
            raise ValueError(f"softplus: beta must be > 0, got {beta!r}")
        return self._apply1(_SOFTPLUS, x, SoftplusAttrs(b, t))

    def prelu(self, x, alpha):
        """``x`` where x > 0, else ``alpha * x``; alpha has shape [C] (C = the
        last axis of x, one slope per channel) or [1] (one shared slope).
        Gradients flow to x and alpha (alpha may be a NodeId or an array)."""
        _, xv, _ = self._operand(x, "prelu", "x")
        _, av, _ = self._operand(alpha, "prelu", "alpha")
        c = xv.shape[-1] if xv.ndim else 1
        if av.shape != (1,) and av.shape != (c,):
            raise shape_error(
                "prelu", f"alpha must have shape ({c},) (the last axis of x {xv.shape}) "
                f"or (1,), got {av.shape}", expected=(c,), got=av.shape)
        return self._apply(_PRELU, (x, alpha))

    def softmax(self, x, axis=-1):
        """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (any axis)."""
        _, xv, _ = self._operand(x, "softmax", "x")
        return self._apply1(_SOFTMAX, x, normalize_axis(axis, xv.ndim, "softmax"))

    def log_softmax(self, x, axis=-1):
        """``x - max - log(sum(exp(x - max)))`` along ``axis`` (any axis)."""
        _, xv, _ = self._operand(x, "log_softmax", "x")
        return self._apply1(_LOG_SOFTMAX, x, normalize_axis(axis, xv.ndim, "log_softmax"))

    def dropout(self, x, p, training=True, seed=None):
        """Inverted dropout: zero each element with probability ``p``, scale the
        rest by ``1/(1-p)``.

        ``training=False`` or ``p=0`` is the identity (one node, value = input);
        ``p=1`` gives zeros. The mask is ``np.random.default_rng(seed).random(
        x.shape, dtype=np.float32) >= p``; with ``seed=None`` a seed is drawn
        from the library generator (`yscv.manual_seed`) and recorded on
        the node, so backward and checkpoint replays reuse the same mask.
        """
        pv = _real(p, "dropout", "p")
        if not 0.0 <= pv <= 1.0:
            raise ValueError(f"dropout: p must be in [0, 1], got {p!r}")
        if not isinstance(training, (bool, np.bool_)):
            raise TypeError(f"dropout: training must be a bool, got {training!r}")
        if seed is not None and (isinstance(seed, (bool, np.bool_))
                                 or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ValueError(f"dropout: seed must be None or a non-negative int, got {seed!r}")
        self._operand(x, "dropout", "x")  # validate x before drawing a seed
        training = bool(training)
        if training and 0.0 < pv < 1.0 and seed is None:
            seed = _random.draw_seed()
        return self._apply1(_DROPOUT, x,
                            DropoutAttrs(pv, training, None if seed is None else int(seed)))

    def elu(self, x, alpha=1.0):
        """``x`` where x > 0, else ``alpha (exp(x) - 1)``; gradient 1, else
        ``alpha exp(x)`` (``alpha`` at 0, as PyTorch)."""
        a = _real(alpha, "elu", "alpha")
        return self._apply1(_ELU, x, EluAttrs(a, 1.0, 1.0))

    def selu(self, x):
        """``scale elu(x, alpha)`` with PyTorch's constants
        ``alpha = 1.6732632423543772...``, ``scale = 1.0507009873554804...``."""
        return self._apply1(_SELU, x, _SELU_ATTRS)

    def celu(self, x, alpha=1.0):
        """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``; alpha must not be 0."""
        a = _real(alpha, "celu", "alpha")
        if a == 0.0:
            raise ValueError(f"celu: alpha must not be 0, got {alpha!r}")
        return self._apply1(_CELU, x, EluAttrs(a, 1.0, 1.0 / a))

    def hardtanh(self, x, min_val=-1.0, max_val=1.0):
        """``x`` clipped to ``[min_val, max_val]``; the gradient passes strictly
        inside (0 at the bounds and at NaN, as PyTorch; clamp's bounds are
        inclusive)."""
        lo = _real(min_val, "hardtanh", "min_val")
        hi = _real(max_val, "hardtanh", "max_val")
        if lo > hi:
            raise ValueError(f"hardtanh: min_val={min_val!r} is greater than max_val={max_val!r}")
        return self._apply1(_HARDTANH, x, HardtanhAttrs(lo, hi))

    def relu6(self, x):
        """``min(max(x, 0), 6)`` (``hardtanh(x, 0, 6)``: gradient 0 at 0 and 6)."""
        return self._apply1(_RELU6, x)

    def hardsigmoid(self, x):
        """``relu6(x + 3) / 6``; gradient 1/6 on (-3, 3), else 0."""
        return self._apply1(_HARDSIGMOID, x)

    def hardswish(self, x):
        """``x relu6(x + 3) / 6``; gradient 0 for x <= -3, ``x/3 + 1/2`` on
        (-3, 3), 1 from 3 (PyTorch's sides at -3 and 3)."""
        return self._apply1(_HARDSWISH, x)

    def softsign(self, x):
        """``x / (1 + |x|)``; backward ``g / (1 + |x|)^2``."""
        return self._apply1(_SOFTSIGN, x)

    def logsigmoid(self, x):
        """``log(sigmoid(x))``, stable for any x; backward ``g sigmoid(-x)``."""
        return self._apply1(_LOGSIGMOID, x)

    def glu(self, x, axis=-1):
        """Gated linear unit: ``a * sigmoid(b)``, ``a`` and ``b`` the first and
        second halves of ``x`` along ``axis`` (whose length must be even)."""
        _, xv, _ = self._operand(x, "glu", "x")
        if xv.ndim == 0:
            raise shape_error("glu", "x must have at least one axis (a 0-d x has no halves)",
                              got=xv.shape)
        ax = normalize_axis(axis, xv.ndim, "glu")
        if xv.shape[ax] % 2:
            raise shape_error("glu", f"the length of axis {axis} must be even to halve it, "
                              f"got {xv.shape[ax]} (x has shape {xv.shape})", got=xv.shape)
        return self._apply1(_GLU, x, ax)
