"""Pooling kernels (NHWC), shared by max/avg/adaptive pooling forward and backward.

Every 2-d pool here is a "bins" pool: output row ``oh`` reads input rows
``[hs[oh], he[oh])`` and output column ``ow`` reads input columns
``[ws[ow], we[ow])`` (windows already clipped to the input, so padding never
has to be materialised). Strided/padded windows and PyTorch's adaptive bins
are both expressed this way by yscv/compute/pool.py, so three kernels serve
five ops (max-pool backward is indexing's ``scatter_add_axis`` of the saved
argmax positions).

Loops run n -> oh -> ow -> window row -> window column -> channel: the channel
loop is innermost, so every access is a contiguous run of C elements (the
layout is channel-last). The caller allocates the outputs (dtype of the
input; float32 stays float32): allocating inside a jitted function
(``np.empty`` with a shape tuple, ``reshape``) made these small kernels
much slower to compile. Average-pool divisions are done by the caller with
NumPy, once per output element, so these kernels only sum and scatter.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .sync import region_chunks


@jit
def max_pool_bins_forward(x, hs, he, ws, we, out, arg, mbuf, abuf, bounds, st):
    """Max over each bin, per channel, into ``out`` and ``arg``; a region
    kernel (yscv/compute/regions.py) over chunks of output rows.

    Args:
        x: [N, H, W, C] float32/float64, C-contiguous.
        hs, he, ws, we: int64 bin bounds ([OH] rows, [OW] columns), non-empty.
        out: [N, OH, OW, C] of x.dtype (overwritten).
        arg: [N, OH, OW, C] integer (overwritten): the flat position
            ``ih * W + iw`` of the FIRST maximum in row-major window order;
            NaN wins (and propagates), as PyTorch.
        mbuf: [chunks, 2, >= C] x.dtype scratch; abuf: [chunks, 2, >= C]
            arg.dtype scratch (one pair of rows per chunk; the caller pads
            the rows so that two chunks never share a cache line).
        bounds: int64 [chunks + 1]: chunk ``k`` covers the flat output rows
            ``r = n * OH + oh`` in ``[bounds[k], bounds[k + 1])``.
        st: the region state.
    """
    h_, w_, c_ = x.shape[1], x.shape[2], x.shape[3]
    oh_ = hs.shape[0]
    ow_ = ws.shape[0]
    neg_inf = -np.inf
    # The running max/argmax ping-pong between two scratch rows: each tap
    # reads one row and writes the other with a branch-free select. Updating
    # one row in place (``m[c] = v if v > m[c] else m[c]``) is turned by LLVM
    # into masked stores (vmaskmovps), which are slow on some x86 cores
    # (docs/ops/pool.md has the measurements).
    for k in region_chunks(st, bounds.shape[0] - 1):
        for r in range(bounds[k], bounds[k + 1]):
            n = r // oh_
            oh = r - n * oh_
            h0 = hs[oh]
            h1 = he[oh]
            for ow in range(ow_):
                w0 = ws[ow]
                w1 = we[ow]
                first = h0 * w_ + w0
                m_src = mbuf[k, 0]
                m_dst = mbuf[k, 1]
                a_src = abuf[k, 0]
                a_dst = abuf[k, 1]
                for c in range(c_):
                    m_src[c] = neg_inf
                    a_src[c] = first
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        idx = ih * w_ + iw
                        for c in range(c_):
                            v = x[n, ih, iw, c]
                            m = m_src[c]
                            take = (v > m) | (v != v)
                            m_dst[c] = v if take else m
                            a_dst[c] = idx if take else a_src[c]
                        m_src, m_dst = m_dst, m_src
                        a_src, a_dst = a_dst, a_src
                for c in range(c_):
                    out[n, oh, ow, c] = m_src[c]
                    arg[n, oh, ow, c] = a_src[c]


@jit
def max_pool_2x2(a, b, arg, bounds, st, backward):
    """The common pool, 2 x 2 windows with stride 2 and no padding, both
    directions in one kernel (one first-call compile for the pair); a region
    kernel over chunks of output rows ``n * OH + oh`` (``bounds``).

    Forward (``backward`` False): ``a`` is x [N, H, W, C], ``b`` the max
    [N, OH, OW, C] and ``arg`` the flat position ``ih*W + iw`` of the first
    maximum in row-major order (NaN wins: the last NaN), both overwritten;
    as `max_pool_bins_forward`, with the four taps in registers: one
    straight-line select chain per channel, vectorised over the channels.

    Backward: ``a`` is the cotangent g [N, OH, OW, C], ``arg`` the forward's
    argmax, ``b`` gx [N, H, W, C]: every input element of window (oh, ow)
    gets ``g[n, oh, ow, c]`` if it is the saved argmax, else 0, written once
    (no zero fill, no scatter: the windows do not overlap), in rows
    ``[0, 2*OH)`` and columns ``[0, 2*OW)`` (the caller zeroes an odd last
    row / column).
    """
    if backward:
        oh_, ow_, c_ = a.shape[1], a.shape[2], a.shape[3]
        w_ = b.shape[2]
    else:
        oh_, ow_, c_ = b.shape[1], b.shape[2], b.shape[3]
        w_ = a.shape[2]
    zero = b.dtype.type(0)
    for k in region_chunks(st, bounds.shape[0] - 1):
        for r in range(bounds[k], bounds[k + 1]):
            n = r // oh_
            oh = r - n * oh_
            if backward:
                # one contiguous store stream per loop (input row by input
                # row); four stores per channel into two rows measured 1.6x slower
                for i in range(2):
                    ih = 2 * oh + i
                    for ow in range(ow_):
                        for j in range(2):
                            iw = 2 * ow + j
                            idx = ih * w_ + iw
                            for c in range(c_):
                                # ``+ zero``: -0.0 becomes +0.0, as the scatter into zeros gives
                                hit = arg[n, oh, ow, c] == idx
                                b[n, ih, iw, c] = a[n, oh, ow, c] + zero if hit else zero
                continue
            ih = 2 * oh
            for ow in range(ow_):
                iw = 2 * ow
                i0 = ih * w_ + iw
                i1 = i0 + 1
                i2 = i0 + w_
                i3 = i2 + 1
                for c in range(c_):
                    m = a[n, ih, iw, c]
                    q = i0
                    v = a[n, ih, iw + 1, c]
                    t = (v > m) | (v != v)
                    m = v if t else m
                    q = i1 if t else q
                    v = a[n, ih + 1, iw, c]
                    t = (v > m) | (v != v)
                    m = v if t else m
                    q = i2 if t else q
                    v = a[n, ih + 1, iw + 1, c]
                    t = (v > m) | (v != v)
                    b[n, oh, ow, c] = v if t else m
                    arg[n, oh, ow, c] = i3 if t else q


@jit
def window_sum(x, hs, he, ws, we, out):
    """``out[n, oh, ow, :] = sum of x over bin (oh, ow)`` (out overwritten)."""
    n_, h_, w_, c_ = x.shape
    oh_ = hs.shape[0]
    ow_ = ws.shape[0]
    for n in range(n_):
        for oh in range(oh_):
            h0 = hs[oh]
            h1 = he[oh]
            for ow in range(ow_):
                w0 = ws[ow]
                w1 = we[ow]
                for c in range(c_):
                    out[n, oh, ow, c] = 0
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        for c in range(c_):
                            out[n, oh, ow, c] += x[n, ih, iw, c]


@jit
def window_scatter_add(g, hs, he, ws, we, gx):
    """Every input element of bin (oh, ow) gets ``+= g[n, oh, ow, :]``.

    Args:
        g: [N, OH, OW, C] (already divided by the bin's divisor for averages);
        gx: [N, H, W, C] zero-initialised (updated in place).
    """
    n_, oh_, ow_, c_ = g.shape
    for n in range(n_):
        for oh in range(oh_):
            h0 = hs[oh]
            h1 = he[oh]
            for ow in range(ow_):
                w0 = ws[ow]
                w1 = we[ow]
                for ih in range(h0, h1):
                    for iw in range(w0, w1):
                        for c in range(c_):
                            gx[n, ih, iw, c] += g[n, oh, ow, c]
