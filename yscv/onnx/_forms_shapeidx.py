"""ONNX forms of the further shape and indexing ops: tril/triu,
roll, diagonal, outer, unfold/fold, interpolate, masked_fill, index_select
(one mapping function per Op member; see `yscv.onnx._optable`).

split, chunk and take_along_axis record narrow, expand and gather nodes,
whose forms are in `yscv.onnx._forms_tensor`. unfold, fold and
interpolate are spelled with Slice/Pad/Gather/Mul/Add rather than Conv,
Col2Im or Resize: the same arithmetic as yscv's forward, in float32 and
float64 alike, with PyTorch's index rules baked into the Gather indices.
"""
from __future__ import annotations

import numpy as np

from ..node import Op
from ._registry import onnx_form


# ------------------------------------------------------------------ shape
def _triangle(upper: int):
    def emit(b, n):
        return b.emit("Trilu", [n.x(), b.const(np.asarray(n.attrs, dtype=np.int64), "k")],
                      upper=upper)
    return emit


onnx_form(Op.TRIL, "Trilu")(_triangle(0))
onnx_form(Op.TRIU, "Trilu")(_triangle(1))


def _roll_axis(b, x: str, axis: int, shift: int, size: int) -> str:
    s = shift % size if size else 0
    if s == 0:
        return x
    tail = b.emit("Slice", [x, b.ints([size - s]), b.ints([size]), b.ints([axis])])
    head = b.emit("Slice", [x, b.ints([0]), b.ints([size - s]), b.ints([axis])])
    return b.emit("Concat", [tail, head], axis=axis)


@onnx_form(Op.ROLL, "Slice, Concat, Reshape")
def _roll(b, n):
    a = n.attrs
    shape = n.in_shape()
    x = n.x()
    if a.axes is None:
        b.fixed_axes(n.inputs[0], range(len(shape)), n.name, n.index)
        size = int(np.prod(shape))
        flat = b.emit("Reshape", [x, b.ints([size])])
        y = _roll_axis(b, flat, 0, a.shifts[0], size)
        return b.emit("Reshape", [y, b.ints(shape)])
    b.fixed_axes(n.inputs[0], a.axes, n.name, n.index)
    y = x
    for shift, axis in zip(a.shifts, a.axes):
        y = _roll_axis(b, y, axis, shift, shape[axis])
    return b.emit("Identity", [y]) if y is x else y


@onnx_form(Op.DIAGONAL, "Transpose, Reshape, Gather")
def _diagonal(b, n):
    from ..compute.shape import diagonal_positions
    a = n.attrs
    shape = n.in_shape()
    b.fixed_axes(n.inputs[0], (a.axis1, a.axis2), n.name, n.index)
    rest = [k for k in range(len(shape)) if k not in (a.axis1, a.axis2)]
    n1, n2 = shape[a.axis1], shape[a.axis2]
    y = b.emit("Transpose", [n.x()], perm=rest + [a.axis1, a.axis2])
    y = b.emit("Reshape", [y, b.ints([0] * len(rest) + [n1 * n2])])
    i, j = diagonal_positions(n1, n2, a.offset)
    return b.emit("Gather", [y, b.const(i * n2 + j, "diag")], axis=len(rest))


@onnx_form(Op.OUTER, "Unsqueeze, Mul")
def _outer(b, n):
    col = b.emit("Unsqueeze", [n.x(0), b.ints([1])])
    row = b.emit("Unsqueeze", [n.x(1), b.ints([0])])
    return b.emit("Mul", [col, row])


def _pad_hw(b, x: str, before, after) -> str:
    """Zero padding of axes 1 and 2 of a 4-d tensor."""
    if not any(before) and not any(after):
        return x
    pads = [0, before[0], before[1], 0, 0, after[0], after[1], 0]
    return b.emit("Pad", [x, b.ints(pads), b.scalar(0.0)], mode="constant")


@onnx_form(Op.UNFOLD, "Pad, Slice, Unsqueeze, Concat, Reshape")
def _unfold(b, n):
    a = n.attrs
    shape = n.in_shape()
    b.fixed_axes(n.inputs[0], (1, 2, 3), n.name, n.index)
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = a.kernel, a.dilation, a.stride, a.blocks
    xp = _pad_hw(b, n.x(), a.padding, a.padding)
    taps = []
    for i in range(kh):
        for j in range(kw):
            t = b.emit("Slice", [xp, b.ints([i * dh, j * dw]),
                                 b.ints([i * dh + sh * (oh - 1) + 1, j * dw + sw * (ow - 1) + 1]),
                                 b.ints([1, 2]), b.ints([sh, sw])])
            taps.append(b.emit("Unsqueeze", [t, b.ints([3])]))
    y = taps[0] if len(taps) == 1 else b.emit("Concat", taps, axis=3)
    return b.emit("Reshape", [y, b.ints([0, oh * ow, kh * kw * shape[3]])])


@onnx_form(Op.FOLD, "Slice, Unsqueeze, Pad, Reshape, Add")
def _fold(b, n):
    """Each kernel tap's [N, OH, OW, C] slab, spread stride apart and padded
    to its place in the padded image, summed in tap order; then cropped."""
    a = n.attrs
    shape = n.in_shape()
    b.fixed_axes(n.inputs[0], (1, 2), n.name, n.index)
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = a.kernel, a.dilation, a.stride, a.blocks
    (ph, pw), (h, w) = a.padding, a.size
    c = shape[2] // (kh * kw)
    hp, wp = h + 2 * ph, w + 2 * pw
    span_h, span_w = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    x4 = b.emit("Reshape", [n.x(), b.ints([0, oh, ow, kh * kw * c])])
    total = None
    for i in range(kh):
        for j in range(kw):
            tap = (i * kw + j) * c
            t = b.emit("Slice", [x4, b.ints([tap]), b.ints([tap + c]), b.ints([3])])
            if sh > 1 or sw > 1:   # [N, OH, 1, OW, 1, C] -> [N, OH*sh, OW*sw, C]
                t = b.emit("Unsqueeze", [t, b.ints([2, 4])])
                t = b.emit("Pad", [t, b.ints([0] * 6 + [0, 0, sh - 1, 0, sw - 1, 0]),
                                   b.scalar(0.0)], mode="constant")
                t = b.emit("Reshape", [t, b.ints([0, oh * sh, ow * sw, c])])
                t = b.emit("Slice", [t, b.ints([0, 0]), b.ints([span_h, span_w]), b.ints([1, 2])])
            t = _pad_hw(b, t, (i * dh, j * dw), (hp - i * dh - span_h, wp - j * dw - span_w))
            total = t if total is None else b.emit("Add", [total, t])
    if ph or pw:
        total = b.emit("Slice", [total, b.ints([ph, pw]), b.ints([ph + h, pw + w]),
                                 b.ints([1, 2])])
    return total


def _interp_axis(b, x: str, axis: int, ax, n_in: int) -> str:
    if ax.i1 is None:
        if ax.i0.size == n_in and np.array_equal(ax.i0, np.arange(n_in)):
            return x
        return b.emit("Gather", [x, b.const(ax.i0, "rows")], axis=axis)
    tail = (1,) * (3 - axis)
    parts = [b.emit("Mul", [b.emit("Gather", [x, b.const(idx, "rows")], axis=axis),
                            b.const(np.asarray(wt, b.dtype).reshape((-1,) + tail), "weights")])
             for idx, wt in ((ax.i0, ax.w0), (ax.i1, ax.w1))]
    return b.emit("Add", parts)


@onnx_form(Op.INTERPOLATE, "Gather, Mul, Add")
def _interpolate(b, n):
    b.fixed_axes(n.inputs[0], (1, 2), n.name, n.index)
    ah, aw = n.attrs.axes
    x = n.x()
    _, h, w, _ = n.in_shape()
    y = _interp_axis(b, _interp_axis(b, x, 1, ah, h), 2, aw, w)
    return b.emit("Identity", [y]) if y is x else y


# --------------------------------------------------------------- indexing
@onnx_form(Op.MASKED_FILL, "Where")
def _masked_fill(b, n):
    mask = b.const(np.asarray(n.attrs.mask, dtype=np.bool_), "mask")
    return b.emit("Where", [mask, b.scalar(n.attrs.value), n.x()])


@onnx_form(Op.INDEX_SELECT, "Gather")
def _index_select(b, n):
    return b.emit("Gather", [n.x(), b.index_tensor(n.attrs.index)], axis=n.attrs.axis)
