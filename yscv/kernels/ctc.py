"""CTC loss: the forward-backward recursions in log space, as PyTorch's CPU
``ctc_loss`` (Graves et al., 2006).

For sample ``n`` with target ``l`` of length ``L``, the extended sequence
``l'`` of length ``S = 2L + 1`` has a blank at every even position and
``l[(s - 1) / 2]`` at odd ``s``. With ``y = log_probs[:, n, :]`` and ``T_n``
the input length:

    alpha_0(0) = y_0(blank),  alpha_0(1) = y_0(l'_1)
    alpha_t(s) = lse(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)) + y_t(l'_s)
    nll = -lse(alpha_{T_n-1}(S-1), alpha_{T_n-1}(S-2))

where the ``s - 2`` term is taken only when ``l'_s`` is a label different
from ``l'_{s-2}`` (``lse`` is log-sum-exp, -inf when every term is). beta
runs the same recursion from the end (its value at ``t`` includes
``y_t(l'_s)``), and the gradient of ``nll`` is

    d nll / d y_t(c) = -exp(lse_{s: l'_s = c}(alpha_t(s) + beta_t(s)) + nll - y_t(c))

for ``t < T_n`` and 0 beyond. (PyTorch's kernel adds ``exp(y_t(c))`` to
this, the term that vanishes when ``log_probs`` is a log-softmax: see
docs/ops/loss.md.) Targets are one flat int64 array, sample ``n``'s labels
starting at ``offsets[n]``; the op validated every length and label.
"""
from __future__ import annotations

import math

from ._jit import jit


@jit
def _lse3(a, b, c, ninf):
    m = a if a > b else b
    m = c if c > m else m
    if m == ninf:
        return ninf
    return m + math.log(math.exp(a - m) + math.exp(b - m) + math.exp(c - m))


@jit
def _label(targets, off, s, blank):
    if s % 2 == 0:
        return blank
    return targets[off + (s - 1) // 2]


@jit
def _window(t, tn, sn):
    """The states ``[lo, hi)`` an alignment can occupy at time ``t``: reached
    from the start (``s <= 2t + 1``) and still able to finish by ``tn - 1``
    (``s >= sn - 2 (tn - t)``). Outside it alpha or beta is -inf, so the
    loops skip it (the scratch keeps its -inf fill there)."""
    lo = sn - 2 * (tn - t)
    hi = 2 * t + 2
    return (lo if lo > 0 else 0), (hi if hi < sn else sn)


@jit
def ctc_alpha(lp, targets, offsets, input_lengths, target_lengths, blank, log_alpha, nll):
    """Fill ``log_alpha [N, T, S_max]`` (-inf outside the states an alignment can occupy)
    and ``nll [N]`` (+inf for an impossible alignment) from ``lp [T, N, C]``."""
    t_max, n_, c_ = lp.shape
    s_max = log_alpha.shape[2]
    dt = lp.dtype.type
    ninf = dt(-math.inf)
    for n in range(n_):
        tn = input_lengths[n]
        ln = target_lengths[n]
        sn = 2 * ln + 1
        off = offsets[n]
        for t in range(t_max):
            for s in range(s_max):
                log_alpha[n, t, s] = ninf
        if tn == 0:
            nll[n] = dt(0.0) if ln == 0 else -ninf
            continue
        log_alpha[n, 0, 0] = lp[0, n, blank]
        if ln > 0:
            log_alpha[n, 0, 1] = lp[0, n, targets[off]]
        for t in range(1, tn):
            lo, hi = _window(t, tn, sn)
            for s in range(lo, hi):
                lab = _label(targets, off, s, blank)
                a = log_alpha[n, t - 1, s]
                b = log_alpha[n, t - 1, s - 1] if s > 0 else ninf
                c = ninf
                if s > 1 and lab != blank and lab != targets[off + (s - 3) // 2]:
                    c = log_alpha[n, t - 1, s - 2]
                v = _lse3(a, b, c, ninf)
                log_alpha[n, t, s] = v + lp[t, n, lab] if v != ninf else ninf
        last = log_alpha[n, tn - 1, sn - 1]
        prev = log_alpha[n, tn - 1, sn - 2] if ln > 0 else ninf
        nll[n] = -_lse3(last, prev, ninf, ninf)


@jit
def ctc_grad(lp, targets, offsets, input_lengths, target_lengths, blank, log_alpha, nll,
             up, zero_infinity, log_beta, lcab, grad):
    """The gradient of ``sum_n up[n] * nll[n]`` with respect to ``lp`` into
    ``grad [T, N, C]`` (zeroed by the caller). ``up`` is [N];
    ``log_beta [T, S_max]`` and ``lcab [C]`` are scratch. A sample with
    infinite nll gets gradient 0 when ``zero_infinity``."""
    t_max, n_, c_ = lp.shape
    dt = lp.dtype.type
    ninf = dt(-math.inf)
    for n in range(n_):
        tn = input_lengths[n]
        ln = target_lengths[n]
        sn = 2 * ln + 1
        off = offsets[n]
        loss = nll[n]
        if tn == 0 or (zero_infinity and loss == -ninf):
            continue
        g = up[n]
        for t in range(tn):
            for s in range(sn):
                log_beta[t, s] = ninf
        log_beta[tn - 1, sn - 1] = lp[tn - 1, n, blank]
        if ln > 0:
            log_beta[tn - 1, sn - 2] = lp[tn - 1, n, targets[off + ln - 1]]
        for t in range(tn - 2, -1, -1):
            lo, hi = _window(t, tn, sn)
            for s in range(lo, hi):
                lab = _label(targets, off, s, blank)
                a = log_beta[t + 1, s]
                b = log_beta[t + 1, s + 1] if s + 1 < sn else ninf
                c = ninf
                if s + 2 < sn and lab != blank and lab != targets[off + (s + 1) // 2]:
                    c = log_beta[t + 1, s + 2]
                v = _lse3(a, b, c, ninf)
                log_beta[t, s] = v + lp[t, n, lab] if v != ninf else ninf
        for t in range(tn):
            for k in range(c_):
                lcab[k] = ninf
            lo, hi = _window(t, tn, sn)
            for s in range(lo, hi):
                lab = _label(targets, off, s, blank)
                lcab[lab] = _lse3(lcab[lab], log_alpha[n, t, s] + log_beta[t, s], ninf, ninf)
            for k in range(c_):
                grad[t, n, k] = -math.exp(lcab[k] + loss - lp[t, n, k]) * g
