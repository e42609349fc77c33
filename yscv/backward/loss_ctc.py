"""Loss ops (backward): ctc_loss, forward in `yscv.ops.loss_ctc`: its
backward rule on the Numba kernels (`yscv.kernels.ctc`; an array rule,
as every loss's) and its composite, the alpha recursion said with primitive
ops, which ``create_graph=True`` differentiates through ``Op.VJP``.
See yscv/registry.py for the op contract.
"""
from __future__ import annotations

import numpy as np

from ..compute.ctc import ctc_backward as ctc_rows_grad
from ..node import Op
from ..registry import register_composite, register_rule


@register_rule(Op.CTC_LOSS)
def ctc_loss_rule(ns, g, inputs, out, attrs, saved, needs):
    lp = inputs[0] if attrs.batched else inputs[0][:, None, :]
    nll, log_alpha = saved
    n = nll.shape[0]
    if attrs.reduction == "none":
        up = g.reshape(n)
    elif attrs.reduction == "sum":
        up = np.full(n, g, dtype=lp.dtype)
    else:
        up = (g / (n * np.maximum(attrs.target_lengths, 1))).astype(lp.dtype)
    grad = ctc_rows_grad(lp, attrs.targets, attrs.offsets, attrs.input_lengths,
                         attrs.target_lengths, attrs.blank, log_alpha, nll, up,
                         attrs.zero_infinity)
    return (grad if attrs.batched else grad[:, 0, :],)


#: stands for log 0 in ctc_loss's composite: exp(_LOG0 - m) is exactly 0
#: next to any reachable term, and unreachable states stay finite (a -inf
#: would turn their zero gradients into 0 * inf = NaN)
_LOG0 = -1e30


def _ctc_sample_nll(G, y, ext, blank):
    """The negative log-likelihood node of one sample: ``y [T_n, C]`` its
    log-probabilities, ``ext`` its extended label sequence (blanks between
    and around the labels), the alpha recursion of yscv/kernels/ctc.py."""
    tn, s = y.shape[0], ext.size
    emis = G.gather(y, 1, np.ascontiguousarray(np.broadcast_to(ext, (tn, s))))
    init = np.full(s, _LOG0, dtype=G.dtype)
    init[:2] = 0.0
    skip = np.full(s, _LOG0, dtype=G.dtype)
    if s > 2:
        ok = (ext[2:] != blank) & (ext[2:] != ext[:-2])
        skip[2:][ok] = 0.0
    alpha = G.add(G.select(emis, 0, 0), init)
    for t in range(1, tn):
        terms = [alpha]
        if s > 1:
            terms.append(G.pad(G.narrow(alpha, 0, 0, s - 1), ((1, 0),), value=_LOG0))
        if s > 2:
            terms.append(G.add(G.pad(G.narrow(alpha, 0, 0, s - 2), ((2, 0),), value=_LOG0),
                               skip))
        alpha = G.add(G.logsumexp(G.stack(terms, 0), axis=0), G.select(emis, 0, t))
    end = G.narrow(alpha, 0, s - 2, 2) if s > 1 else alpha
    return G.neg(G.logsumexp(end, axis=0))


def _ctc_composite(G, log_probs, attrs):
    lp = log_probs if attrs.batched else G.unsqueeze(log_probs, 1)
    losses = []
    for n in range(lp.shape[1]):
        tn, ln = int(attrs.input_lengths[n]), int(attrs.target_lengths[n])
        if tn == 0:
            losses.append(G.constant(np.asarray(
                0.0 if ln == 0 or attrs.zero_infinity else np.inf, dtype=G.dtype)))
            continue
        o = int(attrs.offsets[n])
        ext = np.full(2 * ln + 1, attrs.blank, dtype=np.int64)
        ext[1::2] = attrs.targets[o:o + ln]
        y = G.narrow(G.select(lp, 1, n), 0, 0, tn)
        nll = _ctc_sample_nll(G, y, ext, attrs.blank)
        if G.value(nll) > -0.5 * _LOG0:       # no alignment: the loss is inf
            nll = (G.constant(np.zeros((), dtype=G.dtype)) if attrs.zero_infinity
                   else G.mul(G.sum(y), np.nan))
        losses.append(nll)
    per = G.stack(losses, 0) if losses else G.constant(np.zeros(0, dtype=G.dtype))
    if attrs.reduction == "none":
        return per if attrs.batched else G.reshape(per, ())
    if attrs.reduction == "sum":
        return G.sum(per)
    per = G.div(per, np.maximum(attrs.target_lengths, 1).astype(G.dtype))
    return G.mean(per)


register_composite(Op.CTC_LOSS, _ctc_composite)
