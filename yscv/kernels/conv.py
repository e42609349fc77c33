"""Convolution kernels: window gathers (im2col), their adjoint scatter
(col2im) and the direct depthwise loops.

Every kernel works on channel-last, C-contiguous arrays. The gather/scatter
pair is written once for three spatial axes: conv1d and conv2d use it with
singleton depth/height axes (``x`` viewed as [N, 1, 1, L, C] or [N, 1, H, W, C]).

Geometry arguments, in this order everywhere::

    kd, kh, kw    kernel extent per axis
    sd, sh, sw    stride
    pd, ph, pw    zero padding (before; the after-padding only shows in od/oh/ow)
    dd, dh, dw    dilation
    od, oh, ow    output extent per axis (the "window grid")

A row ``r`` of a column matrix is the window of output position
``(n, z, y, x)`` flattened as ``((n*od + z)*oh + y)*ow + x``; its
``kd*kh*kw`` taps are laid out tap-major, each holding ``cg`` channels taken
from ``x[..., c0:c0+cg]`` (one group of a grouped convolution).

Why flat arrays and unsigned offsets: Numba supports negative indices, so a
signed index costs a wrap-around test per element, which blocks
vectorisation of the channel copy loops. Offsets are computed in int64, then
cast to uint64 (after the bounds test) for the innermost loops: the im2col
gather runs ~4x faster that way (0.77 ms vs 2.9 ms for 8x32x32x64, 3x3).
Never mix uint64 and int64 in one expression (Numba would give float64).

The bilinear kernels of the deformable convolution live in conv_deform.py.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit


@jit
def im2col(x, cols, r0, c0, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow):
    """Fill ``cols[r, t, k] = x[n, iz, iy, ix, c0 + k]`` for rows ``r0 + r``
    (zero where the tap falls in the padding).

    x: [N, D, H, W, C]; cols: [R, kd*kh*kw, cg], overwritten.
    """
    R = cols.shape[0]
    ucg = np.uint64(cols.shape[2])
    D = x.shape[1]
    H = x.shape[2]
    W = x.shape[3]
    C = x.shape[4]
    xf = x.reshape(-1)
    cf = cols.reshape(-1)
    for r in range(R):
        q = r0 + r
        ox = q % ow
        q //= ow
        oy = q % oh
        q //= oh
        oz = q % od
        n = q // od
        ob = np.uint64(r * cols.shape[1] * cols.shape[2])
        for a in range(kd):
            iz = oz * sd - pd + a * dd
            zin = 0 <= iz < D
            for b in range(kh):
                iy = oy * sh - ph + b * dh
                yin = zin and 0 <= iy < H
                for c in range(kw):
                    ix = ox * sw - pw + c * dw
                    if yin and 0 <= ix < W:
                        ib = np.uint64((((n * D + iz) * H + iy) * W + ix) * C + c0)
                        for k in range(ucg):
                            cf[ob + k] = xf[ib + k]
                    else:
                        for k in range(ucg):
                            cf[ob + k] = 0
                    ob += ucg


@jit
def col2im(cols, dx, r0, c0, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow):
    """Adjoint of :func:`im2col`: ``dx[n, iz, iy, ix, c0 + k] += cols[r, t, k]``
    (taps in the padding are dropped).

    cols: [R, kd*kh*kw, cg]; dx: [N, D, H, W, C], accumulated in place.
    """
    R = cols.shape[0]
    ucg = np.uint64(cols.shape[2])
    D = dx.shape[1]
    H = dx.shape[2]
    W = dx.shape[3]
    C = dx.shape[4]
    df = dx.reshape(-1)
    cf = cols.reshape(-1)
    for r in range(R):
        q = r0 + r
        ox = q % ow
        q //= ow
        oy = q % oh
        q //= oh
        oz = q % od
        n = q // od
        ob = np.uint64(r * cols.shape[1] * cols.shape[2])
        for a in range(kd):
            iz = oz * sd - pd + a * dd
            zin = 0 <= iz < D
            for b in range(kh):
                iy = oy * sh - ph + b * dh
                yin = zin and 0 <= iy < H
                for c in range(kw):
                    ix = ox * sw - pw + c * dw
                    if yin and 0 <= ix < W:
                        ib = np.uint64((((n * D + iz) * H + iy) * W + ix) * C + c0)
                        for k in range(ucg):
                            df[ib + k] += cf[ob + k]
                    ob += ucg


@jit
def depthwise_forward(x, w, out, sh, sw, ph, pw, dh, dw):
    """``out[n, y, x, c*M + m] = sum_ij x[n, y*sh-ph+i*dh, x*sw-pw+j*dw, c] * w[i, j, c, m]``.

    x: [N, H, W, C]; w: [KH, KW, C, M]; out: [N, OH, OW, C*M], overwritten.
    Direct loops: each output pixel's C*M accumulators stay in cache while the
    taps stream by; the channel loop is contiguous in x, w and out.
    """
    N, H, W, C = x.shape
    KH, KW, _, M = w.shape
    OH = out.shape[1]
    OW = out.shape[2]
    uc = np.uint64(C)
    um = np.uint64(M)
    ucm = np.uint64(C * M)
    xf = x.reshape(-1)
    wf = w.reshape(-1)
    of = out.reshape(-1)
    for n in range(N):
        for oy in range(OH):
            for ox in range(OW):
                ob = np.uint64(((n * OH + oy) * OW + ox) * C * M)
                for c in range(ucm):
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
                        wb = np.uint64((i * KW + j) * C * M)
                        if M == 1:
                            for c in range(uc):
                                of[ob + c] += xf[xb + c] * wf[wb + c]
                        else:
                            for c in range(uc):
                                v = xf[xb + c]
                                cm = c * um
                                for m in range(um):
                                    of[ob + cm + m] += v * wf[wb + cm + m]


@jit
def depthwise_backward(x, w, g, dx, dwt, need_x, need_w, sh, sw, ph, pw, dh, dw):
    """Gradients of :func:`depthwise_forward` for the cotangent ``g`` [N, OH, OW, C*M].

    Accumulates into ``dx`` [N, H, W, C] (if need_x) and ``dwt`` [KH, KW, C, M]
    (if need_w); both must be zero on entry.
    """
    N, H, W, C = x.shape
    KH, KW, _, M = w.shape
    OH = g.shape[1]
    OW = g.shape[2]
    uc = np.uint64(C)
    um = np.uint64(M)
    xf = x.reshape(-1)
    wf = w.reshape(-1)
    gf = g.reshape(-1)
    dxf = dx.reshape(-1)
    dwf = dwt.reshape(-1)
    for n in range(N):
        for oy in range(OH):
            for ox in range(OW):
                ob = np.uint64(((n * OH + oy) * OW + ox) * C * M)
                for i in range(KH):
                    iy = oy * sh - ph + i * dh
                    if iy < 0 or iy >= H:
                        continue
                    for j in range(KW):
                        ix = ox * sw - pw + j * dw
                        if ix < 0 or ix >= W:
                            continue
                        xb = np.uint64(((n * H + iy) * W + ix) * C)
                        wb = np.uint64((i * KW + j) * C * M)
                        if M == 1:
                            if need_x:
                                for c in range(uc):
                                    dxf[xb + c] += gf[ob + c] * wf[wb + c]
                            if need_w:
                                for c in range(uc):
                                    dwf[wb + c] += xf[xb + c] * gf[ob + c]
                        else:
                            for c in range(uc):
                                cm = c * um
                                if need_x:
                                    s = dxf[xb + c]
                                    for m in range(um):
                                        s += gf[ob + cm + m] * wf[wb + cm + m]
                                    dxf[xb + c] = s
                                if need_w:
                                    v = xf[xb + c]
                                    for m in range(um):
                                        dwf[wb + cm + m] += v * gf[ob + cm + m]
