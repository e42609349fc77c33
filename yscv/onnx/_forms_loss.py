"""ONNX forms of the functional losses beyond the core ones (one mapping function per Op
member; see `yscv.onnx._optable`). Each loss is spelled with
elementwise operators and reductions, the formula of its yscv forward;
ctc_loss has none (its recursion over time has no ONNX operator)."""
from __future__ import annotations

import math

import numpy as np

from ..node import Op
from ._forms_layers import _reduce_loss
from ._registry import NO_ONNX, onnx_form

_REDUCE = "ReduceMean / ReduceSum"

NO_ONNX[Op.CTC_LOSS] = ("a training loss: ONNX has no CTC operator, and its alignment "
                        "recursion over time is not an inference graph")


def _reduce(b, terms, reduction, rank=None):
    """``_reduce_loss`` plus kl_div's "batchmean" (the sum over the first
    axis's length): the mean over the first axis of the per-row sums."""
    if reduction != "batchmean":
        return _reduce_loss(b, terms, reduction)
    if not rank:
        return b.reduce("ReduceSum", terms, None, False)
    rows = b.reduce("ReduceSum", terms, tuple(range(1, rank)), False)
    return b.reduce("ReduceMean", rows, None, False)


@onnx_form(Op.SMOOTH_L1_LOSS, f"Sub, Abs, Less, Mul, Div, Where, {_REDUCE}")
def _smooth_l1_loss(b, n):
    a = n.attrs
    d = b.emit("Abs", [b.emit("Sub", [n.x(0), n.x(1)])])
    if a.beta == 0.0:
        return _reduce(b, d, a.reduction)
    quad = b.emit("Div", [b.emit("Mul", [b.emit("Mul", [d, d]), b.scalar(0.5)]),
                          b.scalar(a.beta)])
    lin = b.emit("Sub", [d, b.scalar(0.5 * a.beta)])
    terms = b.emit("Where", [b.emit("Less", [d, b.scalar(a.beta)]), quad, lin])
    return _reduce(b, terms, a.reduction)


@onnx_form(Op.KL_DIV, f"Exp, Log, Equal, Where, Mul, Sub, {_REDUCE}")
def _kl_div(b, n):
    a = n.attrs
    x, t = n.x(0), n.x(1)
    if a.log_target:
        terms = b.emit("Mul", [b.emit("Exp", [t]), b.emit("Sub", [t, x])])
    else:                   # xlogy(t, t): 0 where t == 0
        tlogt = b.emit("Where", [b.emit("Equal", [t, b.scalar(0.0)]), b.scalar(0.0),
                                 b.emit("Mul", [t, b.emit("Log", [t])])])
        terms = b.emit("Sub", [tlogt, b.emit("Mul", [t, x])])
    return _reduce(b, terms, a.reduction, len(n.in_shape(0)))


@onnx_form(Op.BINARY_CROSS_ENTROPY, f"Log, Sub, Max, Mul, {_REDUCE}")
def _binary_cross_entropy(b, n):
    a = n.attrs
    p, t = n.x(0), n.x(1)
    floor = b.scalar(-100.0)
    lp = b.emit("Max", [b.emit("Log", [p]), floor])
    l1p = b.emit("Max", [b.emit("Log", [b.emit("Sub", [b.scalar(1.0), p])]), floor])
    terms = b.emit("Sub", [b.emit("Mul", [b.emit("Sub", [t, b.scalar(1.0)]), l1p]),
                           b.emit("Mul", [t, lp])])
    if a.weight is not None:
        terms = b.emit("Mul", [terms, b.const(np.asarray(a.weight, b.dtype), "weight")])
    return _reduce(b, terms, a.reduction)


@onnx_form(Op.COSINE_SIMILARITY, f"Shape, Expand, Mul, ReduceSum, Sqrt, Max, Div, {_REDUCE}")
def _cosine_similarity(b, n):
    a = n.attrs
    x, y = n.x(0), n.x(1)
    if n.in_shape(0) != n.in_shape(1):        # broadcast first: norms of the broadcast rows
        x, y = (b.emit("Expand", [x, b.emit("Shape", [y])]),
                b.emit("Expand", [y, b.emit("Shape", [x])]))
    units = []
    for v in (x, y):
        norm = b.emit("Sqrt", [b.reduce("ReduceSum", b.emit("Mul", [v, v]), (a.axis,), True)])
        units.append(b.emit("Div", [v, b.emit("Max", [norm, b.scalar(a.eps)])]))
    return _reduce(b, b.reduce("ReduceSum", b.emit("Mul", units), (a.axis,), False), a.reduction)


def _p_norm(b, d, p, keepdim):
    """||d||_p over the last axis."""
    if p == 2.0:
        return b.emit("Sqrt", [b.reduce("ReduceSum", b.emit("Mul", [d, d]), (-1,), keepdim)])
    if p == 1.0:
        return b.reduce("ReduceSum", b.emit("Abs", [d]), (-1,), keepdim)
    if p == math.inf:
        return b.reduce("ReduceMax", b.emit("Abs", [d]), (-1,), keepdim)
    if p == 0.0:
        nz = b.emit("Cast", [b.emit("Not", [b.emit("Equal", [d, b.scalar(0.0)])])],
                    to=b.elem_type)
        return b.reduce("ReduceSum", nz, (-1,), keepdim)
    s = b.reduce("ReduceSum", b.emit("Pow", [b.emit("Abs", [d]), b.scalar(p)]), (-1,), keepdim)
    return b.emit("Pow", [s, b.scalar(1.0 / p)])


def _distance(b, u, v, p, eps, keepdim=False):
    return _p_norm(b, b.emit("Add", [b.emit("Sub", [u, v]), b.scalar(eps)]), p, keepdim)


_NORM_OPS = "Sub, Add, Abs, Mul, Pow, Sqrt, ReduceSum, ReduceMax, Equal, Not, Cast"


@onnx_form(Op.PAIRWISE_DISTANCE, f"{_NORM_OPS}, {_REDUCE}")
def _pairwise_distance(b, n):
    a = n.attrs
    return _reduce(b, _distance(b, n.x(0), n.x(1), a.p, a.eps, a.keepdim), a.reduction)


@onnx_form(Op.TRIPLET_MARGIN_LOSS, f"{_NORM_OPS}, Min, Relu, {_REDUCE}")
def _triplet_margin_loss(b, n):
    a = n.attrs
    anchor, pos, neg = n.x(0), n.x(1), n.x(2)
    dp = _distance(b, anchor, pos, a.p, a.eps)
    dn = _distance(b, anchor, neg, a.p, a.eps)
    if a.swap:
        dn = b.emit("Min", [dn, _distance(b, pos, neg, a.p, a.eps)])
    z = b.emit("Add", [b.emit("Sub", [dp, dn]), b.scalar(a.margin)])
    return _reduce(b, b.emit("Relu", [z]), a.reduction)


@onnx_form(Op.MARGIN_RANKING_LOSS, f"Sub, Mul, Neg, Add, Relu, {_REDUCE}")
def _margin_ranking_loss(b, n):
    a = n.attrs
    z = b.emit("Neg", [b.emit("Mul", [n.x(2), b.emit("Sub", [n.x(0), n.x(1)])])])
    return _reduce(b, b.emit("Relu", [b.emit("Add", [z, b.scalar(a.margin)])]), a.reduction)


@onnx_form(Op.GAUSSIAN_NLL_LOSS, f"Unsqueeze, Max, Log, Sub, Mul, Div, Add, {_REDUCE}")
def _gaussian_nll_loss(b, n):
    a = n.attrs
    var = n.x(2)
    if tuple(n.in_shape(2)) != tuple(a.var_shape):   # one axis short: a trailing 1
        var = b.emit("Unsqueeze", [var, b.ints([-1])])
    v = b.emit("Max", [var, b.scalar(a.eps)])
    d = b.emit("Sub", [n.x(0), n.x(1)])
    terms = b.emit("Add", [b.emit("Log", [v]), b.emit("Div", [b.emit("Mul", [d, d]), v])])
    terms = b.emit("Mul", [terms, b.scalar(0.5)])
    if a.full:
        terms = b.emit("Add", [terms, b.scalar(0.5 * math.log(2 * math.pi))])
    return _reduce(b, terms, a.reduction)


@onnx_form(Op.POISSON_NLL_LOSS, f"Exp, Log, Mul, Sub, Add, Greater, Where, {_REDUCE}")
def _poisson_nll_loss(b, n):
    a = n.attrs
    x, t = n.x(0), n.x(1)
    if a.log_input:
        terms = b.emit("Sub", [b.emit("Exp", [x]), b.emit("Mul", [t, x])])
    else:
        terms = b.emit("Sub", [x, b.emit("Mul", [t, b.emit("Log", [
            b.emit("Add", [x, b.scalar(a.eps)])])])])
    if a.full:   # t log t - t + 0.5 log(2 pi t) where t > 1
        big = b.emit("Greater", [t, b.scalar(1.0)])
        ts = b.emit("Where", [big, t, b.scalar(2.0)])
        st = b.emit("Sub", [b.emit("Mul", [ts, b.emit("Log", [ts])]), ts])
        st = b.emit("Add", [st, b.emit("Mul", [b.emit("Log", [
            b.emit("Mul", [ts, b.scalar(2 * math.pi)])]), b.scalar(0.5)])])
        terms = b.emit("Add", [terms, b.emit("Where", [big, st, b.scalar(0.0)])])
    return _reduce(b, terms, a.reduction)
