"""Loss ops (forward). See yscv/registry.py for the op contract.

Every loss is reduced by the mean and returns a 0-d node of the graph dtype.

* ``mse_loss``, ``l1_loss``, ``huber_loss``, ``binary_cross_entropy_with_logits``
  take ``(pred, target)`` of exactly the same shape (PyTorch broadcasts with
  a warning; we refuse with a ShapeError). ``target`` may be a NodeId (its
  gradient is computed too, as PyTorch) or an array (a constant). Nothing is
  saved: backward recomputes ``pred - target`` from the input values.
* ``cross_entropy(logits[N, C], labels[N])`` is ONE fused Numba pass
  (log-softmax + NLL + label smoothing, :mod:`yscv.kernels.loss`); it saves
  only the per-row log-sum-exp [N] for backward.
* ``nll_loss(log_probs[N, C], labels[N])``: mean of ``-log_probs[i, labels[i]]``.

Labels are integer arrays kept (read-only, int64) in the node's attributes.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..kernels import lazy
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_index_array, shape_error
from .activation import SOFTPLUS, unary_kernel_forward

K = lazy("loss")


def ro(a: np.ndarray) -> np.ndarray:
    """A read-only C-contiguous view (one Numba specialisation per dtype)."""
    v = np.ascontiguousarray(a).view()
    v.flags.writeable = False
    return v


def softplus_exact(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) for any x (the fused kernel with an infinite threshold)."""
    return unary_kernel_forward(x, SOFTPLUS, 1.0, float("inf"))


def _mean(a: np.ndarray) -> np.ndarray:
    """Mean of all elements as a 0-d array of a's dtype (NaN for no elements,
    as PyTorch, without NumPy's empty-mean warning)."""
    if a.size == 0:
        return np.full((), np.nan, dtype=a.dtype)
    return np.asarray(np.mean(a, dtype=a.dtype))


@register_forward(Op.MSE_LOSS)
def mse_loss_forward(attrs, pred, target):
    d = pred - target
    return _mean(d * d), None


@register_forward(Op.L1_LOSS)
def l1_loss_forward(attrs, pred, target):
    return _mean(np.abs(pred - target)), None


@register_forward(Op.HUBER_LOSS)
def huber_loss_forward(delta, pred, target):
    # with m = min(|d|, delta): 0.5 m^2 + delta (|d| - m) is 0.5 d^2 where
    # |d| <= delta and delta (|d| - delta/2) beyond, without np.where (which
    # branches per element)
    a = np.abs(pred - target)
    m = np.minimum(a, delta)
    a -= m
    a *= delta
    a += m * (m * pred.dtype.type(0.5))
    return _mean(a), None


@register_forward(Op.BCE_WITH_LOGITS)
def bce_with_logits_forward(attrs, logits, target):
    # max(x, 0) - x t + log1p(exp(-|x|)) = softplus(x) - x t: the fused,
    # stable softplus kernel (no threshold, so exact for large x too)
    terms = softplus_exact(logits)
    terms -= logits * target
    return _mean(terms), None


@register_forward(Op.CROSS_ENTROPY)
def cross_entropy_forward(attrs, logits):
    labels, smoothing = attrs
    if logits.shape[0] == 0:  # mean over no rows: NaN, as PyTorch
        return np.full((), np.nan, dtype=logits.dtype), np.empty(0, dtype=logits.dtype)
    loss, lse = K.cross_entropy_forward(ro(logits), labels, smoothing)
    return np.asarray(loss, dtype=logits.dtype), lse


@register_forward(Op.NLL_LOSS)
def nll_loss_forward(labels, log_probs):
    n = log_probs.shape[0]
    if n == 0:
        return np.full((), np.nan, dtype=log_probs.dtype), None
    picked = log_probs[np.arange(n), labels]
    return np.asarray(-np.mean(picked, dtype=log_probs.dtype)), None


# ------------------------------------------------------------ graph methods
def _labels(labels, logits_shape: tuple, op: str, arg: str) -> np.ndarray:
    """Validated int64 labels [N] for logits [N, C], read-only."""
    if type(labels) is NodeId:
        raise TypeError(f"{op}: {arg} must be an integer array of class indices, not a "
                        "NodeId (labels are not differentiable)")
    lab = as_index_array(labels, op, arg)
    n, c = logits_shape
    if lab.shape != (n,):
        raise shape_error(op, f"{arg} must have shape ({n},) to match input of shape "
                          f"{logits_shape}, got {lab.shape}", expected=(n,), got=lab.shape)
    if n and (lab.min() < 0 or lab.max() >= c):   # two reductions; locate only on failure
        k = int(np.flatnonzero((lab < 0) | (lab >= c))[0])
        raise IndexError(f"{op}: {arg}[{k}]={int(lab[k])} is out of range for {c} classes "
                         f"(valid labels are 0..{c - 1})")
    lab.flags.writeable = False
    return lab


class LossOps:
    """Graph methods of the loss category."""

    def _loss_pair(self, op: Op, pred, target, attrs=None):
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
        if xv.ndim != 2 or xv.shape[1] < 1:
            raise shape_error(op, f"{arg} must be 2-d [N, C] with C >= 1, got shape "
                              f"{xv.shape}", expected="[N, C]", got=xv.shape)
        return xv

    def mse_loss(self, pred, target):
        """``mean((pred - target)^2)``."""
        return self._loss_pair(Op.MSE_LOSS, pred, target)

    def l1_loss(self, pred, target):
        """``mean(|pred - target|)``; gradient sign(pred - target)/n (0 at 0)."""
        return self._loss_pair(Op.L1_LOSS, pred, target)

    def huber_loss(self, pred, target, delta=1.0):
        """Mean of ``0.5 d^2`` where ``|d| < delta`` else ``delta (|d| - delta/2)``,
        ``d = pred - target`` (torch.nn.functional.huber_loss); delta > 0."""
        if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
            raise TypeError(f"huber_loss: delta must be a real number, got {delta!r}")
        if not float(delta) > 0.0:
            raise ValueError(f"huber_loss: delta must be > 0, got {delta!r}")
        return self._loss_pair(Op.HUBER_LOSS, pred, target, float(delta))

    def binary_cross_entropy_with_logits(self, logits, target):
        """Mean of ``max(x, 0) - x t + log(1 + exp(-|x|))`` (stable); gradients
        ``(sigmoid(x) - t)/n`` to the logits and ``-x/n`` to the target."""
        return self._loss_pair(Op.BCE_WITH_LOGITS, logits, target)

    def cross_entropy(self, logits, labels, label_smoothing=0.0):
        """Mean cross-entropy of ``logits [N, C]`` against integer ``labels [N]``
        with optional label smoothing (torch.nn.functional.cross_entropy):
        target distribution ``(1 - eps) onehot + eps / C``. One fused op;
        backward ``(softmax - target) / N``."""
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real):
            raise TypeError(
                f"cross_entropy: label_smoothing must be a real number, got {label_smoothing!r}")
        eps = float(label_smoothing)
        if not 0.0 <= eps <= 1.0:
            raise ValueError(
                f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing!r}")
        xv = self._class_input(logits, "cross_entropy", "logits")
        lab = _labels(labels, xv.shape, "cross_entropy", "labels")
        return self._apply(Op.CROSS_ENTROPY, (logits,), (lab, eps))

    def nll_loss(self, log_probs, labels):
        """``mean(-log_probs[i, labels[i]])`` for ``log_probs [N, C]``."""
        xv = self._class_input(log_probs, "nll_loss", "log_probs")
        lab = _labels(labels, xv.shape, "nll_loss", "labels")
        return self._apply(Op.NLL_LOSS, (log_probs,), lab)
