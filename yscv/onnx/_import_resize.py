"""Handlers of ONNX Resize (opsets 10-19) and Upsample (opsets 7-9).

For given shapes and attributes, resizing is a fixed linear map of the
input, separable over the axes: output index i of an axis reads
``sum_k w[i, k] * x[idx[i, k]]``. The indices and weights of each axis are
computed here with NumPy (as ONNX's reference does: every mode, coordinate
transformation, nearest rounding, cubic ``A``, ``exclude_outside``,
``antialias``), and the map is recorded with ordinary graph ops: an
``index_select`` for nearest modes, a weighted sum of one ``index_select``
per tap otherwise, so gradients are exact. ``tf_crop_and_resize`` positions
outside the input add ``extrapolation_value`` as a constant.
"""
from __future__ import annotations

import numpy as np

from ._import_layout import channel_last_perm
from ._import_registry import ChannelLast, handler

__all__ = ["check_resize", "axis_weights"]

_MODES = ("nearest", "linear", "cubic")
_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
           "tf_crop_and_resize", "half_pixel_symmetric")
_ROUNDING = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _settings(node, opset):
    """(mode, coordinate mode, nearest rounding) of a Resize/Upsample node:
    Upsample and opset-10 Resize use asymmetric coordinates and ONNX
    Runtime's "simple" rounding (floor when enlarging, ceil when shrinking)."""
    at = node.attrs
    mode = at.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" and node.op == "Upsample" else mode
    if node.op == "Upsample" or opset < 11:
        return mode, "asymmetric", "simple"
    return (mode, at.get("coordinate_transformation_mode", "half_pixel"),
            at.get("nearest_mode", "round_prefer_floor"))


def check_resize(node, opset, fail):
    """Refuse, at load, the Resize/Upsample attribute values not implemented."""
    at = node.attrs
    mode, coord, rounding = _settings(node, opset)
    if mode not in _MODES:
        raise fail(f"mode {at.get('mode')!r} is not supported (nearest, linear or cubic)")
    if node.op == "Upsample" and mode == "cubic":
        raise fail("mode 'cubic' is not an Upsample mode (nearest or linear)")
    if coord not in _COORDS:
        raise fail(f"coordinate_transformation_mode {coord!r} is not supported")
    if mode == "nearest" and rounding not in _ROUNDING + ("simple",):
        raise fail(f"nearest_mode {rounding!r} is not supported")
    if mode == "nearest" and int(at.get("antialias", 0)):
        raise fail("antialias=1 with mode 'nearest' is not defined")
    if at.get("keep_aspect_ratio_policy", "stretch") not in _POLICIES:
        raise fail(f"keep_aspect_ratio_policy {at['keep_aspect_ratio_policy']!r} is not "
                   "supported")


# ------------------------------------------------------------ coefficients
def _source_coords(coord, n_in, scale, n_out, roi):
    """Source coordinate of every output index (float64) and, for
    tf_crop_and_resize, which outputs fall outside the input."""
    y = np.arange(n_out, dtype=np.float64)
    width = scale * n_in
    outside = None
    if coord == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif coord == "asymmetric":
        x = y / scale
    elif coord == "tf_crop_and_resize":
        lo, hi = roi
        x = (np.full(n_out, (hi - lo) * (n_in - 1) / 2) if width == 1
             else y * (hi - lo) * (n_in - 1) / (width - 1))
        x = x + lo * (n_in - 1)
        outside = (x < 0) | (x > n_in - 1)
    elif coord == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif coord == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric
        offset = n_in / 2 * (1 - n_out / width)
        x = offset + (y + 0.5) / scale - 0.5
    return x, outside


def _coeffs(mode, rounding, ratio, scale, a, antialias):
    """[n_out, taps] weights of the taps around each source coordinate;
    ``ratio`` in (0, 1] is its distance past the tap left of it."""
    r = ratio[:, None]
    if mode == "nearest":
        if rounding == "simple":
            rounding = "floor" if scale >= 1 else "ceil"
        right = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5,
                 "floor": np.zeros_like(r, bool), "ceil": np.ones_like(r, bool)}[rounding]
        right = right | (r == 1.0)
        return np.concatenate([~right, right], axis=1).astype(np.float64)
    if antialias and scale < 1.0:
        support = 1.0 if mode == "linear" else 2.0
        start = int(np.floor(-support / scale) + 1)
        taps = np.arange(start, 2 - start)
        t = np.abs((taps[None, :] - r) * scale)
        w = np.clip(1 - t, 0, 1) if mode == "linear" else _cubic_kernel(t, a)
        return w / w.sum(axis=1, keepdims=True)
    if mode == "linear":
        return np.concatenate([1 - r, r], axis=1)
    t = np.abs(np.arange(-1, 3)[None, :] - r)
    return _cubic_kernel(t, a)


def _cubic_kernel(t, a):
    """Keys' cubic convolution kernel with parameter ``a`` at distances t >= 0."""
    t2, t3 = t * t, t * t * t
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def axis_weights(n_in, n_out, scale, mode, coord, rounding, roi=(0.0, 1.0), a=-0.75,
                 exclude_outside=False, antialias=False):
    """The taps of one resized axis: input indices [n_out, taps] (neighbours
    past the ends read the edge), their float64 weights (0 on extrapolated
    rows) and the boolean [n_out] mask of extrapolated outputs (None unless
    tf_crop_and_resize puts some outside): output i = sum_k w[i, k] *
    input[idx[i, k]]."""
    x, outside = _source_coords(coord, n_in, scale, n_out, roi)
    base = np.floor(x)
    ratio = np.where(x == base, 1.0, x - base)
    w = _coeffs(mode, rounding, ratio, scale, a, antialias)
    n = w.shape[1]
    pad = -(-n // 2)
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        start = p + np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        start = p + np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = start[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    if outside is not None:
        w = np.where(outside[:, None], 0.0, w)
        if not outside.any():
            outside = None
    return np.clip(idx, 0, n_in - 1), w, outside


def _matrix(idx, w, n_in):
    """The dense [n_out, n_in] matrix of an axis's taps."""
    mat = np.zeros((idx.shape[0], n_in))
    np.add.at(mat, (np.repeat(np.arange(idx.shape[0]), idx.shape[1]), idx.reshape(-1)),
              w.reshape(-1))
    return mat


# ------------------------------------------------------------ the handlers
def _static_list(run, node, slot):
    if not run.has(node, slot):
        return None
    v = run.arr(node.inputs[slot]).reshape(-1)
    return None if v.size == 0 else v.tolist()


def _plan(run, node, shape):
    """Per-axis (n_out, scale) and the per-axis roi of a Resize/Upsample node."""
    at = node.attrs
    r = len(shape)
    roi = sizes = None
    if node.op == "Upsample":
        scales = at.get("scales") or _static_list(run, node, 1)
    elif run.m.opset < 11:
        scales = _static_list(run, node, 1)
    else:
        roi, scales, sizes = (_static_list(run, node, s) for s in (1, 2, 3))
    axes = at.get("axes")
    axes = list(range(r)) if axes is None else [int(v) % r for v in axes]
    k = len(axes)
    full_roi = [(0.0, 1.0)] * r
    if roi is not None:
        for i, d in enumerate(axes):
            full_roi[d] = (float(roi[i]), float(roi[k + i]))
    out, scale = list(shape), [1.0] * r
    if sizes is not None:
        if len(sizes) != k:
            raise node.fail(f"sizes {sizes} have {len(sizes)} values for {k} axes")
        for i, d in enumerate(axes):
            out[d], scale[d] = int(sizes[i]), int(sizes[i]) / shape[d]
        policy = at.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = (min if policy == "not_larger" else max)(scale[d] for d in axes)
            for d in axes:
                scale[d], out[d] = s, int(s * shape[d] + 0.5)
    elif scales is not None:
        if len(scales) != k:
            raise node.fail(f"scales {scales} have {len(scales)} values for {k} axes")
        for i, d in enumerate(axes):
            scale[d] = float(scales[i])
            if scale[d] <= 0:
                raise node.fail(f"scale {scale[d]} of axis {d} is not positive")
            out[d] = int(np.float64(scale[d]) * shape[d])
    else:
        raise node.fail("neither scales nor sizes is given")
    return out, scale, full_roi, axes


def _nearest_repeat(idx, w, n_in):
    """The integer factor f if the map is out[i] = in[i // f], else None."""
    n_out = idx.shape[0]
    if n_out % n_in or w.shape[1] != 2:
        return None
    f = n_out // n_in
    pick = idx[np.arange(n_out), np.argmax(w, axis=1)]
    one_hot = np.all(np.sort(w, axis=1) == [0.0, 1.0])
    return f if one_hot and np.array_equal(pick, np.arange(n_out) // f) else None


@handler("Resize", "Upsample")
def _resize(run, node):
    """Separable resampling: each resized axis through its taps (a weighted
    sum of index_selects; one index_select for nearest modes; integer-factor
    nearest repeats as a reshape and an expand); a channel-last input stays
    channel-last. Extrapolated outputs get ``extrapolation_value``."""
    name = node.inputs[0]
    shape = tuple(run.shape(name))
    at = node.attrs
    mode, coord, rounding = _settings(node, run.m.opset)
    out, scale, roi, axes = _plan(run, node, shape)
    a = float(at.get("cubic_coeff_a", -0.75))
    excl, anti = bool(at.get("exclude_outside", 0)), bool(at.get("antialias", 0))
    maps = []
    for d in sorted(set(axes)):
        if out[d] == shape[d] and scale[d] == 1.0 and roi[d] == (0.0, 1.0):
            continue
        idx, w, outside = axis_weights(shape[d], out[d], scale[d], mode, coord, rounding,
                                       roi[d], a, excl, anti)
        maps.append((d, (idx, w), outside))
    if run.is_static(name):
        return [_static_resize(run.arr(name), maps, at)]
    v = run.raw(name)
    cl = isinstance(v, ChannelLast)
    x = v.node if cl else run.node(name)
    where = (lambda d: channel_last_perm(len(shape)).index(d)) if cl else (lambda d: d)
    g = run.g
    if maps and all(o is None for _, _, o in maps) and \
            all(_nearest_repeat(*m, shape[d]) for d, m, _ in maps):
        x = _repeat(g, x, [(where(d), _nearest_repeat(*m, shape[d])) for d, m, _ in maps])
    else:
        for d, (idx, w), outside in maps:
            x = _apply_axis(g, x, where(d), idx, w, mode == "nearest", outside)
    extra = _extrapolated(maps, len(shape), float(at.get("extrapolation_value", 0.0)))
    if extra is not None:
        if cl:
            extra = np.transpose(extra, channel_last_perm(len(shape)))
        x = g.add(x, extra.astype(g.dtype))
    return [ChannelLast(x) if cl else x]


def _repeat(g, x, factors):
    """out[..., i, ...] = x[..., i // f, ...] on the given (axis, f) pairs."""
    shape = tuple(x.shape)
    fac = dict(factors)
    spread, wide = [], []
    for i, s in enumerate(shape):
        spread += [s, 1]
        wide += [s, fac.get(i, 1)]
    y = g.expand(g.reshape(x, tuple(spread)), tuple(wide))
    return g.reshape(y, tuple(s * fac.get(i, 1) for i, s in enumerate(shape)))


def _apply_axis(g, x, axis, idx, w, nearest, outside):
    """One axis through its taps: an index_select of the picked inputs
    (nearest; extrapolated rows zeroed), else the sum over taps of an
    index_select times that tap's weights (cost linear in the output)."""
    nd = len(x.shape)
    bshape = [1] * nd
    bshape[axis] = idx.shape[0]
    if nearest:
        y = g.index_select(x, axis, idx[np.arange(idx.shape[0]), np.argmax(w, axis=1)])
        if outside is not None:
            y = g.mul(y, (~outside).reshape(bshape).astype(g.dtype))
        return y
    y = None
    for k in range(idx.shape[1]):
        if not np.any(w[:, k]):
            continue
        term = g.mul(g.index_select(x, axis, idx[:, k].astype(np.int64)),
                     w[:, k].reshape(bshape).astype(g.dtype))
        y = term if y is None else g.add(y, term)
    return y if y is not None else g.mul(g.index_select(x, axis, idx[:, 0]), 0.0)


def _extrapolated(maps, ndim, value):
    """value * (1 - prod of the in-range masks), broadcastable to the
    output; None when no output is extrapolated or the value is 0."""
    masks = [(d, o) for d, _, o in maps if o is not None]
    if not masks or value == 0.0:
        return None
    keep = np.ones((1,) * ndim)
    for d, o in masks:
        shape = [1] * ndim
        shape[d] = o.size
        keep = keep * (~o).reshape(shape)
    return value * (1.0 - keep)


def _static_resize(arr, maps, at):
    """The same map on a static array (NumPy, float64, cast back)."""
    y = arr.astype(np.float64)
    for d, (idx, w), _ in maps:
        mat = _matrix(idx, w, arr.shape[d])
        y = np.moveaxis(np.tensordot(mat, y, axes=([1], [d])), 0, d)
    extra = _extrapolated(maps, arr.ndim, float(at.get("extrapolation_value", 0.0)))
    if extra is not None:
        y = y + extra
    if arr.dtype.kind in "iu":
        info = np.iinfo(arr.dtype)
        y = np.clip(np.rint(y), info.min, info.max)
    return y.astype(arr.dtype)
