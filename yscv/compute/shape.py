"""What the shape forwards (``yscv/ops/shape.py``) and backward rules
(``yscv/backward/shape.py``) share: the attributes each op stores on its node,
and the array layouts both sides compute with.

Every attribute is resolved at graph-build time by the Graph method and
stored as one of the records below; forward and backward read its fields by
name. Shape ops have no kernels and never import Numba.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["ReshapeAttrs", "ExpandAttrs", "CatAttrs", "StackAttrs", "IndexAttrs", "FlipAttrs",
           "PadAttrs", "RepeatAttrs", "PixelShuffleAttrs", "UpsampleAttrs", "pad_interior",
           "pixel_shuffle", "pixel_unshuffle"]


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
    """[N, H, W, C*r*r] -> [N, H*r, W*r, C] in PyTorch's channel order: input
    channel ``c*r*r + i*r + j`` of pixel ``(h, w)`` goes to output pixel
    ``(h*r + i, w*r + j)``, channel ``c``. One 6-d transpose copy."""
    n, h, w, crr = x.shape
    c = crr // (r * r)
    y = x.reshape(n, h, w, c, r, r).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, h * r, w * r, c)


def pixel_unshuffle(g: np.ndarray, r: int) -> np.ndarray:
    """The inverse of pixel_shuffle: [N, H*r, W*r, C] -> [N, H, W, C*r*r],
    output channel ``c*r*r + i*r + j`` from pixel ``(h*r + i, w*r + j)``.

    Written as r*r strided copies ``gx[..., i, j] = g6[:, :, i, :, j, :]``
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
