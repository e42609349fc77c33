"""Handlers of ONNX's SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss
on yscv's fused ``g.cross_entropy`` / ``g.nll_loss``.

ONNX holds the classes on axis 1 (scores [N, C] or [N, C, d1, ...], labels
[N] or [N, d1, ...]); yscv's losses take them on the last axis, so the
scores are transposed there in the graph. Labels (integers) and the class
``weights`` [C] are read by value; the gradient reaches the scores.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler


def _classes_last(g, x):
    """[N, C, d1, ...] -> [N, d1, ..., C] (2-D input as it is)."""
    nd = len(x.shape)
    return x if nd <= 2 else g.transpose(x, (0,) + tuple(range(2, nd)) + (1,))


def _loss_args(run, node):
    """(labels, weight, ignore_index, reduction): without the file's
    ignore_index, one no label holds (nothing is ignored)."""
    labels = np.asarray(run.arr(node.inputs[1])).astype(np.int64)
    weight = run.arr(node.inputs[2]) if run.has(node, 2) else None
    ignore = node.attrs.get("ignore_index")
    if ignore is None:
        ignore = int(labels.min()) - 1 if labels.size else -100
    return labels, weight, int(ignore), node.attrs.get("reduction", "mean")


@handler("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(run, node):
    """The loss, and output 1 (log_prob, the scores' log-softmax over axis 1)
    when the file uses it."""
    g = run.g
    x = run.node(node.inputs[0])
    labels, weight, ignore, reduction = _loss_args(run, node)
    loss = g.cross_entropy(_classes_last(g, x), labels, weight=weight, ignore_index=ignore,
                           reduction=reduction)
    if len(node.outputs) > 1 and node.outputs[1]:
        return [loss, g.log_softmax(x, 1)]
    return [loss]


@handler("NegativeLogLikelihoodLoss")
def _nll_loss(run, node):
    g = run.g
    x = run.node(node.inputs[0])
    labels, weight, ignore, reduction = _loss_args(run, node)
    return [g.nll_loss(_classes_last(g, x), labels, weight=weight, ignore_index=ignore,
                       reduction=reduction)]
