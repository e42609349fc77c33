"""The shape names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node.

The arguments are those of the Graph method of the same name, as backward
rules pass them: valid (rules derive them from a node's resolved
attributes), so nothing is checked again here. Negative axes and -1 sizes
are resolved as the Graph method resolves them. Views stay views, as the
forwards return them (``reshape``, ``expand``, ``getitem`` ...).
(``transpose`` is the linalg category's: yscv/engine/namespace/array_linalg.py.)
"""
from __future__ import annotations

import math

import numpy as np

from ... import registry
from ...compute.shape import (PadAttrs, UpsampleAttrs, WindowAttrs, fold, pixel_shuffle,
                             unfold)
from ...node import Op

_PAD, _UPSAMPLE = int(Op.PAD), int(Op.UPSAMPLE_NEAREST)


def _pair(v) -> tuple:
    """An int or a pair of ints as a pair (unfold/fold's arguments)."""
    if isinstance(v, (tuple, list)):
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _window(kernel, dilation, padding, stride, size) -> WindowAttrs:
    """The record ``Graph.unfold`` / ``Graph.fold`` build: the pairs and the
    number of sliding blocks over the image of spatial ``size``."""
    k, d, p, s = _pair(kernel), _pair(dilation), _pair(padding), _pair(stride)
    blocks = tuple((n + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a, n in enumerate(size))
    return WindowAttrs(k, d, p, s, tuple(size), blocks)


def _pad_widths(pad_width, ndim: int) -> tuple:
    """np.pad's pad_width as one ``(before, after)`` pair per axis."""
    if type(pad_width) in (tuple, list) and len(pad_width) == ndim and all(
            type(p) in (tuple, list) and len(p) == 2 for p in pad_width):
        return tuple((int(b), int(a)) for b, a in pad_width)
    return tuple((int(b), int(a))
                 for b, a in np.broadcast_to(np.asarray(pad_width), (ndim, 2)).tolist())


class ArrayShape:
    """Shape ops on arrays, for the rules of backward/."""

    __slots__ = ()

    # ------------------------------------------------------------ reshapes
    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def flatten(x, start_axis=1, end_axis=-1):
        nd = x.ndim
        if nd == 0:
            return x.reshape(1)
        s, e = start_axis % nd, end_axis % nd
        return x.reshape(x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])

    @staticmethod
    def unsqueeze(x, axis):
        a = axis % (x.ndim + 1)
        return x.reshape(x.shape[:a] + (1,) + x.shape[a:])

    @staticmethod
    def squeeze(x, axis=None):
        return np.squeeze(x, axis)

    @staticmethod
    def expand(x, shape):
        """A read-only broadcast view; -1 keeps an existing axis' size."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if -1 in shape:
            lead = len(shape) - x.ndim
            shape = tuple(x.shape[k - lead] if s == -1 else s for k, s in enumerate(shape))
        return np.broadcast_to(x, shape)

    # --------------------------------------------------------- joins, views
    @staticmethod
    def cat(nodes, axis=0):
        return np.concatenate(nodes, axis=axis)

    @staticmethod
    def stack(nodes, axis=0):
        return np.stack(nodes, axis=axis)

    @staticmethod
    def select(x, axis, index):
        a = axis % x.ndim
        return x[(slice(None),) * a + (index % x.shape[a], Ellipsis)]

    @staticmethod
    def narrow(x, axis, start, length):
        a = axis % x.ndim
        s = start % x.shape[a] if start < 0 else start
        return x[(slice(None),) * a + (slice(s, s + length), Ellipsis)]

    @staticmethod
    def getitem(x, key):
        """``x[key]`` for a basic key; always an array (a trailing Ellipsis,
        as the Graph method's canonical key), never a NumPy scalar."""
        if type(key) is not tuple:
            key = (key,)
        if not any(k is Ellipsis for k in key):
            key = key + (Ellipsis,)
        return x[key]

    @staticmethod
    def flip(x, axes=None):
        return np.flip(x, axes)

    @staticmethod
    def diagonal(x, offset=0, axis1=0, axis2=1):
        return np.diagonal(x, offset, axis1, axis2)

    # ------------------------------------------------ placing by position
    @staticmethod
    def pad(x, pad_width, value=0.0):
        attrs = PadAttrs(_pad_widths(pad_width, x.ndim), float(value))
        return registry.FORWARD[_PAD](attrs, x)[0]

    @staticmethod
    def repeat(x, repeats):
        return np.tile(x, repeats)

    @staticmethod
    def tril(x, k=0):
        return np.tril(x, k)

    @staticmethod
    def triu(x, k=0):
        return np.triu(x, k)

    @staticmethod
    def roll(x, shifts, axis=None):
        if axis is None:
            s = shifts if isinstance(shifts, (int, np.integer)) else shifts[0]
            return np.roll(x.reshape(-1), s).reshape(x.shape)
        return np.roll(x, shifts, axis)

    @staticmethod
    def outer(a, b):
        return np.multiply.outer(a, b)

    @staticmethod
    def pixel_shuffle(x, r):
        return pixel_shuffle(x, int(r))

    @staticmethod
    def upsample_nearest(x, r):
        scales = (tuple(int(v) for v in r) if isinstance(r, (tuple, list))
                  else (int(r),) * (x.ndim - 2))
        return registry.FORWARD[_UPSAMPLE](UpsampleAttrs(scales), x)[0]

    @staticmethod
    def unfold(x, kernel, dilation=1, padding=0, stride=1):
        return unfold(x, _window(kernel, dilation, padding, stride, x.shape[1:3]))

    @staticmethod
    def fold(x, output_size, kernel, dilation=1, padding=0, stride=1):
        return fold(x, _window(kernel, dilation, padding, stride, _pair(output_size)))
