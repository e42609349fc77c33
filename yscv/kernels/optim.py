"""Fused parameter-update kernels: one pass over (param, grad, state) per step.

Each kernel walks flat, contiguous arrays of one dtype and performs the whole
PyTorch update for one element before moving on, so every array is read and
written once per step (the NumPy composition makes ~8 passes with
temporaries). The arithmetic follows PyTorch's single-tensor (foreach=False)
order of operations in the array's dtype; every scalar is passed in already
converted to that dtype, so no float64 leaks into float32 arithmetic.

Imported lazily by :mod:`yscv.optim.optimizer` through :func:`yscv.kernels.lazy`
(``import yscv`` must not import numba).
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels._jit import jit


@jit
def sgd_update(p, g, buf, lr, wd, momentum, one_minus_dampening, nesterov, maximize, first):
    """p -= lr * d, d = grad (+ wd*p) through the momentum buffer.

    ``buf`` is ignored when ``momentum == 0``; ``first`` means the buffer is
    new and is set to d (PyTorch clones the first gradient).
    """
    use_m = momentum != 0
    for i in range(p.size):
        d = -g[i] if maximize else g[i]
        pi = p[i]
        if wd != 0:
            d = d + wd * pi
        if use_m:
            if first:
                b = d
            else:
                b = buf[i] * momentum + one_minus_dampening * d
            buf[i] = b
            if nesterov:
                d = d + momentum * b
            else:
                d = b
        p[i] = pi - lr * d


@jit(inline="always")
def _adam_moments(p, g, m, v, i, one_minus_beta1, beta2, one_minus_beta2, wd, decay, maximize):
    """Element i's shared Adam step: stores the new m[i], v[i]; returns
    (p[i] * decay, m[i], v[i])."""
    gi = -g[i] if maximize else g[i]
    pi = p[i] * decay
    if wd != 0:
        gi = gi + wd * pi
    mi = m[i]
    mi = mi + one_minus_beta1 * (gi - mi)
    vi = v[i] * beta2 + one_minus_beta2 * gi * gi
    m[i] = mi
    v[i] = vi
    return pi, mi, vi


@jit
def adam_update(p, g, m, v, one_minus_beta1, beta2, one_minus_beta2, step_size,
                bias_correction2_sqrt, eps, wd, decay, maximize):
    """Adam / AdamW for one parameter (without amsgrad).

    ``decay`` is AdamW's decoupled factor 1 - lr*wd (1 for Adam); ``wd`` is
    Adam's coupled L2 term (0 for AdamW). The amsgrad variant is
    :func:`adam_update_amsgrad`, a kernel of its own (the shared part is the
    inlined :func:`_adam_moments`): a loop-invariant branch on amsgrad inside
    one loop makes the plain loop markedly slower, and two loops in one
    kernel compiled both for every Adam user (~0.09 s of first-call compile
    time for the amsgrad loop nobody ran; docs/engine.md, "Cold start").
    """
    for i in range(p.size):
        pi, mi, vi = _adam_moments(p, g, m, v, i, one_minus_beta1, beta2, one_minus_beta2,
                                   wd, decay, maximize)
        p[i] = pi - step_size * mi / (math.sqrt(vi) / bias_correction2_sqrt + eps)


@jit
def adam_update_amsgrad(p, g, m, v, vmax, one_minus_beta1, beta2, one_minus_beta2, step_size,
                        bias_correction2_sqrt, eps, wd, decay, maximize):
    """:func:`adam_update` with amsgrad: the denominator uses the running
    maximum ``vmax`` of the second moment (updated here)."""
    for i in range(p.size):
        pi, mi, vi = _adam_moments(p, g, m, v, i, one_minus_beta1, beta2, one_minus_beta2,
                                   wd, decay, maximize)
        vm = vmax[i]
        vm = vm if vm >= vi else vi  # a NaN vi propagates, as torch.maximum
        vmax[i] = vm
        p[i] = pi - step_size * mi / (math.sqrt(vm) / bias_correction2_sqrt + eps)


@jit(inline="always")
def _fma(a, b, c, f32):
    """a*b + c rounded once, as a fused multiply-add, returned as a float64
    the caller rounds to its array's dtype by storing it.

    PyTorch's vectorised CPU kernels (AVX2/AVX512 builds) compute
    ``x.add(y, alpha=)``, ``addcmul`` and ``lerp`` with fmadd, and Numba
    without fastmath never contracts. For float32 operands (``f32``) the
    product is exact in float64 and the float64 sum is rounded to odd (the
    neighbour with an odd last bit when the sum is inexact), which rounds to
    float32 exactly as a float32 fma would (Boldo & Melquiond, 2008). Float64
    operands get a*b + c (two roundings).
    """
    pd = np.float64(a) * np.float64(b)
    cd = np.float64(c)
    s = pd + cd
    if not f32:
        return s
    bb = s - pd
    err = (pd - (s - bb)) + (cd - bb)  # the exact sum is s + err (TwoSum)
    if err != 0.0:
        m, e = math.frexp(s)
        if (np.int64(math.ldexp(m, 53)) & 1) == 0:
            s = np.nextafter(s, math.inf if err > 0.0 else -math.inf)
    return s


@jit
def rmsprop_update(p, g, square_avg, grad_avg, buf, lr, alpha, one_minus_alpha, eps, wd,
                   momentum, centered, maximize, f32):
    """RMSprop with PyTorch's roundings: eps added outside the square root;
    the weight decay ``grad.add(param, alpha=wd)``, ``addcmul`` into the
    square average, the centered ``lerp`` and ``addcmul(value=-1)``, and the
    momentum step ``param.add_(buf, alpha=-lr)`` each rounded once (fused
    multiply-adds, :func:`_fma`); ``f32`` says the arrays are float32."""
    use_m = momentum > 0
    tmp = np.empty(1, p.dtype)  # rounds a float64 intermediate to the dtype
    w_small = abs(one_minus_alpha) < 0.5  # torch's lerp: start + w*(end - start)
    w_big = one_minus_alpha - 1.0         # ... or end + (w - 1)*(end - start) (exact)
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if wd != 0:
            tmp[0] = _fma(wd, pi, gi, f32)
            gi = tmp[0]
        square_avg[i] = _fma(one_minus_alpha * gi, gi, square_avg[i] * alpha, f32)
        sq = square_avg[i]
        if centered:
            ga = grad_avg[i]
            if w_small:
                grad_avg[i] = _fma(one_minus_alpha, gi - ga, ga, f32)
            else:
                grad_avg[i] = _fma(w_big, gi - ga, gi, f32)
            ga = grad_avg[i]
            tmp[0] = _fma(-ga, ga, sq, f32)
            avg = math.sqrt(tmp[0]) + eps
        else:
            avg = math.sqrt(sq) + eps
        if use_m:
            b = buf[i] * momentum + gi / avg
            buf[i] = b
            p[i] = _fma(b, -lr, pi, f32)
        else:
            p[i] = pi - lr * gi / avg


@jit
def adagrad_update(p, g, state_sum, clr, eps, wd, maximize):
    """Adagrad with the decayed rate clr = lr / (1 + (step-1)*lr_decay)."""
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if wd != 0:
            gi = gi + wd * pi
        s = state_sum[i] + gi * gi
        state_sum[i] = s
        p[i] = pi - clr * gi / (math.sqrt(s) + eps)
