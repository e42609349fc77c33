"""Fused elementwise activation kernels (forward and backward), one pass each.

Two kernels serve every activation that NumPy cannot do in one ufunc: the
activation is chosen by an int ``kind`` (the constants below), and each kind
has its own loop, so the branch is taken once per call, not per element.
Arrays are flat (1-D, C-contiguous); inputs arrive read-only (the op module
passes read-only views so that Numba compiles one specialisation per dtype,
not one per writeable-flag combination) and outputs are allocated here with
the input's dtype. Every constant is cast to that dtype first, so float32
stays float32 (no float64 literal widens the arithmetic).

Numerical stability: sigmoid never exponentiates a positive number;
softplus uses ``max(z, 0) + log1p(exp(-|z|))``; the erf GELU uses
``erfc(-x/sqrt 2)``, which keeps relative accuracy in the negative tail where
``1 + erf`` cancels.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit

SIGMOID = 0
TANH = 1
GELU_ERF = 2
GELU_TANH = 3
GELU_SIGMOID = 4
SILU = 5
MISH = 6
SOFTPLUS = 7

_SQRT_2_OVER_PI = 0.7978845608028654   # sqrt(2 / pi)
_INV_SQRT_2 = 0.7071067811865476       # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327     # 1 / sqrt(2 pi)
_GELU_KAPPA = 0.044715
_GELU_SIGMOID_K = 1.702


@jit
def _sigmoid(v, one):
    """Stable logistic function (never exp of a positive argument)."""
    if v >= 0:
        return one / (one + math.exp(-v))
    e = math.exp(v)
    return e / (one + e)


@jit
def _softplus(v, zero, one):
    """Stable log(1 + exp(v))."""
    return max(v, zero) + math.log1p(math.exp(-abs(v)))


@jit
def unary_forward(x, kind, p0, p1):
    """y = act(x) for ``kind`` in SIGMOID, GELU_*, SILU, MISH, SOFTPLUS.

    Args:
        x: 1-D contiguous float32/float64 (read-only).
        kind: one of the module constants.
        p0, p1: softplus beta and threshold (ignored by the other kinds).

    Returns:
        y, a new array of x's dtype and shape.
    """
    dt = x.dtype.type
    zero = dt(0.0)
    one = dt(1.0)
    half = dt(0.5)
    n = x.shape[0]
    y = np.empty(n, dtype=x.dtype)
    if kind == SIGMOID:
        for i in range(n):
            y[i] = _sigmoid(x[i], one)
    elif kind == GELU_ERF:
        c = dt(_INV_SQRT_2)
        for i in range(n):
            v = x[i]
            y[i] = half * v * math.erfc(-v * c)
    elif kind == GELU_TANH:
        b = dt(_SQRT_2_OVER_PI)
        k = dt(_GELU_KAPPA)
        for i in range(n):
            v = x[i]
            y[i] = half * v * (one + math.tanh(b * (v + k * v * v * v)))
    elif kind == GELU_SIGMOID:
        k = dt(_GELU_SIGMOID_K)
        for i in range(n):
            v = x[i]
            y[i] = v * _sigmoid(k * v, one)
    elif kind == SILU:
        for i in range(n):
            v = x[i]
            y[i] = v * _sigmoid(v, one)
    elif kind == MISH:
        for i in range(n):
            v = x[i]
            y[i] = v * math.tanh(_softplus(v, zero, one))
    elif kind == SOFTPLUS:
        beta = dt(p0)
        threshold = dt(p1)
        for i in range(n):
            v = x[i]
            z = beta * v
            y[i] = v if z > threshold else _softplus(z, zero, one) / beta
    return y


@jit
def unary_backward(g, x, y, kind, p0, p1):
    """dL/dx = g * act'(x) for ``kind`` in SIGMOID, TANH, GELU_*, SILU, MISH, SOFTPLUS.

    SIGMOID and TANH read the output ``y`` (x is not touched); the others read
    ``x`` (y is not touched; pass any array of the same dtype, e.g. x).

    Args:
        g: upstream gradient, 1-D contiguous, same length as x.
        x: the input values, y: the output values.
        kind, p0, p1: as :func:`unary_forward`.

    Returns:
        the input gradient, a new array of g's dtype.
    """
    dt = g.dtype.type
    zero = dt(0.0)
    one = dt(1.0)
    half = dt(0.5)
    n = g.shape[0]
    out = np.empty(n, dtype=g.dtype)
    if kind == SIGMOID:
        for i in range(n):
            s = y[i]
            out[i] = g[i] * s * (one - s)
    elif kind == TANH:
        for i in range(n):
            t = y[i]
            out[i] = g[i] * (one - t * t)
    elif kind == GELU_ERF:
        c = dt(_INV_SQRT_2)
        pdf_scale = dt(_INV_SQRT_2PI)
        for i in range(n):
            v = x[i]
            cdf = half * math.erfc(-v * c)
            pdf = pdf_scale * math.exp(-half * v * v)
            out[i] = g[i] * (cdf + v * pdf)
    elif kind == GELU_TANH:
        b = dt(_SQRT_2_OVER_PI)
        k = dt(_GELU_KAPPA)
        k3 = dt(3.0 * _GELU_KAPPA)
        for i in range(n):
            v = x[i]
            v2 = v * v
            t = math.tanh(b * (v + k * v2 * v))
            sech2 = one - t * t
            d = half * (one + t)
            if sech2 != zero:  # else the tail: 0 * inf (v2 overflowed) must stay 0
                d += half * v * sech2 * b * (one + k3 * v2)
            out[i] = g[i] * d
    elif kind == GELU_SIGMOID:
        k = dt(_GELU_SIGMOID_K)
        for i in range(n):
            v = x[i]
            s = _sigmoid(k * v, one)
            out[i] = g[i] * (s + k * v * s * (one - s))
    elif kind == SILU:
        for i in range(n):
            v = x[i]
            s = _sigmoid(v, one)
            out[i] = g[i] * (s * (one + v * (one - s)))
    elif kind == MISH:
        for i in range(n):
            v = x[i]
            t = math.tanh(_softplus(v, zero, one))
            s = _sigmoid(v, one)
            out[i] = g[i] * (t + v * s * (one - t * t))
    elif kind == SOFTPLUS:
        beta = dt(p0)
        threshold = dt(p1)
        for i in range(n):
            z = beta * x[i]
            out[i] = g[i] if z > threshold else g[i] * _sigmoid(z, one)
    return out
