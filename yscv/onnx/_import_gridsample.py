"""Handlers of ONNX GridSample (opsets 16, 20, 22: modes nearest, linear /
bilinear, cubic / bicubic; padding zeros, border, reflection;
align_corners; any number of spatial axes), AffineGrid (opset 20) and
RoiAlign (opsets 10, 16, 22).

The sampling follows ONNX's reference: grid values are denormalised to
pixel coordinates, coordinates outside the borders are clamped or
reflected, and each output reads its 2 (linear) or 4 (cubic) taps per axis,
a tap outside the input reading 0 (zeros), the edge (border) or its
reflection. The integer parts (tap indices, which branch of a clamp or a
reflection applies) are computed with NumPy from the grid's value at the
call; the fractional parts and the weights are graph ops on the grid, and
the taps are gathered from the channel-last input with ``embedding``, so
gradients flow to both the input and the grid. Cubic sampling with border
padding clamps only the taps, not the coordinate, as PyTorch and ONNX
Runtime do (ONNX's reference clamps both).
"""
from __future__ import annotations

from itertools import product

import numpy as np

from ._import_registry import ChannelLast, handler

__all__ = ["GRID_MODES", "GRID_PADDING"]

GRID_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear",
              "cubic": "cubic", "bicubic": "cubic"}
GRID_PADDING = ("zeros", "border", "reflection")
_A = -0.75


def _reflect(x, lo, hi):
    """ONNX's reflection of x into [lo, hi], and its slope (+1 or -1, 1 inside)."""
    rng = hi - lo
    out, slope = x.copy(), np.ones_like(x)
    for side in (x < lo, x > hi):
        dx = np.where(x < lo, lo - x, x - hi)
        n = np.floor(dx / rng) if rng else np.zeros_like(dx)
        r = dx - n * rng
        even = n % 2 == 0
        val = np.where(x < lo, np.where(even, lo + r, hi - r), np.where(even, hi - r, lo + r))
        out = np.where(side, val, out)
        slope = np.where(side, np.where(even, -1.0, 1.0), slope)
    return out, slope


def _tap_index(i, d, lo, hi, padding):
    """Index actually read for integer taps i on an axis of size d, and the
    mask of taps that read a value (zeros padding reads 0 outside)."""
    if padding == "zeros":
        ok = (i >= 0) & (i < d)
        return np.clip(i, 0, d - 1), ok.astype(np.float64)
    if padding == "border":
        return np.clip(i, 0, d - 1), np.ones(i.shape)
    r, _ = _reflect(i.astype(np.float64), lo, hi)
    return np.clip(np.trunc(r).astype(np.int64), 0, d - 1), np.ones(i.shape)


def _weights(g, t, mode):
    """Graph weights of the taps (left tap first) at fractional offsets t."""
    if mode == "linear":
        return [1.0 - t, t]
    s, u = t + 1.0, 2.0 - t
    v = 1.0 - t
    return [((s * _A - 5 * _A) * s + 8 * _A) * s - 4 * _A,
            ((t * (_A + 2)) - (_A + 3)) * t * t + 1.0,
            ((v * (_A + 2)) - (_A + 3)) * v * v + 1.0,
            ((u * _A - 5 * _A) * u + 8 * _A) * u - 4 * _A]


@handler("GridSample")
def _grid_sample(run, node):
    g = run.g
    at = node.attrs
    mode = GRID_MODES[at.get("mode", "linear" if run.m.opset >= 20 else "bilinear")]
    padding = at.get("padding_mode", "zeros")
    corners = bool(at.get("align_corners", 0))
    x = run.cl(node.inputs[0])  # [N, *S, C]
    grid = run.node(node.inputs[1])  # [N, *O, r]
    dims = tuple(x.shape[1:-1])
    n, ch, r = x.shape[0], x.shape[-1], len(dims)
    out = tuple(grid.shape[1:-1])
    if grid.shape[-1] != r or grid.shape[0] != n:
        raise node.fail(f"grid of shape {tuple(grid.shape)} does not match the input's "
                        f"{r} spatial axes and batch {n}")
    p = int(np.prod(out, dtype=np.int64))
    gval = np.asarray(g.value(grid), np.float64).reshape(n, p, r)
    per_axis = []  # per spatial axis: (indices [taps] of [N, P], masks, weights)
    for i, d in enumerate(dims):
        c = g.reshape(g.select(grid, -1, r - 1 - i), (n, p))
        cv = gval[..., r - 1 - i]
        if corners:
            lo, hi = 0.0, d - 1.0
            xs, xv = c * ((d - 1) / 2) + (d - 1) / 2, (cv + 1) / 2 * (d - 1)
        else:
            lo, hi = -0.5, d - 0.5
            xs, xv = c * (d / 2) + (d - 1) / 2, ((cv + 1) * d - 1) / 2
        if mode == "nearest":
            xv = np.rint(xv)
        outside = (xv < lo) | (xv > hi)
        if padding == "border" and mode == "cubic":  # taps clamped only (PyTorch, ORT)
            fv, slope = xv, np.ones_like(xv)
        elif padding == "border":
            fv, slope = np.where(outside, np.clip(xv, 0, d - 1), xv), np.where(outside, 0.0, 1.0)
        elif padding == "reflection":
            fv, slope = _reflect(xv, lo, hi)
        else:
            fv, slope = xv, np.ones_like(xv)
        if mode == "nearest":
            idx, ok = _tap_index(fv.astype(np.int64), d, lo, hi, padding)
            per_axis.append(([idx], [ok], [None]))
            continue
        if padding != "zeros":
            xs = xs * slope.astype(g.dtype) + (fv - slope * xv).astype(g.dtype)
        base = np.floor(fv)
        t = xs - base.astype(g.dtype)
        taps = 2 if mode == "linear" else 4
        first = base.astype(np.int64) - (0 if taps == 2 else 1)
        idxs, oks = zip(*(_tap_index(first + k, d, lo, hi, padding) for k in range(taps)))
        per_axis.append((list(idxs), list(oks), _weights(g, t, mode)))
    strides = [int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(r)]
    flat = g.reshape(x, (n * int(np.prod(dims, dtype=np.int64)), ch))
    offset = (np.arange(n) * int(np.prod(dims, dtype=np.int64)))[:, None]
    y = None
    for combo in product(*(range(len(a[0])) for a in per_axis)):
        index = offset + sum(per_axis[i][0][k] * strides[i] for i, k in enumerate(combo))
        mask = np.prod([per_axis[i][1][k] for i, k in enumerate(combo)], axis=0)
        if not mask.any():
            continue
        term = g.embedding(flat, index.astype(np.int64))  # [N, P, C]
        w = None
        for i, k in enumerate(combo):
            wk = per_axis[i][2][k]
            if wk is not None:
                w = wk if w is None else w * wk
        if w is None:
            w = g.constant(mask.astype(g.dtype))
        elif not mask.all():
            w = w * mask.astype(g.dtype)
        term = term * g.reshape(w, (n, p, 1))
        y = term if y is None else y + term
    if y is None:
        y = g.constant(np.zeros((n, p, ch), g.dtype))
    return [ChannelLast(g.reshape(y, (n,) + out + (ch,)))]


def _base_coords(n, corners):
    """Normalised pixel-centre coordinates of an axis of size n in [-1, 1]."""
    if corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (2 * np.arange(n) + 1) / n - 1


@handler("AffineGrid")
def _affine_grid(run, node):
    """theta [N, 2, 3] (or [N, 3, 4]) and size [N, C, H, W] (or [N, C, D,
    H, W]) -> grid [N, H, W, 2] ([N, D, H, W, 3]): the homogeneous base
    coordinates (x, y[, z], 1) times theta transposed, a matmul that
    theta's gradient flows through."""
    g = run.g
    theta = run.node(node.inputs[0])
    size = [int(v) for v in run.arr(node.inputs[1]).reshape(-1)]
    corners = bool(node.attrs.get("align_corners", 0))
    spatial = size[2:]
    r = len(spatial)
    if r not in (2, 3) or tuple(theta.shape[1:]) != (r, r + 1):
        raise node.fail(f"theta of shape {tuple(theta.shape)} does not fit size {size}")
    axes = [_base_coords(n, corners) for n in spatial]  # D, H, W order
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=1)
    y = g.matmul(base.astype(g.dtype), g.transpose(theta, (0, 2, 1)))  # [N, P, r]
    return [g.reshape(y, (size[0], *spatial, r))]


def _roi_taps(roi, h, w, oh, ow, scale, ratio, half):
    """Flat positions [oh, ow, S, 4] in an H x W plane and bilinear weights
    of one RoI's sample points (ONNX's reference: S = grid_h * grid_w samples
    per bin; points beyond one pixel outside read nothing)."""
    off = 0.5 if half else 0.0
    x0, y0, x1, y1 = (float(v) * scale - off for v in roi)
    rw, rh = x1 - x0, y1 - y0
    if not half:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / oh, rw / ow
    gh = int(ratio) if ratio > 0 else int(np.ceil(rh / oh))
    gw = int(ratio) if ratio > 0 else int(np.ceil(rw / ow))
    ys = y0 + np.arange(oh)[:, None] * bh + (np.arange(gh)[None, :] + 0.5) * bh / max(gh, 1)
    xs = x0 + np.arange(ow)[:, None] * bw + (np.arange(gw)[None, :] + 0.5) * bw / max(gw, 1)
    y = np.broadcast_to(ys[:, None, :, None], (oh, ow, gh, gw)).reshape(oh, ow, -1)
    x = np.broadcast_to(xs[None, :, None, :], (oh, ow, gh, gw)).reshape(oh, ow, -1)
    valid = ~((y < -1.0) | (y > h) | (x < -1.0) | (x > w))
    y, x = np.maximum(y, 0.0), np.maximum(x, 0.0)
    yl, xl = y.astype(np.int64), x.astype(np.int64)
    ytop, xtop = yl >= h - 1, xl >= w - 1
    yl, xl = np.where(ytop, h - 1, yl), np.where(xtop, w - 1, xl)
    yh, xh = np.where(ytop, h - 1, yl + 1), np.where(xtop, w - 1, xl + 1)
    y, x = np.where(ytop, yl, y), np.where(xtop, xl, x)
    ly, lx = y - yl, x - xl
    hy, hx = 1.0 - ly, 1.0 - lx
    pos = np.stack([yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh], axis=-1)
    wts = np.stack([hy * hx, hy * lx, ly * hx, ly * lx], axis=-1) * valid[..., None]
    return pos, wts, max(gh * gw, 1)


@handler("RoiAlign")
def _roi_align(run, node):
    """Each RoI's bins sampled bilinearly and averaged (or maxed) as ONNX's
    reference does: tap positions and weights from NumPy (the RoIs and
    batch indices are read as values), the taps gathered from the
    channel-last input with ``embedding``, so X gets the gradient."""
    g = run.g
    at = node.attrs
    x = run.cl(node.inputs[0])  # [N, H, W, C]
    n, h, w, ch = x.shape
    rois = run.arr(node.inputs[1]).astype(np.float64).reshape(-1, 4)
    batch = run.arr(node.inputs[2]).astype(np.int64).reshape(-1)
    oh, ow = int(at.get("output_height", 1)), int(at.get("output_width", 1))
    half = at.get("coordinate_transformation_mode",
                  "half_pixel" if run.m.opset >= 16 else "output_half_pixel") == "half_pixel"
    mode = at.get("mode", "avg")
    taps = [_roi_taps(r, h, w, oh, ow, float(at.get("spatial_scale", 1.0)),
                      int(at.get("sampling_ratio", 0)), half) for r in rois]
    if batch.size != len(taps) or (batch.size and (batch.min() < 0 or batch.max() >= n)):
        raise node.fail(f"batch_indices {batch.tolist()} do not index the {n} images for "
                        f"{len(taps)} RoIs")
    s = max(p.shape[2] for p, _, _ in taps) if taps else 1
    m = len(taps) * oh * ow
    pos = np.zeros((len(taps), oh, ow, s, 4), np.int64)
    wts = np.zeros((len(taps), oh, ow, s, 4))
    pad = np.full((len(taps), oh, ow, s, 1), -np.inf)
    for i, (p, wt, count) in enumerate(taps):
        k = p.shape[2]
        pos[i, :, :, :k] = p + batch[i] * h * w
        wts[i, :, :, :k] = wt / count if mode == "avg" else wt
        pad[i, :, :, :k] = 0.0
    flat = g.reshape(x, (n * h * w, ch))
    vals = g.embedding(flat, pos.reshape(m, s * 4))  # [M, S*4, C]
    vals = g.mul(vals, wts.reshape(m, s * 4, 1).astype(g.dtype))
    if mode == "avg":
        y = g.sum(vals, axis=1)
    else:
        per = g.max(g.reshape(vals, (m, s, 4, ch)), axis=2)
        y = g.max(g.add(per, pad.reshape(m, s, 1).astype(g.dtype)), axis=1)
    return [ChannelLast(g.reshape(y, (len(taps), oh, ow, ch)))]
