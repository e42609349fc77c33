"""Fused parameter-update kernels: one pass over (param, grad, state) per step.

Each kernel walks flat, contiguous arrays of one dtype and performs the whole
PyTorch update for one element before moving on, so every array is read and
written once per step (the NumPy composition makes ~8 passes with
temporaries). The arithmetic follows PyTorch's single-tensor (foreach=False)
order of operations in the array's dtype; every scalar is passed in already
converted to that dtype, so no float64 leaks into float32 arithmetic.

Imported lazily by `yscv.optim.optimizer` through `yscv.kernels.lazy`
(``import yscv`` must not import numba).
"""
from __future__ import annotations

import math

from ..kernels._jit import jit
from .simd import fma
from .sync import region_chunks


@jit(inline="always")
def _sgd_loop(p, g, buf, lr, wd, momentum, one_minus_dampening, nesterov, maximize, first):
    """`sgd_update`'s loop, from index 0 (a loop from an unknown start keeps
    NumPy's negative-index test on every access and does not vectorise:
    the region kernel passes slices)."""
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


@jit
def sgd_update(p, g, buf, lr, wd, momentum, one_minus_dampening, nesterov, maximize, first):
    """p -= lr * d, d = grad (+ ``wd*p``) through the momentum buffer.

    ``buf`` is ignored when ``momentum == 0``; ``first`` means the buffer is
    new and is set to d (PyTorch clones the first gradient).
    """
    _sgd_loop(p, g, buf, lr, wd, momentum, one_minus_dampening, nesterov, maximize, first)


@jit
def sgd_update_region(p, g, buf, lr, wd, momentum, one_minus_dampening, nesterov, maximize,
                      first, bounds, st):
    """`sgd_update` on the chunks ``[bounds[k], bounds[k + 1])`` it claims
    from ``st`` (yscv/compute/regions.py): element by element, so the same
    bits on any number of threads."""
    use_m = momentum != 0
    for k in region_chunks(st, bounds.shape[0] - 1):
        lo, hi = bounds[k], bounds[k + 1]
        _sgd_loop(p[lo:hi], g[lo:hi], buf[lo:hi] if use_m else buf, lr, wd, momentum,
                  one_minus_dampening, nesterov, maximize, first)


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


@jit(inline="always")
def _adam_loop(p, g, m, v, one_minus_beta1, beta2, one_minus_beta2, step_size,
               bias_correction2_sqrt, eps, wd, decay, maximize):
    """`adam_update`'s loop (from index 0, as `_sgd_loop`)."""
    for i in range(p.size):
        pi, mi, vi = _adam_moments(p, g, m, v, i, one_minus_beta1, beta2, one_minus_beta2,
                                   wd, decay, maximize)
        p[i] = pi - step_size * mi / (math.sqrt(vi) / bias_correction2_sqrt + eps)


@jit
def adam_update(p, g, m, v, one_minus_beta1, beta2, one_minus_beta2, step_size,
                bias_correction2_sqrt, eps, wd, decay, maximize):
    """Adam / AdamW for one parameter (without amsgrad).

    ``decay`` is AdamW's decoupled factor 1 - ``lr*wd`` (1 for Adam); ``wd`` is
    Adam's coupled L2 term (0 for AdamW). The amsgrad variant is
    `adam_update_amsgrad`, a kernel of its own (the shared part is the
    inlined `_adam_moments`): a loop-invariant branch on amsgrad inside
    one loop makes the plain loop markedly slower, and two loops in one
    kernel compiled both for every Adam user (~0.09 s of first-call compile
    time for the amsgrad loop nobody ran; docs/engine.md, "Cold start").
    """
    _adam_loop(p, g, m, v, one_minus_beta1, beta2, one_minus_beta2, step_size,
               bias_correction2_sqrt, eps, wd, decay, maximize)


@jit
def adam_update_region(p, g, m, v, one_minus_beta1, beta2, one_minus_beta2, step_size,
                       bias_correction2_sqrt, eps, wd, decay, maximize, bounds, st):
    """`adam_update` on the chunks of ``bounds`` it claims from ``st``."""
    for k in region_chunks(st, bounds.shape[0] - 1):
        lo, hi = bounds[k], bounds[k + 1]
        _adam_loop(p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], one_minus_beta1, beta2,
                   one_minus_beta2, step_size, bias_correction2_sqrt, eps, wd, decay, maximize)


@jit
def adam_update_amsgrad(p, g, m, v, vmax, one_minus_beta1, beta2, one_minus_beta2, step_size,
                        bias_correction2_sqrt, eps, wd, decay, maximize):
    """`adam_update` with amsgrad: the denominator uses the running
    maximum ``vmax`` of the second moment (updated here)."""
    for i in range(p.size):
        pi, mi, vi = _adam_moments(p, g, m, v, i, one_minus_beta1, beta2, one_minus_beta2,
                                   wd, decay, maximize)
        vm = vmax[i]
        vm = vm if vm >= vi else vi  # a NaN vi propagates, as torch.maximum
        vmax[i] = vm
        p[i] = pi - step_size * mi / (math.sqrt(vm) / bias_correction2_sqrt + eps)


@jit(inline="always")
def _rms_grad(g, i, pi, wd, maximize):
    """RMSprop's gradient of element i (``pi`` = p[i]): negated (maximize),
    plus the weight decay ``grad.add(param, alpha=wd)`` rounded once."""
    gi = -g[i] if maximize else g[i]
    decayed = fma(wd, pi, gi)
    return decayed if wd != 0 else gi  # a select: a branch here stops vectorisation


@jit(inline="always")
def _rms_square(square_avg, i, gi, alpha, one_minus_alpha):
    """``square_avg.mul_(alpha).addcmul_(grad, grad, value=1-alpha)``, the
    addcmul rounded once; stores and returns the new average."""
    sq = fma(one_minus_alpha * gi, gi, square_avg[i] * alpha)
    square_avg[i] = sq
    return sq


@jit(inline="always")
def _rms_centered_avg(grad_avg, i, gi, sq, w, w_small, eps):
    """Centered: ``grad_avg.lerp_(grad, 1-alpha)``, PyTorch's lerp: start +
    ``w*(end`` - start) when ``w_small`` (|1-alpha| < 0.5; ``w`` = 1-alpha), else
    end + ``w*(end`` - start) with ``w`` = (1-alpha) - 1, then
    ``sqrt(square_avg.addcmul(grad_avg, grad_avg, value=-1)) + eps``, each
    multiply-add rounded once."""
    ga = grad_avg[i]
    ga = fma(w, gi - ga, ga if w_small else gi)
    grad_avg[i] = ga
    return math.sqrt(fma(-ga, ga, sq)) + eps


# RMSprop: one kernel per (centered, momentum) case, picked by
# yscv.optim.RMSprop. The eps is added outside the square root; the weight
# decay, the addcmul into the square average, the centered lerp and
# addcmul(value=-1) and the momentum step param.add_(buf, alpha=-lr) are
# fused multiply-adds (simd.fma), as in PyTorch's vectorised CPU kernels. A
# loop that stores under a branch does not vectorise, and one kernel with
# the four loops took ~1.7 s more to compile on the first step than one loop.
@jit
def rmsprop_update(p, g, square_avg, lr, alpha, one_minus_alpha, eps, wd, maximize):
    """RMSprop, neither centered nor with momentum."""
    for i in range(p.size):
        pi = p[i]
        gi = _rms_grad(g, i, pi, wd, maximize)
        sq = _rms_square(square_avg, i, gi, alpha, one_minus_alpha)
        p[i] = pi - lr * gi / (math.sqrt(sq) + eps)


@jit
def rmsprop_update_momentum(p, g, square_avg, buf, lr, alpha, one_minus_alpha, eps, wd,
                            momentum, maximize):
    """RMSprop with momentum > 0, not centered."""
    for i in range(p.size):
        pi = p[i]
        gi = _rms_grad(g, i, pi, wd, maximize)
        sq = _rms_square(square_avg, i, gi, alpha, one_minus_alpha)
        b = buf[i] * momentum + gi / (math.sqrt(sq) + eps)
        buf[i] = b
        p[i] = fma(b, -lr, pi)


@jit
def rmsprop_update_centered(p, g, square_avg, grad_avg, lr, alpha, one_minus_alpha, eps, wd,
                            maximize, w, w_small):
    """Centered RMSprop without momentum; ``w``, ``w_small`` as
    `_rms_centered_avg` takes them."""
    for i in range(p.size):
        pi = p[i]
        gi = _rms_grad(g, i, pi, wd, maximize)
        sq = _rms_square(square_avg, i, gi, alpha, one_minus_alpha)
        avg = _rms_centered_avg(grad_avg, i, gi, sq, w, w_small, eps)
        p[i] = pi - lr * gi / avg


@jit
def rmsprop_update_centered_momentum(p, g, square_avg, grad_avg, buf, lr, alpha,
                                     one_minus_alpha, eps, wd, momentum, maximize, w, w_small):
    """Centered RMSprop with momentum > 0."""
    for i in range(p.size):
        pi = p[i]
        gi = _rms_grad(g, i, pi, wd, maximize)
        sq = _rms_square(square_avg, i, gi, alpha, one_minus_alpha)
        avg = _rms_centered_avg(grad_avg, i, gi, sq, w, w_small, eps)
        b = buf[i] * momentum + gi / avg
        buf[i] = b
        p[i] = fma(b, -lr, pi)


@jit
def adagrad_update(p, g, state_sum, clr, eps, wd, maximize):
    """Adagrad with the decayed rate clr = lr / (1 + ``(step-1)*lr_decay``)."""
    for i in range(p.size):
        gi = -g[i] if maximize else g[i]
        pi = p[i]
        if wd != 0:
            gi = gi + wd * pi
        s = state_sum[i] + gi * gi
        state_sum[i] = s
        p[i] = pi - clr * gi / (math.sqrt(s) + eps)
