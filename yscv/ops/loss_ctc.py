"""Loss ops (forward): ctc_loss (`CtcLossOps`).
See yscv/registry.py for the op contract.

``ctc_loss(log_probs[T, N, C], ...)`` runs the log-space forward recursion
on Numba kernels (`yscv.kernels.ctc`) and saves the per-sample loss
[N] and the forward variables [N, T, 2 max(L) + 1]. The reduction check
comes from `yscv.ops.loss`, the bool check from `yscv.ops.loss_functional`.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ..compute.ctc import ctc_forward as ctc_rows
from ..compute.loss import reduce_loss
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_index_array, shape_error
from .loss import check_reduction
from .loss_functional import _flag


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


class CtcLossOps:
    """Graph method of the CTC loss."""

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
