"""Batching rules of the losses: an elementwise loss runs unreduced on the
batch and is reduced per sample; the class losses with per-sample labels
(`BATCHING_METHODS`) take the labels of every sample at once."""
from __future__ import annotations

import inspect

import numpy as np

from ..op import Op
from ..registry import BATCHING_METHODS, register_batching
from ._rules import BatchedInts, elementwise, loop, reduce_after, register_all

_ELEMENTWISE_STR = (Op.MSE_LOSS, Op.L1_LOSS)
_ELEMENTWISE_REC = (Op.HUBER_LOSS, Op.SMOOTH_L1_LOSS, Op.BCE_WITH_LOGITS, Op.BINARY_CROSS_ENTROPY,
                    Op.POISSON_NLL_LOSS)


@register_batching(Op.MSE_LOSS)
@register_batching(Op.L1_LOSS)
def _str_reduction(g, op, xs, bat, attrs, e):
    out = elementwise(g, op, xs, bat, "none", e)
    return reduce_after(g, out, attrs)


def _rec_reduction(g, op, xs, bat, attrs, e):
    out = elementwise(g, op, xs, bat, attrs._replace(reduction="none"), e)
    return reduce_after(g, out, attrs.reduction)


register_all(_ELEMENTWISE_REC, _rec_reduction)


@register_batching(Op.CROSS_ENTROPY)
@register_batching(Op.NLL_LOSS)
def _class_loss(g, op, xs, bat, attrs, e):
    """Logits batched, labels (an attribute) the same for every sample."""
    (x,) = xs
    shape = tuple(x.shape)
    if len(shape) != 3 or attrs.weight is not None or attrs.reduction not in ("mean", "sum",
                                                                            "none"):
        return loop(g, op, xs, bat, attrs, e)
    labels = attrs.labels
    if attrs.reduction == "mean" and np.any(labels == attrs.ignore_index):
        return loop(g, op, xs, bat, attrs, e)
    flat = g.reshape(x, (shape[0] * shape[1], shape[2]))
    tiled = np.tile(labels, shape[0])
    tiled.flags.writeable = False
    out = g._apply(op, (flat,), attrs._replace(labels=tiled, reduction="none",
                                               total_weight=float(tiled.size)))
    out = g.reshape(out, shape[:2])
    return reduce_after(g, out, attrs.reduction)


def _labels_batched(g, fn, args, kw, level, entry):
    """``g.cross_entropy`` / ``g.nll_loss`` with per-sample labels (a
    `BatchedInts`): one call on the folded batch, unreduced, then reduced
    per sample; other forms loop."""
    bound = inspect.signature(fn).bind(g, *args, **kw)
    bound.apply_defaults()
    a = bound.arguments
    names = list(a)
    x, labels = a[names[1]], a[names[2]]
    reduction = a.get("reduction", "mean")
    simple = (type(labels) is BatchedInts and labels.levels == (level,) and entry.batched(g, x)
              and a.get("weight") is None and reduction in ("mean", "sum", "none")
              and a.get("label_smoothing", 0.0) == 0.0)
    if simple and reduction == "mean":
        simple = not np.any(labels.physical == a.get("ignore_index", -100))
    if not simple:
        return NotImplemented  # the loop
    shape = tuple(x.shape)
    a[names[1]] = g.reshape(x, (-1, shape[-1]))
    a[names[2]] = labels.physical.reshape(-1)
    a["reduction"] = "none"
    out = fn(**a)
    return reduce_after(g, g.reshape(out, shape[:-1]), reduction)


BATCHING_METHODS["cross_entropy"] = _labels_batched
BATCHING_METHODS["nll_loss"] = _labels_batched

register_all((Op.KL_DIV, Op.COSINE_SIMILARITY, Op.PAIRWISE_DISTANCE, Op.TRIPLET_MARGIN_LOSS,
              Op.MARGIN_RANKING_LOSS, Op.GAUSSIAN_NLL_LOSS, Op.CTC_LOSS), loop, "loop")
