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
           "BCEWithLogitsLoss"]


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
    if hasattr(w, "detach") and hasattr(w, "numpy"):  # a torch tensor, without importing torch
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


# Loss modules for the other losses of the op catalogue (smooth_l1_loss,
# kl_div, binary_cross_entropy, cosine_similarity, triplet_margin_loss,
# margin_ranking_loss, gaussian_nll_loss, poisson_nll_loss, ctc_loss, ...)
# belong here, one class per Graph method with torch.nn's name and
# constructor arguments (SmoothL1Loss, KLDivLoss, BCELoss, ...), each listed
# in __all__ and exported from yscv.nn.
