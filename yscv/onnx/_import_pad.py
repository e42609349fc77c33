"""Handlers of ONNX Pad (opsets 2-21: modes constant, edge, reflect, wrap;
pads from the attribute or the input, the ``axes`` input) and
CenterCropPad (a centred slice and a zero pad).

Constant padding is ``g.pad``. The other modes read, along each padded
axis, input indices computed with NumPy (``np.pad`` of ``arange``), applied
with ``index_select``: the gradient of each padded element is added back
to the element it copies. A channel-last input stays channel-last.
"""
from __future__ import annotations

import numpy as np

from ._import_layout import channel_last_perm
from ._import_registry import ChannelLast, handler

__all__ = ["PAD_MODES"]

PAD_MODES = ("constant", "edge", "reflect", "wrap")


def _pad_args(run, node, ndim):
    """(mode, [(begin, end)] per axis, constant value) of a Pad node."""
    at = node.attrs
    if run.has(node, 1):
        pads = [int(v) for v in run.arr(node.inputs[1]).reshape(-1)]
    else:
        pads = [int(v) for v in at.get("pads") or ()]
    value = float(at.get("value", 0.0))
    if run.has(node, 2):
        value = float(run.arr(node.inputs[2]).reshape(-1)[0])
    axes = list(range(ndim))
    if run.has(node, 3):
        axes = [int(a) % ndim for a in run.arr(node.inputs[3]).reshape(-1)]
    k = len(axes)
    if len(pads) != 2 * k:
        raise node.fail(f"pads {pads} have {len(pads)} values; the {k} padded axes need {2 * k}")
    widths = [(0, 0)] * ndim
    for j, a in enumerate(axes):
        widths[a] = (pads[j], pads[j + k])
    return at.get("mode", "constant"), widths, value


def pad_index(n, begin, end, mode, node):
    """The input index each output position of one axis reads (negative
    widths crop); refuses reflect pads that reach past the opposite end and
    padding an empty axis."""
    idx = np.arange(n)[max(-begin, 0):n - max(-end, 0)]
    b, e = max(begin, 0), max(end, 0)
    if b == 0 and e == 0:
        return idx
    if idx.size == 0:
        raise node.fail(f"{mode} padding of an empty axis (pads {begin}, {end} on size {n})")
    if mode == "reflect" and max(b, e) >= idx.size:
        raise node.fail(f"reflect pads ({begin}, {end}) must be smaller than the axis size "
                        f"{idx.size}")
    return np.pad(idx, (b, e), mode={"edge": "edge", "reflect": "reflect", "wrap": "wrap"}[mode])


@handler("Pad")
def _pad(run, node):
    name = node.inputs[0]
    shape = tuple(run.shape(name))
    mode, widths, value = _pad_args(run, node, len(shape))
    if mode == "constant":
        if run.is_static(name):
            return [_static_constant(run.arr(name), widths, value)]
        if any(b < 0 or e < 0 for b, e in widths):
            return [_crop_then_pad(run, name, shape, widths, value)]
        return [run.g.pad(run.node(name), widths, value)]
    index = [pad_index(n, b, e, mode, node) for n, (b, e) in zip(shape, widths)]
    if run.is_static(name):
        return [run.arr(name)[np.ix_(*index)]]
    v = run.raw(name)
    cl = isinstance(v, ChannelLast)
    x = v.node if cl else run.node(name)
    perm = channel_last_perm(len(shape)) if cl else tuple(range(len(shape)))
    for d, (n, idx) in enumerate(zip(shape, index)):
        if idx.size != n or np.any(idx != np.arange(n)):
            x = run.g.index_select(x, perm.index(d), idx.astype(np.int64))
    return [ChannelLast(x) if cl else x]


def _static_constant(arr, widths, value):
    key = tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(arr.shape, widths))
    pos = [(max(b, 0), max(e, 0)) for b, e in widths]
    return np.pad(arr[key], pos, constant_values=value)


def _crop_then_pad(run, name, shape, widths, value):
    """Negative constant pads crop (a slice) before the positive ones pad."""
    key = tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(shape, widths))
    x = run.g.getitem(run.node(name), key)
    pos = [(max(b, 0), max(e, 0)) for b, e in widths]
    return run.g.pad(x, pos, value) if any(b or e for b, e in pos) else x


@handler("CenterCropPad")
def _center_crop_pad(run, node):
    """Each listed axis cropped to, or zero-padded to, its target size,
    centred: a crop starts at (size - target) // 2, a pad puts
    (target - size) // 2 before (a slice, then ``g.pad``)."""
    name = node.inputs[0]
    shape = tuple(run.shape(name))
    nd = len(shape)
    target = [int(v) for v in run.arr(node.inputs[1]).reshape(-1)]
    axes = node.attrs.get("axes")
    axes = list(range(nd)) if axes is None else [int(a) % nd for a in axes]
    if len(target) != len(axes):
        raise node.fail(f"shape {target} has {len(target)} values for {len(axes)} axes")
    key, widths = [slice(None)] * nd, [(0, 0)] * nd
    for a, t in zip(axes, target):
        if t < 0:
            raise node.fail(f"target size {t} of axis {a} is negative")
        if t < shape[a]:
            start = (shape[a] - t) // 2
            key[a] = slice(start, start + t)
        elif t > shape[a]:
            widths[a] = ((t - shape[a]) // 2, t - shape[a] - (t - shape[a]) // 2)
    if run.is_static(name):
        return [np.pad(run.arr(name)[tuple(key)], widths)]
    x = run.node(name)
    if any(k != slice(None) for k in key):
        x = run.g.getitem(x, tuple(key))
    if any(b or e for b, e in widths):
        x = run.g.pad(x, widths, 0.0)
    return [x]
