"""CTC loss driver: scratch and output arrays around the forward-backward
kernels of `yscv.kernels.ctc` (compiled on first use)."""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from .arrays import readonly

__all__ = ["ctc_forward", "ctc_backward"]

K = lazy("ctc")


def ctc_forward(lp, targets, offsets, input_lengths, target_lengths, blank):
    """``(nll [N], log_alpha [N, T, 2 max(L) + 1])`` for ``lp [T, N, C]``:
    per-sample negative log-likelihoods (+inf when no alignment exists) and
    the forward variables the backward reuses."""
    t, n, _ = lp.shape
    s_max = 2 * (int(target_lengths.max()) if n else 0) + 1
    log_alpha = np.empty((n, t, s_max), dtype=lp.dtype)
    nll = np.empty(n, dtype=lp.dtype)
    K.ctc_alpha(readonly(lp), targets, offsets, input_lengths, target_lengths, blank,
                log_alpha, nll)
    return nll, log_alpha


def ctc_backward(lp, targets, offsets, input_lengths, target_lengths, blank, log_alpha, nll,
                 up, zero_infinity):
    """``d(sum_n up[n] nll[n]) / d lp`` as ``[T, N, C]``, 0 at ``t >=
    input_lengths[n]`` (and for infinite losses when ``zero_infinity``)."""
    t, _, c = lp.shape
    grad = np.zeros(lp.shape, dtype=lp.dtype)
    log_beta = np.empty((t, log_alpha.shape[2]), dtype=lp.dtype)
    lcab = np.empty(c, dtype=lp.dtype)
    K.ctc_grad(readonly(lp), targets, offsets, input_lengths, target_lengths, blank, log_alpha,
               nll, readonly(np.asarray(up, dtype=lp.dtype)), bool(zero_infinity), log_beta,
               lcab, grad)
    return grad
