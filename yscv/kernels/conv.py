"""Convolution kernels: window gathers (im2col), their adjoint scatter
(col2im). The depthwise loops live in conv_depthwise.py.

Every kernel works on channel-last, C-contiguous arrays, passed flattened
with their extents as integers (indexing and reshaping N-d arrays inside the
jitted code made the kernels markedly slower to compile). The gather/scatter
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
cast to uint64 (after the bounds test) for the innermost loops, which
vectorise (docs/ops/conv.md has the measurements).
Never mix uint64 and int64 in one expression (Numba would give float64).

The bilinear kernels of the deformable convolution live in conv_deform.py.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .sync import region_chunks


@jit(inline="always")
def _row_runs(cg, C, W, kw, sw, pw, dw):
    """``[in_lo, in_hi)``: the output columns whose kernel rows lie inside
    the image along W, so each kernel row is one contiguous run of ``kw*C``
    input values (only when all channels are taken and the W-dilation is 1;
    else an empty range: every column goes tap by tap)."""
    in_lo = 0
    in_hi = 0
    if cg == C and dw == 1:
        in_lo = (pw + sw - 1) // sw
        last = (W - kw + pw) // sw + 1
        in_hi = last if last > in_lo else in_lo   # max(in_lo, last)
    return in_lo, in_hi


@jit(inline="always")
def _row_position(r, ow, oh, od):
    """``(ox, oy, oz, n)`` of column-matrix row ``r`` (the window of output
    position ``((n*od + oz)*oh + oy)*ow + ox``)."""
    ox = r % ow
    q = r // ow
    oy = q % oh
    q //= oh
    return ox, oy, q % od, q // od


@jit(inline="always")
def _next_row(oy, oz, n, oh, od):
    """The (oy, oz, n) of the next output row segment, without integer divisions."""
    oy += 1
    if oy == oh:
        oy = 0
        oz += 1
        if oz == od:
            oz = 0
            n += 1
    return oy, oz, n


@jit
def im2col(xf, cf, R, ld, cg, c0, r0, D, H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh,
           dw, od, oh, ow):
    """Fill ``cols[r, t, k] = x[n, iz, iy, ix, c0 + k]`` for rows ``r0 + r``
    (zero where the tap falls in the padding).

    ``xf`` is x [N, D, H, W, C] flattened; ``cf`` the flattened column block
    [R, ld] (``ld`` >= ``kd*kh*kw*cg`` is the row stride; the alignment
    columns beyond the taps are set to zero). Rows go by output-row segments (same n,
    z, y). Within a segment, the columns whose kernel row lies inside the
    image along W take, kernel row by kernel row, one contiguous run of
    ``kw*C`` input values each (when all channels are taken and the W-dilation
    is 1); the others, and every column otherwise, go tap by tap.
    """
    ucg = np.uint64(cg)
    rowlen = np.uint64(ld)
    used = np.uint64(kd * kh * kw * cg)
    pad = np.uint64(ld - kd * kh * kw * cg)
    krow = np.uint64(kw * cg)
    step = np.uint64(sw * C)
    in_lo, in_hi = _row_runs(cg, C, W, kw, sw, pw, dw)
    ox, oy, oz, n = _row_position(r0, ow, oh, od)
    r = 0
    while r < R:
        cnt = R - r if R - r < ow - ox else ow - ox
        lo = in_lo if in_lo > ox else ox
        hi = in_hi if in_hi < ox + cnt else ox + cnt
        if lo < hi:
            tb = np.uint64(0)
            for a in range(kd):
                iz = oz * sd - pd + a * dd
                for b in range(kh):
                    iy = oy * sh - ph + b * dh
                    ob = np.uint64(r + lo - ox) * rowlen + tb
                    if 0 <= iz < D and 0 <= iy < H:
                        ib = np.uint64((((n * D + iz) * H + iy) * W + lo * sw - pw) * C)
                        if krow < 8:
                            # short runs (few channels): along the positions
                            # first, a longer inner loop
                            for k in range(krow):
                                obk = ob + k
                                ibk = ib + k
                                for t in range(hi - lo):
                                    cf[obk] = xf[ibk]
                                    obk += rowlen
                                    ibk += step
                        else:
                            for t in range(hi - lo):
                                for k in range(krow):
                                    cf[ob + k] = xf[ib + k]
                                ob += rowlen
                                ib += step
                    else:
                        for t in range(hi - lo):
                            for k in range(krow):
                                cf[ob + k] = 0
                            ob += rowlen
                    tb += krow
        for xo in range(ox, ox + cnt):
            if lo <= xo < hi:
                continue
            ob = np.uint64(r + xo - ox) * rowlen
            ix0 = xo * sw - pw
            for a in range(kd):
                iz = oz * sd - pd + a * dd
                for b in range(kh):
                    iy = oy * sh - ph + b * dh
                    yin = 0 <= iz < D and 0 <= iy < H
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
        if pad > 0:  # alignment columns: zero, so cols.T @ g sees no garbage
            for xo in range(cnt):
                ob = np.uint64(r + xo) * rowlen + used
                for k in range(pad):
                    cf[ob + k] = 0
        r += cnt
        ox = 0
        oy, oz, n = _next_row(oy, oz, n, oh, od)


@jit
def col2im(cf, df, R, ld, cg, c0, r0, D, H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh,
           dw, od, oh, ow):
    """Adjoint of `im2col`: ``dx[n, iz, iy, ix, c0 + k] += cols[r, t, k]``
    (taps in the padding are dropped), in the same order of passes.

    ``cf``: flattened columns [R, ld] (the first ``kd*kh*kw*cg`` entries of each
    row are read); ``df``: flattened dx [N, D, H, W, C], accumulated in place.
    """
    ucg = np.uint64(cg)
    rowlen = np.uint64(ld)
    krow = np.uint64(kw * cg)
    in_lo, in_hi = _row_runs(cg, C, W, kw, sw, pw, dw)
    ox, oy, oz, n = _row_position(r0, ow, oh, od)
    r = 0
    while r < R:
        cnt = R - r if R - r < ow - ox else ow - ox
        lo = in_lo if in_lo > ox else ox
        hi = in_hi if in_hi < ox + cnt else ox + cnt
        # column by column here (not kernel row by kernel row as im2col):
        # consecutive columns' runs overlap in dx, and adding them back to
        # back stalls on store-to-load forwarding
        for xo in range(lo, hi):
            ob = np.uint64(r + xo - ox) * rowlen
            for a in range(kd):
                iz = oz * sd - pd + a * dd
                for b in range(kh):
                    iy = oy * sh - ph + b * dh
                    if 0 <= iz < D and 0 <= iy < H:
                        ib = np.uint64((((n * D + iz) * H + iy) * W + xo * sw - pw) * C)
                        for k in range(krow):
                            df[ib + k] += cf[ob + k]
                    ob += krow
        for xo in range(ox, ox + cnt):
            if lo <= xo < hi:
                continue
            ob = np.uint64(r + xo - ox) * rowlen
            ix0 = xo * sw - pw
            for a in range(kd):
                iz = oz * sd - pd + a * dd
                for b in range(kh):
                    iy = oy * sh - ph + b * dh
                    yin = 0 <= iz < D and 0 <= iy < H
                    for c in range(kw):
                        ix = ix0 + c * dw
                        if yin and 0 <= ix < W:
                            ib = np.uint64((((n * D + iz) * H + iy) * W + ix) * C + c0)
                            for k in range(ucg):
                                df[ib + k] += cf[ob + k]
                        ob += ucg
        r += cnt
        ox = 0
        oy, oz, n = _next_row(oy, oz, n, oh, od)


@jit
def im2col_region(xf, cf, base, ld, cg, c0, D, H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd,
                  dh, dw, od, oh, ow, rb, st):
    """`im2col` over the row chunks ``[rb[k], rb[k + 1])`` of a region
    (yscv/compute/regions.py): each chunk fills its own rows; row 0 of
    ``cf`` is the column matrix's row ``base``."""
    for k in region_chunks(st, rb.shape[0] - 1):
        r0 = rb[k]
        im2col(xf, cf[np.uint64(r0 - base) * np.uint64(ld):], rb[k + 1] - r0, ld, cg, c0, r0, D,
               H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow)


@jit
def col2im_region(cf, df, ld, cg, c0, D, H, W, C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh,
                  dw, od, oh, ow, rb, st):
    """`col2im` over the row chunks of a region; the bounds must be whole
    samples (multiples of ``od*oh*ow``), so no two chunks add into one
    element of dx and every element sums in the order of one pass."""
    for k in region_chunks(st, rb.shape[0] - 1):
        r0 = rb[k]
        col2im(cf[np.uint64(r0) * np.uint64(ld):], df, rb[k + 1] - r0, ld, cg, c0, r0, D, H, W,
               C, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow)
