"""Depthwise convolution drivers: the direct loops of
yscv/kernels/conv_depthwise.py, split over the cores.

The forward splits its output rows (``(n, y)`` pairs) into chunks of about
`GRAIN` multiply-adds (at most `yscv.compute.regions.MAX_CHUNKS`); the
backward runs its two passes, the input and the weight gradient, as two
chunks when both are needed, the convolution has `GRAIN` multiply-adds and
there is a second thread (one thread: one fused pass).
A chunk computes whole elements in the order of a single pass, so results
are the same bits on one thread and two, and as the fused one-pass loops
gave. (Splitting by channels instead, also bit-exact, was slower even on
two threads: every chunk walks every pixel, and the per-pixel overhead
dominates at MobileNet's 16 to 96 channels.)
"""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from . import regions as par

_K = lazy("conv_depthwise")

#: multiply-adds per chunk: smaller convolutions run in one chunk on the caller
GRAIN = 1 << 17


def _out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def depthwise_operands(x, w):
    """(x, w) as the multiplier-1 kernel sees them: with M > 1, x repeated M
    times along C (channel ``c*M`` + m holds x[..., c], the same size as the
    output) and w [KH, KW, ``C*M``]. ``x`` None: xr None."""
    kh, kw, c, m = w.shape
    if x is None:
        xr = None
    else:
        xr = np.ascontiguousarray(x) if m == 1 else np.repeat(x, m, axis=3)
    return xr, np.ascontiguousarray(w).reshape(kh, kw, c * m)


def depthwise_forward(x, w, stride, padding, dilation):
    """y [N, OH, OW, ``C*M``] of the depthwise correlation (no bias) of x
    [N, H, W, C] with w [KH, KW, C, M]."""
    xr, wr = depthwise_operands(x, w)
    n, h, wd, c = xr.shape
    kh, kw, _ = wr.shape
    oh = _out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = _out_size(wd, kw, stride[1], padding[1], dilation[1])
    y = np.empty((n, oh, ow, c), dtype=x.dtype)
    rows = n * oh
    rb = par.bounds(par.split(rows, par.num_chunks(rows, rows * ow * c * kh * kw, GRAIN)))
    xf, wf, yf = xr.reshape(-1), wr.reshape(-1), y.reshape(-1)
    par.run_region(lambda st: _K.depthwise_forward_region(
        xf, wf, yf, n, h, wd, c, kh, kw, oh, ow, *stride, *padding, *dilation, rb, st),
        len(rb) - 1)
    return y


def depthwise_backward(g, x, w, stride, padding, dilation, need_x, need_w, x_shape=None):
    """(dx, dw) of `depthwise_forward` for the cotangent ``g`` (None where
    not needed). ``x`` may be None when dw is not needed (``x_shape`` [N, H,
    W, C] then gives its shape; the kernel reads x only for dw)."""
    xr, wr = depthwise_operands(x, w)
    m = w.shape[3]
    if x is not None:
        x_shape = x.shape
    xr_shape = tuple(x_shape[:3]) + (x_shape[3] * m,)
    dtype = g.dtype
    # an input that needs no gradient gets a 1-element stand-in (the kernel skips it)
    xrf = np.zeros(1, dtype=dtype) if xr is None else xr.reshape(-1)
    dxr = np.zeros(xr_shape if need_x else (1, 1, 1, 1), dtype=dtype)
    dwr = np.zeros(wr.shape if need_w else (1, 1, 1), dtype=dtype)
    c = xr_shape[3]
    kh, kw = wr.shape[:2]
    oh, ow = g.shape[1:3]
    # two passes on two threads; one thread keeps the fused pass (fewer loads of g)
    split = (bool(need_x) and bool(need_w) and par.workers() > 0
             and xr_shape[0] * oh * ow * c * kh * kw >= GRAIN)
    wf, gf = wr.reshape(-1), np.ascontiguousarray(g).reshape(-1)
    dxf, dwf = dxr.reshape(-1), dwr.reshape(-1)
    par.run_region(lambda st: _K.depthwise_backward_region(
        xrf, wf, gf, dxf, dwf, bool(need_x), bool(need_w), split, *xr_shape, kh, kw, oh, ow,
        *stride, *padding, *dilation, st), 2 if split else 1)
    dx = dw = None
    if need_x:
        dx = dxr if m == 1 else dxr.reshape(*x_shape, m).sum(axis=4)
    if need_w:
        dw = dwr.reshape(w.shape)
    return dx, dw
