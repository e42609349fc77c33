"""Deformable convolution (torchvision.ops.deform_conv2d without mask,
one offset group): bilinear-sampling im2col, its adjoint, and the GEMM driver.

Layouts: x [N, H, W, C]; offsets [N, OH, OW, 2*KH*KW] with the pair
(dy, dx) of tap k = i*KW + j at positions 2k, 2k+1; weight [KH, KW, C, Cout].
Tap k of output (oy, ox) samples x at
``(oy*sh - ph + i*dh + dy, ox*sw - pw + j*dw + dx)``. As torchvision, a
sample with y <= -1, y >= H, x <= -1 or x >= W is zero, and inside that
range each of the four bilinear corners contributes only when it lies in the
image. A non-finite sample position (a NaN or +-inf offset) is outside:
zero contribution, and zero gradients to x and to its offsets (torchvision
leaves NaN undefined: its bounds test lets NaN through to an integer cast).
The offset gradient uses the cell containing the sample (the derivative
from the right at integer coordinates, as torchvision).

Float constants enter as arguments of the array dtype (``one``, and the
integer window origins ``ybase``/``xbase`` pre-converted), so float32 data is
never promoted to float64 inside the kernels.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .conv_gemm import scratch

CHUNK_BYTES = 4 << 20


@jit
def _inside(py, px, one, H, W):
    """Whether the sample (py, px) can touch the image: -1 < py < H and
    -1 < px < W. Written as positive comparisons so that a NaN coordinate
    (from a NaN offset; false in every comparison) counts as outside, as
    do +-inf: a non-finite sample contributes zero and gets zero gradients.
    (The negated test let NaN through, and int(floor(NaN)) is INT64_MIN.)"""
    return py > -one and px > -one and py < H and px < W


@jit
def deform_im2col(xf, of, cf, R, r0, H, W, C, ybase, xbase, one, kh, kw, oh, ow):
    """``cols[r, k, c]`` = bilinear sample of channel c for tap k of row r0 + r.

    Flattened arrays: x [N, H, W, C]; offsets [N, OH, OW, 2*kh*kw]; cols
    [R, kh*kw, C] (overwritten). ybase: [OH*kh] window origins
    ``oy*sh - ph + i*dh`` in x's dtype; xbase: [OW*kw] likewise.
    """
    uc = np.uint64(C)
    T = kh * kw
    for r in range(R):
        q = r0 + r
        ox = q % ow
        q //= ow
        oy = q % oh
        n = q // oh
        orow = (r0 + r) * 2 * T
        for i in range(kh):
            for j in range(kw):
                k = i * kw + j
                ob = np.uint64((r * T + k) * C)
                py = ybase[oy * kh + i] + of[orow + 2 * k]
                px = xbase[ox * kw + j] + of[orow + 2 * k + 1]
                if not _inside(py, px, one, H, W):
                    for c in range(uc):
                        cf[ob + c] = 0
                    continue
                y0f = np.floor(py)
                x0f = np.floor(px)
                y0 = int(y0f)
                x0 = int(x0f)
                ly = py - y0f
                lx = px - x0f
                hy = one - ly
                hx = one - lx
                top = y0 >= 0
                bot = y0 + 1 < H
                lft = x0 >= 0
                rgt = x0 + 1 < W
                base = ((n * H + y0) * W + x0) * C
                for c in range(uc):
                    cf[ob + c] = 0
                if top and lft:
                    b = np.uint64(base)
                    wt = hy * hx
                    for c in range(uc):
                        cf[ob + c] += wt * xf[b + c]
                if top and rgt:
                    b = np.uint64(base + C)
                    wt = hy * lx
                    for c in range(uc):
                        cf[ob + c] += wt * xf[b + c]
                if bot and lft:
                    b = np.uint64(base + W * C)
                    wt = ly * hx
                    for c in range(uc):
                        cf[ob + c] += wt * xf[b + c]
                if bot and rgt:
                    b = np.uint64(base + W * C + C)
                    wt = ly * lx
                    for c in range(uc):
                        cf[ob + c] += wt * xf[b + c]


@jit
def deform_col2im(gf, xf, of, df, odf, R, r0, H, W, C, ybase, xbase, one, kh, kw, oh, ow,
                  need_x, need_off):
    """Adjoint of :func:`deform_im2col` for the flattened column cotangent
    ``gf`` [R, kh*kw, C]: accumulates into ``df`` (x's shape, if need_x) and
    writes the offset-gradient rows r0..r0+R of ``odf`` (the offsets' shape,
    if need_off; zero for samples outside the image)."""
    uc = np.uint64(C)
    T = kh * kw
    zero = one - one
    for r in range(R):
        q = r0 + r
        ox = q % ow
        q //= ow
        oy = q % oh
        n = q // oh
        orow = (r0 + r) * 2 * T
        for i in range(kh):
            for j in range(kw):
                k = i * kw + j
                gb = np.uint64((r * T + k) * C)
                py = ybase[oy * kh + i] + of[orow + 2 * k]
                px = xbase[ox * kw + j] + of[orow + 2 * k + 1]
                if not _inside(py, px, one, H, W):
                    continue
                y0f = np.floor(py)
                x0f = np.floor(px)
                y0 = int(y0f)
                x0 = int(x0f)
                ly = py - y0f
                lx = px - x0f
                hy = one - ly
                hx = one - lx
                top = y0 >= 0
                bot = y0 + 1 < H
                lft = x0 >= 0
                rgt = x0 + 1 < W
                base = ((n * H + y0) * W + x0) * C
                b1 = np.uint64(base if top and lft else 0)
                b2 = np.uint64(base + C if top and rgt else 0)
                b3 = np.uint64(base + W * C if bot and lft else 0)
                b4 = np.uint64(base + W * C + C if bot and rgt else 0)
                if need_x:
                    if top and lft:
                        wt = hy * hx
                        for c in range(uc):
                            df[b1 + c] += wt * gf[gb + c]
                    if top and rgt:
                        wt = hy * lx
                        for c in range(uc):
                            df[b2 + c] += wt * gf[gb + c]
                    if bot and lft:
                        wt = ly * hx
                        for c in range(uc):
                            df[b3 + c] += wt * gf[gb + c]
                    if bot and rgt:
                        wt = ly * lx
                        for c in range(uc):
                            df[b4 + c] += wt * gf[gb + c]
                if need_off:
                    gy = zero
                    gx = zero
                    for c in range(uc):
                        v1 = xf[b1 + c] if top and lft else zero
                        v2 = xf[b2 + c] if top and rgt else zero
                        v3 = xf[b3 + c] if bot and lft else zero
                        v4 = xf[b4 + c] if bot and rgt else zero
                        gc = gf[gb + c]
                        gy += gc * (hx * (v3 - v1) + lx * (v4 - v2))
                        gx += gc * (hy * (v2 - v1) + ly * (v4 - v3))
                    odf[orow + 2 * k] = gy
                    odf[orow + 2 * k + 1] = gx


def _window_origins(n_out, k, s, p, d, dtype):
    o = np.arange(n_out)[:, None] * s - p + np.arange(k)[None, :] * d
    return np.ascontiguousarray(o.astype(dtype).reshape(-1))


def _setup(x, w, off):
    n, h, wd, c = x.shape
    kh, kw, _, cout = w.shape
    oh, ow = off.shape[1], off.shape[2]
    rows = max(1, min(n * oh * ow, CHUNK_BYTES // max(1, kh * kw * c * x.itemsize)))
    return n, c, kh, kw, cout, oh, ow, n * oh * ow, rows


def deform_forward(x, w, off, stride, padding, dilation):
    """y [N, OH, OW, Cout] (no bias); OH, OW are taken from ``off``."""
    n, c, kh, kw, cout, oh, ow, m, rows = _setup(x, w, off)
    h, wd = x.shape[1:3]
    xf, of = x.reshape(-1), off.reshape(-1)
    one = x.dtype.type(1)
    yb = _window_origins(oh, kh, stride[0], padding[0], dilation[0], x.dtype)
    xb = _window_origins(ow, kw, stride[1], padding[1], dilation[1], x.dtype)
    w2 = w.reshape(kh * kw * c, cout)
    y = np.empty((m, cout), dtype=x.dtype)
    buf = scratch((rows, kh * kw, c), x.dtype)
    for r0 in range(0, m, rows):
        r = min(rows, m - r0)
        cols2 = buf[:r].reshape(r, kh * kw * c)
        deform_im2col(xf, of, cols2.reshape(-1), r, r0, h, wd, c, yb, xb, one, kh, kw, oh, ow)
        np.matmul(cols2, w2, out=y[r0:r0 + r])
    return y.reshape(n, oh, ow, cout)


def deform_backward(g, x, w, off, stride, padding, dilation, need_x, need_w, need_off):
    """(dx, dw, doff) for the cotangent ``g`` [N, OH, OW, Cout] (None where not needed)."""
    n, c, kh, kw, cout, oh, ow, m, rows = _setup(x, w, off)
    h, wd = x.shape[1:3]
    xf, of = x.reshape(-1), off.reshape(-1)
    dtype = x.dtype
    one = dtype.type(1)
    yb = _window_origins(oh, kh, stride[0], padding[0], dilation[0], dtype)
    xb = _window_origins(ow, kw, stride[1], padding[1], dilation[1], dtype)
    w2 = w.reshape(kh * kw * c, cout)
    g2 = g.reshape(m, cout)
    dx = np.zeros(x.shape, dtype=dtype) if need_x else None
    doff = np.zeros(off.shape, dtype=dtype) if need_off else None
    dw2 = np.zeros((kh * kw * c, cout), dtype=dtype) if need_w else None
    buf = scratch((rows, kh * kw, c), dtype)
    # unused outputs still need typed arrays for the kernel signature
    dxf = dx.reshape(-1) if need_x else np.zeros(1, dtype=dtype)
    dof = doff.reshape(-1) if need_off else np.zeros(1, dtype=dtype)
    for r0 in range(0, m, rows):
        r = min(rows, m - r0)
        cols2 = buf[:r].reshape(r, kh * kw * c)
        if need_w:
            deform_im2col(xf, of, cols2.reshape(-1), r, r0, h, wd, c, yb, xb, one, kh, kw, oh, ow)
            dw2 += cols2.T @ g2[r0:r0 + r]
        if need_x or need_off:
            np.matmul(g2[r0:r0 + r], w2.T, out=cols2)
            deform_col2im(cols2.reshape(-1), xf, of, dxf, dof, r, r0, h, wd, c, yb, xb, one,
                          kh, kw, oh, ow, need_x, need_off)
    return dx, (dw2.reshape(w.shape) if need_w else None), doff
