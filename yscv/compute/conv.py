"""How the convolutions are computed: layouts, the choice between the direct
tiles and im2col + GEMM, the chunk scratch.

Per pass: whole vectors of output channels (groups 1, not a plain 1x1) run
the forward and dW on the direct tiles (yscv/compute/conv_direct.py, no
column matrix); whole vectors of input channels with stride 1 run dx there
too. A 3x3 stride-1 conv with 32+ channels on both sides and outputs of
16x16 or more runs the forward and dx by Winograd F(2x2, 3x3) instead
(yscv/compute/conv_winograd.py, ``usable``). Everything else takes the
im2col + GEMM path below.

Shared by the forwards (yscv/ops/conv.py) and the backward rules
(yscv/backward/conv.py), which only state shapes and formulas. Everything
here works on the 3-spatial-axis form: ``x`` [N, D, H, W, Cin]
(C-contiguous, `lift_x`), weight ``w`` [KD, KH, KW, Cin/groups, Cout]
(`lift_w`); conv1d/conv2d are conv3d on views with singleton depth
(and height) axes.

The column matrix is never built whole: rows (output positions) are processed
in chunks of about `CHUNK_BYTES` so that the gathered block is still in
cache when BLAS reads it, and the only scratch is one chunk-sized buffer,
reused per thread (`scratch`). Per chunk and per group:

* forward:  ``cols = im2col(x)``; ``y[rows, group] = cols @ W_g``
* weight:   ``cols = im2col(x)``; ``dW_g += cols.T @ g[rows, group]``
* input:    ``dcols = g[rows, group] @ W_g.T``; ``dx += col2im(dcols)``

A 1x1 kernel with stride 1 and no padding skips the gather: the input itself
is the column matrix. Depthwise convolution (and a grouped conv with one
input channel per group, `_as_depthwise`) runs direct loops split by
channels (yscv/compute/conv_depthwise.py), the deformable one
bilinear-sampling im2col (yscv/kernels/conv_deform.py) through the same chunking. docs/ops/conv.md
("Algorithms and why") has the measurements behind every choice here.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import runtime
from ..kernels import lazy
from . import conv_direct as direct
from .gemm import one_thread_work, split_dot
from .columns import fill_columns
from .conv_depthwise import depthwise_backward, depthwise_forward, depthwise_operands  # noqa: F401
from . import conv_winograd as winograd

_K = lazy("conv")
_D = lazy("conv_deform")

#: target size of one im2col chunk (bytes)
CHUNK_BYTES = 4 << 20
#: cotangents of at most this many bytes take `_gemm_data_grad`'s dx
SMALL_MAP_GRAD_BYTES = 256 << 10
#: bias add / bias-gradient rows span output positions up to this many values
WIDE_ROW = 512


# ------------------------------------------------------------- layouts
def lift_x(x: np.ndarray) -> np.ndarray:
    """[N, ``*spatial``, C] (1 to 3 spatial axes) as a C-contiguous [N, D, H, W, C] view."""
    x = np.ascontiguousarray(x)
    lead = (1,) * (5 - x.ndim)
    return x.reshape(x.shape[0], *lead, *x.shape[1:])


def lift_w(w: np.ndarray) -> np.ndarray:
    """[``*kernel``, Cg, Cout] (1 to 3 kernel axes) as a C-contiguous [KD, KH, KW, Cg, Cout] view."""
    w = np.ascontiguousarray(w)
    return w.reshape((1,) * (5 - w.ndim) + w.shape)


def pad3(t: tuple, fill: int) -> tuple:
    """A per-axis tuple of 1 to 3 entries as 3 (leading axes get ``fill``)."""
    return (fill,) * (3 - len(t)) + t


def out_size(n: int, k: int, s: int, p: int, d: int) -> int:
    """Output extent of one axis: floor((n + 2p - d(k-1) - 1) / s) + 1."""
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def transpose_out_size(n: int, k: int, s: int, p: int, d: int, op_: int) -> int:
    """Output extent of one axis of a transposed convolution."""
    return (n - 1) * s - 2 * p + d * (k - 1) + op_ + 1


def wide_rows(a: np.ndarray):
    """``a`` [N, ``*spatial``, C] as a 2-D view [rows, ``k*C``] whose rows span k
    trailing spatial positions (``k*C`` >= WIDE_ROW where possible), and k:
    broadcasting a [C] vector over short rows runs NumPy's inner loop C
    elements at a time, over ``[k*C]`` rows it runs long."""
    k = wide_row_count(a.shape)
    return a.reshape(-1, k * a.shape[-1]), k


def add_bias(y: np.ndarray, b) -> np.ndarray:
    """``y += b`` over the last axis (in place; nothing when b is None)."""
    if b is not None:
        y2, k = wide_rows(y)
        y2 += np.tile(b, k) if k > 1 else b
    return y


def wide_row_count(shape: tuple) -> int:
    """The k of `wide_rows` for an array of ``shape``."""
    c = shape[-1]
    k = 1
    for s in reversed(shape[1:-1]):
        if k * c >= WIDE_ROW:
            break
        k *= s
    return k


def bias_grad(g: np.ndarray) -> np.ndarray:
    """Sum of ``g`` [N, ``*spatial``, C] over every axis but the last: the
    sum over rows of `wide_rows`, then over its k positions (both
    ``np.add.reduce`` along axis 0, so graph ``sum`` ops in that order give
    the same bits: yscv/backward/conv.py)."""
    g2, k = wide_rows(g)
    return g2.sum(axis=0).reshape(k, g.shape[-1]).sum(axis=0)


def padded_width(k: int) -> int:
    """Row stride for a column block of width k used in ``cols.T @ g``: k
    rounded up to a multiple of 8 when that adds at most a quarter (OpenBLAS's
    transposed-A GEMM runs faster on aligned rows; the forward and the dcols
    GEMMs do not gain, so only the weight pass pads)."""
    kp = -(-k // 8) * 8
    return kp if 4 * (kp - k) <= k else k


def _chunk_rows(m: int, row_elems: int, itemsize: int) -> int:
    return max(1, min(m, CHUNK_BYTES // max(1, row_elems * itemsize)))


_scratch_store = threading.local()


def scratch(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` backed by this thread's
    reusable chunk buffer (grown on demand, kept between calls).

    A fresh chunk-sized ``np.empty`` per call is handed out as new pages
    (page faults on every conv call) when glibc's thresholds are not tuned
    (``YSCV_MALLOC_TUNING=0``). Per-thread storage keeps two graphs in two
    threads apart; a thread never holds two scratch arrays at once (no conv
    kernel calls back into Python).
    """
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buf = getattr(_scratch_store, "buf", None)
    if buf is None or buf.nbytes < n:
        buf = np.empty(max(n, 1), dtype=np.uint8)
        _scratch_store.buf = buf
    return buf[:n].view(dtype).reshape(shape)


# ------------------------------------------------------------- im2col + GEMM
def _geometry(wshape, stride, padding, dilation, out_sp):
    kd, kh, kw = wshape[:3]
    return (kd, kh, kw, *stride, *padding, *dilation, *out_sp)


def _is_pointwise(wshape, stride, padding) -> bool:
    return wshape[0] == wshape[1] == wshape[2] == 1 and stride == (1, 1, 1) and padding == (0, 0, 0)


def _as_depthwise(x_shape, w_shape, groups, stride, padding, dilation):
    """The depthwise form of a grouped conv with one input channel per group
    (``groups == Cin``, what ``Conv2d(groups=C)`` and ONNX's ``Conv`` with
    ``group`` say) and no depth axis: ``(w_shape as [KH, KW, C, M], the
    2-D stride, padding, dilation)``, or None for any other conv. Output
    channel ``g*M + m`` of the grouped conv is channel ``c*M + m`` of the
    depthwise one, so the weight is the same array reshaped."""
    kd, kh, kw, cg, cout = w_shape
    cin = x_shape[4]
    if groups < 2 or groups != cin or cg != 1 or kd != 1 or x_shape[1] != 1:
        return None
    return (kh, kw, cin, cout // cin), stride[1:], padding[1:], dilation[1:]


def conv_forward(x, w, stride, padding, dilation, groups, out_sp=None, bias=None,
                 return_padded=False):
    """y [N, OD, OH, OW, Cout] = cross-correlation of x with w, plus ``bias``
    [Cout] when given. With ``return_padded``: ``(y, xp)``, ``xp`` the
    zero-padded input the direct or Winograd path read (None on the other
    paths, or when x needed no padding); `conv_backward` takes it as
    ``padded`` and its weight pass does not pad x again.

    ``out_sp`` overrides the output extent (conv_transpose's backward, where
    output_padding >= stride leaves the last rows of the transpose's output
    outside every window of its input). 3x3 stride-1 convs in the Winograd
    gate go to yscv/compute/conv_winograd.py; whole vectors of output
    channels (groups 1, not a plain 1x1) to the direct tiles
    (yscv/compute/conv_direct.py), the rest to im2col + BLAS.
    """
    n, d, h, wd, cin = x.shape
    kd, kh, kw, cg, cout = w.shape
    if out_sp is None:
        out_sp = tuple(out_size(i, k, s, p, dl) for i, k, s, p, dl in
                       zip((d, h, wd), (kd, kh, kw), stride, padding, dilation))
    dwf = _as_depthwise(x.shape, w.shape, groups, stride, padding, dilation)
    if dwf is not None and out_sp[1:] == tuple(
            out_size(i, k, s, p, dl) for i, k, s, p, dl in zip((h, wd), (kh, kw), *dwf[1:])):
        y = depthwise_forward(x[:, 0], w.reshape(dwf[0]), *dwf[1:]).reshape(n, *out_sp, cout)
        y = add_bias(y, bias)
        return (y, None) if return_padded else y
    pointwise = _is_pointwise(w.shape, stride, padding) and out_sp == (d, h, wd)
    if winograd.forward_usable(x.dtype, x.shape, w.shape, stride, padding, dilation, groups,
                               out_sp):
        return winograd.forward(x, w, padding, bias=bias, return_padded=return_padded)
    if not pointwise and direct.usable(x.dtype, cout, groups):
        return direct.forward(x, w, stride, padding, dilation, bias=bias, out_sp=out_sp,
                              return_padded=return_padded)
    one = one_thread_work(_product_work(x.shape[0], out_sp, w.shape, groups))
    if one:
        runtime.hold_one_blas_thread(True)
    try:
        y = _im2col_forward(x, w, stride, padding, dilation, groups, out_sp)
    finally:
        if one:
            runtime.hold_one_blas_thread(False)
    y = add_bias(y, bias)
    return (y, None) if return_padded else y


def _product_work(n: int, out_sp, w_shape, groups: int) -> int:
    """Multiply-adds of one im2col product of a convolution (one group, all
    rows): ``rows x (KD*KH*KW*Cg) x (Cout/groups)``, for the thread rule
    of `gemm.one_thread_work` (a small product on OpenBLAS's two threads
    leaves its worker spinning where the next region kernel runs)."""
    kd, kh, kw, cg, cout = w_shape
    return n * out_sp[0] * out_sp[1] * out_sp[2] * kd * kh * kw * cg * (cout // groups)


def _im2col_forward(x, w, stride, padding, dilation, groups, out_sp):
    """`conv_forward` without bias by (chunked) im2col + BLAS."""
    n, d, h, wd, cin = x.shape
    kd, kh, kw, cg, cout = w.shape
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
            fill_columns(xf, cols2, r, t * cg, cg, gi * cg, r0, xdims, geo)
            np.matmul(cols2, w2[:, gi * og:(gi + 1) * og],
                      out=y[r0:r0 + r, gi * og:(gi + 1) * og])
    return y.reshape(n, *out_sp, cout)


def conv_backward(g, w, stride, padding, dilation, groups, x=None, x_shape=None,
                  need_x=True, need_w=True, need_b=False, padded=None):
    """Gradients of `conv_forward` for the cotangent ``g`` [N, OD, OH, OW, Cout].

    Returns ``(dx, dw, db)`` (None where not needed; ``db`` is the bias
    gradient, ``g`` summed over positions). ``x`` is required for dw;
    ``x_shape`` gives dx's shape when x is not passed. Also the forward of
    conv_transpose (its ``dx`` with ``g`` = the transpose's input). dW runs
    on the direct tiles when Cout is whole vectors (db then comes from the
    same pass over ``g``), dx when Cin is (and the stride is 1; by
    Winograd for 3x3 in its gate); what is left goes through im2col + BLAS.
    ``padded``: x as `conv_forward` padded it (``return_padded``), or
    None; the direct dW pass reads it instead of padding x again.
    """
    if x_shape is None:
        x_shape = x.shape
    cin, cout = x_shape[4], w.shape[4]
    dx = dw = db = None
    dwf = _as_depthwise(x_shape, w.shape, groups, stride, padding, dilation)
    if dwf is not None and (need_x or need_w) and (x is not None or not need_w):
        # dx alone needs only x's shape: the same kernel with or without x,
        # so conv_grad_input gives the bits of conv's fused backward
        dx, dw = depthwise_backward(g[:, 0], None if x is None else x[:, 0],
                                    w.reshape(dwf[0]), *dwf[1:], need_x, need_w,
                                    x_shape=(x_shape[0],) + tuple(x_shape[2:]))
        dx = None if dx is None else dx.reshape(x_shape)
        dw = None if dw is None else dw.reshape(w.shape)
        return dx, dw, (bias_grad(g) if need_b else None)
    if not (_is_pointwise(w.shape, stride, padding) and g.shape[1:4] == tuple(x_shape[1:4])):
        if need_w and direct.usable(g.dtype, cout, groups):
            dw, db = direct.weight_grad(x, g, w.shape, stride, padding, dilation, need_b,
                                        xp=padded)
            need_w = False
            need_b = need_b and db is None   # a small map's db: bias_grad below
        if (need_x and direct.usable(g.dtype, cin, groups) and not _gemm_data_grad(g, w)
                and direct.data_grad_usable(stride, padding, dilation, w.shape[:3])):
            if winograd.data_grad_usable(g.dtype, g.shape, w.shape, stride, padding, dilation,
                                         groups, x_shape):
                dx = winograd.data_grad(g, w, padding)
            else:
                dx = direct.data_grad(g, w, x_shape, padding, dilation)
            need_x = False
    if need_x or need_w:
        split = need_x and _gemm_data_grad(g, w)
        one = split or one_thread_work(_product_work(g.shape[0], g.shape[1:4], w.shape, groups))
        if one:
            runtime.hold_one_blas_thread(True)
        try:
            dx2, dw2 = _im2col_backward(g, w, stride, padding, dilation, groups, x, x_shape,
                                        need_x, need_w, split)
        finally:
            if one:
                runtime.hold_one_blas_thread(False)
        dx = dx2 if need_x else dx
        dw = dw2 if need_w else dw
    if need_b:
        db = bias_grad(g)
    return dx, dw, db


def _gemm_data_grad(g, w) -> bool:
    """Whether dx of a conv with cotangent ``g`` and weight ``w`` [KD, KH, KW,
    Cg, Cout] runs as ``g @ W.T`` and col2im on one OpenBLAS thread: a
    small map (``g`` at most `SMALL_MAP_GRAD_BYTES`) with a weight of at
    least twice as many rows as ``g`` has positions. The direct pass would copy the
    weight flipped and transposed and read it once per row chunk; OpenBLAS
    packs it in cache-sized panels. One thread: a woken OpenBLAS worker
    spins on the second core where the next region kernel needs it
    (yscv/compute/gemm.py, ``SMALL_WORK``)."""
    m = g.size // g.shape[-1]
    k = w.shape[0] * w.shape[1] * w.shape[2] * w.shape[3]
    return g.nbytes <= SMALL_MAP_GRAD_BYTES and k >= 2 * m


def _im2col_backward(g, w, stride, padding, dilation, groups, x, x_shape, need_x, need_w,
                     split=False):
    """`conv_backward` by (chunked) im2col + BLAS and col2im; with ``split``
    the data gradient's products run as `gemm.split_dot` (blocks of
    columns over the cores, one OpenBLAS thread each)."""
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
            if need_x and split:
                split_dot(g2[:, gs], w2[:, gs].T, dx.reshape(m, cin)[:, cs])
            elif need_x:
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
    # fill would cost about the whole gain); they only feed the rows of
    # cols.T @ g that are dropped ([:k])
    buf = scratch((rows, ld), dtype)
    for r0 in range(0, m, rows):
        r = min(rows, m - r0)
        colsp = buf[:r]          # [r, ld]: the column block plus alignment padding
        cols2 = colsp[:, :k]
        for gi in range(groups):
            gs = slice(gi * og, (gi + 1) * og)
            if need_w:
                fill_columns(xf, colsp, r, ld, cg, gi * cg, r0, xdims, geo)
                if ld == k and r0 == 0:
                    np.matmul(cols2.T, g2[r0:r0 + r, gs], out=dw2[:, gs])
                else:
                    part = (colsp.T @ g2[r0:r0 + r, gs])[:k]
                    if r0 == 0:
                        dw2[:, gs] = part
                    else:
                        dw2[:, gs] += part
            if need_x:
                if split:
                    split_dot(g2[r0:r0 + r, gs], w2[:, gs].T, cols2)
                else:
                    np.matmul(g2[r0:r0 + r, gs], w2[:, gs].T, out=cols2)
                _K.col2im(colsp.reshape(-1), dxf, r, ld, cg, gi * cg, r0, *xdims, *geo)
    return dx, (dw2.reshape(w.shape) if need_w else None)


# ------------------------------------------------------------- deformable
def _window_origins(n_out, k, s, p, d, dtype):
    o = np.arange(n_out)[:, None] * s - p + np.arange(k)[None, :] * d
    return np.ascontiguousarray(o.astype(dtype).reshape(-1))


def _deform_setup(x, w, off, stride, padding, dilation):
    """The extents, the window origins (in x's dtype) and the chunk rows."""
    n, h, wd, c = x.shape
    kh, kw, _, cout = w.shape
    oh, ow = off.shape[1], off.shape[2]
    m = n * oh * ow
    rows = _chunk_rows(m, kh * kw * c, x.itemsize)
    yb = _window_origins(oh, kh, stride[0], padding[0], dilation[0], x.dtype)
    xb = _window_origins(ow, kw, stride[1], padding[1], dilation[1], x.dtype)
    return (h, wd, c, kh, kw, cout, oh, ow, m, rows), yb, xb


def deform_forward(x, w, off, stride, padding, dilation):
    """y [N, OH, OW, Cout] of the deformable convolution (no bias); OH, OW
    are taken from ``off``. All arrays C-contiguous."""
    (h, wd, c, kh, kw, cout, oh, ow, m, rows), yb, xb = _deform_setup(
        x, w, off, stride, padding, dilation)
    xf, of = x.reshape(-1), off.reshape(-1)
    one = x.dtype.type(1)
    w2 = w.reshape(kh * kw * c, cout)
    y = np.empty((m, cout), dtype=x.dtype)
    buf = scratch((rows, kh * kw, c), x.dtype)
    for r0 in range(0, m, rows):
        r = min(rows, m - r0)
        cols2 = buf[:r].reshape(r, kh * kw * c)
        _D.deform_im2col(xf, of, cols2.reshape(-1), r, r0, h, wd, c, yb, xb, one, kh, kw, oh, ow)
        np.matmul(cols2, w2, out=y[r0:r0 + r])
    return y.reshape(x.shape[0], oh, ow, cout)


def deform_backward(g, x, w, off, stride, padding, dilation, need_x, need_w, need_off):
    """(dx, dw, doff) for the cotangent ``g`` [N, OH, OW, Cout] (None where
    not needed). All arrays C-contiguous."""
    (h, wd, c, kh, kw, cout, oh, ow, m, rows), yb, xb = _deform_setup(
        x, w, off, stride, padding, dilation)
    xf, of = x.reshape(-1), off.reshape(-1)
    dtype = x.dtype
    one = dtype.type(1)
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
            _D.deform_im2col(xf, of, cols2.reshape(-1), r, r0, h, wd, c, yb, xb, one, kh, kw,
                             oh, ow)
            dw2 += cols2.T @ g2[r0:r0 + r]
        if need_x or need_off:
            np.matmul(g2[r0:r0 + r], w2.T, out=cols2)
            _D.deform_col2im(cols2.reshape(-1), xf, of, dxf, dof, r, r0, h, wd, c, yb, xb, one,
                             kh, kw, oh, ow, need_x, need_off)
    return dx, (dw2.reshape(w.shape) if need_w else None), doff
