"""Reductions and scans (backward): one rule per op against the namespace
``ns`` (yscv/engine/namespace/__init__.py), run on arrays by the first-order walks
and on the graph by ``create_graph=True``.

The cotangent ``g`` has the output shape; ``ns.reshape(g, attrs.kshape)``
puts size-1 axes back where the input was reduced, so it broadcasts against
the input. Masks (the extremal elements, a zero std) and counts enter as
constants, as in PyTorch's double backward. sum and mean, on the per-node
hot path, keep a written-out array copy that returns a fresh C-contiguous
array (it may become a leaf's stored gradient or reach a Numba kernel),
held to its rule's bits by tests/test_rule_flags.py.
"""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_rule
from ._rules import unary


def _broadcast_back(gk: np.ndarray, shape: tuple) -> np.ndarray:
    out = np.empty(shape, dtype=gk.dtype)
    out[...] = gk
    return out


def sum_array(ns, g, inputs, out, a, saved, needs):
    """`sum_rule` written out for arrays (hot path): g broadcast back, materialised."""
    return (_broadcast_back(g.reshape(a.kshape), inputs[0].shape),)


@register_rule(Op.SUM, array=sum_array)
def sum_rule(ns, g, inputs, out, a, saved, needs):
    """g broadcast back over the reduced axes."""
    return (ns.expand(ns.reshape(g, a.kshape), inputs[0].shape),)


def _mean_share_array(gk, count):
    with np.errstate(divide="ignore", invalid="ignore"):
        return gk / float(count) if count else gk * np.nan


def mean_array(ns, g, inputs, out, a, saved, needs):
    """`mean_rule` written out for arrays (hot path)."""
    return (_broadcast_back(_mean_share_array(g.reshape(a.kshape), a.count), inputs[0].shape),)


@register_rule(Op.MEAN, array=mean_array)
def mean_rule(ns, g, inputs, out, a, saved, needs):
    """g / count broadcast back; NaN for an empty reduction (as the forward)."""
    gk = ns.reshape(g, a.kshape)
    with np.errstate(divide="ignore", invalid="ignore"):
        gk = ns.div(gk, float(a.count)) if a.count else ns.mul(gk, np.nan)
    return (ns.expand(gk, inputs[0].shape),)


def _extremum_rule(ns, g, x, y, a):
    """Split the cotangent evenly among the elements equal to the extremum
    (PyTorch amax/amin: ``g / count * mask``); a NaN extremum routes the
    gradient to the NaNs. The mask and its count are constants."""
    xv = ns.value(x)
    outk = ns.value(y).reshape(a.kshape)
    mask = xv == outk
    nan_out = np.isnan(outk)
    if nan_out.any():
        mask |= np.isnan(xv) & nan_out
    count = np.add.reduce(mask, axis=a.axes, keepdims=True, dtype=xv.dtype)
    share = ns.div(ns.reshape(g, a.kshape), ns.const(count))
    return ns.mul(share, ns.const(mask.astype(xv.dtype)))


unary(Op.MAX, _extremum_rule)
unary(Op.MIN, _extremum_rule)
unary(Op.LOGSUMEXP, lambda ns, g, x, y, a: ns.mul(
    ns.exp(ns.sub(x, ns.reshape(y, a.kshape))), ns.reshape(g, a.kshape)))


def _centered(ns, x, attrs, saved):
    """x - mean(x) over the reduced axes. On the graph the mean is a node of
    x (its dependence on x is part of the second derivative); on arrays the
    mean the forward saved has the same bits as ``ns.mean`` (the same
    pairwise sum and division) and costs nothing."""
    if ns.is_graph:
        return ns.sub(x, ns.mean(x, axis=attrs.axes, keepdims=True))
    return ns.sub(x, saved)


def _var_scale(attrs):
    denom = attrs.count - attrs.ddof
    return 2.0 / denom if denom > 0 else np.inf


@register_rule(Op.VAR)
def var_rule(ns, g, inputs, out, attrs, saved, needs):
    """d var / dx = 2 (x - mean) / (N - ddof); ``saved`` is the mean."""
    with np.errstate(invalid="ignore"):
        return (ns.mul(_centered(ns, inputs[0], attrs, saved),
                       ns.mul(ns.reshape(g, attrs.kshape), _var_scale(attrs))),)


@register_rule(Op.STD)
def std_rule(ns, g, inputs, out, attrs, saved, needs):
    """(g / (2 std), 0 where std == 0) * 2 (x - mean) / (N - c), as
    PyTorch's std_backward through var_backward."""
    yk = ns.reshape(out, attrs.kshape)
    zero = ns.value(yk) == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        h = ns.div(ns.reshape(g, attrs.kshape), ns.mul(yk, 2.0))
        if zero.any():
            h = ns.where(zero, 0.0, h)
        return (ns.mul(_centered(ns, inputs[0], attrs, saved), ns.mul(h, _var_scale(attrs))),)


# --------------------------------------------- prod, norm, scans, sort
def _reduced_last(ns, x, axes):
    """``x`` with the reduced ``axes`` moved last and flattened into one:
    ``(t [..., n], n, undo)``, ``undo(a)`` restores ``x``'s layout."""
    shape = x.shape
    nd = len(shape)
    axes = tuple(range(nd)) if axes is None else axes
    keep = [d for d in range(nd) if d not in axes]
    perm = tuple(keep + list(axes))
    moved = tuple(shape[d] for d in perm)
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    inv = tuple(int(i) for i in np.argsort(perm))
    identity = perm == tuple(range(nd))
    t = x if identity else ns.transpose(x, perm)
    t = ns.reshape(t, moved[:len(keep)] + (n,))

    def undo(a):
        a = ns.reshape(a, moved)
        return a if identity else ns.transpose(a, inv)

    return t, n, undo


@register_rule(Op.PROD)
def prod_rule(ns, g, inputs, out, attrs, saved, needs):
    """PyTorch's prod_backward: g * (out / x) without zeros, else g times the
    product of the other elements: exclusive cumulative products from both
    sides (prod_safe_zeros_backward), no division."""
    x = inputs[0]
    xv = ns.value(x)
    gk = ns.reshape(g, attrs.kshape)
    if xv.size == 0 or not (xv == 0).any():
        with np.errstate(invalid="ignore", divide="ignore"):
            return (ns.mul(gk, ns.div(ns.reshape(out, attrs.kshape), x)),)
    t, n, undo = _reduced_last(ns, x, attrs.axes)
    if n == 1:
        return (ns.mul(gk, ns.const(np.ones(xv.shape, dtype=xv.dtype))),)
    ones = ns.const(np.ones(t.shape[:-1] + (1,), dtype=xv.dtype))
    left = ns.cumprod(ns.cat([ones, ns.narrow(t, -1, 0, n - 1)], -1), -1)
    right = ns.flip(ns.cumprod(ns.cat([ones, ns.flip(ns.narrow(t, -1, 1, n - 1), -1)], -1), -1),
                    -1)
    return (ns.mul(gk, undo(ns.mul(left, right))),)


@register_rule(Op.NORM)
def norm_rule(ns, g, inputs, out, attrs, saved, needs):
    """PyTorch's norm_backward, branch by branch (p = 0: zero gradient);
    sign(x) and the masks are constants (their derivative is 0, as sgn's
    and masked_fill's)."""
    x = inputs[0]
    p = attrs.ord
    if p == 0.0:
        return (ns.zeros_like(x),)
    xv = ns.value(x)
    dt = xv.dtype
    sign = ns.const(np.sign(xv))
    gk = ns.reshape(g, attrs.kshape)
    nk = ns.reshape(out, attrs.kshape)
    nv = ns.value(nk)
    if p == 1.0:
        return (ns.mul(gk, sign),)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if p == 2.0:
            s = ns.div(x, nk)
            if (nv == 0).any():
                s = ns.where(np.broadcast_to(nv == 0, xv.shape), 0.0, s)
            return (ns.mul(gk, s),)
        a = np.abs(xv)
        if np.isinf(p):
            mask = (a == nv) | np.isnan(a)
            count = np.add.reduce(mask, axis=attrs.axes, keepdims=True, dtype=dt)
            return (ns.mul(ns.div(gk, ns.const(count)), ns.const(np.sign(xv) * mask)),)
        ax = ns.abs(x)
        if p < 1.0:
            powed = ns.pow(ax, p - 1)
            if (xv == 0).any():
                powed = ns.where(xv == 0, 0.0, powed)
            return (ns.mul(ns.mul(ns.mul(powed, sign), gk), ns.pow(nk, 1 - p)),)
        scaled = ns.mul(ns.pow(ax, p - 1), sign) if p < 2.0 else ns.mul(x, ns.pow(ax, p - 2))
        sv = ns.div(gk, ns.pow(nk, p - 1))
        if (nv == 0).any():
            sv = ns.where(nv == 0, 0.0, sv)
        return (ns.mul(scaled, sv),)


def _reverse_cumsum(ns, a, axis):
    return ns.flip(ns.cumsum(ns.flip(a, axis), axis), axis)


@register_rule(Op.CUMSUM)
def cumsum_rule(ns, g, inputs, out, axis, saved, needs):
    """The reversed cumulative sum of g."""
    return (_reverse_cumsum(ns, g, axis) if len(inputs[0].shape) else g,)


@register_rule(Op.CUMPROD)
def cumprod_rule(ns, g, inputs, out, axis, saved, needs):
    """dx_k = sum_{i >= k} g_i prod_{j <= i, j != k} x_j (PyTorch's
    cumprod_backward): reversed_cumsum(out * g) / x without zeros; with
    zeros its exact form without division: the cumulative products of x
    with x_k replaced by 1, summed against g over i >= k ([..., n, n] work
    and memory, only where x has a zero)."""
    x = inputs[0]
    xv = ns.value(x)
    if xv.ndim == 0 or xv.shape[axis] <= 1:
        return (g,)
    if not (xv == 0).any():
        return (ns.div(_reverse_cumsum(ns, ns.mul(out, g), axis), x),)
    nd = xv.ndim
    perm = tuple(d for d in range(nd) if d != axis) + (axis,)
    inv = tuple(int(i) for i in np.argsort(perm))
    moved = axis != nd - 1
    t = ns.transpose(x, perm) if moved else x
    gt = ns.transpose(g, perm) if moved else g
    n = xv.shape[axis]
    lead = tuple(xv.shape[d] for d in perm[:-1])
    eye = np.eye(n, dtype=bool)
    omit = ns.cumprod(ns.where(eye, 1.0, ns.reshape(t, lead + (1, n))), -1)   # [..., k, i]
    upper = ns.const(np.triu(np.ones((n, n), dtype=xv.dtype)))                # i >= k
    gx = ns.sum(ns.mul(omit, ns.mul(ns.reshape(gt, lead + (1, n)), upper)), axis=-1)
    return (ns.transpose(gx, inv) if moved else gx,)


def _scatter_sorted(ns, g, inputs, out, attrs, saved, needs):
    """The gradient put back at the chosen positions (zeros elsewhere)."""
    x = inputs[0]
    if not len(x.shape):
        return (g,)
    zeros = np.zeros(x.shape, dtype=ns.value(g).dtype)
    return (ns.scatter_add(zeros, attrs.axis, attrs.index, g),)


register_rule(Op.TOPK)(_scatter_sorted)
register_rule(Op.SORT)(_scatter_sorted)


# ------------------------------------------------------------------ sum_to
def _sum_to_array(ns, g, xs, y, attrs, saved, needs):
    """`sum_to_rule` written out for arrays: the same values, materialised (a
    fresh array, not a read-only broadcast view, since it may become a
    leaf's stored gradient)."""
    out = np.empty(attrs.in_shape, dtype=g.dtype)
    out[...] = g
    return (out,)


@register_rule(Op.SUM_TO, array=_sum_to_array)
def sum_to_rule(ns, g, xs, y, attrs, saved, needs):
    """d sum_to(x, shape) / dx: the cotangent (``shape``) broadcast back to
    x's shape (``attrs.in_shape``), as PyTorch's sum_to_size."""
    return (ns.expand(g, attrs.in_shape),)
