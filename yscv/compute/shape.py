"""What the shape forwards (``yscv/ops/shape.py`` and
``yscv/ops/shape_windows.py``) and backward rules
(``yscv/backward/shape.py``) share: the attributes each op stores on its node,
and the array layouts both sides compute with (unfold/fold's strided tap
copies, interpolate's index and weight tables).

Every attribute is resolved at graph-build time by the Graph method and
stored as one of the records below; forward and backward read its fields by
name. Shape ops have no kernels of their own; unfold/fold are the
convolutions' im2col/col2im (`yscv.compute.columns`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .columns import columns, columns_adjoint

__all__ = ["ReshapeAttrs", "ExpandAttrs", "CatAttrs", "StackAttrs", "IndexAttrs", "FlipAttrs",
           "PadAttrs", "RepeatAttrs", "PixelShuffleAttrs", "UpsampleAttrs", "pad_interior",
           "pixel_shuffle", "pixel_unshuffle", "RollAttrs", "DiagonalAttrs", "WindowAttrs",
           "InterpAxis", "InterpolateAttrs", "diagonal_positions", "diagonal_scatter", "unfold",
           "fold", "interp_axis", "interp_along", "interp_along_adjoint"]


# ------------------------------------------------------------ attributes
class ReshapeAttrs(NamedTuple):
    """reshape / flatten / unsqueeze / squeeze: the resolved output shape."""

    shape: tuple


class ExpandAttrs(NamedTuple):
    """expand: the resolved output shape (no -1 left)."""

    shape: tuple


class CatAttrs(NamedTuple):
    """cat: the non-negative axis and the offsets along it where inputs 1.. start."""

    axis: int
    offsets: tuple


class StackAttrs(NamedTuple):
    """stack: the new axis, non-negative, in ``[0, ndim]``."""

    axis: int


class IndexAttrs(NamedTuple):
    """select / narrow / getitem: the canonical basic-slicing key (explicit
    slices, non-negative ints, None; a trailing Ellipsis)."""

    key: tuple


class FlipAttrs(NamedTuple):
    """flip: the reversed axes, non-negative."""

    axes: tuple


class PadAttrs(NamedTuple):
    """pad: one ``(before, after)`` pair of ints per axis and the fill value."""

    widths: tuple
    value: float


class RepeatAttrs(NamedTuple):
    """repeat: the tile count per output axis (as many as the output has axes)."""

    reps: tuple


class PixelShuffleAttrs(NamedTuple):
    """pixel_shuffle: the upscale factor."""

    r: int


class UpsampleAttrs(NamedTuple):
    """upsample_nearest: the factor per spatial axis."""

    scales: tuple


# --------------------------------------------------------------- layouts
def pad_interior(widths, in_shape) -> tuple:
    """The slices of a padded array that hold the input."""
    return tuple(slice(b, b + n) for (b, _), n in zip(widths, in_shape))


def pixel_shuffle(x: np.ndarray, r: int) -> np.ndarray:
    """[N, H, W, ``C*r*r``] -> [N, ``H*r``, ``W*r``, C] in PyTorch's channel order: input
    channel ``c*r*r + i*r + j`` of pixel ``(h, w)`` goes to output pixel
    ``(h*r + i, w*r + j)``, channel ``c``. One 6-d transpose copy."""
    n, h, w, crr = x.shape
    c = crr // (r * r)
    y = x.reshape(n, h, w, c, r, r).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, h * r, w * r, c)


def pixel_unshuffle(g: np.ndarray, r: int) -> np.ndarray:
    """The inverse of pixel_shuffle: [N, ``H*r``, ``W*r``, C] -> [N, H, W, ``C*r*r``],
    output channel ``c*r*r + i*r + j`` from pixel ``(h*r + i, w*r + j)``.

    Written as ``r*r`` strided copies ``gx[..., i, j] = g6[:, :, i, :, j, :]``
    rather than the inverse 6-d transpose, whose innermost destination axis
    (``j``, length r) would read with stride C (docs/ops/shape.md)."""
    n, hr, wr, c = g.shape
    h, w = hr // r, wr // r
    gx = np.empty((n, h, w, c, r, r), dtype=g.dtype)
    g6 = g.reshape(n, h, r, w, r, c)
    for i in range(r):
        for j in range(r):
            gx[..., i, j] = g6[:, :, i, :, j, :]
    return gx.reshape(n, h, w, c * r * r)


# ------------------------------------------- tril / roll / diagonal / outer
class RollAttrs(NamedTuple):
    """roll: the shift per axis and the non-negative axes (``None``: the
    flattened input is rolled, as ``torch.roll`` without dims)."""

    shifts: tuple
    axes: tuple | None


class DiagonalAttrs(NamedTuple):
    """diagonal: the offset and the two non-negative, distinct axes."""

    offset: int
    axis1: int
    axis2: int


def diagonal_positions(n1: int, n2: int, offset: int):
    """Row and column indices ``(i, j)`` of the ``offset`` diagonal of an
    ``n1 x n2`` plane (``offset > 0`` above the main diagonal), as np.diagonal."""
    if offset >= 0:
        length = max(0, min(n1, n2 - offset))
        i = np.arange(length, dtype=np.int64)
        return i, i + offset
    length = max(0, min(n1 + offset, n2))
    j = np.arange(length, dtype=np.int64)
    return j - offset, j


def diagonal_scatter(g: np.ndarray, shape: tuple, attrs: DiagonalAttrs) -> np.ndarray:
    """The adjoint of diagonal: zeros of ``shape`` with ``g`` ([..., L])
    written on the diagonal."""
    out = np.zeros(shape, dtype=g.dtype)
    plane = np.moveaxis(out, (attrs.axis1, attrs.axis2), (-2, -1))   # a writeable view
    i, j = diagonal_positions(shape[attrs.axis1], shape[attrs.axis2], attrs.offset)
    plane[..., i, j] = g
    return out


# ------------------------------------------------------- unfold / fold
class WindowAttrs(NamedTuple):
    """unfold / fold: kernel, dilation, padding, stride (one pair each, over
    H and W), the spatial size ``(H, W)`` of the image side and the number
    of sliding blocks ``(OH, OW)``."""

    kernel: tuple
    dilation: tuple
    padding: tuple
    stride: tuple
    size: tuple
    blocks: tuple


def unfold(x: np.ndarray, attrs: WindowAttrs) -> np.ndarray:
    """[N, H, W, C] -> [N, ``OH*OW``, ``KH*KW*C``]: block ``l = oh*OW + ow``, feature
    ``(i*KW + j)*C + c`` = padded ``x[n, oh*sh + i*dh, ow*sw + j*dw, c]``: the
    convolutions' column matrix (`yscv.compute.columns.columns`)."""
    return columns(x, attrs.kernel, attrs.stride, attrs.padding, attrs.dilation, attrs.blocks)


def fold(x: np.ndarray, attrs: WindowAttrs) -> np.ndarray:
    """[N, ``OH*OW``, ``KH*KW*C``] -> [N, H, W, C], the adjoint of `unfold`:
    each block's taps are summed into the image (taps in the padding
    dropped; `yscv.compute.columns.columns_adjoint`)."""
    return columns_adjoint(x, attrs.size, attrs.kernel, attrs.stride, attrs.padding,
                           attrs.dilation, attrs.blocks)


# ------------------------------------------------------------ interpolate
class InterpAxis(NamedTuple):
    """One spatial axis of interpolate: output position ``o`` reads input
    rows ``i0[o]`` and ``i1[o]`` with weights ``w0[o]`` and ``w1[o]``
    (nearest: ``i1``, ``w0`` and ``w1`` are None). Indices are sorted."""

    i0: np.ndarray
    i1: np.ndarray | None
    w0: np.ndarray | None
    w1: np.ndarray | None


class InterpolateAttrs(NamedTuple):
    """interpolate: the mode, align_corners, the output size (OH, OW) and
    the index/weight tables of the two spatial axes (H, W)."""

    mode: str
    align_corners: bool
    size: tuple
    axes: tuple


def interp_axis(n_in: int, n_out: int, scale, mode: str, align_corners: bool,
                dtype) -> InterpAxis:
    """PyTorch's source indices (and bilinear weights) of one axis.

    nearest (``upsample_nearest2d``): ``src = min(floor(o * s), n_in - 1)``
    in float32, ``s = 1/scale_factor`` if given else ``n_in / n_out``.
    bilinear (``upsample_bilinear2d``, in the input's precision):
    align_corners: ``src = o * (n_in - 1) / (n_out - 1)`` (0 when
    ``n_out == 1``); else ``src = max(s * (o + 0.5) - 0.5, 0)``; then
    ``i0 = floor(src)``, ``i1 = min(i0 + 1, n_in - 1)``, ``w1 = src - i0``,
    ``w0 = 1 - w1``. An axis whose size does not change is copied, and
    nearest with ``n_out == 2 * n_in`` takes ``o >> 1``, as PyTorch."""
    o = np.arange(n_out)
    if n_out == n_in:                 # PyTorch copies (whatever the scale)
        i = _frozen(o.astype(np.int64))
        return InterpAxis(i, None, None, None)
    if mode == "nearest":
        if n_out == 2 * n_in:
            return InterpAxis(_frozen(o.astype(np.int64) >> 1), None, None, None)
        s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
        src = np.floor(o.astype(np.float32) * s).astype(np.int64)
        i0 = np.minimum(src, n_in - 1)
        return InterpAxis(_frozen(i0), None, None, None)
    t = np.dtype(dtype).type
    if align_corners:
        s = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0.0)
        src = s * o.astype(dtype)
    else:
        s = t(1.0 / scale) if scale else t(n_in) / t(n_out)
        src = np.maximum(s * (o.astype(dtype) + t(0.5)) - t(0.5), t(0.0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = i0 + (i0 < n_in - 1)
    w1 = np.clip(src - i0.astype(dtype), t(0.0), t(1.0)).astype(dtype)
    w0 = (t(1.0) - w1).astype(dtype)
    return InterpAxis(_frozen(i0), _frozen(i1), _frozen(w0), _frozen(w1))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def _weights(w: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    return w.reshape((-1,) + (1,) * (ndim - axis - 1))


def interp_along(x: np.ndarray, axis: int, ax: InterpAxis) -> np.ndarray:
    """``x`` resampled along ``axis`` by one `InterpAxis`."""
    if ax.i1 is None:
        return np.take(x, ax.i0, axis=axis)
    w0 = _weights(ax.w0, axis, x.ndim)
    w1 = _weights(ax.w1, axis, x.ndim)
    return np.take(x, ax.i0, axis=axis) * w0 + np.take(x, ax.i1, axis=axis) * w1


def _add_sorted(g: np.ndarray, index: np.ndarray, axis: int, n_in: int) -> np.ndarray:
    """Rows of ``g`` along ``axis`` summed into ``n_in`` rows at the sorted
    ``index`` (the adjoint of ``np.take``): one ``np.add.reduceat`` over the
    runs of equal indices, summed in output order."""
    shape = list(g.shape)
    shape[axis] = n_in
    out = np.zeros(shape, dtype=g.dtype)
    if index.size == 0:
        return out
    rows, starts = np.unique(index, return_index=True)
    key = (slice(None),) * axis + (rows,)
    out[key] = np.add.reduceat(g, starts, axis=axis)
    return out


def interp_along_adjoint(g: np.ndarray, axis: int, ax: InterpAxis, n_in: int) -> np.ndarray:
    """The adjoint of `interp_along`: ``g`` summed back onto ``n_in`` rows."""
    if ax.i1 is None:
        return _add_sorted(g, ax.i0, axis, n_in)
    w0 = _weights(ax.w0, axis, g.ndim)
    w1 = _weights(ax.w1, axis, g.ndim)
    return _add_sorted(g * w0, ax.i0, axis, n_in) + _add_sorted(g * w1, ax.i1, axis, n_in)
