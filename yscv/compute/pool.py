"""How the pools are computed: bins, divisors, the kernel calls.

Every pool is computed as a "bins" pool by the kernels in
yscv/kernels/pool.py: output row ``oh`` covers input rows ``[hs[oh], he[oh])``
and output column ``ow`` covers ``[ws[ow], we[ow])``. `window_plan`
turns (kernel, stride, padding) into such bounds (windows clipped to the
input, so padding is never materialised) and `adaptive_plan` gives
PyTorch's adaptive bins (``start = floor(i*H/OH)``, ``end = ceil((i+1)*H/OH)``);
both are cached per shape and carry the average-pool divisor per output
position. Shared by yscv/ops/pool.py and yscv/backward/pool.py.
"""
from __future__ import annotations

import functools

import numpy as np

from ..kernels import lazy
from . import regions as par

K = lazy("pool")
_I = lazy("indexing")

#: input elements read per chunk of a threaded max-pool pass (fewer: the
#: caller does it all); these passes are memory-bound, a chunk of 64 K
#: values (256 KB float32) is what pays for waking the second core
GRAIN = 1 << 16


def _window_axis(size: int, k: int, s: int, p: int, count_include_pad: bool):
    """Clipped window bounds along one axis and the average divisor per window."""
    n_out = (size + 2 * p - k) // s + 1
    raw = np.arange(n_out, dtype=np.int64) * s - p
    start = np.maximum(raw, 0)
    end = np.minimum(raw + k, size)
    div = np.full(n_out, k, dtype=np.int64) if count_include_pad else end - start
    return start, end, div


def _adaptive_axis(size: int, n_out: int):
    """PyTorch's adaptive bins: ``[floor(i*size/n_out), ceil((i+1)*size/n_out))``."""
    i = np.arange(n_out, dtype=np.int64)
    start = (i * size) // n_out
    end = -((-(i + 1) * size) // n_out)
    return start, end, end - start


def _plan(rows, cols, dtype):
    hs, he, dh = rows
    ws, we, dw = cols
    # the product in float64: kh*kw overflows int64 for kernels beyond 2**31
    # (exact below 2**53, so the same divisor as the integer product there)
    div = np.multiply.outer(dh.astype(np.float64), dw.astype(np.float64))
    div = div.astype(dtype)[:, :, None]
    for a in (hs, he, ws, we, div):
        a.flags.writeable = False
    return hs, he, ws, we, div


@functools.lru_cache(maxsize=256)
def window_plan(h: int, w: int, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int,
                count_include_pad: bool, dtype):
    """Bins of strided, padded windows (PyTorch, ceil_mode=False), read-only:
    ``(hs, he, ws, we, div)``: int64 bounds clipped to the input, and the
    average divisor ``div`` [OH, OW, 1] of ``dtype`` (``kh*kw`` with
    ``count_include_pad``, else the number of non-padding positions)."""
    return _plan(_window_axis(h, kh, sh, ph, count_include_pad),
                 _window_axis(w, kw, sw, pw, count_include_pad), dtype)


@functools.lru_cache(maxsize=256)
def adaptive_plan(h: int, w: int, oh: int, ow: int, dtype):
    """PyTorch's adaptive bins as ``(hs, he, ws, we, div)`` (see window_plan)."""
    return _plan(_adaptive_axis(h, oh), _adaptive_axis(w, ow), dtype)


def plans3d(shape, kernel, stride, padding, count_include_pad: bool, dtype):
    """The two plans of a 3-d pool of x [N, D, H, W, C] (window triples
    (d, h, w)): over (H, W) of every depth slice, then over the depth axis
    of the [N, D, ``OH*OW``, C] result (a 2-d plan with width-1 windows)."""
    _, d, h, w, _ = shape
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw) = kernel, stride, padding
    hw = window_plan(h, w, kh, kw, sh, sw, ph, pw, count_include_pad, dtype)
    depth = window_plan(d, len(hw[0]) * len(hw[2]), kd, 1, sd, 1, pd, 0, count_include_pad,
                        dtype)
    return hw, depth


def index_dtype(h: int, w: int):
    """The argmax dtype: int32 unless ``H*W`` needs int64."""
    return np.int32 if h * w < 2 ** 31 else np.int64


def two_by_two(attrs) -> bool:
    """Whether max-pool attributes ``(kh, kw, sh, sw, ph, pw)`` are 2 x 2
    windows with stride 2 and no padding: the kernels with the four taps in
    registers (`max_pool`, `max_scatter`)."""
    return tuple(attrs) == (2, 2, 2, 2, 0, 0)


def _row_bounds(rows: int, work: int) -> np.ndarray:
    """Region bounds over ``rows`` output rows (``n * OH + oh``): a number of
    chunks fixed by the sizes (yscv/compute/regions.py)."""
    return par.bounds(par.split(rows, par.num_chunks(rows, work, GRAIN)))


def max_pool(x, plan, two_by_two=False):
    """(max [N, OH, OW, C], argmax [N, OH, OW, C]) over the bins of ``plan``;
    argmax holds the flat position ``ih*W + iw`` of the first maximum.
    Output rows are split over the cores (each chunk has its scratch rows).
    ``two_by_two``: the plan is 2 x 2 windows, stride 2, no padding (the
    kernel with the four taps in registers)."""
    hs, he, ws, we, _ = plan
    n, h, w, c = x.shape
    out = np.empty((n, len(hs), len(ws), c), dtype=x.dtype)
    arg = np.empty(out.shape, dtype=index_dtype(h, w))
    rows = n * len(hs)
    if rows == 0 or c == 0:
        return out, arg
    bounds = _row_bounds(rows, x.size)
    k = len(bounds) - 1
    x = np.ascontiguousarray(x)
    if two_by_two:
        par.run_region(lambda st: K.max_pool_2x2(x, out, arg, bounds, st, False), k)
        return out, arg
    # each chunk's scratch rows end 64 bytes before the next chunk's start:
    # two threads never write one cache line (false sharing made the
    # two-thread pass 5x slower than one thread)
    mbuf = np.empty((k, 2, c + 64 // x.itemsize), dtype=x.dtype)
    abuf = np.empty((k, 2, c + 64 // arg.itemsize), dtype=arg.dtype)
    par.run_region(lambda st: K.max_pool_bins_forward(x, hs, he, ws, we, out, arg, mbuf, abuf,
                                                      bounds, st), k)
    return out, arg


def avg_pool(x, plan):
    """Mean [N, OH, OW, C] over the bins of ``plan`` (sum, then the divisor)."""
    hs, he, ws, we, div = plan
    out = np.empty((x.shape[0], len(hs), len(ws), x.shape[3]), dtype=x.dtype)
    K.window_sum(np.ascontiguousarray(x), hs, he, ws, we, out)
    np.divide(out, div, out=out)
    return out


def max_scatter(g, x_shape, arg, two_by_two=False):
    """dx [N, H, W, C]: ``g`` added at the saved argmax positions.

    ``two_by_two``: the windows are 2 x 2 with stride 2 and no padding (each
    input element in at most one window); then one threaded pass writes
    every element of dx once (``g`` at the argmax, 0 elsewhere) instead of a
    zero fill and a scatter."""
    n, h, w, c = x_shape
    oh, ow = g.shape[1], g.shape[2]
    if two_by_two and n * oh * ow * c > 0:
        gx = np.empty(x_shape, dtype=g.dtype)
        gx[:, 2 * oh:] = 0                  # an odd last row / column: in no window
        gx[:, :, 2 * ow:] = 0
        rows = n * oh
        bounds = _row_bounds(rows, n * h * w * c)
        g = np.ascontiguousarray(g)
        par.run_region(lambda st: K.max_pool_2x2(g, gx, arg, bounds, st, True),
                       len(bounds) - 1)
        return gx
    p = oh * ow
    gx = np.zeros((n, h * w, c), dtype=g.dtype)
    _I.scatter_add_axis(gx, arg.reshape(n, p, c), np.ascontiguousarray(g).reshape(n, p, c))
    return gx.reshape(n, h, w, c)


def avg_scatter(g, x_shape, plan):
    """dx [N, H, W, C]: ``g / divisor`` spread over every bin."""
    hs, he, ws, we, div = plan
    gx = np.zeros(x_shape, dtype=g.dtype)
    K.window_scatter_add(np.ascontiguousarray(g / div), hs, he, ws, we, gx)
    return gx
