"""im2col + GEMM drivers for conv1d/2d/3d (any groups) and conv_transpose2d.

Everything here works on the 3-spatial-axis form: ``x`` [N, D, H, W, Cin]
(C-contiguous), weight ``w`` [KD, KH, KW, Cin/groups, Cout], and
``geom = (stride3, padding3, dilation3, groups)``. conv1d/conv2d call it
with singleton depth (and height) axes.

The column matrix is never built whole: rows (output positions) are processed
in chunks of about ``CHUNK_BYTES`` so that the gathered block is still in
cache when BLAS reads it, and the only scratch is one chunk-sized buffer,
reused per thread (:func:`scratch`; docs/ops/conv.md has the measurements
behind both). Per chunk and per group:

* forward:  ``cols = im2col(x)``; ``y[rows, group] = cols @ W_g``
* weight:   ``cols = im2col(x)``; ``dW_g += cols.T @ g[rows, group]``
* input:    ``dcols = g[rows, group] @ W_g.T``; ``dx += col2im(dcols)``

A 1x1 kernel with stride 1 and no padding skips the gather: the input itself
is the column matrix.
"""
from __future__ import annotations

import threading

import numpy as np

from . import conv as _k

#: target size of one im2col chunk (bytes); see docs/ops/conv.md
CHUNK_BYTES = 4 << 20


def out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    """Output extent of one axis: floor((n + 2p - d(k-1) - 1) / s) + 1."""
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _geometry(wshape, stride, padding, dilation, out_sp):
    kd, kh, kw = wshape[:3]
    return (kd, kh, kw, *stride, *padding, *dilation, *out_sp)


def _is_pointwise(wshape, stride, padding) -> bool:
    return wshape[0] == wshape[1] == wshape[2] == 1 and stride == (1, 1, 1) and padding == (0, 0, 0)


def padded_width(k: int) -> int:
    """Row stride for a column block of width k used in ``cols.T @ g``: k
    rounded up to a multiple of 8 when that adds at most a quarter. With rows
    of 27 floats OpenBLAS's transposed-A GEMM ran 0.70 ms on 32768 rows
    (x16 outputs), with rows of 32 (5 ignored columns) 0.44 ms; K = 75 -> 80:
    0.62 -> 0.39 ms; K = 9 -> 16 was slower (0.24 -> 0.35 ms). The forward
    and the dcols GEMMs do not gain, so only the weight pass pads."""
    kp = -(-k // 8) * 8
    return kp if 4 * (kp - k) <= k else k


def _chunk_rows(m: int, row_elems: int, itemsize: int) -> int:
    return max(1, min(m, CHUNK_BYTES // max(1, row_elems * itemsize)))


_scratch_store = threading.local()


def scratch(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` backed by this thread's
    reusable chunk buffer (grown on demand, kept between calls).

    Without the engine's glibc tuning (``YSCV_MALLOC_TUNING=0``), a fresh
    4 MB ``np.empty`` per call was handed out as new pages more often than
    not, ~500 page faults per conv call in a CNN training step (11.8 ms/step
    in a yscv-only process, 6.3-7.5 ms with this buffer). Per-thread storage
    keeps two graphs in two threads apart; a thread never holds two scratch
    arrays at once (no conv kernel calls back into Python).
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buf = getattr(_scratch_store, "buf", None)
    if buf is None or buf.nbytes < n:
        buf = np.empty(max(n, 1), dtype=np.uint8)
        _scratch_store.buf = buf
    return buf[:n].view(dtype).reshape(shape)


def conv_forward(x, w, stride, padding, dilation, groups, out_sp=None):
    """y [N, OD, OH, OW, Cout] = cross-correlation of x with w (no bias).

    ``out_sp`` overrides the output extent (conv_transpose's backward, where
    output_padding >= stride leaves the last rows of the transpose's output
    outside every window of its input).
    """
    n, d, h, wd, cin = x.shape
    kd, kh, kw, cg, cout = w.shape
    if out_sp is None:
        out_sp = tuple(out_size(i, k, s, p, dl) for i, k, s, p, dl in
                       zip((d, h, wd), (kd, kh, kw), stride, padding, dilation))
    m = n * out_sp[0] * out_sp[1] * out_sp[2]
    og = cout // groups
    t = kd * kh * kw
    w2 = w.reshape(t * cg, cout)
    y = np.empty((m, cout), dtype=x.dtype)
    if _is_pointwise(w.shape, stride, padding) and out_sp == (d, h, wd):
        x2 = x.reshape(m, cin)
        for gi in range(groups):
            np.matmul(x2[:, gi * cg:(gi + 1) * cg], w2[:, gi * og:(gi + 1) * og],
                      out=y[:, gi * og:(gi + 1) * og])
        return y.reshape(n, *out_sp, cout)
    geo = _geometry(w.shape, stride, padding, dilation, out_sp)
    xf = x.reshape(-1)
    xdims = x.shape[1:]
    rows = _chunk_rows(m, t * cg, x.itemsize)
    buf = scratch((rows, t, cg), x.dtype)
    for r0 in range(0, m, rows):
        r = min(rows, m - r0)
        cols = buf[:r]
        cols2 = cols.reshape(r, t * cg)
        for gi in range(groups):
            _k.im2col(xf, cols2.reshape(-1), r, t * cg, cg, gi * cg, r0, *xdims, *geo)
            np.matmul(cols2, w2[:, gi * og:(gi + 1) * og],
                      out=y[r0:r0 + r, gi * og:(gi + 1) * og])
    return y.reshape(n, *out_sp, cout)


def conv_backward(g, w, stride, padding, dilation, groups, x=None, x_shape=None,
                  need_x=True, need_w=True):
    """Gradients of :func:`conv_forward` for the cotangent ``g`` [N, OD, OH, OW, Cout].

    Returns ``(dx, dw)`` (None where not needed). ``x`` is required for dw;
    ``x_shape`` gives dx's shape when x is not passed. Also the forward of
    conv_transpose (its ``dx`` with ``g`` = the transpose's input).
    """
    if x_shape is None:
        x_shape = x.shape
    n = x_shape[0]
    cin = x_shape[4]
    kd, kh, kw, cg, cout = w.shape
    out_sp = g.shape[1:4]
    m = n * out_sp[0] * out_sp[1] * out_sp[2]
    og = cout // groups
    t = kd * kh * kw
    dtype = g.dtype
    g2 = g.reshape(m, cout)
    w2 = w.reshape(t * cg, cout)
    dx = np.zeros(x_shape, dtype=dtype) if need_x else None
    dw2 = None
    if need_w:
        dw2 = np.empty((t * cg, cout), dtype=dtype) if m else np.zeros((t * cg, cout), dtype=dtype)
    if _is_pointwise(w.shape, stride, padding) and out_sp == tuple(x_shape[1:4]):
        for gi in range(groups):
            gs = slice(gi * og, (gi + 1) * og)
            cs = slice(gi * cg, (gi + 1) * cg)
            if need_w:
                np.matmul(x.reshape(m, cin)[:, cs].T, g2[:, gs], out=dw2[:, gs])
            if need_x:
                np.matmul(g2[:, gs], w2[:, gs].T, out=dx.reshape(m, cin)[:, cs])
        return dx, (dw2.reshape(w.shape) if need_w else None)
    geo = _geometry(w.shape, stride, padding, dilation, out_sp)
    xdims = tuple(x_shape[1:])
    xf = x.reshape(-1) if need_w else None
    dxf = dx.reshape(-1) if need_x else None
    k = t * cg
    ld = padded_width(k) if need_w else k
    rows = _chunk_rows(m, ld, dtype.itemsize)
    # im2col zeroes the ld - k alignment columns as it goes (a strided NumPy
    # fill would cost 0.15 ms on 32768 rows, about the whole gain); they only
    # feed the rows of cols.T @ g that are dropped ([:k])
    buf = scratch((rows, ld), dtype)
    for r0 in range(0, m, rows):
        r = min(rows, m - r0)
        colsp = buf[:r]          # [r, ld]: the column block plus alignment padding
        cols2 = colsp[:, :k]
        for gi in range(groups):
            gs = slice(gi * og, (gi + 1) * og)
            if need_w:
                _k.im2col(xf, colsp.reshape(-1), r, ld, cg, gi * cg, r0, *xdims, *geo)
                if ld == k and r0 == 0:
                    np.matmul(cols2.T, g2[r0:r0 + r, gs], out=dw2[:, gs])
                else:
                    part = (colsp.T @ g2[r0:r0 + r, gs])[:k]
                    if r0 == 0:
                        dw2[:, gs] = part
                    else:
                        dw2[:, gs] += part
            if need_x:
                np.matmul(g2[r0:r0 + r, gs], w2[:, gs].T, out=cols2)
                _k.col2im(colsp.reshape(-1), dxf, r, ld, cg, gi * cg, r0, *xdims, *geo)
    return dx, (dw2.reshape(w.shape) if need_w else None)
