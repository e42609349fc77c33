"""Deformable convolution (torchvision.ops.deform_conv2d without mask,
one offset group): bilinear-sampling im2col and its adjoint (the chunked
GEMM driver is in yscv/compute/conv.py).

Layouts: x [N, H, W, C]; offsets [N, OH, OW, ``2*KH*KW``] with the pair
(dy, dx) of tap k = ``i*KW`` + j at positions 2k, 2k+1; weight [KH, KW, C, Cout].
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


@jit
def _inside(py, px, one, H, W):
    """Whether the sample (py, px) can touch the image: -1 < py < H and
    -1 < px < W. Written as positive comparisons so that a NaN coordinate
    (from a NaN offset; false in every comparison) counts as outside, as
    do +-inf: a non-finite sample contributes zero and gets zero gradients.
    (The negated test let NaN through, and int(floor(NaN)) is INT64_MIN.)"""
    return py > -one and px > -one and py < H and px < W


@jit(inline="always")
def _out_position(q, oh, ow):
    """``(n, oy, ox)`` of output row ``q`` = ``(n*oh + oy)*ow + ox``."""
    ox = q % ow
    q //= ow
    return q // oh, q % oh, ox


@jit(inline="always")
def _bilinear(py, px, one, H, W):
    """The cell of the sample (py, px) (inside, see `_inside`):
    ``(y0, x0, ly, lx, hy, hx, top, bot, lft, rgt)``: its top-left corner,
    the fractional parts and their complements, and which of the cell's
    rows (top y0, bottom y0 + 1) and columns (left x0, right x0 + 1) lie in
    the image."""
    y0f = np.floor(py)
    x0f = np.floor(px)
    y0 = int(y0f)
    x0 = int(x0f)
    ly = py - y0f
    lx = px - x0f
    return y0, x0, ly, lx, one - ly, one - lx, y0 >= 0, y0 + 1 < H, x0 >= 0, x0 + 1 < W


@jit
def deform_im2col(xf, of, cf, R, r0, H, W, C, ybase, xbase, one, kh, kw, oh, ow):
    """``cols[r, k, c]`` = bilinear sample of channel c for tap k of row r0 + r.

    Flattened arrays: x [N, H, W, C]; offsets [N, OH, OW, ``2*kh*kw``]; cols
    [R, ``kh*kw``, C] (overwritten). ybase: ``[OH*kh]`` window origins
    ``oy*sh - ph + i*dh`` in x's dtype; xbase: ``[OW*kw]`` likewise.
    """
    uc = np.uint64(C)
    T = kh * kw
    for r in range(R):
        n, oy, ox = _out_position(r0 + r, oh, ow)
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
                y0, x0, ly, lx, hy, hx, top, bot, lft, rgt = _bilinear(py, px, one, H, W)
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
    """Adjoint of `deform_im2col` for the flattened column cotangent
    ``gf`` [R, ``kh*kw``, C]: accumulates into ``df`` (x's shape, if need_x) and
    writes the offset-gradient rows r0..r0+R of ``odf`` (the offsets' shape,
    if need_off; zero for samples outside the image)."""
    uc = np.uint64(C)
    T = kh * kw
    zero = one - one
    for r in range(R):
        n, oy, ox = _out_position(r0 + r, oh, ow)
        orow = (r0 + r) * 2 * T
        for i in range(kh):
            for j in range(kw):
                k = i * kw + j
                gb = np.uint64((r * T + k) * C)
                py = ybase[oy * kh + i] + of[orow + 2 * k]
                px = xbase[ox * kw + j] + of[orow + 2 * k + 1]
                if not _inside(py, px, one, H, W):
                    continue
                y0, x0, ly, lx, hy, hx, top, bot, lft, rgt = _bilinear(py, px, one, H, W)
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

