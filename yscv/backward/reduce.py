"""Reductions (backward). See yscv/registry.py for the op contract.

The cotangent ``g`` has the output shape; ``g.reshape(attrs.kshape)`` puts
size-1 axes back where the input was reduced, so it broadcasts against the
input. Returned gradients are materialised (fresh, C-contiguous) arrays, not
zero-stride broadcast views: they may end up as a leaf's stored gradient or
be handed to a Numba kernel, and both want an ordinary array.
"""
from __future__ import annotations

import numpy as np

from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import recorded_unary
from ._legacy_rules import unary


def _broadcast_back(gk: np.ndarray, shape: tuple) -> np.ndarray:
    out = np.empty(shape, dtype=gk.dtype)
    out[...] = gk
    return out


def _mean_share(g, a):
    """g / count at the kept-dims shape; NaN for an empty reduction (as the forward)."""
    gk = g.reshape(a.kshape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return gk / a.count if a.count else gk * np.nan


def _extremum_backward(g, x, out, attrs):
    """Split the cotangent evenly among the elements equal to the extremum
    (PyTorch amax/amin). A NaN extremum routes the gradient to the NaNs."""
    outk = out.reshape(attrs.kshape)
    mask = x == outk
    nan_out = np.isnan(outk)
    if nan_out.any():
        mask |= np.isnan(x) & nan_out
    count = np.add.reduce(mask, axis=attrs.axes, keepdims=True, dtype=x.dtype)
    share = g.reshape(attrs.kshape) / count
    return np.multiply(mask, share, dtype=x.dtype)


def _softmax_times(g, x, y, a):
    """Cotangent times softmax: g * exp(x - logsumexp(x))."""
    e = x - y.reshape(a.kshape)
    e = np.exp(e, out=e) if type(e) is np.ndarray else np.exp(e)
    return np.multiply(e, g.reshape(a.kshape))


unary(Op.SUM, lambda g, x, y, a: _broadcast_back(g.reshape(a.kshape), x.shape))
unary(Op.MEAN, lambda g, x, y, a: _broadcast_back(_mean_share(g, a), x.shape))
unary(Op.MAX, _extremum_backward)
unary(Op.MIN, _extremum_backward)
unary(Op.LOGSUMEXP, _softmax_times)


@register_backward(Op.VAR)
def var_backward(g, inputs, out, attrs, saved, needs):
    """d var / dx = 2 (x - mean) / (N - ddof); ``saved`` is the mean."""
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    d = inputs[0] - saved
    with np.errstate(invalid="ignore"):
        d *= g.reshape(attrs.kshape) * scale
    return (d,)


# --------------------------------------------------------------- recorded
def _sum_recorded(G, gy, x, y, a):
    return G.expand(G.reshape(gy, a.kshape), G.value(x).shape)


def _mean_recorded(G, gy, x, y, a):
    gk = G.reshape(gy, a.kshape)
    gk = G.div(gk, float(a.count)) if a.count else G.mul(gk, np.nan)
    return G.expand(gk, G.value(x).shape)


def _extremum_recorded(G, gy, x, y, a):
    """The array rule's even split among the extremal elements, its
    mask / count a constant (PyTorch's amax/amin double backward)."""
    xv = G.value(x)
    outk = G.value(y).reshape(a.kshape)
    mask = xv == outk
    nan_out = np.isnan(outk)
    if nan_out.any():
        mask |= np.isnan(xv) & nan_out
    count = np.add.reduce(mask, axis=a.axes, keepdims=True, dtype=xv.dtype)
    return G.mul(G.reshape(gy, a.kshape), G.constant(mask / count))


@register_recorded(Op.VAR)
def var_recorded(G, gy, xs, y, attrs, saved, needs):
    """grad * 2 (x - mean(x)) / (N - ddof), the mean a node of x."""
    x = xs[0]
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    d = G.sub(x, G.mean(x, axis=attrs.axes, keepdims=True))
    return (G.mul(d, G.mul(G.reshape(gy, attrs.kshape), scale)),)


recorded_unary(Op.SUM, _sum_recorded)
recorded_unary(Op.MEAN, _mean_recorded)
recorded_unary(Op.MAX, _extremum_recorded)
recorded_unary(Op.MIN, _extremum_recorded)
recorded_unary(Op.LOGSUMEXP, lambda G, gy, x, y, a: G.mul(
    G.reshape(gy, a.kshape), G.exp(G.sub(x, G.reshape(y, a.kshape)))))


# --------------------------------------------- prod, std, norm, scans, sort
def _reduced_last(x: np.ndarray, axes):
    """``x`` with the reduced ``axes`` moved last and flattened into one:
    ``(array [..., n], undo)``, ``undo(a)`` restores ``x``'s layout."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    keep = [d for d in range(x.ndim) if d not in axes]
    perm = keep + list(axes)
    moved = x.transpose(perm)
    inv = np.argsort(perm)
    n = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))

    def undo(a):
        return a.reshape(moved.shape).transpose(inv)

    return moved.reshape(moved.shape[:len(keep)] + (n,)), undo


def _exclusive_products(xm: np.ndarray) -> np.ndarray:
    """Product of every other element of the last axis, without division."""
    left = np.ones_like(xm)
    right = np.ones_like(xm)
    if xm.shape[-1] > 1:
        np.cumprod(xm[..., :-1], axis=-1, out=left[..., 1:])
        right[..., :-1] = np.cumprod(xm[..., :0:-1], axis=-1)[..., ::-1]
    return left * right


@register_backward(Op.PROD)
def prod_backward(g, inputs, out, attrs, saved, needs):
    """g * out / x without zeros (PyTorch's formula); else g times the
    product of the other elements (exclusive products from both sides)."""
    x = inputs[0]
    gk = g.reshape(attrs.kshape)
    if x.size == 0 or not (x == 0).any():
        with np.errstate(invalid="ignore", divide="ignore"):
            return (_broadcast_back(gk * (out.reshape(attrs.kshape) / x), x.shape),)
    xm, undo = _reduced_last(x, attrs.axes)
    return (np.ascontiguousarray(undo(_exclusive_products(xm)) * gk),)


@register_backward(Op.STD)
def std_backward(g, inputs, out, attrs, saved, needs):
    """g (x - mean) / ((N - c) std); 0 where std == 0 (PyTorch)."""
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    outk = out.reshape(attrs.kshape)
    with np.errstate(invalid="ignore", divide="ignore"):
        h = np.where(outk == 0, 0, g.reshape(attrs.kshape) / (outk * 2))
        d = inputs[0] - saved
        d *= h * scale
    return (d,)


@register_backward(Op.NORM)
def norm_backward(g, inputs, out, attrs, saved, needs):
    """PyTorch's norm_backward, branch by branch (p = 0: zero gradient)."""
    x = inputs[0]
    p = attrs.ord
    gk = g.reshape(attrs.kshape)
    nk = out.reshape(attrs.kshape)
    if p == 0.0:
        return (np.zeros_like(x),)
    if p == 1.0:
        return (np.sign(x) * gk,)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if p == 2.0:
            return (gk * np.where(nk == 0, 0, x / nk),)
        a = np.abs(x)
        if np.isinf(p):
            mask = (a == nk) | np.isnan(a)
            count = np.add.reduce(mask, axis=attrs.axes, keepdims=True, dtype=x.dtype)
            return (np.sign(x) * ((gk / count) * mask),)
        if p < 1.0:
            scaled = np.sign(x) * np.where(x == 0, 0, a ** (p - 1))
            return (scaled * gk * nk ** (1 - p),)
        scaled = np.sign(x) * a ** (p - 1) if p < 2.0 else x * a ** (p - 2)
        return (scaled * np.where(nk == 0, 0, gk / nk ** (p - 1)),)


def _reverse_cumsum(a: np.ndarray, axis: int) -> np.ndarray:
    return np.ascontiguousarray(np.flip(np.cumsum(np.flip(a, axis), axis=axis), axis))


@register_backward(Op.CUMSUM)
def cumsum_backward(g, inputs, out, axis, saved, needs):
    return (_reverse_cumsum(g, axis) if g.ndim else g,)


@register_backward(Op.CUMPROD)
def cumprod_backward(g, inputs, out, axis, saved, needs):
    """dx_k = sum_{i >= k} g_i prod_{j <= i, j != k} x_j. Without zeros
    PyTorch's reversed_cumsum(out * g) / x; with zeros the same sum without
    division: (prod_{j < k} x_j) * R_k, R_k = g_k + x_{k+1} R_{k+1}."""
    x = inputs[0]
    if x.ndim == 0 or x.shape[axis] <= 1:
        return (g,)
    if not (x == 0).any():
        return (_reverse_cumsum(out * g, axis) / x,)
    xm = np.moveaxis(x, axis, 0)
    gm = np.moveaxis(g, axis, 0)
    n = xm.shape[0]
    r = np.empty(xm.shape, dtype=x.dtype)
    r[n - 1] = gm[n - 1]
    for k in range(n - 2, -1, -1):
        np.multiply(xm[k + 1:k + 2], r[k + 1:k + 2], out=r[k:k + 1])
        r[k:k + 1] += gm[k:k + 1]
    left = np.ones_like(r)
    np.cumprod(xm[:-1], axis=0, out=left[1:])
    return (np.ascontiguousarray(np.moveaxis(left * r, 0, axis)),)


def _scatter_sorted(g, inputs, out, attrs, saved, needs):
    """The gradient put back at the chosen positions (zeros elsewhere)."""
    x = inputs[0]
    if x.ndim == 0:
        return (g.copy(),)
    gx = np.zeros(x.shape, dtype=g.dtype)
    np.put_along_axis(gx, attrs.index, g, attrs.axis)
    return (gx,)


register_backward(Op.TOPK)(_scatter_sorted)
register_backward(Op.SORT)(_scatter_sorted)


# ------------------------------------------------------ recorded (the same)
def _reduced_last_node(G, x, xv, axes):
    """Graph-op form of `_reduced_last`: (node [..., n], undo)."""
    axes = tuple(range(xv.ndim)) if axes is None else axes
    keep = [d for d in range(xv.ndim) if d not in axes]
    perm = keep + list(axes)
    moved = tuple(xv.shape[d] for d in perm)
    n = int(np.prod([xv.shape[d] for d in axes], dtype=np.int64))
    inv = tuple(int(i) for i in np.argsort(perm))
    t = G.transpose(x, tuple(perm)) if perm != list(range(xv.ndim)) else x
    t = G.reshape(t, moved[:len(keep)] + (n,))

    def undo(a):
        a = G.reshape(a, moved)
        return G.transpose(a, inv) if perm != list(range(xv.ndim)) else a

    return t, n, undo


@register_recorded(Op.PROD)
def prod_recorded(G, gy, xs, y, attrs, saved, needs):
    """PyTorch's prod_backward: g * (out / x) without zeros, else g times
    exclusive cumulative products from both sides (prod_safe_zeros_backward)."""
    x = xs[0]
    xv = G.value(x)
    gk = G.reshape(gy, attrs.kshape)
    if xv.size == 0 or not (xv == 0).any():
        return (G.mul(gk, G.div(G.reshape(y, attrs.kshape), x)),)
    t, n, undo = _reduced_last_node(G, x, xv, attrs.axes)
    if n == 1:
        return (G.mul(gk, np.ones(xv.shape, dtype=xv.dtype)),)
    ones = np.ones(G.value(t).shape[:-1] + (1,), dtype=xv.dtype)
    left = G.cumprod(G.cat([ones, G.narrow(t, -1, 0, n - 1)], -1), -1)
    right = G.flip(G.cumprod(G.cat([ones, G.flip(G.narrow(t, -1, 1, n - 1), -1)], -1), -1), -1)
    return (G.mul(gk, undo(G.mul(left, right))),)


@register_recorded(Op.STD)
def std_recorded(G, gy, xs, y, attrs, saved, needs):
    """(g / (2 std), 0 where std == 0) * 2 (x - mean(x)) / (N - c), as
    PyTorch's std_backward through var_backward."""
    x = xs[0]
    denom = attrs.count - attrs.ddof
    scale = 2.0 / denom if denom > 0 else np.inf
    yk = G.reshape(y, attrs.kshape)
    zero = G.value(yk) == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        h = G.div(G.reshape(gy, attrs.kshape), G.mul(yk, 2.0))
    if zero.any():
        h = G.where(zero, np.zeros((), G.dtype), h)
    d = G.sub(x, G.mean(x, axis=attrs.axes, keepdims=True))
    return (G.mul(d, G.mul(h, scale)),)


@register_recorded(Op.NORM)
def norm_recorded(G, gy, xs, y, attrs, saved, needs):
    """PyTorch's norm_backward in graph ops; sign(x) and the masks are
    constants (their derivative is 0, as sgn's and masked_fill's)."""
    x = xs[0]
    p = attrs.ord
    if p == 0.0:
        return (None,)
    xv = G.value(x)
    dt = xv.dtype
    zero = np.zeros((), dt)
    sign = np.sign(xv)
    gk = G.reshape(gy, attrs.kshape)
    nk = G.reshape(y, attrs.kshape)
    nv = G.value(nk)
    if p == 1.0:
        return (G.mul(gk, sign),)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if p == 2.0:
            s = G.div(x, nk)
            if (nv == 0).any():
                s = G.where(nv == 0, zero, s)
            return (G.mul(gk, s),)
        a = np.abs(xv)
        if np.isinf(p):
            mask = (a == nv) | np.isnan(a)
            count = np.add.reduce(mask, axis=attrs.axes, keepdims=True, dtype=dt)
            return (G.mul(G.div(gk, count), sign * mask),)
        ax = G.abs(x)
        if p < 1.0:
            powed = G.pow(ax, p - 1)
            if (xv == 0).any():
                powed = G.where(xv == 0, zero, powed)
            return (G.mul(G.mul(G.mul(powed, sign), gk), G.pow(nk, 1 - p)),)
        scaled = G.mul(G.pow(ax, p - 1), sign) if p < 2.0 else G.mul(x, G.pow(ax, p - 2))
        sv = G.div(gk, G.pow(nk, p - 1))
        if (nv == 0).any():
            sv = G.where(nv == 0, zero, sv)
        return (G.mul(scaled, sv),)


def _reverse_cumsum_node(G, a, axis):
    return G.flip(G.cumsum(G.flip(a, axis), axis), axis)


@register_recorded(Op.CUMSUM)
def cumsum_recorded(G, gy, xs, y, axis, saved, needs):
    return (_reverse_cumsum_node(G, gy, axis) if G.value(gy).ndim else gy,)


@register_recorded(Op.CUMPROD)
def cumprod_recorded(G, gy, xs, y, axis, saved, needs):
    """PyTorch's cumprod_backward: reversed_cumsum(out * g) / x without
    zeros; with zeros its exact O(n^2) form: the products omitting x_k,
    cumprod of x with x_k replaced by 1, summed against g over i >= k."""
    x = xs[0]
    xv = G.value(x)
    if xv.ndim == 0 or xv.shape[axis] <= 1:
        return (gy,)
    if not (xv == 0).any():
        return (G.div(_reverse_cumsum_node(G, G.mul(y, gy), axis), x),)
    last = xv.ndim - 1
    perm = tuple(d for d in range(xv.ndim) if d != axis) + (axis,)
    inv = tuple(int(i) for i in np.argsort(perm))
    moved = axis != last
    t = G.transpose(x, perm) if moved else x
    gt = G.transpose(gy, perm) if moved else gy
    n = xv.shape[axis]
    eye = np.eye(n, dtype=bool)
    omit = G.cumprod(G.where(eye, np.ones((), xv.dtype), G.unsqueeze(t, -2)), -1)
    upper = np.triu(np.ones((n, n), dtype=xv.dtype))      # [k, i]: i >= k
    gx = G.sum(G.mul(omit, G.mul(G.unsqueeze(gt, -2), upper)), axis=-1)
    return (G.transpose(gx, inv) if moved else gx,)


def _scatter_sorted_recorded(G, gy, xs, y, attrs, saved, needs):
    xv = G.value(xs[0])
    if xv.ndim == 0:
        return (gy,)
    return (G.scatter_add(np.zeros(xv.shape, xv.dtype), attrs.axis, attrs.index, gy),)


register_recorded(Op.TOPK)(_scatter_sorted_recorded)
register_recorded(Op.SORT)(_scatter_sorted_recorded)


# ------------------------------------------------------------------ sum_to
# The one rule of Op.SUM_TO (PyTorch: sum_to_size's gradient is expand), and
# its written-out array copy: the same values, materialised (a fresh array,
# not a read-only broadcast view, since it may become a leaf's stored grad).
from ..registry import register_rule as _register_rule  # noqa: E402


def _sum_to_array(ns, g, xs, y, attrs, saved, needs):
    out = np.empty(attrs.in_shape, dtype=g.dtype)
    out[...] = g
    return (out,)


@_register_rule(Op.SUM_TO, array=_sum_to_array)
def sum_to_rule(ns, g, xs, y, attrs, saved, needs):
    """d sum_to(x, shape) / dx: the cotangent (``shape``) broadcast back to
    x's shape (``attrs.in_shape``)."""
    return (ns.expand(g, attrs.in_shape),)
