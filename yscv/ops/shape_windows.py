"""Shape ops (forward) that place values by position: constant padding,
tiling, pixel shuffle and nearest upsampling; triangles, roll, diagonal,
outer; unfold/fold and interpolate.

``diagonal`` returns a view of the input value; the others build a new array.
Every attribute (pad widths, full tile reps, the sliding-block counts,
interpolate's index and weight tables) is resolved at graph-build time into a
named record of `yscv.compute.shape`; forwards are one NumPy call (or a
few: unfold/fold's tap copies, interpolate's two ``np.take``). Nothing is
saved for backward beyond the input values. The argument helpers shared with
the reshapes (ints, shape arguments, the least ndim) come from
`yscv.ops.shape`.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..compute.shape import (DiagonalAttrs, InterpolateAttrs, PadAttrs, PixelShuffleAttrs,
                             RepeatAttrs, RollAttrs, UpsampleAttrs, WindowAttrs, fold,
                             interp_along, interp_axis, pad_interior, pixel_shuffle, unfold)
from ..node import Op
from ..registry import register_forward
from ._common import (check_array_size, check_int_bound, check_ndim, int_tuple, is_scalar,
                      normalize_axis, operand_shape, shape_error)
from .shape import _is_int, _need_ndim, _shape_arg


# --------------------------------------------------------------- helpers
def _pad_widths(pad_width, in_shape: tuple) -> tuple:
    """np.pad's pad_width broadcast to one (before, after) pair of ints per axis."""
    nd = len(in_shape)
    if (type(pad_width) in (tuple, list) and len(pad_width) == nd
            and all(type(p) in (tuple, list) and len(p) == 2 and type(p[0]) is int
                    and type(p[1]) is int for p in pad_width)):
        widths = tuple((p[0], p[1]) for p in pad_width)  # the common spelling, fast
    else:
        try:
            pw = np.asarray(pad_width)
        except Exception:
            pw = np.asarray([], dtype=object)
        if pw.dtype.kind not in "iu":
            raise TypeError(f"pad: pad_width must hold ints, got {pad_width!r}")
        try:
            pw = np.broadcast_to(pw, (nd, 2))
        except ValueError:
            raise ValueError(f"pad: pad_width={pad_width!r} must be one (before, after) pair per "
                             f"axis ({nd} pairs for shape {in_shape}), one pair or an int") from None
        widths = tuple((int(b), int(a)) for b, a in pw.tolist())
    if any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"pad: pad_width={pad_width!r} has a negative width")
    for e in itertools.chain.from_iterable(widths):
        check_int_bound(e, "pad", "pad_width", pad_width)
    return widths


# -------------------------------------------------------------- forwards
@register_forward(Op.PAD)
def pad_forward(attrs: PadAttrs, x):
    widths, value = attrs.widths, attrs.value
    shape = tuple(n + b + a for n, (b, a) in zip(x.shape, widths))
    out = np.zeros(shape, x.dtype) if value == 0.0 else np.full(shape, value, x.dtype)
    out[pad_interior(widths, x.shape)] = x
    return out, None


@register_forward(Op.REPEAT)
def repeat_forward(attrs: RepeatAttrs, x):
    return np.tile(x, attrs.reps), None


@register_forward(Op.PIXEL_SHUFFLE)
def pixel_shuffle_forward(attrs: PixelShuffleAttrs, x):
    return pixel_shuffle(x, attrs.r), None


@register_forward(Op.UPSAMPLE_NEAREST)
def upsample_nearest_forward(attrs: UpsampleAttrs, x):
    n, *spatial, c = x.shape
    scales = attrs.scales
    inter, full = [n], [n]
    for s, r in zip(spatial, scales):
        inter += [s, 1]
        full += [s, r]
    y = np.broadcast_to(x.reshape(inter + [c]), tuple(full) + (c,))
    return y.reshape((n,) + tuple(s * r for s, r in zip(spatial, scales)) + (c,)), None


@register_forward(Op.TRIL)
def tril_forward(k: int, x):
    return np.tril(x, k), None


@register_forward(Op.TRIU)
def triu_forward(k: int, x):
    return np.triu(x, k), None


@register_forward(Op.ROLL)
def roll_forward(attrs: RollAttrs, x):
    if attrs.axes is None:
        return np.roll(x.reshape(-1), attrs.shifts[0]).reshape(x.shape), None
    return np.roll(x, attrs.shifts, attrs.axes), None


@register_forward(Op.DIAGONAL)
def diagonal_forward(attrs: DiagonalAttrs, x):
    return np.diagonal(x, attrs.offset, attrs.axis1, attrs.axis2), None


@register_forward(Op.OUTER)
def outer_forward(attrs, a, b):
    return np.multiply.outer(a, b), None


@register_forward(Op.UNFOLD)
def unfold_forward(attrs: WindowAttrs, x):
    return unfold(x, attrs), None


@register_forward(Op.FOLD)
def fold_forward(attrs: WindowAttrs, x):
    return fold(x, attrs), None


@register_forward(Op.INTERPOLATE)
def interpolate_forward(attrs: InterpolateAttrs, x):
    ah, aw = attrs.axes
    return interp_along(interp_along(x, 1, ah), 2, aw), None


def _window_attrs(op: str, kernel, dilation, padding, stride, size: tuple) -> WindowAttrs:
    """unfold/fold's arguments as pairs, and the sliding-block counts over
    the image of spatial ``size`` (ValueError when there is no block)."""
    k = int_tuple(kernel, 2, op, "kernel", minimum=1)
    d = int_tuple(dilation, 2, op, "dilation", minimum=1)
    p = int_tuple(padding, 2, op, "padding", minimum=0)
    s = int_tuple(stride, 2, op, "stride", minimum=1)
    blocks = []
    for axis, n in enumerate(size):
        span = d[axis] * (k[axis] - 1) + 1
        free = n + 2 * p[axis] - span
        if free < 0:
            raise ValueError(f"{op}: kernel={kernel!r} with dilation={dilation!r} spans {span} "
                             f"on spatial axis {axis}, more than the padded size "
                             f"{n + 2 * p[axis]} (size {n}, padding={padding!r})")
        blocks.append(free // s[axis] + 1)
    return WindowAttrs(k, d, p, s, tuple(size), tuple(blocks))


def _interp_size(in_hw: tuple, size, scale_factor) -> tuple:
    """interpolate's output (OH, OW) and the scale per axis (None where the
    index rule uses in/out)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor, got "
                         f"size={size!r}, scale_factor={scale_factor!r}")
    if size is not None:
        return int_tuple(size, 2, "interpolate", "size", minimum=1), (None, None)
    if is_scalar(scale_factor):
        scales = (float(scale_factor),) * 2
    elif (isinstance(scale_factor, (tuple, list)) and len(scale_factor) == 2
          and all(is_scalar(v) for v in scale_factor)):
        scales = tuple(float(v) for v in scale_factor)
    else:
        raise TypeError("interpolate: scale_factor must be a number or a pair of numbers, got "
                        f"{scale_factor!r}")
    if not all(math.isfinite(v) and v > 0 for v in scales):
        raise ValueError(f"interpolate: scale_factor={scale_factor!r} must be finite and > 0")
    out = tuple(int(math.floor(n * v)) for n, v in zip(in_hw, scales))
    if min(out) < 1:
        raise ValueError(f"interpolate: scale_factor={scale_factor!r} gives an output size "
                         f"{out} for the input size {tuple(in_hw)}; each must be >= 1")
    return out, scales


# ----------------------------------------------------------- Graph methods
class ShapeWindowOps:
    """Graph methods of the shape category: padding, tiling, resampling,
    triangles, roll, diagonal, outer, sliding windows."""

    def pad(self, x, pad_width, value=0.0):
        """Constant padding, ``np.pad(x, pad_width, constant_values=value)``:
        ``pad_width`` is one ``(before, after)`` pair per axis (or, as in
        np.pad, an int or one pair used for every axis); widths >= 0.
        Backward: the gradient's interior slice."""
        x, in_shape = operand_shape(self, x, "pad")
        if not is_scalar(value):
            raise TypeError(f"pad: value must be a real number, got {value!r}")
        widths = _pad_widths(pad_width, in_shape)
        check_array_size("pad", tuple(n + b + a for n, (b, a) in zip(in_shape, widths)),
                         self.dtype.itemsize, pad_width=pad_width)
        return self._apply1(Op.PAD, x, PadAttrs(widths, float(value)))

    def repeat(self, x, repeats):
        """Tile ``x`` (``np.tile`` semantics): ``repeats`` an int or a tuple of
        ints >= 0; a longer tuple adds leading axes. Backward sums the
        gradient over the copies."""
        x, in_shape = operand_shape(self, x, "repeat")
        reps = _shape_arg(repeats, "repeat", "repeats")
        if any(r < 0 for r in reps):
            raise ValueError(f"repeat: repeats={reps} must be >= 0")
        d = max(len(reps), len(in_shape))
        reps = (1,) * (d - len(reps)) + reps
        full = (1,) * (d - len(in_shape)) + tuple(in_shape)
        check_array_size("repeat", tuple(n * r for n, r in zip(full, reps)), self.dtype.itemsize,
                         repeats=repeats)
        return self._apply1(Op.REPEAT, x, RepeatAttrs(reps))

    def pixel_shuffle(self, x, r):
        """[N, H, W, ``C*r*r``] -> [N, ``H*r``, ``W*r``, C] in PyTorch's channel order:
        input channel ``c*r*r + i*r + j`` goes to output pixel
        ``(h*r + i, w*r + j)``, channel ``c``."""
        x, in_shape = operand_shape(self, x, "pixel_shuffle")
        if len(in_shape) != 4:
            raise shape_error("pixel_shuffle", f"x must be 4-d (NHWC), got shape {in_shape}",
                              expected=4, got=in_shape)
        (r,) = int_tuple(r, 1, "pixel_shuffle", "r", minimum=1)
        if in_shape[3] % (r * r):
            raise shape_error("pixel_shuffle", f"channels {in_shape[3]} (shape {in_shape}) are "
                                               f"not divisible by r*r = {r * r}", got=in_shape)
        return self._apply1(Op.PIXEL_SHUFFLE, x, PixelShuffleAttrs(r))

    def upsample_nearest(self, x, r):
        """Nearest-neighbour upsampling by an integer factor: [N, H, W, C] ->
        [N, ``H*r``, ``W*r``, C] (each pixel repeated r x r). ``r`` is an int or one
        int per spatial axis; NLC and NDHWC inputs work alike. Backward sums
        each r x r block of the gradient."""
        x, in_shape = operand_shape(self, x, "upsample_nearest")
        if len(in_shape) not in (3, 4, 5):
            raise shape_error("upsample_nearest", f"x must be 3-d (NLC), 4-d (NHWC) or 5-d "
                                                  f"(NDHWC), got shape {in_shape}", got=in_shape)
        scales = int_tuple(r, len(in_shape) - 2, "upsample_nearest", "r", minimum=1)
        out = (in_shape[0], *(n * k for n, k in zip(in_shape[1:-1], scales)), in_shape[-1])
        check_array_size("upsample_nearest", out, self.dtype.itemsize, r=r)
        return self._apply1(Op.UPSAMPLE_NEAREST, x, UpsampleAttrs(scales))

    # ----------------------------------------------------- more shape ops
    def tril(self, x, k=0):
        """The lower triangle of the last two axes (``torch.tril``): entries
        with ``col - row > k`` zeroed. Backward: ``tril(g, k)``."""
        return self._triangle(Op.TRIL, "tril", x, k)

    def triu(self, x, k=0):
        """The upper triangle of the last two axes (``torch.triu``): entries
        with ``col - row < k`` zeroed. Backward: ``triu(g, k)``."""
        return self._triangle(Op.TRIU, "triu", x, k)

    def _triangle(self, op, name, x, k):
        x, in_shape = operand_shape(self, x, name)
        _need_ndim(in_shape, 2, name)
        if not _is_int(k):
            raise TypeError(f"{name}: k must be an int, got {type(k).__name__}")
        return self._apply1(op, x, int(check_int_bound(int(k), name, "k")))

    def roll(self, x, shifts, axis=None):
        """``torch.roll``: elements shifted by ``shifts`` along ``axis``
        (ints, or equally long tuples), wrapping around; ``axis=None`` rolls
        the flattened input (one int shift) and restores the shape.
        Backward: the gradient rolled back."""
        x, in_shape = operand_shape(self, x, "roll")
        sh = _shape_arg(shifts, "roll", "shifts")
        if axis is None:
            if len(sh) != 1:
                raise ValueError(f"roll: shifts={shifts!r} must be one int when axis is None")
            return self._apply1(Op.ROLL, x, RollAttrs(sh, None))
        axes = (axis,) if _is_int(axis) else axis
        if not isinstance(axes, (tuple, list)) or len(axes) != len(sh) or not sh:
            raise ValueError(f"roll: shifts={shifts!r} and axis={axis!r} must be ints or "
                             "tuples of the same length")
        _need_ndim(in_shape, 1, "roll")
        ax = tuple(normalize_axis(a, len(in_shape), "roll") for a in axes)
        return self._apply1(Op.ROLL, x, RollAttrs(sh, ax))

    def diagonal(self, x, offset=0, axis1=0, axis2=1):
        """``torch.diagonal``: the ``offset`` diagonal of the planes spanned
        by ``axis1`` and ``axis2`` (removed), as a new last axis. A view.
        Backward: zeros with ``g`` written on that diagonal."""
        x, in_shape = operand_shape(self, x, "diagonal")
        _need_ndim(in_shape, 2, "diagonal")
        if not _is_int(offset):
            raise TypeError(f"diagonal: offset must be an int, got {type(offset).__name__}")
        a1 = normalize_axis(axis1, len(in_shape), "diagonal", "axis1")
        a2 = normalize_axis(axis2, len(in_shape), "diagonal", "axis2")
        if a1 == a2:
            raise ValueError(f"diagonal: axis1={axis1} and axis2={axis2} are the same axis")
        offset = int(check_int_bound(int(offset), "diagonal", "offset"))
        return self._apply1(Op.DIAGONAL, x, DiagonalAttrs(offset, a1, a2))

    def outer(self, a, b):
        """``torch.outer``: ``out[i, j] = a[i] * b[j]`` for 1-d ``a`` [n] and
        ``b`` [m]. Backward: ``g @ b`` and ``a @ g``."""
        a, sa = operand_shape(self, a, "outer", "a")
        b, sb = operand_shape(self, b, "outer", "b")
        for arg, s in (("a", sa), ("b", sb)):
            if len(s) != 1:
                raise shape_error("outer", f"{arg} must be 1-d, got shape {s}", expected=1, got=s)
        return self._apply(Op.OUTER, (a, b))

    def unfold(self, x, kernel, dilation=1, padding=0, stride=1):
        """``torch.nn.functional.unfold`` on NHWC: [N, H, W, C] -> [N, L,
        ``KH*KW*C``], block ``l = oh*OW + ow`` (row-major over the OH x OW
        sliding blocks), feature ``(i*KW + j)*C + c`` (channels fastest: the
        order of yscv's conv weights [KH, KW, C, Cout] flattened).
        ``kernel``, ``dilation``, ``padding`` (zeros), ``stride``: an int or an
        (H, W) pair. Backward: ``fold`` of the gradient."""
        x, in_shape = operand_shape(self, x, "unfold")
        check_ndim(in_shape, 4, "unfold", "x", "NHWC")
        attrs = _window_attrs("unfold", kernel, dilation, padding, stride, in_shape[1:3])
        (kh, kw), (oh, ow) = attrs.kernel, attrs.blocks
        check_array_size("unfold", (in_shape[0], oh * ow, kh * kw * in_shape[3]),
                         self.dtype.itemsize, kernel=kernel, stride=stride)
        return self._apply1(Op.UNFOLD, x, attrs)

    def fold(self, x, output_size, kernel, dilation=1, padding=0, stride=1):
        """``torch.nn.functional.fold`` on yscv's layout: [N, L, ``KH*KW*C``] ->
        [N, H, W, C] with ``output_size = (H, W)``; each block's taps are
        summed into the image (overlaps add up): the adjoint of ``unfold``,
        and its inverse where blocks do not overlap. ``L`` must be the number
        of sliding blocks. Backward: ``unfold`` of the gradient."""
        x, in_shape = operand_shape(self, x, "fold")
        check_ndim(in_shape, 3, "fold", "x", "[N, L, KH*KW*C]")
        size = int_tuple(output_size, 2, "fold", "output_size", minimum=1)
        attrs = _window_attrs("fold", kernel, dilation, padding, stride, size)
        (kh, kw), (oh, ow) = attrs.kernel, attrs.blocks
        if in_shape[2] % (kh * kw):
            raise shape_error("fold", f"x's last axis ({in_shape[2]}, shape {in_shape}) is not "
                                      f"divisible by KH*KW = {kh * kw}", got=in_shape)
        if in_shape[1] != oh * ow:
            raise shape_error("fold", f"x has {in_shape[1]} blocks (shape {in_shape}) but "
                                      f"output_size={output_size!r} with kernel={kernel!r} "
                                      f"gives {oh} x {ow} = {oh * ow}",
                              expected=oh * ow, got=in_shape)
        check_array_size("fold", (in_shape[0], *size, in_shape[2] // (kh * kw)),
                         self.dtype.itemsize, output_size=output_size)
        return self._apply1(Op.FOLD, x, attrs)

    def interpolate(self, x, size=None, scale_factor=None, mode="nearest", align_corners=None):
        """``torch.nn.functional.interpolate`` on NHWC [N, H, W, C], ``mode``
        "nearest" or "bilinear", with PyTorch's index rules: ``size`` (an int
        or (OH, OW)) or ``scale_factor`` (a number or a pair: OH =
        floor(H * s), and the index rule uses 1/s as PyTorch does without
        ``recompute_scale_factor``); ``align_corners`` (bilinear only; None =
        False). Backward: the gradient summed back onto the source pixels
        with the same weights."""
        x, in_shape = operand_shape(self, x, "interpolate")
        check_ndim(in_shape, 4, "interpolate", "x", "NHWC")
        if mode not in ("nearest", "bilinear"):
            raise ValueError(f"interpolate: mode={mode!r} must be 'nearest' or 'bilinear'")
        if align_corners is not None and not isinstance(align_corners, (bool, np.bool_)):
            raise TypeError(f"interpolate: align_corners must be None or a bool, got "
                            f"{align_corners!r}")
        if mode == "nearest" and align_corners is not None:
            raise ValueError("interpolate: align_corners can only be set with mode='bilinear', "
                             f"got align_corners={align_corners!r} with mode='nearest'")
        if min(in_shape[1:3]) < 1:
            raise shape_error("interpolate", f"x has an empty spatial axis (shape {in_shape})",
                              got=in_shape)
        out_hw, scales = _interp_size(in_shape[1:3], size, scale_factor)
        corners = bool(align_corners)
        check_array_size("interpolate", (in_shape[0], *out_hw, in_shape[3]), self.dtype.itemsize,
                         size=size, scale_factor=scale_factor)
        axes = tuple(interp_axis(n, m, s, mode, corners, self.dtype)
                     for n, m, s in zip(in_shape[1:3], out_hw, scales))
        return self._apply1(Op.INTERPOLATE, x, InterpolateAttrs(mode, corners, out_hw, axes))
