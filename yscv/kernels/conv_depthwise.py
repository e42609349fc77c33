"""Depthwise convolution kernels: direct loops over channel-last arrays,
split over the cores.

Flattened arrays with their extents as integers, unsigned offsets in the
channel loops (see yscv/kernels/conv.py). Each output pixel's channel
accumulators stay in cache while the taps stream by, and the channel loop
is contiguous everywhere. A channel multiplier M > 1 is handled by the
caller (x repeated M times along C).

Both kernels are region kernels (yscv/compute/regions.py). The forward's
chunk ``k`` is the output rows ``[rb[k], rb[k + 1])`` (a row: one ``(n, y)``
of the output); the backward's chunks are its two passes, the input
gradient (chunk 0) and the weight gradient (chunk 1), each over every
pixel. Every element is computed by one chunk, in the order of a single
pass (output pixels in raster order, taps in raster order within each), so
the results are the same bits for any number of chunks and threads.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .sync import region_chunks


@jit
def depthwise_forward_region(xf, wf, of, N, H, W, C, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw,
                             rb, st):
    """``out[n, y, x, c] = sum_ij x[n, y*sh-ph+i*dh, x*sw-pw+j*dw, c] * w[i, j, c]``.

    x [N, H, W, C], w [KH, KW, C], out [N, OH, OW, C] (overwritten), flat.
    """
    uc = np.uint64(C)
    for k in region_chunks(st, rb.shape[0] - 1):
        for r in range(rb[k], rb[k + 1]):
            n = r // OH
            oy = r - n * OH
            for ox in range(OW):
                ob = np.uint64(((n * OH + oy) * OW + ox) * C)
                for c in range(uc):
                    of[ob + c] = 0
                for i in range(KH):
                    iy = oy * sh - ph + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    for j in range(KW):
                        ix = ox * sw - pw + j * dw
                        if ix < 0 or ix >= W:
                            continue
                        xb = np.uint64(((n * H + iy) * W + ix) * C)
                        wb = np.uint64((i * KW + j) * C)
                        for c in range(uc):
                            of[ob + c] += xf[xb + c] * wf[wb + c]


@jit
def depthwise_backward_region(xf, wf, gf, dxf, dwf, need_x, need_w, split, N, H, W, C, KH, KW,
                              OH, OW, sh, sw, ph, pw, dh, dw, st):
    """Gradients of `depthwise_forward_region` for the cotangent g [N, OH, OW, C].

    Accumulates into ``dxf`` (x's shape, if need_x) and ``dwf`` (w's shape,
    if need_w), both zero on entry; flat arrays. ``split``: two chunks, the
    input gradient (0) and the weight gradient (1); else one chunk, both in
    one pass over the pixels.
    """
    uc = np.uint64(C)
    for k in region_chunks(st, 2 if split else 1):
        do_x = need_x and (k == 0 or not split)
        do_w = need_w and (k == 1 or not split)
        if not (do_x or do_w):
            continue
        for n in range(N):
            for oy in range(OH):
                for ox in range(OW):
                    ob = np.uint64(((n * OH + oy) * OW + ox) * C)
                    for i in range(KH):
                        iy = oy * sh - ph + i * dh
                        if iy < 0 or iy >= H:
                            continue
                        for j in range(KW):
                            ix = ox * sw - pw + j * dw
                            if ix < 0 or ix >= W:
                                continue
                            xb = np.uint64(((n * H + iy) * W + ix) * C)
                            wb = np.uint64((i * KW + j) * C)
                            if do_x:
                                for c in range(uc):
                                    dxf[xb + c] += gf[ob + c] * wf[wb + c]
                            if do_w:
                                for c in range(uc):
                                    dwf[wb + c] += xf[xb + c] * gf[ob + c]
