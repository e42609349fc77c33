"""Loss drivers: the fused cross-entropy kernel calls, label rows, the
reduction shared by every loss, and the stable sigmoid / softplus the
logits losses use (from :mod:`yscv.compute.activation`)."""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from .activation import sigmoid, softplus_exact
from .arrays import readonly

__all__ = ["cross_entropy_forward", "cross_entropy_backward", "label_rows", "reduce_loss",
           "sigmoid", "softplus_exact"]

K = lazy("loss")

_NO_WEIGHT = {np.dtype(t): np.empty(0, dtype=t) for t in (np.float32, np.float64)}
for _a in _NO_WEIGHT.values():
    _a.flags.writeable = False


def _weight_or_none(weight, dtype) -> np.ndarray:
    """``weight``, or the kernels' "no class weight": a read-only empty array."""
    return weight if weight is not None else _NO_WEIGHT[np.dtype(dtype)]


def cross_entropy_forward(logits, labels, weight, ignore_index, label_smoothing):
    """(per-row loss [R], per-row log-sum-exp [R]) of ``logits`` viewed as rows
    [R, C], in one fused pass."""
    c = logits.shape[-1]
    return K.cross_entropy_forward(readonly(logits.reshape(-1, c)), labels.reshape(-1),
                                   _weight_or_none(weight, logits.dtype), ignore_index,
                                   label_smoothing)


def cross_entropy_backward(logits, labels, lse, weight, ignore_index, label_smoothing, up):
    """The logits' gradient (A softmax - a) * up, per row; ``up`` is [R] or [1]."""
    c = logits.shape[-1]
    gx = K.cross_entropy_backward(readonly(logits.reshape(-1, c)), labels.reshape(-1), lse,
                                  _weight_or_none(weight, logits.dtype), ignore_index,
                                  label_smoothing, readonly(up))
    return gx.reshape(logits.shape)


def label_rows(labels: np.ndarray, ignore_index: int):
    """(row indices, labels) of the targets that are not ignored, labels flat."""
    flat = labels.reshape(-1)
    keep = np.flatnonzero(flat != ignore_index)
    if keep.size == flat.size:
        return np.arange(flat.size), flat
    return keep, flat[keep]


def reduce_loss(terms: np.ndarray, reduction: str, denominator=None) -> np.ndarray:
    """``terms`` reduced as asked, in their dtype. "mean" divides the sum by
    ``denominator`` (default: the element count); a zero denominator gives
    NaN (0/0) as PyTorch, without NumPy's warning."""
    if reduction == "none":
        return terms
    total = terms.sum(dtype=terms.dtype)
    if reduction == "sum":
        return np.asarray(total)
    d = terms.size if denominator is None else denominator
    if d == 0:   # 0/0 = NaN (all targets ignored, empty input); x/0 = +-inf
        return np.asarray(total * terms.dtype.type(np.inf) if total else
                          terms.dtype.type(np.nan))
    return np.asarray(total / terms.dtype.type(d))
