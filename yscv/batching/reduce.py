"""Batching rules of the reductions and sorts: the reduced axes move by one
(all per-sample axes for a full reduction)."""
from __future__ import annotations

from ..op import Op
from ._rules import loop, register_all


def _reduce(g, op, xs, bat, attrs, e):
    """The record's axes move by one (a full reduction: every per-sample
    axis), its kept and output shapes gain the batch axis; the count of
    reduced elements is the per-sample one."""
    (x,) = xs
    nd = len(x.shape)
    axes = tuple(range(1, nd)) if attrs.axes is None else tuple(a + 1 for a in attrs.axes)
    return g._apply(op, xs, attrs._replace(axes=axes, kshape=(e.size,) + tuple(attrs.kshape),
                                           oshape=(e.size,) + tuple(attrs.oshape)))


register_all((Op.SUM, Op.MEAN, Op.MAX, Op.MIN, Op.VAR, Op.STD, Op.LOGSUMEXP, Op.PROD, Op.NORM),
             _reduce)
# the attributes fix per-sample shapes (sort's index, sum_to's target)
register_all((Op.TOPK, Op.SORT, Op.SUM_TO), loop, "loop")
