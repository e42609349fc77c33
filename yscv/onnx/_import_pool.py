"""Handlers of the pooling variants: MaxPool and AveragePool with 3-D
kernels or dilations (and MaxPool's indices output), LpPool and
GlobalLpPool (any rank), MaxUnpool.

1-D and 2-D pools without dilation run as before (`_import_nn`). Otherwise
the channel-last input is padded explicitly (``-inf`` for max, 0 else,
the end widened for ``ceil_mode``) and reduced over its windows: with
``max_pool3d`` / ``avg_pool3d`` when the kernel is not dilated, else as the
max or sum of the kernel's strided slices (``getitem``) stacked on a new
axis, so every form stays differentiable. Average divisors (which pads
count) are computed with NumPy from the same windows over a mask.
"""
from __future__ import annotations

import math
from itertools import product

import numpy as np

from ._import_dtypes import integer_through_float
from ._import_nn import _avg_pool, _geometry, _max_pool, _spatial_pads
from ._import_registry import ChannelLast, handler


def _pads(node, sizes, kernel, strides, dilations):
    """(begin, end) pads per axis widened for ceil_mode (the last window
    starts inside the input or its begin pad), and the explicit pads."""
    pads = _spatial_pads(node, sizes, kernel, strides, dilations)
    if not node.attrs.get("ceil_mode", 0):
        return pads, pads
    wide = []
    for n, k, s, d, (b, e) in zip(sizes, kernel, strides, dilations, pads):
        ek = (k - 1) * d + 1
        out = math.ceil((n + b + e - ek) / s) + 1
        if (out - 1) * s >= n + b:
            out -= 1
        wide.append((b, max(e, (out - 1) * s + ek - n - b)))
    return wide, pads


def _window_keys(padded, kernel, strides, dilations):
    """Output sizes and, per kernel offset, the strided spatial slices."""
    outs = [(p - ((k - 1) * d + 1)) // s + 1
            for p, k, s, d in zip(padded, kernel, strides, dilations)]
    keys = []
    for offs in product(*(range(k) for k in kernel)):
        keys.append(tuple(slice(j * d, j * d + (o - 1) * s + 1, s)
                          for j, d, o, s in zip(offs, dilations, outs, strides)))
    return outs, keys


def _reduce_windows(g, x, how, kernel, strides, dilations, pads):
    """Max or sum over each window of channel-last x [N, ``*S``, C] (already padded)."""
    nsp = len(kernel)
    if all(d == 1 for d in dilations) and nsp == 3:
        if how == "max":
            return g.max_pool3d(x, kernel, strides, 0)
        return g.mul(g.avg_pool3d(x, kernel, strides, 0), float(np.prod(kernel)))
    if all(d == 1 for d in dilations) and nsp in (1, 2) and how == "sum":
        pool = g.avg_pool1d if nsp == 1 else g.avg_pool2d
        k, s = (kernel[0], strides[0]) if nsp == 1 else (kernel, strides)
        return g.mul(pool(x, k, s, 0), float(np.prod(kernel)))
    _, keys = _window_keys(x.shape[1:-1], kernel, strides, dilations)
    parts = [g.getitem(x, (slice(None),) + key + (slice(None),)) for key in keys]
    if len(parts) == 1:
        return parts[0]
    stacked = g.stack(parts, axis=0)
    return g.max(stacked, axis=0) if how == "max" else g.sum(stacked, axis=0)


def _pad_cl(g, x, pads, value):
    if all(b == 0 and e == 0 for b, e in pads):
        return x
    return g.pad(x, [(0, 0)] + list(pads) + [(0, 0)], value)


def _setup(run, node):
    x = run.cl(node.inputs[0])
    kernel, strides, dilations = _geometry(node)
    pads, counted = _pads(node, x.shape[1:-1], kernel, strides, dilations)
    return x, kernel, strides, dilations, pads, counted


def _plain(run, node):
    """A 1-D or 2-D pool without dilation: the `_import_nn` handlers."""
    at = node.attrs
    return len(at.get("kernel_shape", ())) in (1, 2) and \
        all(int(d) == 1 for d in at.get("dilations") or ())


@handler("MaxPool")
def _max_pool_nd(run, node):
    """The pooled values; output 1, when used, the indices of the maxima
    (NumPy, from the input's value: an integer output has no gradient)."""
    y = _max_pool_values(run, node)
    if len(node.outputs) > 1 and node.outputs[1]:
        y.append(_argmax_indices(run, node))
    return y


@integer_through_float
def _max_pool_values(run, node):
    """MaxPool's output 0 (an integer input's values keep its dtype)."""
    if _plain(run, node):
        return _max_pool(run, node)
    g = run.g
    x, kernel, strides, dilations, pads, _ = _setup(run, node)
    xp = _pad_cl(g, x, pads, -np.inf)
    return [ChannelLast(_reduce_windows(g, xp, "max", kernel, strides, dilations, pads))]


def _argmax_indices(run, node):
    """MaxPool's Indices [N, C, ``*O``]: the flat NCHW (storage_order 0) or
    spatially column-major (1) index of each window's first maximum,
    padding not counted."""
    x = run.cl(node.inputs[0])
    kernel, strides, dilations = _geometry(node)
    sizes = tuple(x.shape[1:-1])
    pads, _ = _pads(node, sizes, kernel, strides, dilations)
    v = np.asarray(run.g.value(x), np.float64)
    v = np.pad(v, [(0, 0)] + list(pads) + [(0, 0)], constant_values=-np.inf)
    outs, keys = _window_keys(v.shape[1:-1], kernel, strides, dilations)
    best = np.full((v.shape[0], *outs, v.shape[-1]), -np.inf)
    where = np.zeros(best.shape + (len(sizes),), np.int64)
    grids = np.meshgrid(*(np.arange(o) for o in outs), indexing="ij")
    for offs, key in zip(product(*(range(k) for k in kernel)), keys):
        part = v[(slice(None),) + key + (slice(None),)]
        better = part > best
        best = np.where(better, part, best)
        for a, (j, s, d, (b, _)) in enumerate(zip(offs, strides, dilations, pads)):
            coord = (grids[a] * s + j * d - b)[None, ..., None]
            where[..., a] = np.where(better, coord, where[..., a])
    order = range(len(sizes)) if not int(node.attrs.get("storage_order", 0)) \
        else reversed(range(len(sizes)))
    flat = np.zeros(best.shape, np.int64)
    for a in order:
        flat = flat * sizes[a] + where[..., a]
    n, c, plane = v.shape[0], v.shape[-1], int(np.prod(sizes, dtype=np.int64))
    flat = flat + (np.arange(n)[:, None] * c + np.arange(c)[None, :]).reshape(
        (n,) + (1,) * len(outs) + (c,)) * plane
    return np.moveaxis(flat, -1, 1)


@handler("AveragePool")
def _avg_pool_nd(run, node):
    """The window sums divided by the count of what each window counts:
    input elements, and the explicit pads with count_include_pad (never
    the ceil_mode overhang)."""
    if _plain(run, node):
        return _avg_pool(run, node)
    g = run.g
    x, kernel, strides, dilations, pads, counted = _setup(run, node)
    sizes = x.shape[1:-1]
    total = _reduce_windows(g, _pad_cl(g, x, pads, 0.0), "sum", kernel, strides, dilations, pads)
    include = bool(node.attrs.get("count_include_pad", 0))
    mask = np.zeros(tuple(n + b + e for n, (b, e) in zip(sizes, pads)))
    region = tuple(slice(b - cb, b + n + ce) if include else slice(b, b + n)
                   for n, (b, _), (cb, ce) in zip(sizes, pads, counted))
    mask[region] = 1.0
    _, keys = _window_keys(mask.shape, kernel, strides, dilations)
    counts = sum(mask[key] for key in keys)
    return [ChannelLast(g.div(total, counts[None, ..., None].astype(g.dtype)))]


def _power(g, x, p):
    if p == 1:
        return g.abs(x)
    if p == 2:
        return g.mul(x, x)
    return g.pow(g.abs(x), float(p))


def _root(g, s, p):
    if p == 1:
        return s
    if p == 2:
        return g.sqrt(s)
    return g.pow(s, 1.0 / p)


@handler("LpPool")
def _lp_pool(run, node):
    """(sum over each window of ``|x|**p``) ** (1/p), zero padding."""
    g = run.g
    p = int(node.attrs.get("p", 2))
    x, kernel, strides, dilations, pads, _ = _setup(run, node)
    xp = _pad_cl(g, _power(g, x, p), pads, 0.0)
    total = _reduce_windows(g, xp, "sum", kernel, strides, dilations, pads)
    return [ChannelLast(_root(g, total, p))]


@handler("GlobalLpPool")
def _global_lp_pool(run, node):
    """[N, C, ``*S``] -> [N, C, 1, ...]: the p-norm over the spatial axes."""
    g = run.g
    p = int(node.attrs.get("p", 2))
    x = run.cl(node.inputs[0])
    nsp = len(x.shape) - 2
    y = _root(g, g.sum(_power(g, x, p), axis=tuple(range(1, 1 + nsp))), p)
    return [g.reshape(y, (x.shape[0], x.shape[-1]) + (1,) * nsp)]


@handler("MaxUnpool")
def _max_unpool(run, node):
    """Zeros of the unpooled shape with X's values put at the flat indices
    I (MaxPool's output 1): a ``scatter_add`` onto a constant, so X gets
    the gradient read back at I. I indexes the unpooled shape, (size - 1)
    * stride - pads + kernel per spatial axis; a larger ``output_shape``
    (input 2) zero-pads it at the end, as ONNX's reference does."""
    g = run.g
    at = node.attrs
    x = run.node(node.inputs[0])
    shape = tuple(x.shape)
    idx = run.arr(node.inputs[1]).astype(np.int64)
    kernel = [int(k) for k in at["kernel_shape"]]
    k = len(kernel)
    strides = [int(s) for s in at.get("strides") or [1] * k]
    pads = [int(p) for p in at.get("pads") or [0] * (2 * k)]
    out = shape[:2] + tuple((n - 1) * s - pads[i] - pads[i + k] + kk for i, (n, s, kk)
                            in enumerate(zip(shape[2:], strides, kernel)))
    full = out
    if run.has(node, 2):
        full = tuple(int(v) for v in run.arr(node.inputs[2]).reshape(-1))
        if len(full) != len(out) or any(f < o for f, o in zip(full, out)):
            raise node.fail(f"output_shape {list(full)} is smaller than the unpooled {list(out)}")
    if tuple(idx.shape) != shape:
        raise node.fail(f"indices of shape {tuple(idx.shape)} do not match X {shape}")
    total = int(np.prod(out, dtype=np.int64))
    if idx.size and (idx.min() < 0 or idx.max() >= total):
        raise node.fail(f"indices reach {int(idx.max())}, outside the output of {total} elements")
    base = np.zeros(total, g.dtype)
    y = g.reshape(g.scatter_add(base, 0, idx.reshape(-1), g.reshape(x, (-1,))), out)
    if full != out:  # ONNX's reference: the unpooled block at the origin, zeros after
        y = g.pad(y, [(0, f - o) for f, o in zip(full, out)], 0.0)
    return [y]
