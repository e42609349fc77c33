"""Loss ops (backward): the functional losses beyond the core ones (smooth_l1_loss,
kl_div, binary_cross_entropy, cosine_similarity, pairwise_distance,
triplet_margin_loss, margin_ranking_loss, gaussian_nll_loss,
poisson_nll_loss), forward in `yscv.ops.loss_functional`: their backward
rules (array rules of fused ops, as in `yscv.backward.loss`) and their
composites, which ``create_graph=True`` differentiates through ``Op.VJP``.
The upstream factor and the reductions come from `yscv.backward.loss`. See
yscv/registry.py for the op contract.
"""
from __future__ import annotations

import numpy as np

from ..compute.loss import p_norm, p_norm_grad
from ..node import Op
from ..registry import register_composite, register_rule
from .loss import _pair, _reduce_with_batchmean, _scale


@register_rule(Op.SMOOTH_L1_LOSS)
def smooth_l1_loss_rule(ns, g, inputs, out, attrs, saved, needs):
    pred, target = inputs
    d = pred - target
    beta = attrs.beta
    if beta == 0.0:
        gd = np.sign(d)
    else:   # PyTorch: d / beta inside (-beta, beta), sign(d) outside
        gd = np.where(np.abs(d) < beta, d / beta, np.sign(d)).astype(d.dtype, copy=False)
    return _pair(gd * _scale(g, attrs.reduction, d.shape), needs)


@register_rule(Op.KL_DIV)
def kl_div_rule(ns, g, inputs, out, attrs, saved, needs):
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


@register_rule(Op.BINARY_CROSS_ENTROPY)
def binary_cross_entropy_rule(ns, g, inputs, out, attrs, saved, needs):
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


@register_rule(Op.COSINE_SIMILARITY)
def cosine_similarity_rule(ns, g, inputs, out, attrs, saved, needs):
    a, b = np.broadcast_arrays(*inputs)   # the walk sums the gradients back
    ax, eps = attrs.axis, attrs.eps
    na, nb = (np.sqrt(np.sum(x * x, axis=ax, keepdims=True)) for x in (a, b))
    ca, cb = (np.maximum(n, eps).astype(a.dtype, copy=False) for n in (na, nb))
    # the per-row similarities: the output itself, or the forward's terms again
    cos = out if attrs.reduction == "none" else np.sum((a / ca) * (b / cb), axis=ax)
    ck = np.expand_dims(cos, ax)
    s = _scale(g, attrs.reduction, cos.shape)
    gk = np.expand_dims(s, ax) if attrs.reduction == "none" else s

    def side(x, n, nc, other_c, other):
        # (other / |other|_eps - cos x / |x|) / |x|_eps; x / |x| = 0 at 0
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = np.where(n == 0, 0, x / n)
        return ((other / other_c - ck * unit) / nc * gk).astype(x.dtype, copy=False)

    return ((side(a, na, ca, cb, b) if needs[0] else None),
            (side(b, nb, cb, ca, a) if needs[1] else None))


@register_rule(Op.PAIRWISE_DISTANCE)
def pairwise_distance_rule(ns, g, inputs, out, attrs, saved, needs):
    a, b = inputs
    d = a - b + attrs.eps
    if attrs.reduction == "none":
        norm = out[..., 0] if attrs.keepdim else out
        gk = g if attrs.keepdim else g[..., None]
    else:       # the per-row distances again; each row's share of the reduced g
        norm = p_norm(d, attrs.p)
        gk = _scale(g, attrs.reduction, norm.shape)
    return _pair(p_norm_grad(d, norm, attrs.p) * gk, needs)


@register_rule(Op.TRIPLET_MARGIN_LOSS)
def triplet_margin_loss_rule(ns, g, inputs, out, attrs, saved, needs):
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


@register_rule(Op.MARGIN_RANKING_LOSS)
def margin_ranking_loss_rule(ns, g, inputs, out, attrs, saved, needs):
    x1, x2, y = inputs
    z = -y * (x1 - x2) + attrs.margin
    c = ((z >= 0) * _scale(g, attrs.reduction, z.shape)).astype(x1.dtype, copy=False)
    g1 = -y * c
    return ((g1 if needs[0] else None), (-g1 if needs[1] else None),
            ((x2 - x1) * c if needs[2] else None))


@register_rule(Op.GAUSSIAN_NLL_LOSS)
def gaussian_nll_loss_rule(ns, g, inputs, out, attrs, saved, needs):
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


@register_rule(Op.POISSON_NLL_LOSS)
def poisson_nll_loss_rule(ns, g, inputs, out, attrs, saved, needs):
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



# ------------------------------------------------------------- composites
# Each loss said with primitive ops, so create_graph=True
# differentiates it to any order. Kinks take PyTorch's branch through a
# constant mask (where) or clamp's inclusive bounds; floors PyTorch leaves
# undifferentiated (cosine's eps, gaussian's var) add a constant.
@register_composite(Op.SMOOTH_L1_LOSS)
def _smooth_l1_composite(G, pred, target, attrs):
    d = G.sub(pred, target)
    a = G.abs(d)
    beta = attrs.beta
    if beta == 0.0:
        return _reduce_with_batchmean(G, a, attrs.reduction)
    inside = np.abs(G.value(d)) < beta
    terms = G.where(inside, G.mul(G.mul(d, d), 0.5 / beta), G.sub(a, 0.5 * beta))
    return _reduce_with_batchmean(G, terms, attrs.reduction)


def _xlogy_self_nodes(G, t):
    tv = G.value(t)
    if not G.requires_grad(t):
        with np.errstate(divide="ignore", invalid="ignore"):
            return G.constant(np.where(tv == 0, 0, tv * np.log(tv)).astype(G.dtype))
    return G.mul(t, G.log(t))


@register_composite(Op.KL_DIV)
def _kl_div_composite(G, x, t, attrs):
    if attrs.log_target:
        terms = G.mul(G.exp(t), G.sub(t, x))
    else:
        terms = G.sub(_xlogy_self_nodes(G, t), G.mul(t, x))
    return _reduce_with_batchmean(G, terms, attrs.reduction)


@register_composite(Op.BINARY_CROSS_ENTROPY)
def _bce_composite11(G, p, t, attrs):
    lp = G.clamp(G.log(p), min=-100.0)
    l1p = G.clamp(G.log(G.sub(1.0, p)), min=-100.0)
    terms = G.sub(G.mul(G.sub(t, 1.0), l1p), G.mul(t, lp))
    if attrs.weight is not None:
        terms = G.mul(terms, attrs.weight)
    return _reduce_with_batchmean(G, terms, attrs.reduction)


def _floored_norm_nodes(G, x, axis, eps):
    """||x|| over ``axis`` (kept), floored at eps by adding a constant: the
    value is max(||x||, eps), the gradient that of ||x|| (PyTorch's no_grad
    clamp). ||x|| is a NORM node, whose gradient is 0 at a zero vector as
    PyTorch's (sqrt of a sum of squares would give 0 * inf there)."""
    n = G.norm(x, 2, axis=axis, keepdims=True)
    nv = G.value(n)
    lift = np.maximum(nv, eps) - nv
    return G.add(n, lift) if np.any(lift) else n


@register_composite(Op.COSINE_SIMILARITY)
def _cosine_composite(G, a, b, attrs):
    ax = attrs.axis
    shape = np.broadcast_shapes(a.shape, b.shape)
    a = a if a.shape == shape else G.expand(a, shape)
    b = b if b.shape == shape else G.expand(b, shape)
    ua = G.div(a, _floored_norm_nodes(G, a, ax, attrs.eps))
    ub = G.div(b, _floored_norm_nodes(G, b, ax, attrs.eps))
    return _reduce_with_batchmean(G, G.sum(G.mul(ua, ub), axis=ax), attrs.reduction)


def _p_norm_nodes(G, d, p):
    """The p-norm over the last axis as one NORM node: PyTorch's
    linalg.vector_norm gradient (0 for a zero vector, ties of inf split)."""
    return G.norm(d, p, axis=-1)


@register_composite(Op.PAIRWISE_DISTANCE)
def _pairwise_composite(G, a, b, attrs):
    d = _p_norm_nodes(G, G.add(G.sub(a, b), attrs.eps), attrs.p)
    return _reduce_with_batchmean(G, G.unsqueeze(d, -1) if attrs.keepdim else d, attrs.reduction)


@register_composite(Op.TRIPLET_MARGIN_LOSS)
def _triplet_composite(G, anchor, positive, negative, attrs):
    p, e = attrs.p, attrs.eps
    dp = _p_norm_nodes(G, G.add(G.sub(anchor, positive), e), p)
    dn = _p_norm_nodes(G, G.add(G.sub(anchor, negative), e), p)
    if attrs.swap:
        dn = G.minimum(dn, _p_norm_nodes(G, G.add(G.sub(positive, negative), e), p))
    terms = G.clamp(G.add(G.sub(dp, dn), attrs.margin), min=0.0)
    return _reduce_with_batchmean(G, terms, attrs.reduction)


@register_composite(Op.MARGIN_RANKING_LOSS)
def _margin_ranking_composite(G, x1, x2, y, attrs):
    z = G.add(G.neg(G.mul(y, G.sub(x1, x2))), attrs.margin)
    return _reduce_with_batchmean(G, G.clamp(z, min=0.0), attrs.reduction)


@register_composite(Op.GAUSSIAN_NLL_LOSS)
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
    return _reduce_with_batchmean(G, terms, attrs.reduction)


@register_composite(Op.POISSON_NLL_LOSS)
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
    return _reduce_with_batchmean(G, terms, attrs.reduction)
