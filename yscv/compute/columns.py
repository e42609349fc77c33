"""The column matrix of a convolution window, built by yscv's im2col kernel
and summed back by its col2im (yscv/kernels/conv.py), split over the cores:
what the im2col convolutions (yscv/compute/conv.py) fill chunk by chunk and
what ``unfold``/``fold`` (yscv/compute/shape.py) compute whole.

Every split is a function of the sizes only (yscv/compute/regions.py), and a
chunk of the adjoint covers whole samples, so no two chunks add into one
pixel: the same bits on one thread and two.
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from . import regions as par

__all__ = ["columns", "columns_adjoint", "fill_columns", "COLUMNS_GRAIN"]

_K = lazy("conv")

#: values per chunk of the column fills and sums split over the cores
COLUMNS_GRAIN = 1 << 17


def fill_columns(xf, cols, r, ld, cg, c0, r0, xdims, geo) -> None:
    """``cols`` [r, ld] = rows ``[r0, r0 + r)`` of the column matrix of group
    channels ``[c0, c0 + cg)`` (`yscv.kernels.conv.im2col`), the rows split
    over the cores from `COLUMNS_GRAIN` values (a copy: the same bits)."""
    chunks = par.num_chunks(r, r * ld, COLUMNS_GRAIN)
    cf = cols.reshape(-1)
    if chunks == 1:
        _K.im2col(xf, cf, r, ld, cg, c0, r0, *xdims, *geo)
        return
    rb = par.bounds([(r0 + lo, r0 + hi) for lo, hi in par.split(r, chunks)])
    par.run_region(lambda st: _K.im2col_region(xf, cf, r0, ld, cg, c0, *xdims, *geo, rb, st),
                   len(rb) - 1)


def _column_chunks(n: int, per_sample: int, k: int) -> np.ndarray:
    """Region bounds of `columns` / `columns_adjoint` over ``n * per_sample``
    rows of ``k`` values: whole samples per chunk (the adjoint's chunks then
    never add into one pixel), a count fixed by the sizes."""
    chunks = par.num_chunks(n, n * per_sample * k, COLUMNS_GRAIN)
    return par.bounds([(lo * per_sample, hi * per_sample) for lo, hi in par.split(n, chunks)])


def columns(x: np.ndarray, kernel, stride, padding, dilation, blocks) -> np.ndarray:
    """The whole column matrix of a 2-D window: x [N, H, W, C] ->
    [N, ``OH*OW``, ``KH*KW*C``], row ``oh*OW + ow``, column ``(i*KW + j)*C + c``
    = zero-padded ``x[n, oh*sh + i*dh, ow*sw + j*dw, c]`` (``unfold``; the
    layout the conv weights [KH, KW, C, Cout] flatten to). Pairs over (H, W);
    samples split over the cores."""
    x = np.ascontiguousarray(x)
    n, h, wd, c = x.shape
    (kh, kw), (oh, ow) = kernel, blocks
    k = kh * kw * c
    cols = np.empty((n, oh * ow, k), dtype=x.dtype)
    if cols.size:
        geo = (1, kh, kw, 1, *stride, 0, *padding, 1, *dilation, 1, oh, ow)
        rb = _column_chunks(n, oh * ow, k)
        xf, cf = x.reshape(-1), cols.reshape(-1)
        par.run_region(lambda st: _K.im2col_region(xf, cf, 0, k, c, 0, 1, h, wd, c, *geo, rb, st),
                       len(rb) - 1)
    return cols


def columns_adjoint(cols: np.ndarray, size, kernel, stride, padding, dilation,
                    blocks) -> np.ndarray:
    """The adjoint of `columns` (``fold``): cols [N, ``OH*OW``, ``KH*KW*C``] ->
    x [N, H, W, C] with ``size = (H, W)``, every column summed into the
    pixel it read (taps in the padding dropped); whole samples split over
    the cores (the same bits on one thread and two)."""
    cols = np.ascontiguousarray(cols)
    n = cols.shape[0]
    (kh, kw), (oh, ow) = kernel, blocks
    c = cols.shape[2] // (kh * kw)
    h, wd = size
    dx = np.zeros((n, h, wd, c), dtype=cols.dtype)
    if cols.size:
        k = kh * kw * c
        geo = (1, kh, kw, 1, *stride, 0, *padding, 1, *dilation, 1, oh, ow)
        rb = _column_chunks(n, oh * ow, k)
        cf, df = cols.reshape(-1), dx.reshape(-1)
        par.run_region(lambda st: _K.col2im_region(cf, df, k, c, 0, 1, h, wd, c, *geo, rb, st),
                       len(rb) - 1)
    return dx
