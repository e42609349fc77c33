"""Fused elementwise activation kernels (forward and backward), one pass each.

Two kernels serve every activation that NumPy cannot do in one ufunc: the
activation is chosen by an int ``kind`` (the constants below), and each kind
has its own loop, so the branch is taken once per call, not per element.
Arrays are flat (1-D, C-contiguous); inputs arrive read-only (the op module
passes read-only views so that Numba compiles one specialisation per dtype,
not one per writeable-flag combination) and outputs are allocated here with
the input's dtype. Every constant is cast to that dtype first, so float32
stays float32 (no float64 literal widens the arithmetic).

Every loop is branch-free (both sides computed, then selected) and built on
ONE ``exp(-|.|)`` per element, using the vectorisable float32 math of
yscv/kernels/fastmath.py (float64 keeps libm; see that module for the
accuracy and NaN/overflow contract):

* sigmoid(v) = 1/(1+e) for v >= 0, e/(1+e) otherwise, with e = exp(-|v|)
  (`fast_sigmoid`), and s(1-s) = e/(1+e)^2 (`sigmoid_parts`);
* tanh-GELU uses 0.5(1 + tanh(u)) = sigmoid(2u);
* mish's tanh(softplus(v)) is the rational function (w^2+2w)/(w^2+2w+2) of
  w = exp(v), rewritten in e = exp(-|v|) for each sign;
* log1p(e) for e = exp(-|z|) in [0, 1]: `fast_log1p_unit`;
* erf-GELU: float32 uses `fast_erf` (absolute error <= 4.4e-7, like
  PyTorch's vectorised float32 erf, so the far negative tail has absolute,
  not relative, accuracy); float64 calls libm's erfc (relative accuracy in
  the tail too). Its backward from the forward's output
  (``GELU_ERF_FROM_OUTPUT``) reads ``Phi(x) = y / x`` instead of a second
  erf (``y = x Phi(x)``, so the quotient is the forward's own ``Phi``
  within an ulp; ``|x| < 1e-30`` takes ``Phi = 1/2``): one ``exp`` per
  element, no erf.

The ``kind`` codes are defined in yscv/kernels/activation_kinds.py.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .sync import region_chunks
from .activation_kinds import (GELU_ERF, GELU_ERF_FROM_OUTPUT, GELU_SIGMOID, GELU_TANH, MISH,
                               SIGMOID, SILU, SOFTPLUS, TANH)
from .fastmath import fast_erf, fast_exp, fast_log1p_unit, fast_sigmoid, fast_tanh, sigmoid_parts

_SQRT_2_OVER_PI = 0.7978845608028654   # sqrt(2 / pi)
_INV_SQRT_2 = 0.7071067811865476       # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327     # 1 / sqrt(2 pi)
_GELU_KAPPA = 0.044715
_GELU_SIGMOID_K = 1.702


@jit(inline="always")
def _constants(a):
    """0, 1, 1/2 and 2 in ``a``'s dtype."""
    dt = a.dtype.type
    return dt(0.0), dt(1.0), dt(0.5), dt(2.0)


@jit
def unary_forward(x, kind, p0, p1, y):
    """y = act(x) for ``kind`` in SIGMOID, TANH, ``GELU_*``, SILU, MISH, SOFTPLUS.

    Args:
        x: 1-D contiguous float32/float64 (read-only).
        kind: one of the module constants.
        p0, p1: softplus beta and threshold (ignored by the other kinds).
        y: the output, 1-D contiguous, x's dtype and length (written here;
            the caller allocates it so a call can be split over threads).
    """
    dt = x.dtype.type
    zero, one, half, two = _constants(x)
    n = x.shape[0]
    if kind == SIGMOID:
        for i in range(n):
            y[i] = fast_sigmoid(x[i])
    elif kind == SILU:
        for i in range(n):
            v = x[i]
            y[i] = v * fast_sigmoid(v)
    elif kind == TANH:
        for i in range(n):
            y[i] = fast_tanh(x[i])
    elif kind == GELU_ERF:
        c = dt(_INV_SQRT_2)
        if x.itemsize == 4:
            for i in range(n):
                v = x[i]
                y[i] = (half * v) * (one + fast_erf(v * c))
        else:
            for i in range(n):
                v = x[i]
                y[i] = v * (half * math.erfc(-v * c))
    elif kind == GELU_TANH:
        b2 = dt(2.0 * _SQRT_2_OVER_PI)
        k = dt(_GELU_KAPPA)
        for i in range(n):
            v = x[i]
            y[i] = v * fast_sigmoid(b2 * (v + k * v * v * v))
    elif kind == GELU_SIGMOID:
        k = dt(_GELU_SIGMOID_K)
        for i in range(n):
            v = x[i]
            y[i] = v * fast_sigmoid(k * v)
    elif kind == MISH:
        for i in range(n):
            v = x[i]
            e = fast_exp(-abs(v))
            num_p = one + two * e
            num_n = e * (e + two)
            t_p = num_p / (num_p + two * e * e)
            t_n = num_n / (num_n + two)
            y[i] = v * (t_p if v >= zero else t_n)
    elif kind == SOFTPLUS:
        beta = dt(p0)
        threshold = dt(p1)
        for i in range(n):
            v = x[i]
            z = beta * v
            pos = zero if zero > z else z   # max(z, 0), without the builtin's helper
            sp = (pos + fast_log1p_unit(fast_exp(-abs(z)))) / beta
            y[i] = v if z > threshold else sp


@jit
def unary_backward(g, x, y, kind, p0, p1, out):
    """dL/dx = g * act'(x) for ``kind`` in SIGMOID, TANH, ``GELU_*``, SILU, MISH, SOFTPLUS.

    SIGMOID and TANH read the output ``y`` (x is not touched);
    GELU_ERF_FROM_OUTPUT reads both (``y`` the erf-GELU forward's output);
    the others read ``x`` (y is not touched; pass any array of the same
    dtype, e.g. x).

    Args:
        g: upstream gradient, 1-D contiguous, same length as x.
        x: the input values, y: the output values.
        kind, p0, p1: as `unary_forward`.
        out: the input gradient (written here), 1-D contiguous, g's dtype.
    """
    dt = g.dtype.type
    zero, one, half, two = _constants(g)
    n = g.shape[0]
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
        if x.itemsize == 4:
            for i in range(n):
                v = x[i]
                cdf = half * (one + fast_erf(v * c))
                out[i] = g[i] * (cdf + v * (pdf_scale * fast_exp(-half * v * v)))
        else:
            for i in range(n):
                v = x[i]
                cdf = half * math.erfc(-v * c)
                out[i] = g[i] * (cdf + v * (pdf_scale * fast_exp(-half * v * v)))
    elif kind == GELU_ERF_FROM_OUTPUT:
        pdf_scale = dt(_INV_SQRT_2PI)
        tiny = dt(1e-30)
        for i in range(n):
            v = x[i]
            q = y[i] / v
            cdf = q if abs(v) >= tiny else half   # a select: 0/0 and NaN never kept
            out[i] = g[i] * (cdf + v * (pdf_scale * fast_exp(-half * v * v)))
    elif kind == GELU_TANH:
        b = dt(_SQRT_2_OVER_PI)
        b2 = dt(2.0 * _SQRT_2_OVER_PI)
        k = dt(_GELU_KAPPA)
        k3 = dt(3.0 * _GELU_KAPPA)
        for i in range(n):
            v = x[i]
            v2 = v * v
            s, ds = sigmoid_parts(b2 * (v + k * v2 * v))
            # d/dv [v sigmoid(2u)] = s + v * 2 s(1-s) * u'/2; where the slope
            # is 0 the term is 0 (v2 may have overflowed to inf there)
            tail = two * ds * v * (b * (one + k3 * v2))
            out[i] = g[i] * (s + (tail if ds != zero else zero))
    elif kind == GELU_SIGMOID:
        k = dt(_GELU_SIGMOID_K)
        for i in range(n):
            v = x[i]
            u = k * v
            s, ds = sigmoid_parts(u)
            out[i] = g[i] * (s + u * ds)
    elif kind == SILU:
        for i in range(n):
            v = x[i]
            s, ds = sigmoid_parts(v)
            out[i] = g[i] * (s + v * ds)
    elif kind == MISH:
        for i in range(n):
            v = x[i]
            e = fast_exp(-abs(v))
            r = one / (one + e)
            pos = v >= zero
            s = r if pos else e * r
            e2 = e * e
            num = one + two * e if pos else e * (e + two)
            gap = two * e2 if pos else two          # den - num
            den = num + gap
            t = num / den
            sech2 = gap * (den + num) / (den * den)  # 1 - t^2 without cancellation
            out[i] = g[i] * (t + v * s * sech2)
    elif kind == SOFTPLUS:
        beta = dt(p0)
        threshold = dt(p1)
        for i in range(n):
            z = beta * x[i]
            out[i] = g[i] if z > threshold else g[i] * fast_sigmoid(z)


@jit
def piecewise_linear(g, x, alpha):
    """``g`` where x > 0, else ``g * alpha[c]``, for g, x [R, C] and alpha [C]
    or [1] (one slope shared by every column). With g = x it is the PReLU /
    leaky-ReLU forward; with the upstream gradient it is their input
    gradient. NaN in x takes the alpha side (x > 0 is False), as PyTorch."""
    r_, c_ = g.shape
    out = np.empty((r_, c_), dtype=g.dtype)
    zero = g.dtype.type(0.0)
    shared = alpha.shape[0] == 1
    a0 = alpha[0]
    for r in range(r_):
        for c in range(c_):
            a = a0 if shared else alpha[c]
            v = g[r, c]
            out[r, c] = v if x[r, c] > zero else v * a
    return out


@jit
def prelu_backward(g, x, alpha, need_x):
    """PReLU gradients in one pass over g, x [R, C].

    Returns:
        (gx [R, C] (or [0, 0] when ``need_x`` is False), per-column sums
        [C] of ``g * x`` where x <= 0). The column sums accumulate in blocks
        of 256 rows (error ~ (256 + R/256) ulp instead of R ulp).
    """
    r_, c_ = g.shape
    gx = np.empty((r_, c_) if need_x else (0, 0), dtype=g.dtype)
    zero = g.dtype.type(0.0)
    total = np.zeros(c_, dtype=g.dtype)
    part = np.zeros(c_, dtype=g.dtype)
    shared = alpha.shape[0] == 1
    a0 = alpha[0]
    for r in range(r_):
        for c in range(c_):
            v = x[r, c]
            gv = g[r, c]
            pos = v > zero
            if need_x:
                gx[r, c] = gv if pos else gv * (a0 if shared else alpha[c])
            part[c] += zero if pos else gv * v
        if (r & 255) == 255:
            for c in range(c_):
                total[c] += part[c]
                part[c] = zero
    for c in range(c_):
        total[c] += part[c]
    return gx, total


@jit
def relu_select(g, x, out, bounds, st):
    """``out = g where not (x <= 0), else 0`` over flat arrays: the ReLU
    input gradient (NaN in x passes g on, as PyTorch's threshold_backward)
    and, with ``g = x``, the ReLU forward (NaN stays NaN, -0.0 becomes 0).
    A region kernel (yscv/compute/regions.py): chunk ``k`` is the elements
    ``[bounds[k], bounds[k + 1])``."""
    zero = out.dtype.type(0.0)
    for k in region_chunks(st, bounds.shape[0] - 1):
        # unsigned indices: no wrap-around test per load (it blocks the
        # vectorisation; yscv/kernels/conv.py)
        for i in range(np.uint64(bounds[k]), np.uint64(bounds[k + 1])):
            v = x[i]
            w = g[i]
            out[i] = zero if v <= zero else w


@jit
def hard_forward(x, y, swish, bounds, st):
    """``y = x * relu6(x + 3) / 6`` (``swish``) or ``relu6(x + 3) / 6`` over
    flat arrays, in NumPy's order of operations (the bits of the ufunc
    forwards of yscv/ops/activation.py); NaN stays NaN, ``-inf * 0`` is NaN
    as in PyTorch. A region kernel (yscv/compute/regions.py): chunk ``k`` is
    the elements ``[bounds[k], bounds[k + 1])``."""
    dt = y.dtype.type
    zero, three, six = dt(0.0), dt(3.0), dt(6.0)
    for k in region_chunks(st, bounds.shape[0] - 1):
        lo, hi = np.uint64(bounds[k]), np.uint64(bounds[k + 1])
        if swish:
            for i in range(lo, hi):
                v = x[i]
                t = v + three
                t = zero if t < zero else t     # NaN fails both tests and stays
                t = six if t > six else t
                y[i] = v * t / six
        else:
            for i in range(lo, hi):
                t = x[i] + three
                t = zero if t < zero else t
                t = six if t > six else t
                y[i] = t / six


@jit
def hard_backward(g, x, out, swish, bounds, st):
    """The input gradient of `hard_forward` over flat arrays, with the bits
    of the rules of yscv/backward/activation.py: hardswish ``0`` where
    x <= -3, ``g`` from 3, else ``g * (x / 3 + 1/2)`` (NaN in x: the middle
    piece); hardsigmoid ``g / 6`` on (-3, 3), else 0 (NaN: 0). A region
    kernel, chunks as `hard_forward`'s."""
    dt = out.dtype.type
    zero, half, three, six = dt(0.0), dt(0.5), dt(3.0), dt(6.0)
    for k in region_chunks(st, bounds.shape[0] - 1):
        lo, hi = np.uint64(bounds[k]), np.uint64(bounds[k + 1])
        if swish:
            for i in range(lo, hi):
                v = x[i]
                w = g[i]
                r = w * (v / three + half)
                r = w if v >= three else r
                out[i] = zero if v <= -three else r
        else:
            for i in range(lo, hi):
                v = x[i]
                out[i] = g[i] / six if (v > -three and v < three) else zero
