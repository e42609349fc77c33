"""Loss drivers: the fused cross-entropy kernel calls (and their NumPy
tier for small logits), label rows, the
reduction shared by every loss, and the stable sigmoid / softplus the
logits losses use (from `yscv.compute.activation`)."""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from .activation import sigmoid, softplus_exact
from .arrays import readonly

__all__ = ["cross_entropy_forward", "cross_entropy_backward", "numpy_tier", "label_rows", "reduce_loss",
           "sigmoid", "softplus_exact", "p_norm", "p_norm_grad"]

K = lazy("loss")

_NO_WEIGHT = {np.dtype(t): np.empty(0, dtype=t) for t in (np.float32, np.float64)}
for _a in _NO_WEIGHT.values():
    _a.flags.writeable = False


def _weight_or_none(weight, dtype) -> np.ndarray:
    """``weight``, or the kernels' "no class weight": a read-only empty array."""
    return weight if weight is not None else _NO_WEIGHT[np.dtype(dtype)]


#: logits elements (rows x classes) up to which cross-entropy runs as NumPy
#: array operations instead of the fused kernels (`numpy_tier`)
NUMPY_MAX_ELEMENTS = 4096


def numpy_tier(rows: int, classes: int) -> bool:
    """Whether cross-entropy over ``rows`` x ``classes`` logits runs as
    NumPy array operations (`_forward_numpy`, `_backward_numpy`)
    rather than the fused kernels of yscv/kernels/loss.py.

    Small batches (a classifier's [64, 10] logits): there the kernels'
    run-time gain is a few microseconds per step, while their first call
    compiles for ~1 s (the forward with its row reductions and exp, and the
    backward): a third of the README job's compile time went to them.
    Same formulas, term for term; the two tiers differ only in rounding
    (NumPy's exp and pairwise sums against the kernels' exp and eight-lane
    sums), and a given shape always takes the same tier (docs/engine.md,
    "Cold start")."""
    return rows * classes <= NUMPY_MAX_ELEMENTS


def _forward_numpy(x, labels, weight, ignore_index, eps):
    """(loss [R], lse [R]) of yscv.kernels.loss.cross_entropy_forward for
    x [R, C], with NumPy array operations in x's dtype (``weight`` None or
    [C]); the formulas of that module's docstring."""
    dt = x.dtype.type
    r, c = x.shape
    ign = labels == ignore_index
    y = np.where(ign, 0, labels)
    rows = np.arange(r)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = x.max(axis=1)
        d = x - m[:, None]
        ls = np.log(np.exp(d).sum(axis=1))
        lse = m + ls
        wy = weight[y] if weight is not None else dt(1.0)
        loss = wy * (ls - d[rows, y])
        if eps > 0.0:
            w_all = weight.sum(dtype=x.dtype) if weight is not None else dt(c)
            wd = (d * weight if weight is not None else d).sum(axis=1)
            loss = (dt(1.0) - dt(eps)) * loss + dt(eps) / dt(c) * (w_all * ls - wd)
    loss = np.asarray(loss, dtype=x.dtype)
    loss[ign] = 0
    lse[ign] = 0
    return loss, lse


def _backward_numpy(x, labels, lse, weight, ignore_index, eps, up):
    """The gradient of `_forward_numpy` as
    yscv.kernels.loss.cross_entropy_backward: ``up`` [R] or [1]."""
    dt = x.dtype.type
    r, c = x.shape
    ign = labels == ignore_index
    y = np.where(ign, 0, labels)
    rows = np.arange(r)
    hit = dt(1.0) - dt(eps)
    off = dt(eps) / dt(c)
    u = up if up.shape[0] == r else np.full(r, up[0], dtype=x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(x - lse[:, None])
        if weight is not None:
            wy = weight[y]
            a = hit * wy + off * weight.sum(dtype=x.dtype)
            out = u[:, None] * (a[:, None] * p - off * weight)
        else:
            wy = dt(1.0)
            out = u[:, None] * (p - off)
        out[rows, y] -= u * (hit * wy)
    out[ign] = 0
    return out


def cross_entropy_forward(logits, labels, weight, ignore_index, label_smoothing):
    """(per-row loss [R], per-row log-sum-exp [R]) of ``logits`` viewed as rows
    [R, C], in one fused pass (NumPy operations for small ones: `numpy_tier`)."""
    c = logits.shape[-1]
    x = logits.reshape(-1, c)
    if numpy_tier(x.shape[0], c):
        return _forward_numpy(x, labels.reshape(-1), weight, ignore_index, label_smoothing)
    return K.cross_entropy_forward(readonly(x), labels.reshape(-1),
                                   _weight_or_none(weight, logits.dtype), ignore_index,
                                   label_smoothing)


def cross_entropy_backward(logits, labels, lse, weight, ignore_index, label_smoothing, up):
    """The logits' gradient (A softmax - a) * up, per row; ``up`` is [R] or [1]."""
    c = logits.shape[-1]
    x = logits.reshape(-1, c)
    if numpy_tier(x.shape[0], c):
        gx = _backward_numpy(x, labels.reshape(-1), lse, weight, ignore_index,
                             label_smoothing, up)
    else:
        gx = K.cross_entropy_backward(readonly(x), labels.reshape(-1), lse,
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


def p_norm(d: np.ndarray, p: float) -> np.ndarray:
    """The vector ``p``-norm of ``d`` over its last axis, in d's dtype
    (torch.linalg.vector_norm): p = 0 counts the nonzeros, p = inf is the
    largest magnitude."""
    if p == 2.0:
        return np.sqrt(np.sum(d * d, axis=-1))
    if p == 1.0:
        return np.sum(np.abs(d), axis=-1)
    if p == np.inf:
        return np.max(np.abs(d), axis=-1)
    if p == 0.0:
        return np.count_nonzero(d, axis=-1).astype(d.dtype)
    return np.sum(np.abs(d) ** p, axis=-1) ** (1.0 / p)


def p_norm_grad(d: np.ndarray, norm: np.ndarray, p: float) -> np.ndarray:
    """``d norm / d d`` (d's shape) for ``norm = p_norm(d, p)``, PyTorch's
    rule at the edges: 0 where the norm is 0 (and, for p < 1, where d is 0);
    p = 1 gives sign(d); p = inf splits the gradient evenly among the tied
    largest magnitudes; p = 0 has gradient 0."""
    nk = norm[..., None]
    if p == 0.0:
        return np.zeros_like(d)
    if p == 1.0:
        return np.sign(d)
    if p == np.inf:
        hit = np.abs(d) == nk
        return np.sign(d) * hit / np.sum(hit, axis=-1, keepdims=True).astype(d.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        if p == 2.0:
            r = d / nk
        else:
            a = np.abs(d)
            r = np.sign(d) * np.where(a == 0, 0, a ** (p - 1.0)) / nk ** (p - 1.0)
    return np.where(nk == 0, 0, r).astype(d.dtype, copy=False)
