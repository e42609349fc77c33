"""Loss ops (forward). See yscv/registry.py for the op contract.

Every loss takes ``reduction="mean"|"sum"|"none"`` (PyTorch's): a 0-d node
of the graph dtype for "mean" and "sum", the unreduced per-element (or
per-target) losses for "none".

* ``mse_loss``, ``l1_loss``, ``huber_loss``, ``binary_cross_entropy_with_logits``
  take ``(pred, target)`` of exactly the same shape (PyTorch broadcasts with
  a warning; we refuse with a ShapeError). ``target`` may be a NodeId (its
  gradient is computed too, as PyTorch) or an array (a constant). Nothing is
  saved: backward recomputes from the input values. BCE's ``weight`` and
  ``pos_weight`` are constant arrays in the attributes, broadcast to the
  input as NumPy/PyTorch broadcast (``pos_weight [C]`` lines up with the last
  axis).
* ``cross_entropy(logits[..., C], labels[...])`` is ONE fused Numba pass
  (log-softmax + weighted NLL + label smoothing, :mod:`yscv.kernels.loss`)
  over the logits viewed as rows [R, C] (classes on the LAST axis); it saves
  only the per-row log-sum-exp [R] for backward.
* ``nll_loss(log_probs[..., C], labels[...])``: ``-weight[y] * log_probs[..., y]``
  per target (NumPy: a pick and, in backward, a scatter).

* The losses of SPEC section 11 (:class:`LossOps11`): smooth_l1_loss,
  kl_div, binary_cross_entropy, cosine_similarity, pairwise_distance,
  triplet_margin_loss, margin_ranking_loss, gaussian_nll_loss,
  poisson_nll_loss save nothing; ``ctc_loss(log_probs[T, N, C], ...)`` runs
  the log-space forward recursion on Numba kernels (:mod:`yscv.kernels.ctc`)
  and saves the per-sample loss [N] and the forward variables [N, T, 2 max(L) + 1].

Labels are integer arrays kept (read-only, C-contiguous int64) in the node's
attributes. A label equal to ``ignore_index`` contributes 0 to the loss and
its weight is left out of the mean's denominator.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Optional

import numpy as np

from ..compute.loss import cross_entropy_forward as ce_rows
from ..compute.ctc import ctc_forward as ctc_rows
from ..compute.loss import label_rows, p_norm, reduce_loss, softplus_exact
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_graph_array, as_index_array, is_scalar, normalize_axis, shape_error

REDUCTIONS = ("mean", "sum", "none")


class ClassLossAttrs(NamedTuple):
    """Attributes of cross_entropy and nll_loss.

    labels: read-only int64 [...] (the logits' shape without the class axis).
    weight: read-only class weights [C] of the graph dtype, or None.
    ignore_index: label value whose targets are ignored.
    label_smoothing: eps in [0, 1] (always 0 for nll_loss).
    reduction: "mean", "sum" or "none".
    total_weight: the mean's denominator, sum of ``weight[y]`` (1 without a
        weight) over the non-ignored labels, as a float (0 when all are ignored).
    """

    labels: np.ndarray
    weight: Optional[np.ndarray]
    ignore_index: int
    label_smoothing: float
    reduction: str
    total_weight: float


class HuberAttrs(NamedTuple):
    """Attributes of huber_loss: the threshold ``delta`` (> 0) and the reduction."""

    delta: float
    reduction: str


class BceAttrs(NamedTuple):
    """Attributes of binary_cross_entropy_with_logits: read-only constant
    ``weight`` and ``pos_weight`` of the graph dtype (each broadcastable to the
    input; None when absent) and the reduction."""

    weight: Optional[np.ndarray]
    pos_weight: Optional[np.ndarray]
    reduction: str


@register_forward(Op.MSE_LOSS)
def mse_loss_forward(reduction, pred, target):
    d = pred - target
    return reduce_loss(d * d, reduction), None


@register_forward(Op.L1_LOSS)
def l1_loss_forward(reduction, pred, target):
    return reduce_loss(np.abs(pred - target), reduction), None


@register_forward(Op.HUBER_LOSS)
def huber_loss_forward(attrs, pred, target):
    delta = attrs.delta
    # with m = min(|d|, delta): 0.5 m^2 + delta (|d| - m) is 0.5 d^2 where
    # |d| <= delta and delta (|d| - delta/2) beyond, without np.where (which
    # branches per element)
    a = np.abs(pred - target)
    m = np.minimum(a, delta)
    a -= m
    a *= delta
    a += m * (m * pred.dtype.type(0.5))
    return reduce_loss(a, attrs.reduction), None


@register_forward(Op.BCE_WITH_LOGITS)
def bce_with_logits_forward(attrs, logits, target):
    weight, pos_weight = attrs.weight, attrs.pos_weight
    if pos_weight is None:
        # max(x, 0) - x t + log1p(exp(-|x|)) = softplus(x) - x t: the fused,
        # stable softplus kernel (no threshold, so exact for large x too)
        terms = softplus_exact(logits)
        terms -= logits * target
    else:
        # PyTorch's form: (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)
        terms = softplus_exact(-logits)
        terms *= (pos_weight - 1) * target + 1
        terms += (1 - target) * logits
    if weight is not None:
        terms *= weight
    return reduce_loss(terms, attrs.reduction), None


@register_forward(Op.CROSS_ENTROPY)
def cross_entropy_forward(attrs, logits):
    loss, lse = ce_rows(logits, attrs.labels, attrs.weight, attrs.ignore_index,
                        attrs.label_smoothing)
    if attrs.reduction == "none":
        return loss.reshape(attrs.labels.shape), lse
    return reduce_loss(loss, attrs.reduction, attrs.total_weight), lse


@register_forward(Op.NLL_LOSS)
def nll_loss_forward(attrs, log_probs):
    c = log_probs.shape[-1]
    flat = log_probs.reshape(-1, c)
    rows, cols = label_rows(attrs.labels, attrs.ignore_index)
    loss = np.zeros(flat.shape[0], dtype=log_probs.dtype)
    picked = flat[rows, cols]
    if attrs.weight is not None:
        picked = picked * attrs.weight[cols]
    loss[rows] = -picked
    return reduce_loss(loss.reshape(attrs.labels.shape), attrs.reduction, attrs.total_weight), None


# ------------------------------------------------------------ validation
def check_reduction(reduction, op: str) -> str:
    """``reduction`` if it is "mean", "sum" or "none", else TypeError/ValueError."""
    if not isinstance(reduction, str):
        raise TypeError(f"{op}: reduction must be a str ('mean', 'sum' or 'none'), "
                        f"got {reduction!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _constant_array(a, dtype, op: str, arg: str) -> np.ndarray:
    """A read-only copy of a non-differentiable array argument (weights)."""
    if type(a) is NodeId:
        raise TypeError(f"{op}: {arg} must be an array, not a NodeId ({arg} is a constant: "
                        f"no gradient flows to it, as in PyTorch); pass g.value(node)")
    arr = as_graph_array(a, dtype, op, arg)
    arr.flags.writeable = False
    return arr


def _labels(labels, logits_shape: tuple, ignore_index: int, op: str, arg: str):
    """Validated read-only C-contiguous int64 labels of shape ``logits_shape[:-1]``,
    and whether any of them equals ``ignore_index``."""
    if type(labels) is NodeId:
        raise TypeError(f"{op}: {arg} must be an integer array of class indices, not a "
                        "NodeId (labels are not differentiable)")
    lab = np.ascontiguousarray(as_index_array(labels, op, arg))
    want = tuple(logits_shape[:-1])
    c = logits_shape[-1]
    if lab.shape != want:
        hint = ""
        if lab.ndim >= 2 and lab.shape == (logits_shape[0],) + tuple(logits_shape[2:]):
            hint = (" (the class axis is the LAST axis of the input; for PyTorch's "
                    "[N, C, d1, ...] layout move it last, e.g. g.transpose)")
        raise shape_error(op, f"{arg} must have shape {want} to match input of shape "
                          f"{tuple(logits_shape)}, got {lab.shape}{hint}",
                          expected=want, got=lab.shape)
    ignored = False
    if lab.size:
        if lab.min() < 0 or lab.max() >= c:   # two reductions; locate only on failure
            hit = lab == ignore_index
            bad = ~hit & ((lab < 0) | (lab >= c))
            if bad.any():
                k = np.unravel_index(int(np.flatnonzero(bad)[0]), lab.shape)
                where = ", ".join(str(int(j)) for j in k)
                raise IndexError(f"{op}: {arg}[{where}]={int(lab[k])} is out of range for {c} "
                                 f"classes (valid labels are 0..{c - 1}, or "
                                 f"ignore_index={ignore_index})")
            ignored = bool(hit.any())
        elif 0 <= ignore_index < c:
            ignored = bool((lab == ignore_index).any())
    lab.flags.writeable = False
    return lab, ignored


def _total_weight(labels: np.ndarray, ignored: bool, weight, ignore_index: int, dtype) -> float:
    """Sum of weight[y] (1 without a weight) over the non-ignored labels."""
    cols = label_rows(labels, ignore_index)[1] if ignored else labels.reshape(-1)
    if weight is None:
        return float(cols.size)
    return float(np.sum(weight[cols], dtype=dtype))


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


def _lengths(v, n: int, op: str, arg: str, batched: bool) -> np.ndarray:
    """Validated int64 [n] lengths (an int for an unbatched input)."""
    if type(v) is NodeId:
        raise TypeError(f"{op}: {arg} must be integers, not a NodeId")
    if isinstance(v, bool):
        raise TypeError(f"{op}: {arg} must be integers, got {v!r}")
    arr = as_index_array(v, op, arg).reshape(-1) if batched or np.ndim(v) else \
        as_index_array([v], op, arg)
    if arr.shape != (n,):
        raise shape_error(op, f"{arg} must hold one length per sample ({n}), got shape "
                          f"{np.shape(v)}", expected=(n,), got=np.shape(v))
    if arr.size and arr.min() < 0:
        k = int(np.argmin(arr))
        raise ValueError(f"{op}: {arg}[{k}]={int(arr[k])} is negative")
    return arr


class LossOps11:
    """Graph methods of the losses of SPEC section 11 (mixed into LossOps)."""

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
            w = _constant_array(weight, self.dtype, op, "weight")
            try:
                ok = np.broadcast_shapes(w.shape, pv.shape) == pv.shape
            except ValueError:
                ok = False
            if not ok:
                raise shape_error(op, f"weight of shape {w.shape} does not broadcast to the "
                                  f"input's shape {pv.shape}", expected=pv.shape, got=w.shape)
        if pv.size and not (pv.min() >= 0 and pv.max() <= 1):   # NaN fails too
            bad = ~((pv >= 0) & (pv <= 1))
            k = np.unravel_index(int(np.flatnonzero(bad)[0]), pv.shape)
            where = ", ".join(str(int(j)) for j in k)
            raise ValueError(f"{op}: every element of probs must be in [0, 1], got "
                             f"probs[{where}]={float(pv[k])!r}")
        return self._loss_pair(Op.BINARY_CROSS_ENTROPY, probs, target,
                               BinaryCrossEntropyAttrs(w, reduction))

    def cosine_similarity(self, a, b, axis=-1, eps=1e-8):
        """``sum(a b) / (max(||a||, eps) max(||b||, eps))`` along ``axis``
        (torch.nn.functional.cosine_similarity: each input divided by its
        floored norm, the floor not differentiated). ``a`` and ``b``
        broadcast; the result has their broadcast shape without ``axis``."""
        op = "cosine_similarity"
        eps = _real(eps, op, "eps")
        if eps < 0:
            raise ValueError(f"{op}: eps must be >= 0, got {eps!r}")
        shape = self._broadcast_operands(op, (("a", a), ("b", b)), False)
        if not shape:
            raise shape_error(op, "the inputs must have at least one axis, got 0-d inputs",
                              got=shape)
        ax = normalize_axis(axis, len(shape), op) - len(shape)
        return self._apply(Op.COSINE_SIMILARITY, (a, b), CosineAttrs(ax, eps))

    def pairwise_distance(self, a, b, p=2.0, eps=1e-6, keepdim=False):
        """``||a - b + eps||_p`` over the last axis
        (torch.nn.functional.pairwise_distance): ``a`` and ``b`` broadcast;
        ``p >= 0`` (inf: the largest magnitude; 0: the count of nonzeros,
        gradient 0); ``keepdim`` keeps the last axis (size 1)."""
        op = "pairwise_distance"
        p = _norm_order(p, op)
        eps = _real(eps, op, "eps")
        keepdim = _flag(keepdim, op, "keepdim")
        shape = self._broadcast_operands(op, (("a", a), ("b", b)), False)
        if not shape or shape[-1] < 1:
            raise shape_error(op, f"the inputs need a last axis of size >= 1 (the vectors), "
                              f"got broadcast shape {shape}", got=shape)
        return self._apply(Op.PAIRWISE_DISTANCE, (a, b), PairwiseAttrs(p, eps, keepdim))

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

    def ctc_loss(self, log_probs, targets, input_lengths, target_lengths, blank=0,
                 reduction="mean", zero_infinity=False):
        """Connectionist temporal classification loss, torch.nn.functional.ctc_loss:
        ``log_probs [T, N, C]`` (time-major log-probabilities, e.g. a
        log_softmax; or unbatched ``[T, C]``), ``targets`` padded ``[N, S]``
        or concatenated 1-D (``[S]`` unbatched) integer labels, none of them
        ``blank``; ``input_lengths`` and ``target_lengths`` one int per
        sample. The per-sample negative log-likelihood ("none": [N]); "mean"
        divides each by its target length (at least 1) and averages;
        ``zero_infinity`` turns the infinite loss of an impossible alignment
        (and its gradient) into 0. One fused op on Numba kernels
        (forward-backward in log space)."""
        op = "ctc_loss"
        reduction = check_reduction(reduction, op)
        zero_infinity = _flag(zero_infinity, op, "zero_infinity")
        _, lv, _ = self._operand(log_probs, op, "log_probs")
        if lv.ndim not in (2, 3) or lv.shape[-1] < 1:
            raise shape_error(op, f"log_probs must be [T, N, C] (or unbatched [T, C]) with "
                              f"C >= 1, got shape {lv.shape}", expected="[T, N, C]",
                              got=lv.shape)
        batched = lv.ndim == 3
        t_max, c = lv.shape[0], lv.shape[-1]
        n = lv.shape[1] if batched else 1
        if isinstance(blank, bool) or not isinstance(blank, numbers.Integral):
            raise TypeError(f"{op}: blank must be an int, got {blank!r}")
        blank = int(blank)
        if not 0 <= blank < c:
            raise ValueError(f"{op}: blank={blank} is out of range for {c} classes")
        if type(targets) is NodeId:
            raise TypeError(f"{op}: targets must be an integer array, not a NodeId")
        tg = np.ascontiguousarray(as_index_array(targets, op, "targets"))
        il = _lengths(input_lengths, n, op, "input_lengths", batched)
        tl = _lengths(target_lengths, n, op, "target_lengths", batched)
        if il.size and il.max() > t_max:
            k = int(np.argmax(il))
            raise ValueError(f"{op}: input_lengths[{k}]={int(il[k])} is out of range: at most "
                             f"T={t_max} (log_probs has shape {lv.shape})")
        if batched and tg.ndim == 1:          # concatenated
            if tg.size != int(tl.sum()):
                raise ValueError(f"{op}: concatenated targets must hold sum(target_lengths)="
                                 f"{int(tl.sum())} labels, got {tg.size}")
            offsets = np.concatenate(([0], np.cumsum(tl)[:-1])).astype(np.int64)
        else:
            if tg.ndim != (2 if batched else 1) or (batched and tg.shape[0] != n):
                want = f"[{n}, S] or 1-D concatenated" if batched else "1-D [S]"
                raise shape_error(op, f"targets must be {want}, got shape {tg.shape}",
                                  expected=want, got=tg.shape)
            s = tg.shape[-1]
            if tl.size and tl.max() > s:
                k = int(np.argmax(tl))
                raise ValueError(f"{op}: target_lengths[{k}]={int(tl[k])} is out of range: at "
                                 f"most S={s}, the targets' padded length")
            offsets = np.arange(n, dtype=np.int64) * s
            tg = tg.reshape(-1)
        used = np.zeros(tg.size, dtype=bool)
        for o, ln in zip(offsets, tl):
            used[o:o + ln] = True
        labels = tg[used]
        if labels.size and (labels.min() < 0 or labels.max() >= c or (labels == blank).any()):
            k = int(np.flatnonzero(used & ((tg < 0) | (tg >= c) | (tg == blank)))[0])
            if tg[k] == blank:
                raise ValueError(f"{op}: targets hold the blank label {blank} (flat position "
                                 f"{k}); a target sequence cannot contain blank")
            raise IndexError(f"{op}: targets hold label {int(tg[k])} (flat position {k}), out "
                             f"of range for {c} classes")
        for a in (tg, offsets, il, tl):
            a.flags.writeable = False
        attrs = CtcAttrs(tg, offsets, il, tl, blank, reduction, zero_infinity, batched)
        return self._apply(Op.CTC_LOSS, (log_probs,), attrs)


class LossOps(LossOps11):
    """Graph methods of the loss category (those of SPEC section 11 in
    :class:`LossOps11`, below)."""

    def _loss_pair(self, op: Op, pred, target, attrs):
        """Validate that pred and target have the same shape, then apply."""
        name = op.name.lower()
        _, pv, _ = self._operand(pred, name, "pred")
        _, tv, _ = self._operand(target, name, "target")
        if pv.shape != tv.shape:
            raise shape_error(name, f"pred has shape {pv.shape} but target has shape "
                              f"{tv.shape}; they must match exactly (no broadcasting)",
                              expected=pv.shape, got=tv.shape)
        return self._apply(op, (pred, target), attrs)

    def _class_input(self, x, op: str, arg: str):
        _, xv, _ = self._operand(x, op, arg)
        if xv.ndim < 2 or xv.shape[-1] < 1:
            raise shape_error(op, f"{arg} must be [N, C] or [N, d1, ..., C] (classes on the "
                              f"last axis) with C >= 1, got shape {xv.shape}",
                              expected="[N, ..., C]", got=xv.shape)
        return xv

    def _class_attrs(self, x, labels, weight, ignore_index, smoothing, reduction, op, arg):
        """Validated :class:`ClassLossAttrs` for cross_entropy / nll_loss."""
        reduction = check_reduction(reduction, op)
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
            raise TypeError(f"{op}: ignore_index must be an int, got {ignore_index!r}")
        ignore_index = int(ignore_index)
        if not -2**63 <= ignore_index < 2**63:   # labels are int64
            raise ValueError(f"{op}: ignore_index={ignore_index} does not fit in int64")
        xv = self._class_input(x, op, arg)
        c = xv.shape[-1]
        w = None
        if weight is not None:
            if is_scalar(weight):
                hint = (" (the third positional argument is weight, as in PyTorch: pass "
                        "label_smoothing= by keyword)" if op == "cross_entropy" else "")
                raise TypeError(f"{op}: weight must be an array of {c} class weights, got "
                                f"{weight!r}{hint}")
            w = _constant_array(weight, self.dtype, op, "weight")
            if w.shape != (c,):
                raise shape_error(op, f"weight must have shape ({c},), one weight per class "
                                  f"of the input's last axis, got {w.shape}",
                                  expected=(c,), got=w.shape)
        lab, ignored = _labels(labels, xv.shape, ignore_index, op, "labels")
        total = _total_weight(lab, ignored, w, ignore_index, self.dtype)
        return ClassLossAttrs(lab, w, ignore_index, smoothing, reduction, total)

    def mse_loss(self, pred, target, reduction="mean"):
        """``(pred - target)^2`` reduced by ``reduction``."""
        reduction = check_reduction(reduction, "mse_loss")
        return self._loss_pair(Op.MSE_LOSS, pred, target, reduction)

    def l1_loss(self, pred, target, reduction="mean"):
        """``|pred - target|`` reduced by ``reduction``; gradient sign(pred - target)
        (0 at 0), divided by the element count for the mean."""
        reduction = check_reduction(reduction, "l1_loss")
        return self._loss_pair(Op.L1_LOSS, pred, target, reduction)

    def huber_loss(self, pred, target, delta=1.0, reduction="mean"):
        """``0.5 d^2`` where ``|d| < delta`` else ``delta (|d| - delta/2)``,
        ``d = pred - target`` (torch.nn.functional.huber_loss), reduced by
        ``reduction``; delta > 0."""
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
            raise TypeError(f"huber_loss: delta must be a real number, got {delta!r}")
        if not float(delta) > 0.0:
            raise ValueError(f"huber_loss: delta must be > 0, got {delta!r}")
        reduction = check_reduction(reduction, "huber_loss")
        return self._loss_pair(Op.HUBER_LOSS, pred, target, HuberAttrs(float(delta), reduction))

    def binary_cross_entropy_with_logits(self, logits, target, weight=None, pos_weight=None,
                                         reduction="mean"):
        """``weight * ((1 - t) x + (1 + (pos_weight - 1) t) log(1 + exp(-x)))``,
        computed stably, reduced by ``reduction`` (torch's
        binary_cross_entropy_with_logits). ``logits`` and ``target`` have the
        same shape; ``weight`` and ``pos_weight`` are constant arrays
        broadcastable to it (``pos_weight [C]`` weighs the positives of each
        class of the last axis). Gradients ``weight (l σ(x) - pos_weight t)``
        to the logits, ``l = 1 + (pos_weight - 1) t``, and
        ``weight (-x + (pos_weight - 1) log(1 + exp(-x)))`` to the target."""
        op = "binary_cross_entropy_with_logits"
        reduction = check_reduction(reduction, op)
        _, xv, _ = self._operand(logits, op, "logits")
        consts = []
        for arg, a in (("weight", weight), ("pos_weight", pos_weight)):
            if a is not None:
                a = _constant_array(a, self.dtype, op, arg)
                try:
                    ok = np.broadcast_shapes(a.shape, xv.shape) == xv.shape
                except ValueError:
                    ok = False
                if not ok:
                    raise shape_error(op, f"{arg} of shape {a.shape} does not broadcast to the "
                                      f"input's shape {xv.shape}", expected=xv.shape, got=a.shape)
            consts.append(a)
        return self._loss_pair(Op.BCE_WITH_LOGITS, logits, target,
                               BceAttrs(consts[0], consts[1], reduction))

    def cross_entropy(self, logits, labels, weight=None, ignore_index=-100,
                      label_smoothing=0.0, reduction="mean"):
        """Cross-entropy of ``logits [N, C]`` or ``[N, d1, ..., C]`` (classes on
        the LAST axis) against integer ``labels [N]`` / ``[N, d1, ...]``
        (torch.nn.functional.cross_entropy with class-index targets).

        Per target: ``(1 - eps) w_y (-logp_y) + (eps / C) sum_c w_c (-logp_c)``
        with ``logp = log_softmax(logits)``, ``w`` the class ``weight [C]``
        (ones when None), ``eps = label_smoothing``; 0 where the label equals
        ``ignore_index``. "mean" divides the sum by the total weight of the
        non-ignored labels (NaN when every label is ignored), as PyTorch.
        One fused op that saves the per-row log-sum-exp; backward
        ``(A softmax - a) * upstream`` per row."""
        op = "cross_entropy"
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real):
            raise TypeError(
                f"{op}: label_smoothing must be a real number, got {label_smoothing!r}")
        eps = float(label_smoothing)
        if not 0.0 <= eps <= 1.0:
            raise ValueError(
                f"{op}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
        attrs = self._class_attrs(logits, labels, weight, ignore_index, eps, reduction,
                                  op, "logits")
        return self._apply(Op.CROSS_ENTROPY, (logits,), attrs)

    def nll_loss(self, log_probs, labels, weight=None, ignore_index=-100, reduction="mean"):
        """``-weight[y] * log_probs[..., y]`` per target for ``log_probs [N, C]`` or
        ``[N, d1, ..., C]`` (classes last), 0 where the label equals
        ``ignore_index``; "mean" divides by the total weight of the non-ignored
        labels, as PyTorch."""
        attrs = self._class_attrs(log_probs, labels, weight, ignore_index, 0.0, reduction,
                                  "nll_loss", "log_probs")
        return self._apply(Op.NLL_LOSS, (log_probs,), attrs)


# ================================================= losses of SPEC section 11
# Each is one op; its backward rule is in yscv/backward/loss.py. "batchmean"
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
    """cosine_similarity: the axis (negative, counted in the broadcast shape)
    and ``eps``, the floor of each norm."""

    axis: int
    eps: float


class PairwiseAttrs(NamedTuple):
    """pairwise_distance: the norm order ``p`` (>= 0, may be inf), the ``eps``
    added to the difference, and whether the last axis is kept (size 1)."""

    p: float
    eps: float
    keepdim: bool


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


class CtcAttrs(NamedTuple):
    """ctc_loss: the targets flattened (read-only int64, sample n's labels at
    ``offsets[n]``), input and target lengths (int64 [N]), the blank class,
    the reduction, zero_infinity, and whether the input was unbatched [T, C]."""

    targets: np.ndarray
    offsets: np.ndarray
    input_lengths: np.ndarray
    target_lengths: np.ndarray
    blank: int
    reduction: str
    zero_infinity: bool
    batched: bool


def reduce_terms(terms: np.ndarray, reduction: str) -> np.ndarray:
    """:func:`reduce_loss` plus kl_div's "batchmean" (sum over the first axis's
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
    return np.sum((a / na) * (b / nb), axis=attrs.axis), None


@register_forward(Op.PAIRWISE_DISTANCE)
def pairwise_distance_forward(attrs, a, b):
    d = p_norm(a - b + attrs.eps, attrs.p)
    return (d[..., None] if attrs.keepdim else d), None


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


def ctc_reduce(nll: np.ndarray, attrs) -> np.ndarray:
    """The reported loss from the per-sample nll: zero_infinity, then "none"
    (shape [N], or 0-d unbatched), "sum", or "mean" (each loss over its
    target length, at least 1, then the batch mean), as PyTorch."""
    loss = np.where(nll == np.inf, 0, nll).astype(nll.dtype) if attrs.zero_infinity else nll
    if attrs.reduction == "none":
        return loss if attrs.batched else loss.reshape(())
    if attrs.reduction == "sum":
        return reduce_loss(loss, "sum")
    per = loss / np.maximum(attrs.target_lengths, 1).astype(loss.dtype)
    return reduce_loss(per, "mean")


@register_forward(Op.CTC_LOSS)
def ctc_loss_forward(attrs, log_probs):
    lp = log_probs if attrs.batched else log_probs[:, None, :]
    nll, log_alpha = ctc_rows(lp, attrs.targets, attrs.offsets, attrs.input_lengths,
                              attrs.target_lengths, attrs.blank)
    return ctc_reduce(nll, attrs), (nll, log_alpha)

