"""Loss ops (backward): the core losses (mse, l1, huber, BCE with logits,
cross_entropy, nll_loss) and the helpers every loss module shares. The
other losses are in `yscv.backward.loss_functional`, ctc_loss in
`yscv.backward.loss_ctc`. See yscv/registry.py for the op contract.

Every loss is a fused op with one rule and one composite: the rule
(``register_rule``) is the array backward the first-order walks call (fused
NumPy and the compute drivers, e.g. cross_entropy's one pass over the rows);
the composite (``register_composite``) restates the forward with primitive
graph ops. With ``create_graph=True`` each input gradient is one ``Op.VJP``
node (yscv/engine/namespace/vjp.py) whose value is this rule's and whose
derivative is the composite's, so the rule never runs on the graph and reads
its operands as arrays (``ns`` is always the array interpreter here).

``g`` is the upstream gradient: 0-d for the "mean" and "sum" reductions
(turned into one scalar of the graph dtype, divided by the mean's
denominator), the output's shape for "none" (multiplied elementwise).
"""
from __future__ import annotations

import numpy as np

from ..compute.loss import cross_entropy_backward as ce_rows_grad
from ..compute.loss import label_rows, sigmoid, softplus_exact
from ..node import Op
from ..registry import register_composite, register_rule



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


@register_rule(Op.MSE_LOSS)
def mse_loss_rule(ns, g, inputs, out, reduction, saved, needs):
    pred, target = inputs
    return _pair((pred - target) * upstream(g, reduction, pred.size, 2.0), needs)


@register_rule(Op.L1_LOSS)
def l1_loss_rule(ns, g, inputs, out, reduction, saved, needs):
    pred, target = inputs
    return _pair(np.sign(pred - target) * upstream(g, reduction, pred.size), needs)


@register_rule(Op.HUBER_LOSS)
def huber_loss_rule(ns, g, inputs, out, attrs, saved, needs):
    delta = attrs.delta
    pred, target = inputs
    d = np.clip(pred - target, -delta, delta).astype(pred.dtype, copy=False)
    return _pair(d * upstream(g, attrs.reduction, pred.size), needs)


@register_rule(Op.BCE_WITH_LOGITS)
def bce_with_logits_rule(ns, g, inputs, out, attrs, saved, needs):
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


@register_rule(Op.CROSS_ENTROPY)
def cross_entropy_rule(ns, g, inputs, out, attrs, lse, needs):
    x = inputs[0]
    if attrs.reduction == "none":
        up = g.reshape(-1)
    else:   # one value for every row
        up = np.full(1, upstream(g, attrs.reduction, attrs.total_weight), dtype=x.dtype)
    return (ce_rows_grad(x, attrs.labels, lse, attrs.weight, attrs.ignore_index,
                         attrs.label_smoothing, up),)


@register_rule(Op.NLL_LOSS)
def nll_loss_rule(ns, g, inputs, out, attrs, saved, needs):
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


# ------------------------------------------------------------- composites
# Each loss said with primitive ops: exact to any order, with
# PyTorch's choices at the kinks (abs's sign; huber's branch as a constant mask).
def _reduce_nodes(G, terms, reduction, denominator=None):
    if reduction == "none":
        return terms
    total = G.sum(terms)
    if reduction == "sum":
        return total
    d = int(np.prod(terms.shape)) if denominator is None else denominator
    return G.div(total, float(d)) if d else G.mul(total, np.nan)


@register_composite(Op.MSE_LOSS)
def _mse_composite(G, pred, target, reduction):
    d = G.sub(pred, target)
    return _reduce_nodes(G, G.mul(d, d), reduction)


@register_composite(Op.L1_LOSS)
def _l1_composite(G, pred, target, reduction):
    return _reduce_nodes(G, G.abs(G.sub(pred, target)), reduction)


@register_composite(Op.HUBER_LOSS)
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


@register_composite(Op.BCE_WITH_LOGITS)
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


@register_composite(Op.CROSS_ENTROPY)
def _cross_entropy_composite(G, logits, attrs):
    c = logits.shape[-1]
    rows = G.reshape(logits, (-1, c))
    return _class_loss_composite(G, G.log_softmax(rows, axis=-1), attrs)


@register_composite(Op.NLL_LOSS)
def _nll_composite(G, log_probs, attrs):
    c = log_probs.shape[-1]
    return _class_loss_composite(G, G.reshape(log_probs, (-1, c)), attrs)




# ------------------------------------- shared with the other losses
# (yscv/backward/loss_functional.py): the reductions with kl_div's "batchmean"
def _scale(g, reduction, terms_shape, denominator=None):
    """The upstream factor of each unreduced term (``upstream`` plus
    kl_div's "batchmean": the sum over the first axis's length)."""
    if reduction == "batchmean":
        d = terms_shape[0] if terms_shape else 1
        return upstream(g, "mean", d)
    n = int(np.prod(terms_shape)) if denominator is None else denominator
    return upstream(g, reduction, n)



def _reduce_with_batchmean(G, terms, reduction):
    if reduction == "batchmean":
        total = G.sum(terms)
        return G.div(total, float(terms.shape[0])) if terms.shape else total
    return _reduce_nodes(G, terms, reduction)
