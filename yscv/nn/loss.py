"""Loss modules, as ``torch.nn``'s: constructed with PyTorch's arguments,
called as ``loss_fn(g, input, target) -> NodeId``, each a thin ``forward``
over its Graph method (``g.cross_entropy``, ``g.mse_loss``, ...).

Class weights (``weight``, ``pos_weight``) are buffers, as in PyTorch, so
``state_dict()`` holds them under PyTorch's keys. The deprecated
``size_average`` / ``reduce`` arguments map to ``reduction`` by PyTorch's
rule (either given: both default to True; both True -> "mean", ``reduce``
alone -> "sum", ``reduce=False`` -> "none").
"""
from __future__ import annotations

import numbers

import numpy as np

from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "HuberLoss",
           "BCEWithLogitsLoss", "SmoothL1Loss", "KLDivLoss", "BCELoss", "CosineSimilarity",
           "PairwiseDistance", "TripletMarginLoss", "MarginRankingLoss", "GaussianNLLLoss",
           "PoissonNLLLoss", "CTCLoss"]


def _reduction(cls: str, size_average, reduce, reduction) -> str:
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{cls}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _weight_array(cls: str, arg: str, w):
    if w is None:
        return None
    if hasattr(w, "detach") and hasattr(w, "cpu"):  # a torch tensor, not a NodeId
        w = w.detach().cpu().numpy()
    a = np.array(w, copy=True)
    if a.dtype.kind not in "fiu" or a.dtype == np.bool_:
        raise TypeError(f"{cls}: {arg} must be a real array, got dtype {a.dtype}")
    return a if a.dtype.kind == "f" else a.astype(np.float32)


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        self.reduction = _reduction(type(self).__name__, size_average, reduce, reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _weight_array(type(self).__name__, "weight", weight))


def _ignore_index(cls: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{cls}: ignore_index must be an int, got {v!r}")
    return int(v)


class CrossEntropyLoss(_WeightedLoss):
    """``torch.nn.CrossEntropyLoss(weight=None, size_average=None,
    ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0)``:
    ``loss_fn(g, logits, labels)`` is ``g.cross_entropy`` (classes on the
    LAST axis of the logits, integer labels)."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        cls = type(self).__name__
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real) \
                or not 0.0 <= float(label_smoothing) <= 1.0:
            raise ValueError(f"{cls}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
        ignore_index = _ignore_index(cls, ignore_index)
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)

    def forward(self, g, input, target):
        return g.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               label_smoothing=self.label_smoothing, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """``torch.nn.NLLLoss(weight=None, size_average=None, ignore_index=-100,
    reduce=None, reduction="mean")``: ``loss_fn(g, log_probs, labels)`` is
    ``g.nll_loss`` (classes on the last axis)."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        ignore_index = _ignore_index(type(self).__name__, ignore_index)
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, g, input, target):
        return g.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """``torch.nn.MSELoss(size_average=None, reduce=None, reduction="mean")``:
    ``loss_fn(g, input, target)`` is ``g.mse_loss``."""

    def forward(self, g, input, target):
        return g.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``torch.nn.L1Loss(size_average=None, reduce=None, reduction="mean")``:
    ``loss_fn(g, input, target)`` is ``g.l1_loss``."""

    def forward(self, g, input, target):
        return g.l1_loss(input, target, reduction=self.reduction)


class HuberLoss(_Loss):
    """``torch.nn.HuberLoss(reduction="mean", delta=1.0)``:
    ``loss_fn(g, input, target)`` is ``g.huber_loss``."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        cls = type(self).__name__
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
            raise TypeError(f"{cls}: delta must be a real number, got {delta!r}")
        if not float(delta) > 0.0:
            raise ValueError(f"{cls}: delta must be > 0, got {delta!r}")
        super().__init__(None, None, reduction)
        self.delta = float(delta)

    def forward(self, g, input, target):
        return g.huber_loss(input, target, delta=self.delta, reduction=self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, delta={self.delta}"


class BCEWithLogitsLoss(_Loss):
    """``torch.nn.BCEWithLogitsLoss(weight=None, size_average=None,
    reduce=None, reduction="mean", pos_weight=None)``: ``loss_fn(g, logits,
    target)`` is ``g.binary_cross_entropy_with_logits``; ``weight`` and
    ``pos_weight`` are buffers, as in PyTorch."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None):
        cls = type(self).__name__
        w = _weight_array(cls, "weight", weight)
        pw = _weight_array(cls, "pos_weight", pos_weight)
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", w)
        self.register_buffer("pos_weight", pw)

    def forward(self, g, input, target):
        return g.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``torch.nn.SmoothL1Loss(size_average=None, reduce=None,
    reduction="mean", beta=1.0)``: ``g.smooth_l1_loss``."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, g, input, target):
        return g.smooth_l1_loss(input, target, beta=self.beta, reduction=self.reduction)


class KLDivLoss(_Loss):
    """``torch.nn.KLDivLoss(size_average=None, reduce=None, reduction="mean",
    log_target=False)``: ``g.kl_div`` (``input`` holds log-probabilities;
    ``reduction="batchmean"`` as PyTorch)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):
        if reduction == "batchmean" and size_average is None and reduce is None:
            Module.__init__(self)
            self.reduction = reduction
        else:
            super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, g, input, target):
        return g.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_WeightedLoss):
    """``torch.nn.BCELoss(weight=None, size_average=None, reduce=None,
    reduction="mean")``: ``g.binary_cross_entropy`` on probabilities."""

    def forward(self, g, input, target):
        return g.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class CosineSimilarity(Module):
    """``torch.nn.CosineSimilarity(dim=1, eps=1e-8)``: ``g.cosine_similarity``
    along ``dim`` (not a loss: no reduction)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, g, x1, x2):
        return g.cosine_similarity(x1, x2, axis=self.dim, eps=self.eps)


class PairwiseDistance(Module):
    """``torch.nn.PairwiseDistance(p=2.0, eps=1e-6, keepdim=False)``:
    ``g.pairwise_distance`` over the last axis."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, g, x1, x2):
        return g.pairwise_distance(x1, x2, p=self.norm, eps=self.eps, keepdim=self.keepdim)


class TripletMarginLoss(_Loss):
    """``torch.nn.TripletMarginLoss(margin=1.0, p=2.0, eps=1e-6, swap=False,
    size_average=None, reduce=None, reduction="mean")``:
    ``loss_fn(g, anchor, positive, negative)`` is ``g.triplet_margin_loss``."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, g, anchor, positive, negative):
        return g.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``torch.nn.MarginRankingLoss(margin=0.0, size_average=None,
    reduce=None, reduction="mean")``: ``loss_fn(g, x1, x2, y)``."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, g, x1, x2, y):
        return g.margin_ranking_loss(x1, x2, y, margin=self.margin, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """``torch.nn.GaussianNLLLoss(full=False, eps=1e-6, reduction="mean")``:
    ``loss_fn(g, input, target, var)``."""

    def __init__(self, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, g, input, target, var):
        return g.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """``torch.nn.PoissonNLLLoss(log_input=True, full=False,
    size_average=None, eps=1e-8, reduce=None, reduction="mean")``."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, g, input, target):
        return g.poisson_nll_loss(input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class CTCLoss(_Loss):
    """``torch.nn.CTCLoss(blank=0, reduction="mean", zero_infinity=False)``:
    ``loss_fn(g, log_probs[T, N, C], targets, input_lengths, target_lengths)``
    is ``g.ctc_loss``."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(None, None, reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, g, log_probs, targets, input_lengths, target_lengths):
        return g.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=self.blank,
                          reduction=self.reduction, zero_infinity=self.zero_infinity)
