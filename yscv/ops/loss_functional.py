"""Loss ops (forward): `FunctionalLossOps`, PyTorch's functional losses beyond the core ones of `yscv.ops.loss`
(whose reduction and constant-array checks these reuse): smooth_l1_loss,
kl_div, binary_cross_entropy, cosine_similarity, pairwise_distance,
triplet_margin_loss, margin_ranking_loss, gaussian_nll_loss and
poisson_nll_loss save nothing. ctc_loss is in `yscv.ops.loss_ctc`.
See yscv/registry.py for the op contract.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Optional

import numpy as np

from ..compute.loss import p_norm, reduce_loss
from ..node import Op
from ..registry import register_forward
from ._common import is_scalar, normalize_axis, shape_error
from .loss import _broadcast_constant, check_reduction


# ------------------------------------------------ section 11: validation
def _real(v, op: str, arg: str) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {v!r}")
    v = float(v)
    if math.isnan(v):
        raise ValueError(f"{op}: {arg} must not be NaN")
    return v


def _flag(v, op: str, arg: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: {arg} must be a bool, got {v!r}")
    return bool(v)


def _norm_order(p, op: str) -> float:
    p = _real(p, op, "p")
    if p < 0:
        raise ValueError(f"{op}: p must be >= 0 (the order of a vector norm; inf allowed), "
                         f"got {p!r}")
    return p


class FunctionalLossOps:
    """Graph methods of the functional losses beyond the core ones, ctc_loss aside (their
    shared pair check ``_loss_pair`` is LossOps's, reached through Graph)."""

    def _broadcast_operands(self, op: str, named, same_ndim: bool):
        """The broadcast shape of the named operands' values (ShapeError if
        they do not broadcast, or differ in ndim when ``same_ndim``)."""
        shapes = [self._operand(x, op, arg)[1].shape for arg, x in named]
        if same_ndim and len({len(s) for s in shapes}) > 1:
            desc = ", ".join(f"{arg} {s}" for (arg, _), s in zip(named, shapes))
            raise shape_error(op, f"the inputs must have the same number of dimensions "
                              f"(as PyTorch), got {desc}", got=tuple(shapes))
        try:
            return np.broadcast_shapes(*shapes)
        except ValueError:
            desc = ", ".join(f"{arg} {s}" for (arg, _), s in zip(named, shapes))
            raise shape_error(op, f"the shapes do not broadcast: {desc}",
                              got=tuple(shapes)) from None

    def smooth_l1_loss(self, pred, target, beta=1.0, reduction="mean"):
        """``0.5 d^2 / beta`` where ``|d| < beta`` else ``|d| - 0.5 beta``,
        ``d = pred - target`` (torch.nn.functional.smooth_l1_loss), reduced by
        ``reduction``; ``beta >= 0`` (0 is l1_loss, gradient 0 at d = 0)."""
        op = "smooth_l1_loss"
        beta = _real(beta, op, "beta")
        if beta < 0:
            raise ValueError(f"{op}: beta must be >= 0, got {beta!r}")
        reduction = check_reduction(reduction, op)
        return self._loss_pair(Op.SMOOTH_L1_LOSS, pred, target, SmoothL1Attrs(beta, reduction))

    def kl_div(self, input, target, reduction="mean", log_target=False):
        """``target (log target - input)`` per element (``exp(target) (target -
        input)`` with ``log_target``), ``0 log 0 = 0``, where ``input`` holds
        log-probabilities (torch.nn.functional.kl_div). ``reduction`` is
        "mean" (over every element, PyTorch's default), "batchmean" (the sum
        over the first axis's length: the KL divergence per sample), "sum"
        or "none"."""
        op = "kl_div"
        log_target = _flag(log_target, op, "log_target")
        if reduction != "batchmean":
            reduction = check_reduction(reduction, op)
        return self._loss_pair(Op.KL_DIV, input, target, KlDivAttrs(log_target, reduction))

    def binary_cross_entropy(self, probs, target, weight=None, reduction="mean"):
        """``-weight (t log p + (1 - t) log(1 - p))`` with each log clamped
        at -100, as torch.nn.functional.binary_cross_entropy; ``probs`` in
        [0, 1] (ValueError otherwise) and ``target`` of the same shape;
        ``weight`` a constant array broadcastable to them. Gradient
        ``weight (p - t) / max(p (1 - p), 1e-12)`` to the probabilities and
        ``weight (log(1 - p) - log p)`` to the target."""
        op = "binary_cross_entropy"
        reduction = check_reduction(reduction, op)
        _, pv, _ = self._operand(probs, op, "probs")
        w = None
        if weight is not None:
            w = _broadcast_constant(weight, pv.shape, self.dtype, op, "weight")
        if pv.size and not (pv.min() >= 0 and pv.max() <= 1):   # NaN fails too
            bad = ~((pv >= 0) & (pv <= 1))
            k = np.unravel_index(int(np.flatnonzero(bad)[0]), pv.shape)
            where = ", ".join(str(int(j)) for j in k)
            raise ValueError(f"{op}: every element of probs must be in [0, 1], got "
                             f"probs[{where}]={float(pv[k])!r}")
        return self._loss_pair(Op.BINARY_CROSS_ENTROPY, probs, target,
                               BinaryCrossEntropyAttrs(w, reduction))

    def cosine_similarity(self, a, b, axis=-1, eps=1e-8, reduction="none"):
        """``sum(a b) / (max(||a||, eps) max(||b||, eps))`` along ``axis``
        (torch.nn.functional.cosine_similarity: each input divided by its
        floored norm, the floor not differentiated). ``a`` and ``b``
        broadcast; the similarities have their broadcast shape without
        ``axis``. ``reduction`` "none" (the default, PyTorch's per-row
        values) returns them, "mean" / "sum" their mean / sum (0-d)."""
        op = "cosine_similarity"
        eps = _real(eps, op, "eps")
        if eps < 0:
            raise ValueError(f"{op}: eps must be >= 0, got {eps!r}")
        reduction = check_reduction(reduction, op)
        shape = self._broadcast_operands(op, (("a", a), ("b", b)), False)
        if not shape:
            raise shape_error(op, "the inputs must have at least one axis, got 0-d inputs",
                              got=shape)
        ax = normalize_axis(axis, len(shape), op) - len(shape)
        return self._apply(Op.COSINE_SIMILARITY, (a, b), CosineAttrs(ax, eps, reduction))

    def pairwise_distance(self, a, b, p=2.0, eps=1e-6, keepdim=False, reduction="none"):
        """``||a - b + eps||_p`` over the last axis
        (torch.nn.functional.pairwise_distance): ``a`` and ``b`` broadcast;
        ``p >= 0`` (inf: the largest magnitude; 0: the count of nonzeros,
        gradient 0); ``keepdim`` keeps the last axis (size 1). ``reduction``
        "none" (the default, PyTorch's per-row distances) returns them,
        "mean" / "sum" their mean / sum (0-d)."""
        op = "pairwise_distance"
        p = _norm_order(p, op)
        eps = _real(eps, op, "eps")
        keepdim = _flag(keepdim, op, "keepdim")
        reduction = check_reduction(reduction, op)
        shape = self._broadcast_operands(op, (("a", a), ("b", b)), False)
        if not shape or shape[-1] < 1:
            raise shape_error(op, f"the inputs need a last axis of size >= 1 (the vectors), "
                              f"got broadcast shape {shape}", got=shape)
        return self._apply(Op.PAIRWISE_DISTANCE, (a, b), PairwiseAttrs(p, eps, keepdim, reduction))

    def triplet_margin_loss(self, anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
                            swap=False, reduction="mean"):
        """``max(d(anchor, positive) - d(anchor, negative) + margin, 0)`` per
        sample with ``d = pairwise_distance(., ., p, eps)`` over the last
        axis (torch.nn.functional.triplet_margin_loss); ``swap`` takes
        ``min(d(a, n), d(p, n))`` as the negative distance. The inputs have
        the same number of axes and broadcast; ``margin > 0``."""
        op = "triplet_margin_loss"
        margin = _real(margin, op, "margin")
        if margin <= 0:
            raise ValueError(f"{op}: margin must be > 0, got {margin!r}")
        p = _norm_order(p, op)
        eps = _real(eps, op, "eps")
        swap = _flag(swap, op, "swap")
        reduction = check_reduction(reduction, op)
        shape = self._broadcast_operands(
            op, (("anchor", anchor), ("positive", positive), ("negative", negative)), True)
        if not shape or shape[-1] < 1:
            raise shape_error(op, f"the inputs need a last axis of size >= 1 (the embeddings), "
                              f"got broadcast shape {shape}", got=shape)
        return self._apply(Op.TRIPLET_MARGIN_LOSS, (anchor, positive, negative),
                           TripletAttrs(margin, p, eps, swap, reduction))

    def margin_ranking_loss(self, x1, x2, y, margin=0.0, reduction="mean"):
        """``max(0, -y (x1 - x2) + margin)`` (torch.nn.functional.margin_ranking_loss;
        ``y`` holds 1 or -1, a node or an array, differentiable as in
        PyTorch). The three have the same number of axes and broadcast."""
        op = "margin_ranking_loss"
        margin = _real(margin, op, "margin")
        reduction = check_reduction(reduction, op)
        self._broadcast_operands(op, (("x1", x1), ("x2", x2), ("y", y)), True)
        return self._apply(Op.MARGIN_RANKING_LOSS, (x1, x2, y),
                           MarginRankingAttrs(margin, reduction))

    def gaussian_nll_loss(self, input, target, var, full=False, eps=1e-6, reduction="mean"):
        """``0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps))``
        (+ ``0.5 log(2 pi)`` when ``full``), torch.nn.functional.gaussian_nll_loss.
        ``target`` has the input's shape; ``var`` is a node, an array or a
        float, with the input's shape, or one axis short of it, or one axis
        of size 1 (the shared variance broadcast along it); var >= 0
        (ValueError otherwise). The floor at eps is not differentiated."""
        op = "gaussian_nll_loss"
        full = _flag(full, op, "full")
        eps = _real(eps, op, "eps")
        if eps < 0:
            raise ValueError(f"{op}: eps must be >= 0, got {eps!r}")
        reduction = check_reduction(reduction, op)
        _, xv, _ = self._operand(input, op, "input")
        _, tv, _ = self._operand(target, op, "target")
        if tv.shape != xv.shape:
            raise shape_error(op, f"input has shape {xv.shape} but target has shape "
                              f"{tv.shape}; they must match exactly", expected=xv.shape,
                              got=tv.shape)
        if is_scalar(var):
            var = np.full(xv.shape, float(var))
        _, vv, _ = self._operand(var, op, "var")
        vs, xs = vv.shape, xv.shape
        if vs == xs:
            shape = vs
        elif xs and vs == xs[:-1]:
            shape = vs + (1,)
        elif len(vs) == len(xs) and sum(v for x, v in zip(xs, vs) if x != v) == 1:
            shape = vs
        else:
            raise shape_error(op, f"var of shape {vs} does not fit the input's shape {xs}: it "
                              "must be the same, one axis short, or differ in one axis of "
                              "size 1", expected=xs, got=vs)
        if (vv < 0).any():
            k = int(np.flatnonzero(vv < 0)[0])
            raise ValueError(f"{op}: var must be >= 0, got var.flat[{k}]={float(vv.flat[k])!r}")
        if np.isnan(vv).any():
            raise ValueError(f"{op}: var must be >= 0, got NaN")
        return self._apply(Op.GAUSSIAN_NLL_LOSS, (input, target, var),
                           GaussianNllAttrs(full, eps, shape, reduction))

    def poisson_nll_loss(self, input, target, log_input=True, full=False, eps=1e-8,
                         reduction="mean"):
        """Poisson negative log-likelihood (torch.nn.functional.poisson_nll_loss):
        ``exp(input) - target input`` with ``log_input``, else ``input -
        target log(input + eps)``; ``full`` adds the Stirling term ``t log t -
        t + 0.5 log(2 pi t)`` where ``target > 1``. Same shapes."""
        op = "poisson_nll_loss"
        log_input = _flag(log_input, op, "log_input")
        full = _flag(full, op, "full")
        eps = _real(eps, op, "eps")
        reduction = check_reduction(reduction, op)
        return self._loss_pair(Op.POISSON_NLL_LOSS, input, target,
                               PoissonNllAttrs(log_input, full, eps, reduction))


# ================================================= the functional losses
# Each is one op; its backward rule is in yscv/backward/loss_functional.py. "batchmean"
# (kl_div only) divides the sum by the first axis's length.
class SmoothL1Attrs(NamedTuple):
    """smooth_l1_loss: the threshold ``beta`` (>= 0; 0 is l1) and the reduction."""

    beta: float
    reduction: str


class KlDivAttrs(NamedTuple):
    """kl_div: whether the target is given as log-probabilities, and the
    reduction ("mean", "sum", "none" or "batchmean")."""

    log_target: bool
    reduction: str


class BinaryCrossEntropyAttrs(NamedTuple):
    """binary_cross_entropy: read-only constant ``weight`` broadcastable to the
    input (or None) and the reduction."""

    weight: Optional[np.ndarray]
    reduction: str


class CosineAttrs(NamedTuple):
    """cosine_similarity: the axis (negative, counted in the broadcast shape),
    ``eps``, the floor of each norm, and the reduction ("none": per row)."""

    axis: int
    eps: float
    reduction: str = "none"


class PairwiseAttrs(NamedTuple):
    """pairwise_distance: the norm order ``p`` (>= 0, may be inf), the ``eps``
    added to the difference, whether the last axis is kept (size 1), and
    the reduction ("none": per row)."""

    p: float
    eps: float
    keepdim: bool
    reduction: str = "none"


class TripletAttrs(NamedTuple):
    """triplet_margin_loss: margin (> 0), norm order p, eps, swap, reduction."""

    margin: float
    p: float
    eps: float
    swap: bool
    reduction: str


class MarginRankingAttrs(NamedTuple):
    """margin_ranking_loss: the margin and the reduction."""

    margin: float
    reduction: str


class GaussianNllAttrs(NamedTuple):
    """gaussian_nll_loss: ``full`` adds 0.5 log(2 pi); ``eps`` floors the
    variance (its gradient flows as if unclamped, as PyTorch); ``var_shape``
    is the shape the variance takes to broadcast against the input (its own
    shape, or with a trailing 1 for one axis short)."""

    full: bool
    eps: float
    var_shape: tuple
    reduction: str


class PoissonNllAttrs(NamedTuple):
    """poisson_nll_loss: log_input, full (Stirling term where target > 1),
    eps (added inside the log when not log_input), reduction."""

    log_input: bool
    full: bool
    eps: float
    reduction: str


def reduce_terms(terms: np.ndarray, reduction: str) -> np.ndarray:
    """`reduce_loss` plus kl_div's "batchmean" (sum over the first axis's
    length; the sum for a 0-d input, as PyTorch)."""
    if reduction == "batchmean":
        total = reduce_loss(terms, "sum")
        return total / terms.dtype.type(terms.shape[0]) if terms.ndim else total
    return reduce_loss(terms, reduction)


@register_forward(Op.SMOOTH_L1_LOSS)
def smooth_l1_loss_forward(attrs, pred, target):
    d = np.abs(pred - target)
    beta = attrs.beta
    if beta == 0.0:
        return reduce_loss(d, attrs.reduction), None
    return reduce_loss(np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), attrs.reduction), None


def xlogy_self(t: np.ndarray) -> np.ndarray:
    """``t log t`` with 0 where t == 0 (torch.xlogy(t, t)); NaN for t < 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t == 0, 0, t * np.log(t)).astype(t.dtype, copy=False)


@register_forward(Op.KL_DIV)
def kl_div_forward(attrs, inp, target):
    if attrs.log_target:
        terms = np.exp(target) * (target - inp)
    else:
        terms = xlogy_self(target) - target * inp
    return reduce_terms(terms, attrs.reduction), None


def bce_log_terms(p: np.ndarray):
    """(max(log p, -100), max(log(1 - p), -100)): PyTorch clamps both logs."""
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), -100.0), np.maximum(np.log1p(-p), -100.0)


@register_forward(Op.BINARY_CROSS_ENTROPY)
def binary_cross_entropy_forward(attrs, probs, target):
    lp, l1p = bce_log_terms(probs)
    terms = (target - 1) * l1p - target * lp
    if attrs.weight is not None:
        terms = terms * attrs.weight
    return reduce_loss(terms, attrs.reduction), None


def floored_norm(x: np.ndarray, axis: int, eps: float):
    """(||x|| over axis kept as size 1, max(||x||, eps))."""
    n = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return n, np.maximum(n, eps).astype(x.dtype, copy=False)


@register_forward(Op.COSINE_SIMILARITY)
def cosine_similarity_forward(attrs, a, b):
    a, b = np.broadcast_arrays(a, b)
    _, na = floored_norm(a, attrs.axis, attrs.eps)
    _, nb = floored_norm(b, attrs.axis, attrs.eps)
    return reduce_loss(np.sum((a / na) * (b / nb), axis=attrs.axis), attrs.reduction), None


@register_forward(Op.PAIRWISE_DISTANCE)
def pairwise_distance_forward(attrs, a, b):
    d = p_norm(a - b + attrs.eps, attrs.p)
    return reduce_loss(d[..., None] if attrs.keepdim else d, attrs.reduction), None


def triplet_distances(attrs, anchor, positive, negative):
    """(d(a, p), d(a, n), d(p, n) or None): the pairwise distances, last axis reduced."""
    p, e = attrs.p, attrs.eps
    dp = p_norm(anchor - positive + e, p)
    dn = p_norm(anchor - negative + e, p)
    ds = p_norm(positive - negative + e, p) if attrs.swap else None
    return dp, dn, ds


@register_forward(Op.TRIPLET_MARGIN_LOSS)
def triplet_margin_loss_forward(attrs, anchor, positive, negative):
    dp, dn, ds = triplet_distances(attrs, anchor, positive, negative)
    if ds is not None:
        dn = np.minimum(dn, ds)
    terms = np.maximum(attrs.margin + dp - dn, 0.0).astype(dp.dtype, copy=False)
    return reduce_loss(terms, attrs.reduction), None


@register_forward(Op.MARGIN_RANKING_LOSS)
def margin_ranking_loss_forward(attrs, x1, x2, y):
    terms = np.maximum(-y * (x1 - x2) + attrs.margin, 0.0).astype(x1.dtype, copy=False)
    return reduce_loss(terms, attrs.reduction), None


@register_forward(Op.GAUSSIAN_NLL_LOSS)
def gaussian_nll_loss_forward(attrs, inp, target, var):
    v = np.maximum(var.reshape(attrs.var_shape), attrs.eps).astype(inp.dtype, copy=False)
    d = inp - target
    terms = 0.5 * (np.log(v) + d * d / v)
    if attrs.full:
        terms = terms + 0.5 * math.log(2 * math.pi)
    return reduce_loss(terms, attrs.reduction), None


def stirling_terms(t: np.ndarray) -> np.ndarray:
    """``t log t - t + 0.5 log(2 pi t)`` where t > 1, else 0 (poisson_nll_loss's full)."""
    s = np.where(t > 1, t, 2.0).astype(t.dtype, copy=False)
    return np.where(t > 1, s * np.log(s) - s + 0.5 * np.log(2 * math.pi * s), 0).astype(
        t.dtype, copy=False)


@register_forward(Op.POISSON_NLL_LOSS)
def poisson_nll_loss_forward(attrs, inp, target):
    if attrs.log_input:
        terms = np.exp(inp) - target * inp
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = inp - target * np.log(inp + attrs.eps)
    if attrs.full:
        terms = terms + stirling_terms(target)
    return reduce_loss(terms, attrs.reduction), None
