"""Convolution kernels: window gathers (im2col), their adjoint scatter
(col2im) and the direct depthwise loops.

Every kernel works on channel-last, C-contiguous arrays, passed flattened
with their extents as integers (indexing and reshaping N-d arrays inside the
jitted code made the kernels ~30% slower to compile, e.g. im2col 0.80 s ->
0.57 s of CPU). The gather/scatter
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
def im2col(xf, cf, R, cg, c0, r0, D, H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw,
           od, oh, ow):
    """Fill ``cols[r, t, k] = x[n, iz, iy, ix, c0 + k]`` for rows ``r0 + r``
    (zero where the tap falls in the padding).

    ``xf`` is x [N, D, H, W, C] flattened; ``cf`` the flattened column block
    [R, kd*kh*kw, cg], overwritten. When the taps
    of one kernel row are adjacent in memory (all channels, dilation 1 along
    W) and inside the image, they are copied as one run of kw*C elements.
    """
    ucg = np.uint64(cg)
    run = np.uint64(kw * C) if cg == C and dw == 1 else np.uint64(0)
    ox = r0 % ow
    q = r0 // ow
    oy = q % oh
    q //= oh
    oz = q % od
    n = q // od
    ob = np.uint64(0)
    for r in range(R):
        if r > 0:  # next output position without integer divisions
            ox += 1
            if ox == ow:
                ox = 0
                oy += 1
                if oy == oh:
                    oy = 0
                    oz += 1
                    if oz == od:
                        oz = 0
                        n += 1
        ix0 = ox * sw - pw
        xrun = run > 0 and ix0 >= 0 and ix0 + kw <= W
        for a in range(kd):
            iz = oz * sd - pd + a * dd
            zin = 0 <= iz < D
            for b in range(kh):
                iy = oy * sh - ph + b * dh
                yin = zin and 0 <= iy < H
                if yin and xrun:
                    ib = np.uint64((((n * D + iz) * H + iy) * W + ix0) * C)
                    for k in range(run):
                        cf[ob + k] = xf[ib + k]
                    ob += run
                    continue
                for c in range(kw):
                    ix = ix0 + c * dw
                    if yin and 0 <= ix < W:
                        ib = np.uint64((((n * D + iz) * H + iy) * W + ix) * C + c0)
                        for k in range(ucg):
                            cf[ob + k] = xf[ib + k]
                    else:
                        for k in range(ucg):
                            cf[ob + k] = 0
                    ob += ucg


@jit
def col2im(cf, df, R, cg, c0, r0, D, H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw,
           od, oh, ow):
    """Adjoint of :func:`im2col`: ``dx[n, iz, iy, ix, c0 + k] += cols[r, t, k]``
    (taps in the padding are dropped; adjacent in-image taps as one run).

    ``cf``: flattened columns [R, kd*kh*kw, cg]; ``df``: flattened dx
    [N, D, H, W, C], accumulated in place.
    """
    ucg = np.uint64(cg)
    run = np.uint64(kw * C) if cg == C and dw == 1 else np.uint64(0)
    ox = r0 % ow
    q = r0 // ow
    oy = q % oh
    q //= oh
    oz = q % od
    n = q // od
    ob = np.uint64(0)
    for r in range(R):
        if r > 0:  # next output position without integer divisions
            ox += 1
            if ox == ow:
                ox = 0
                oy += 1
                if oy == oh:
                    oy = 0
                    oz += 1
                    if oz == od:
                        oz = 0
                        n += 1
        ix0 = ox * sw - pw
        xrun = run > 0 and ix0 >= 0 and ix0 + kw <= W
        for a in range(kd):
            iz = oz * sd - pd + a * dd
            zin = 0 <= iz < D
            for b in range(kh):
                iy = oy * sh - ph + b * dh
                yin = zin and 0 <= iy < H
                if yin and xrun:
                    ib = np.uint64((((n * D + iz) * H + iy) * W + ix0) * C)
                    for k in range(run):
                        df[ib + k] += cf[ob + k]
                    ob += run
                    continue
                for c in range(kw):
                    ix = ix0 + c * dw
                    if yin and 0 <= ix < W:
                        ib = np.uint64((((n * D + iz) * H + iy) * W + ix) * C + c0)
                        for k in range(ucg):
                            df[ib + k] += cf[ob + k]
                    ob += ucg


@jit
def depthwise_forward(xf, wf, of, N, H, W, C, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw):
    """``out[n, y, x, c] = sum_ij x[n, y*sh-ph+i*dh, x*sw-pw+j*dw, c] * w[i, j, c]``.

    Flattened arrays: x [N, H, W, C], w [KH, KW, C], out [N, OH, OW, C]
    (overwritten). A
    channel multiplier M > 1 is handled by the caller (x repeated M times
    along C). Direct loops: each output pixel's C accumulators stay in cache
    while the taps stream by, and the channel loop is contiguous everywhere.
    """
    uc = np.uint64(C)
    for n in range(N):
        for oy in range(OH):
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
def depthwise_backward(xf, wf, gf, dxf, dwf, need_x, need_w, N, H, W, C, KH, KW, OH, OW,
                       sh, sw, ph, pw, dh, dw):
    """Gradients of :func:`depthwise_forward` for the cotangent ``g`` [N, OH, OW, C].

    Flattened arrays; accumulates into ``dxf`` (x's shape, if need_x) and
    ``dwf`` (w's shape, if need_w), both zero on entry.
    """
    uc = np.uint64(C)
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
                        if need_x:
                            for c in range(uc):
                                dxf[xb + c] += gf[ob + c] * wf[wb + c]
                        if need_w:
                            for c in range(uc):
                                dwf[wb + c] += xf[xb + c] * gf[ob + c]
