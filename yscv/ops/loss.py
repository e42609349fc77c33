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
  (log-softmax + weighted NLL + label smoothing, `yscv.kernels.loss`)
  over the logits viewed as rows [R, C] (classes on the LAST axis); it saves
  only the per-row log-sum-exp [R] for backward.
* ``nll_loss(log_probs[..., C], labels[...])``: ``-weight[y] * log_probs[..., y]``
  per target (NumPy: a pick and, in backward, a scatter).

* The other losses are in `yscv.ops.loss_functional`
  (smooth_l1_loss, kl_div, ..., poisson_nll_loss) and `yscv.ops.loss_ctc`
  (ctc_loss), which import the reduction and constant-array checks from
  here (this module imports nothing from them).

Labels are integer arrays kept (read-only, C-contiguous int64) in the node's
attributes. A label equal to ``ignore_index`` contributes 0 to the loss and
its weight is left out of the mean's denominator.
"""
from __future__ import annotations

import numbers
from typing import NamedTuple, Optional

import numpy as np

from ..compute.loss import cross_entropy_forward as ce_rows
from ..compute.loss import label_rows, reduce_loss, softplus_exact
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_graph_array, as_index_array, is_scalar, shape_error

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


def _broadcast_constant(a, shape: tuple, dtype, op: str, arg: str) -> np.ndarray:
    """`_constant_array`, checked to broadcast to the input's ``shape``
    without changing it (ShapeError otherwise)."""
    a = _constant_array(a, dtype, op, arg)
    try:
        ok = np.broadcast_shapes(a.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise shape_error(op, f"{arg} of shape {a.shape} does not broadcast to the "
                          f"input's shape {shape}", expected=shape, got=a.shape)
    return a


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


class LossOps:
    """Graph methods of the core losses (the other losses are in
    `yscv.ops.loss_functional.FunctionalLossOps` and
    `yscv.ops.loss_ctc.CtcLossOps`)."""

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
        """Validated `ClassLossAttrs` for cross_entropy / nll_loss."""
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
                a = _broadcast_constant(a, xv.shape, self.dtype, op, arg)
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
