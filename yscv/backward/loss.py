"""Loss ops (backward). See yscv/registry.py for the op contract.

``g`` is the upstream gradient: 0-d for the "mean" and "sum" reductions
(turned into one scalar of the graph dtype, divided by the mean's
denominator), the output's shape for "none" (multiplied elementwise).
"""
from __future__ import annotations

import numpy as np

from ..compute.loss import cross_entropy_backward as ce_rows_grad
from ..compute.ctc import ctc_backward as ctc_rows_grad
from ..compute.loss import label_rows, p_norm, p_norm_grad, sigmoid, softplus_exact
from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import composite


def upstream(g: np.ndarray, reduction: str, denominator, factor: float = 1.0):
    """``factor * dL/d(term)`` for each unreduced term: a scalar of g's dtype
    for "mean" (``factor * g / denominator``) and "sum", an array for "none".
    A zero denominator (every target ignored or weighted 0) gives NaN."""
    dt = g.dtype.type
    if reduction == "none":
        return g * dt(factor) if factor != 1.0 else g
    if reduction == "sum":
        return dt(factor * float(g))
    if denominator == 0:   # the forward was 0/0 or x/0
        return dt(np.nan)
    return dt(factor * float(g) / denominator)


def _pair(gp, needs):
    """(grad pred, grad target) from the pred gradient, target's being -gp."""
    return (gp if needs[0] else None), (np.negative(gp) if needs[1] else None)


@register_backward(Op.MSE_LOSS)
def mse_loss_backward(g, inputs, out, reduction, saved, needs):
    pred, target = inputs
    return _pair((pred - target) * upstream(g, reduction, pred.size, 2.0), needs)


@register_backward(Op.L1_LOSS)
def l1_loss_backward(g, inputs, out, reduction, saved, needs):
    pred, target = inputs
    return _pair(np.sign(pred - target) * upstream(g, reduction, pred.size), needs)


@register_backward(Op.HUBER_LOSS)
def huber_loss_backward(g, inputs, out, attrs, saved, needs):
    delta = attrs.delta
    pred, target = inputs
    d = np.clip(pred - target, -delta, delta).astype(pred.dtype, copy=False)
    return _pair(d * upstream(g, attrs.reduction, pred.size), needs)


@register_backward(Op.BCE_WITH_LOGITS)
def bce_with_logits_backward(g, inputs, out, attrs, saved, needs):
    weight, pos_weight = attrs.weight, attrs.pos_weight
    x, t = inputs
    s = upstream(g, attrs.reduction, x.size)
    if weight is not None:
        s = s * weight   # broadcasts to x's shape (checked by the op)
    gx = gt = None
    if needs[0]:
        gx = sigmoid(x)
        if pos_weight is None:            # sigmoid(x) - t
            gx -= t
        else:   # (1 + (pw - 1) t) sigmoid(x) - pw t, rounded in PyTorch's order
            pt = pos_weight * t
            gx *= pt + 1 - t
            gx -= pt
        gx *= s
    if needs[1]:
        if pos_weight is None:            # -x
            gt = x * -s
        else:                              # -x + (pw - 1) softplus(-x)
            gt = softplus_exact(-x)
            gt *= pos_weight - 1
            gt -= x
            gt *= s
    return gx, gt


@register_backward(Op.CROSS_ENTROPY)
def cross_entropy_backward(g, inputs, out, attrs, lse, needs):
    x = inputs[0]
    if attrs.reduction == "none":
        up = g.reshape(-1)
    else:   # one value for every row
        up = np.full(1, upstream(g, attrs.reduction, attrs.total_weight), dtype=x.dtype)
    return (ce_rows_grad(x, attrs.labels, lse, attrs.weight, attrs.ignore_index,
                         attrs.label_smoothing, up),)


@register_backward(Op.NLL_LOSS)
def nll_loss_backward(g, inputs, out, attrs, saved, needs):
    lp = inputs[0]
    c = lp.shape[-1]
    gx = np.zeros((lp.size // c, c), dtype=lp.dtype)
    rows, cols = label_rows(attrs.labels, attrs.ignore_index)
    if attrs.reduction == "none":
        u = -g.reshape(-1)[rows]
    else:
        u = -upstream(g, attrs.reduction, attrs.total_weight)
    if attrs.weight is not None:
        u = u * attrs.weight[cols]
    gx[rows, cols] = u
    return (gx.reshape(lp.shape),)


# --------------------------------------------------------------- recorded
# Each loss said with primitive ops (composites): exact to any order, with
# PyTorch's choices at the kinks (abs's sign; huber's branch as a constant mask).
def _reduce_nodes(G, terms, reduction, denominator=None):
    if reduction == "none":
        return terms
    total = G.sum(terms)
    if reduction == "sum":
        return total
    d = int(np.prod(terms.shape)) if denominator is None else denominator
    return G.div(total, float(d)) if d else G.mul(total, np.nan)


def _mse_composite(G, pred, target, reduction):
    d = G.sub(pred, target)
    return _reduce_nodes(G, G.mul(d, d), reduction)


def _l1_composite(G, pred, target, reduction):
    return _reduce_nodes(G, G.abs(G.sub(pred, target)), reduction)


def _huber_composite(G, pred, target, attrs):
    """PyTorch's branches: 0.5 d^2 where |d| < delta, else delta (|d| - delta/2),
    chosen by a constant mask (as relu's): the second derivative is 1 at
    d == 0 (through |d| it would be sign(0)^2 = 0) and 0 at |d| == delta."""
    d = G.sub(pred, target)
    quadratic = np.abs(G.value(d)) < attrs.delta
    terms = G.where(quadratic, G.mul(G.mul(d, d), 0.5),
                    G.mul(G.sub(G.abs(d), 0.5 * attrs.delta), attrs.delta))
    return _reduce_nodes(G, terms, attrs.reduction)


def _softplus_exact_nodes(G, x):
    """log(1 + exp(x)) with no linear threshold."""
    return G.softplus(x, 1.0, float(np.finfo(G.dtype).max))


def _bce_composite(G, logits, target, attrs):
    if attrs.pos_weight is None:
        terms = G.sub(_softplus_exact_nodes(G, logits), G.mul(logits, target))
    else:
        coef = G.add(G.mul(target, attrs.pos_weight - 1), 1.0)
        terms = G.add(G.mul(_softplus_exact_nodes(G, G.neg(logits)), coef),
                      G.mul(G.sub(1.0, target), logits))
    if attrs.weight is not None:
        terms = G.mul(terms, attrs.weight)
    return _reduce_nodes(G, terms, attrs.reduction)


def _class_weights(attrs, c, dtype, smoothing):
    """The constant [R, C] matrix A with loss_r = -sum_c A[r, c] logp[r, c]:
    (1 - eps) w_y one-hot at the label plus eps / C w_c, 0 for ignored rows."""
    labels = attrs.labels.reshape(-1)
    ign = labels == attrs.ignore_index
    y = np.where(ign, 0, labels)
    w = attrs.weight if attrs.weight is not None else np.ones(c, dtype=dtype)
    a = np.zeros((labels.size, c), dtype=dtype)
    a[np.arange(labels.size), y] = (1.0 - smoothing) * w[y]
    if smoothing > 0.0:
        a += (smoothing / c) * w[None, :]
    a[ign] = 0
    return a


def _class_loss_composite(G, logp_rows, attrs):
    c = logp_rows.shape[-1]
    a = _class_weights(attrs, c, G.dtype, attrs.label_smoothing)
    terms = G.neg(G.sum(G.mul(logp_rows, a), axis=1))
    if attrs.reduction == "none":
        return G.reshape(terms, attrs.labels.shape)
    return _reduce_nodes(G, terms, attrs.reduction, attrs.total_weight)


def _cross_entropy_composite(G, logits, attrs):
    c = logits.shape[-1]
    rows = G.reshape(logits, (-1, c))
    return _class_loss_composite(G, G.log_softmax(rows, axis=-1), attrs)


def _nll_composite(G, log_probs, attrs):
    c = log_probs.shape[-1]
    return _class_loss_composite(G, G.reshape(log_probs, (-1, c)), attrs)


composite(Op.MSE_LOSS, _mse_composite)
composite(Op.L1_LOSS, _l1_composite)
composite(Op.HUBER_LOSS, _huber_composite)
composite(Op.BCE_WITH_LOGITS, _bce_composite)
composite(Op.CROSS_ENTROPY, _cross_entropy_composite)
composite(Op.NLL_LOSS, _nll_composite)


# ================================================= losses of SPEC section 11
def _scale(g, reduction, terms_shape, denominator=None):
    """The upstream factor of each unreduced term (``upstream`` plus
    kl_div's "batchmean": the sum over the first axis's length)."""
    if reduction == "batchmean":
        d = terms_shape[0] if terms_shape else 1
        return upstream(g, "mean", d)
    n = int(np.prod(terms_shape)) if denominator is None else denominator
    return upstream(g, reduction, n)


@register_backward(Op.SMOOTH_L1_LOSS)
def smooth_l1_loss_backward(g, inputs, out, attrs, saved, needs):
    pred, target = inputs
    d = pred - target
    beta = attrs.beta
    if beta == 0.0:
        gd = np.sign(d)
    else:   # PyTorch: d / beta inside (-beta, beta), sign(d) outside
        gd = np.where(np.abs(d) < beta, d / beta, np.sign(d)).astype(d.dtype, copy=False)
    return _pair(gd * _scale(g, attrs.reduction, d.shape), needs)


@register_backward(Op.KL_DIV)
def kl_div_backward(g, inputs, out, attrs, saved, needs):
    x, t = inputs
    s = _scale(g, attrs.reduction, x.shape)
    gx = gt = None
    if attrs.log_target:
        e = np.exp(t)
        if needs[0]:
            gx = -e * s
        if needs[1]:       # d/dt exp(t) (t - x) = exp(t) (t - x + 1)
            gt = e * (t - x + 1) * s
    else:
        if needs[0]:
            gx = -t * s
        if needs[1]:       # torch.xlogy(t, t)'s rule: log t (0 at t == 0) + t / t
            with np.errstate(divide="ignore", invalid="ignore"):
                gt = (np.where(t == 0, 0, np.log(t)) + t / t - x).astype(x.dtype, copy=False) * s
    return gx, gt


_BCE_FLOOR = float(np.float32(1e-12))


@register_backward(Op.BINARY_CROSS_ENTROPY)
def binary_cross_entropy_backward(g, inputs, out, attrs, saved, needs):
    p, t = inputs
    s = _scale(g, attrs.reduction, p.shape)
    if attrs.weight is not None:
        s = s * attrs.weight
    gp = gt = None
    if needs[0]:           # PyTorch's floor of the denominator (a C float: 1e-12 rounded)
        gp = (p - t) / np.maximum((1 - p) * p, _BCE_FLOOR) * s
    if needs[1]:           # -logit(p), unclamped as PyTorch
        with np.errstate(divide="ignore"):
            gt = (np.log1p(-p) - np.log(p)) * s
    return gp, gt


@register_backward(Op.COSINE_SIMILARITY)
def cosine_similarity_backward(g, inputs, out, attrs, saved, needs):
    a, b = np.broadcast_arrays(*inputs)   # the walk sums the gradients back
    ax, eps = attrs.axis, attrs.eps
    gk = np.expand_dims(g, ax)
    ck = np.expand_dims(out, ax)

    def side(x, other):    # (other / |other|_eps - cos x / |x|) / |x|_eps; x / |x| = 0 at 0
        n = np.sqrt(np.sum(x * x, axis=ax, keepdims=True))
        nc = np.maximum(n, eps)
        no = np.maximum(np.sqrt(np.sum(other * other, axis=ax, keepdims=True)), eps)
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = np.where(n == 0, 0, x / n)
        return ((other / no - ck * unit) / nc * gk).astype(x.dtype, copy=False)

    return (side(a, b) if needs[0] else None), (side(b, a) if needs[1] else None)


@register_backward(Op.PAIRWISE_DISTANCE)
def pairwise_distance_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    norm = out[..., 0] if attrs.keepdim else out
    gk = g if attrs.keepdim else g[..., None]
    ga = p_norm_grad(a - b + attrs.eps, norm, attrs.p) * gk
    return _pair(ga, needs)


@register_backward(Op.TRIPLET_MARGIN_LOSS)
def triplet_margin_loss_backward(g, inputs, out, attrs, saved, needs):
    anchor, positive, negative = inputs
    p, e = attrs.p, attrs.eps
    d_ap = anchor - positive + e
    d_an = anchor - negative + e
    dp, dn = p_norm(d_ap, p), p_norm(d_an, p)
    wn = np.ones_like(dn)
    if attrs.swap:
        d_pn = positive - negative + e
        ds = p_norm(d_pn, p)
        wn = np.where(dn < ds, 1.0, np.where(dn == ds, 0.5, 0.0)).astype(dn.dtype)
        dn = np.minimum(dn, ds)
    # clamp_min's rule: the gradient passes where margin + dp - dn >= 0
    c = (attrs.margin + dp - dn >= 0) * _scale(g, attrs.reduction, dp.shape)
    c = np.asarray(c, dtype=dp.dtype)[..., None]
    gp_ = p_norm_grad(d_ap, dp, p) * c                 # d/d anchor of dp
    gn_ = p_norm_grad(d_an, p_norm(d_an, p), p) * (c * wn[..., None])
    ga, gpos, gneg = gp_ - gn_, -gp_, gn_
    if attrs.swap:
        gs_ = p_norm_grad(d_pn, ds, p) * (c * (1 - wn)[..., None])
        gpos = gpos - gs_
        gneg = gneg + gs_
    return tuple(x if need else None for x, need in zip((ga, gpos, gneg), needs))


@register_backward(Op.MARGIN_RANKING_LOSS)
def margin_ranking_loss_backward(g, inputs, out, attrs, saved, needs):
    x1, x2, y = inputs
    z = -y * (x1 - x2) + attrs.margin
    c = ((z >= 0) * _scale(g, attrs.reduction, z.shape)).astype(x1.dtype, copy=False)
    g1 = -y * c
    return ((g1 if needs[0] else None), (-g1 if needs[1] else None),
            ((x2 - x1) * c if needs[2] else None))


@register_backward(Op.GAUSSIAN_NLL_LOSS)
def gaussian_nll_loss_backward(g, inputs, out, attrs, saved, needs):
    x, t, var = inputs
    v = np.maximum(var.reshape(attrs.var_shape), attrs.eps).astype(x.dtype, copy=False)
    d = x - t
    s = _scale(g, attrs.reduction, d.shape)
    gx = d / v * s
    gv = None
    if needs[2]:           # the floor at eps is not differentiated (PyTorch)
        gv = 0.5 * (1 / v - d * d / (v * v)) * s
        gv = np.broadcast_to(gv, d.shape)
        axes = tuple(k for k, (m, w) in enumerate(zip(d.shape, attrs.var_shape)) if w == 1 and m != 1)
        gv = gv.sum(axis=axes, keepdims=True).reshape(var.shape)
    return (gx if needs[0] else None), (-gx if needs[1] else None), gv


@register_backward(Op.POISSON_NLL_LOSS)
def poisson_nll_loss_backward(g, inputs, out, attrs, saved, needs):
    x, t = inputs
    s = _scale(g, attrs.reduction, x.shape)
    gx = gt = None
    with np.errstate(divide="ignore", invalid="ignore"):
        if needs[0]:
            gx = (np.exp(x) - t if attrs.log_input else 1 - t / (x + attrs.eps)) * s
        if needs[1]:
            gt = -x if attrs.log_input else -np.log(x + attrs.eps)
            if attrs.full:   # d/dt of t log t - t + 0.5 log(2 pi t) where t > 1
                ts = np.where(t > 1, t, 2.0)
                gt = gt + np.where(t > 1, np.log(ts) + 0.5 / ts, 0)
            gt = gt.astype(x.dtype, copy=False) * s
    return gx, gt


@register_backward(Op.CTC_LOSS)
def ctc_loss_backward(g, inputs, out, attrs, saved, needs):
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


# ------------------------------------------------ section 11: recorded
# Composites again: each loss said with primitive ops, so create_graph=True
# differentiates it to any order. Kinks take PyTorch's branch through a
# constant mask (where) or clamp's inclusive bounds; floors PyTorch leaves
# undifferentiated (cosine's eps, gaussian's var) add a constant.
def _reduce11(G, terms, reduction):
    if reduction == "batchmean":
        total = G.sum(terms)
        return G.div(total, float(terms.shape[0])) if terms.shape else total
    return _reduce_nodes(G, terms, reduction)


def _smooth_l1_composite(G, pred, target, attrs):
    d = G.sub(pred, target)
    a = G.abs(d)
    beta = attrs.beta
    if beta == 0.0:
        return _reduce11(G, a, attrs.reduction)
    inside = np.abs(G.value(d)) < beta
    terms = G.where(inside, G.mul(G.mul(d, d), 0.5 / beta), G.sub(a, 0.5 * beta))
    return _reduce11(G, terms, attrs.reduction)


def _xlogy_self_nodes(G, t):
    tv = G.value(t)
    if not G.requires_grad(t):
        with np.errstate(divide="ignore", invalid="ignore"):
            return G.constant(np.where(tv == 0, 0, tv * np.log(tv)).astype(G.dtype))
    return G.mul(t, G.log(t))


def _kl_div_composite(G, x, t, attrs):
    if attrs.log_target:
        terms = G.mul(G.exp(t), G.sub(t, x))
    else:
        terms = G.sub(_xlogy_self_nodes(G, t), G.mul(t, x))
    return _reduce11(G, terms, attrs.reduction)


def _bce_composite11(G, p, t, attrs):
    lp = G.clamp(G.log(p), min=-100.0)
    l1p = G.clamp(G.log(G.sub(1.0, p)), min=-100.0)
    terms = G.sub(G.mul(G.sub(t, 1.0), l1p), G.mul(t, lp))
    if attrs.weight is not None:
        terms = G.mul(terms, attrs.weight)
    return _reduce11(G, terms, attrs.reduction)


def _floored_norm_nodes(G, x, axis, eps):
    """||x|| over ``axis`` (kept), floored at eps by adding a constant: the
    value is max(||x||, eps), the gradient that of ||x|| (PyTorch's no_grad clamp)."""
    n = G.sqrt(G.sum(G.mul(x, x), axis=axis, keepdims=True))
    nv = G.value(n)
    lift = np.maximum(nv, eps) - nv
    return G.add(n, lift) if np.any(lift) else n


def _cosine_composite(G, a, b, attrs):
    ax = attrs.axis
    shape = np.broadcast_shapes(a.shape, b.shape)
    a = a if a.shape == shape else G.expand(a, shape)
    b = b if b.shape == shape else G.expand(b, shape)
    ua = G.div(a, _floored_norm_nodes(G, a, ax, attrs.eps))
    ub = G.div(b, _floored_norm_nodes(G, b, ax, attrs.eps))
    return G.sum(G.mul(ua, ub), axis=ax)


def _p_norm_nodes(G, d, p):
    if p == 2.0:
        return G.sqrt(G.sum(G.mul(d, d), axis=-1))
    if p == 1.0:
        return G.sum(G.abs(d), axis=-1)
    if p == np.inf:
        return G.max(G.abs(d), axis=-1)
    if p == 0.0:
        return G.constant(np.count_nonzero(G.value(d), axis=-1).astype(G.dtype))
    return G.pow(G.sum(G.pow(G.abs(d), p), axis=-1), 1.0 / p)


def _pairwise_composite(G, a, b, attrs):
    d = _p_norm_nodes(G, G.add(G.sub(a, b), attrs.eps), attrs.p)
    return G.unsqueeze(d, -1) if attrs.keepdim else d


def _triplet_composite(G, anchor, positive, negative, attrs):
    p, e = attrs.p, attrs.eps
    dp = _p_norm_nodes(G, G.add(G.sub(anchor, positive), e), p)
    dn = _p_norm_nodes(G, G.add(G.sub(anchor, negative), e), p)
    if attrs.swap:
        dn = G.minimum(dn, _p_norm_nodes(G, G.add(G.sub(positive, negative), e), p))
    terms = G.clamp(G.add(G.sub(dp, dn), attrs.margin), min=0.0)
    return _reduce11(G, terms, attrs.reduction)


def _margin_ranking_composite(G, x1, x2, y, attrs):
    z = G.add(G.neg(G.mul(y, G.sub(x1, x2))), attrs.margin)
    return _reduce11(G, G.clamp(z, min=0.0), attrs.reduction)


def _gaussian_nll_composite(G, x, t, var, attrs):
    v = G.reshape(var, attrs.var_shape)
    vv = G.value(v)
    lift = np.maximum(vv, attrs.eps) - vv
    if np.any(lift):
        v = G.add(v, lift)
    d = G.sub(x, t)
    terms = G.mul(G.add(G.log(v), G.div(G.mul(d, d), v)), 0.5)
    if attrs.full:
        terms = G.add(terms, 0.5 * np.log(2 * np.pi))
    return _reduce11(G, terms, attrs.reduction)


def _poisson_nll_composite(G, x, t, attrs):
    if attrs.log_input:
        terms = G.sub(G.exp(x), G.mul(t, x))
    else:
        terms = G.sub(x, G.mul(t, G.log(G.add(x, attrs.eps))))
    if attrs.full:
        tv = G.value(t)
        big = tv > 1
        if G.requires_grad(t):
            ts = G.where(big, t, np.full(tv.shape, 2.0, dtype=G.dtype))
            st = G.add(G.sub(G.mul(ts, G.log(ts)), ts), G.mul(G.log(G.mul(ts, 2 * np.pi)), 0.5))
            terms = G.add(terms, G.where(big, st, np.zeros(tv.shape, dtype=G.dtype)))
        else:
            ts = np.where(big, tv, 2.0)
            st = np.where(big, ts * np.log(ts) - ts + 0.5 * np.log(2 * np.pi * ts), 0)
            terms = G.add(terms, st.astype(G.dtype))
    return _reduce11(G, terms, attrs.reduction)


composite(Op.SMOOTH_L1_LOSS, _smooth_l1_composite)
composite(Op.KL_DIV, _kl_div_composite)
composite(Op.BINARY_CROSS_ENTROPY, _bce_composite11)
composite(Op.COSINE_SIMILARITY, _cosine_composite)
composite(Op.PAIRWISE_DISTANCE, _pairwise_composite)
composite(Op.TRIPLET_MARGIN_LOSS, _triplet_composite)
composite(Op.MARGIN_RANKING_LOSS, _margin_ranking_composite)
composite(Op.GAUSSIAN_NLL_LOSS, _gaussian_nll_composite)
composite(Op.POISSON_NLL_LOSS, _poisson_nll_composite)


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


composite(Op.CTC_LOSS, _ctc_composite)
