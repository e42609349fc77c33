"""Direct convolution drivers: a zero-padded input, two offset tables and
the register tiles of yscv/kernels/conv_direct.py, split over the cores.

Works on the 3-spatial-axis form of yscv/compute/conv.py (x [N, D, H, W, C],
w [KD, KH, KW, Cin, Cout]), groups = 1, and ``Cout`` a multiple of 16
float32 / 8 float64 values (one AVX-512 vector; `usable`). Per pass:

* forward: ``y = init + sum_s xp[ro[r] + so[s]] * w2[s]`` with ``ro`` the
  window starts in the padded input ``xp`` (one per output position) and
  ``so`` the (tap, channel) offsets; the bias is the tiles' starting value.
* weight: the same tables swapped: ``dW[k] = sum_r xp[ro[r] + so[k]] * g[r]``,
  positions split into a fixed number of chunks (a function of the sizes
  only), one partial per chunk, added in chunk order: the same bits with one
  thread or two.
* data (stride 1, padding <= ``dilation*(kernel`` - 1)): the forward of the
  cotangent padded by ``dilation*(kernel - 1) - padding`` with the flipped,
  transposed kernel.

No column matrix is built: the im2col gather (a write and a read of
K values per output position) becomes an offset-table lookup in the tile's
inner loop, and the input stays in cache across the taps. docs/ops/conv.md
has the measurements and the shapes that take this path.
"""
from __future__ import annotations

import functools

import numpy as np

from ..kernels import lazy
from . import regions as par
from .arrays import readonly

_K = lazy("conv_direct")

#: multiply-adds per chunk of a region (fewer: one thread does it all)
GRAIN = 1 << 20
#: a forward splits its columns over the cores when the weight has this many
#: times more rows than the output (`_column_split`)
COLUMN_SPLIT_RATIO = 4
#: a weight gradient whose cotangent has at most this many bytes (and no
#: more positions than dW has rows) splits dW's rows over the cores instead
#: of the positions (`_weight_plan`)
SMALL_MAP_BYTES = 1 << 20
#: padded elements per chunk of the padding pass
PAD_GRAIN = 1 << 16


def usable(dtype, cout: int, groups: int) -> bool:
    """Whether the direct tiles take a conv with this dtype, output channels
    and groups: float32/float64, groups 1, whole vectors of output channels."""
    dtype = np.dtype(dtype)
    return (groups == 1 and dtype in (np.float32, np.float64)
            and cout % (64 // dtype.itemsize) == 0)


def data_grad_usable(stride, padding, dilation, kernel) -> bool:
    """Whether the data gradient can run as a forward with the flipped kernel
    (stride 1, and the padding no larger than the dilated kernel's reach)."""
    return stride == (1, 1, 1) and all(p <= d * (k - 1) for p, d, k in
                                       zip(padding, dilation, kernel))


def _ceil_to(n: int, b: int) -> int:
    return -(-n // b) * b


def _padded(x, kernel, stride, padding, dilation, out_sp, have=None):
    """x zero-padded so that every window of the ``out_sp`` grid lies inside:
    one pass writing each element once (the copy or a zero), split over the
    cores by rows (the NumPy form, a zeroed border and a strided copy, ran
    on one core). ``have``: this padding of x made earlier (the forward's,
    kept for the weight pass), returned as is when its shape fits."""
    plan = _pad_plan(x.shape, tuple(kernel), tuple(stride), tuple(padding), tuple(dilation),
                     tuple(out_sp))
    if plan is None:
        return x
    size, dims, pdims, pads, bounds = plan
    if have is not None and have.shape == size and have.dtype == x.dtype:
        return have
    xp = np.empty(size, dtype=x.dtype)
    if xp.size == 0:
        return xp
    xf = readonly(np.ascontiguousarray(x).reshape(-1))
    pf = xp.reshape(-1)
    par.run_region(lambda st: _K.pad_region(xf, dims, pf, pdims, pads, bounds, st),
                   len(bounds) - 1)
    return xp


@functools.lru_cache(maxsize=64)
def _pad_plan(shape, kernel, stride, padding, dilation, out_sp):
    """None when x of ``shape`` needs no padding, else (padded shape, dims,
    pdims, pads, region bounds): the arguments of ``pad_region``, built once
    per geometry (a training step pads the same shapes every step; building
    them took ~10 us of Python per pass)."""
    n, *sp, c = shape
    size = [max(p + i, (o - 1) * s + d * (k - 1) + 1) for i, k, s, p, d, o in
            zip(sp, kernel, stride, padding, dilation, out_sp)]
    if size == sp and not any(padding):
        return None
    rows = n * size[0] * size[1]
    total = rows * size[2] * c
    bounds = par.bounds(par.split(rows, par.num_chunks(rows, total, PAD_GRAIN)))
    return ((n, *size, c), np.array([*sp, c], dtype=np.int64), np.array(size, dtype=np.int64),
            np.array(padding, dtype=np.int64), bounds)


@functools.lru_cache(maxsize=64)
def _tables(xp_shape, kernel, stride, dilation, out_sp, cin, block):
    """(window starts ``[N*OD*OH*OW]``, tap offsets ``[KD*KH*KW*cin]``) in ``xp``,
    int64, read-only; each padded with copies of its last entry to
    a multiple of ``block`` entries (the tiles' rows: 6 for the 6 x 4-vector
    tiles, 8 for the others, yscv/kernels/conv_direct.py; callers slice what they sum
    over). Cached: a training step asks for the same few tables every step,
    and building them (NumPy broadcasting over every output position) cost
    ~60 us per call on the CNN, 0.3 ms per step."""
    ro, so = _build_tables(xp_shape, kernel, stride, dilation, out_sp, cin)
    out = []
    for t in (ro, so):
        t = np.concatenate([t, np.full(_ceil_to(len(t), block) - len(t), t[-1], dtype=np.int64)])
        t.flags.writeable = False
        out.append(t)
    return tuple(out)


def _build_tables(xp_shape, kernel, stride, dilation, out_sp, cin):
    n, dp, hp, wp, c = xp_shape
    od, oh, ow = out_sp
    sd, sh, sw = stride
    ro = (np.arange(n).reshape(-1, 1, 1, 1) * (dp * hp * wp)
          + np.arange(od).reshape(-1, 1, 1) * (sd * hp * wp)
          + np.arange(oh).reshape(-1, 1) * (sh * wp) + np.arange(ow) * sw) * c
    kd, kh, kw = kernel
    dd, dh, dw = dilation
    so = ((np.arange(kd).reshape(-1, 1, 1, 1) * (dd * hp * wp)
           + np.arange(kh).reshape(-1, 1, 1) * (dh * wp)
           + np.arange(kw).reshape(-1, 1) * dw) * c + np.arange(cin))
    return ro.reshape(-1).astype(np.int64), so.reshape(-1).astype(np.int64)


def _row_block(cout: int, itemsize: int) -> int:
    """Rows per tile of the region kernel for ``cout`` columns: 6 where
    `yscv.kernels.conv_direct.wide_tiles` picks the 6 x 4-vector
    tiles, else 8 (the kernel makes the same choice; the offset tables and
    chunk bounds come in whole blocks of these rows)."""
    return 6 if _K.wide_tiles(cout, itemsize) else 8


def _row_chunks(rows: int, work: int, b: int) -> np.ndarray:
    """Region bounds over ``rows`` rows (whole row blocks of ``b``), whole blocks."""
    k = par.num_chunks(rows // b, work, GRAIN)
    return np.array([b * ((rows // b) * i // k) for i in range(k + 1)], dtype=np.int64)


def _column_split(rows: int, k: int, cout: int, itemsize: int) -> bool:
    """Whether a product with ``rows`` rows of ``c``, ``k`` rows of ``b`` and
    ``cout`` columns splits its columns over the cores
    (``direct_columns`` of yscv/kernels/conv_direct.py) rather than its rows: when ``b`` (the
    weight, ``k x cout``) is more than `COLUMN_SPLIT_RATIO` times the
    output (a small map: a row split would read the whole weight once per
    chunk and per row block) and there are at least two column groups to
    split."""
    return (k >= COLUMN_SPLIT_RATIO * rows
            and cout >= 2 * _column_group(cout, itemsize))


def _column_group(cout: int, itemsize: int) -> int:
    """Columns of one tile (6 x 4 or 8 x 2 vectors): the grain of a column split."""
    return (4 if _K.wide_tiles(cout, itemsize) else 2) * (_K.VBYTES // itemsize)


def _column_bounds(cout: int, work: int, itemsize: int) -> np.ndarray:
    """Region bounds over ``cout`` columns in whole `_column_group` groups
    (the last chunk takes a last odd vector)."""
    grp = _column_group(cout, itemsize)
    groups = cout // grp
    k = par.num_chunks(groups, work, GRAIN)
    b = [grp * (groups * i // k) for i in range(k)] + [cout]
    return np.array(b, dtype=np.int64)


@functools.lru_cache(maxsize=64)
def _forward_plan(xp_shape, kernel, stride, dilation, out_sp, cout, dtype):
    """(ro, so, bounds, no-bias-sum array, split) of `forward` for this
    geometry: built once (a step runs the same shapes every step). ``split``:
    1 (chunks of rows, ``direct_region``) or 2 (of columns, ``direct_columns``;
    `_column_split`)."""
    cin = xp_shape[4]
    block = _row_block(cout, dtype.itemsize)
    ro, so = _tables(xp_shape, kernel, stride, dilation, out_sp, cin, block)
    m = xp_shape[0] * out_sp[0] * out_sp[1] * out_sp[2]
    so = so[:kernel[0] * kernel[1] * kernel[2] * cin]
    work = m * so.shape[0] * cout
    no_bsum = np.empty((0, 3, cout), dtype=dtype)
    if _column_split(ro.shape[0], so.shape[0], cout, dtype.itemsize):
        return ro, so, _column_bounds(cout, work, dtype.itemsize), no_bsum, 2
    return ro, so, _row_chunks(ro.shape[0], work, block), no_bsum, 1


def forward(x, w, stride, padding, dilation, bias=None, out_sp=None, return_padded=False):
    """y [N, OD, OH, OW, Cout] = cross-correlation of x with w (+ bias);
    with ``return_padded`` ``(y, xp)``: also the zero-padded input the tiles
    read (None when x needed no padding), which `weight_grad` can take
    instead of padding x again."""
    n = x.shape[0]
    kernel = w.shape[:3]
    cout = w.shape[4]
    if out_sp is None:  # the grid of `conv.out_size` (floor division of the padded extent)
        out_sp = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in
                       zip(x.shape[1:4], kernel, stride, padding, dilation))
    out_sp = tuple(out_sp)
    xp = _padded(x, kernel, stride, padding, dilation, out_sp)
    ro, so, bounds, bsum, split = _forward_plan(xp.shape, tuple(kernel), tuple(stride),
                                                tuple(dilation), out_sp, cout, x.dtype)
    m = n * out_sp[0] * out_sp[1] * out_sp[2]
    y = np.empty(ro.shape[0] * cout, dtype=x.dtype)
    # inputs as read-only arrays: one kernel specialisation whatever flags
    # the graph's values carry (yscv/compute/arrays.py)
    w2 = readonly(np.ascontiguousarray(w).reshape(-1))
    init = w2 if bias is None else readonly(np.ascontiguousarray(bias, dtype=x.dtype))
    xf = readonly(xp.reshape(-1))
    mode = 0 if bias is None else 1
    work = m * w2.size
    if split == 2:
        par.run_region(lambda st: _K.direct_columns(xf, ro, so, w2, y, init, mode, bounds, st),
                       len(bounds) - 1, work)
    else:
        par.run_region(lambda st: _K.direct_region(xf, ro, so, w2, y, init, mode, bsum, bounds, 1,
                                                   st), len(bounds) - 1, work)
    y = y[:m * cout].reshape(n, *out_sp, cout)
    if return_padded:
        return y, (None if xp is x else xp)
    return y


@functools.lru_cache(maxsize=64)
def _weight_plan(xp_shape, kernel, stride, dilation, out_sp, cout, dtype, need_b):
    """(ro, so, chunks, bounds, by_rows) of `weight_grad` for this geometry.

    ``by_rows`` 1 (a small map: the cotangent, ``m x cout``, at most
    `SMALL_MAP_BYTES`, and no more positions ``m`` than dW has rows): dW's
    rows (taps x channels) split over the cores, each element one sum over
    every position (no partials to add: on a small map the chunks' partials
    of a large weight cost more than the products; the bias gradient, if
    wanted, is left to the caller). Else 0: positions split into
    ``chunks`` partials, the bias gradient taken in the same pass."""
    cin = xp_shape[4]
    block = _row_block(cout, dtype.itemsize)
    so, ro = _tables(xp_shape, kernel, stride, dilation, out_sp, cin, block)
    k = kernel[0] * kernel[1] * kernel[2] * cin
    m = xp_shape[0] * out_sp[0] * out_sp[1] * out_sp[2]
    so = so[:m]
    if m * cout * dtype.itemsize <= SMALL_MAP_BYTES and k >= m:
        bounds = _row_chunks(ro.shape[0], m * k * cout, block)
        return ro, so, len(bounds) - 1, bounds, 1
    nch = par.num_chunks(m, m * k * cout, GRAIN)
    bounds = np.array([m * i // nch for i in range(nch + 1)], dtype=np.int64)
    return ro, so, nch, bounds, 0


def weight_grad(x, g, wshape, stride, padding, dilation, need_b=False, xp=None):
    """(dW [KD, KH, KW, Cin, Cout], db [Cout] or None) of `forward`
    for the cotangent ``g``; with ``need_b`` the bias gradient (the sum of
    ``g`` over positions) is taken in the same pass, per chunk, added in
    chunk order like dW, except on a small map (`_weight_plan`'s
    ``by_rows``), where db is None and the caller sums ``g`` itself (a pass
    over a small ``g`` costs less than the partials of a large dW). ``xp``:
    x as the forward padded it (its ``return_padded``), used when its shape
    is the one this pass needs."""
    kernel = tuple(wshape[:3])
    cin, cout = wshape[3], wshape[4]
    out_sp = tuple(g.shape[1:4])
    xp = _padded(x, kernel, stride, padding, dilation, out_sp, have=xp)
    ro, so, nch, bounds, by_rows = _weight_plan(xp.shape, kernel, tuple(stride),
                                                tuple(dilation), out_sp, cout, x.dtype,
                                                bool(need_b))
    k = kernel[0] * kernel[1] * kernel[2] * cin
    kp = ro.shape[0]
    g2 = readonly(np.ascontiguousarray(g).reshape(-1))
    xf = readonly(xp.reshape(-1))
    if by_rows:
        dw = np.empty(kp * cout, dtype=x.dtype)
        bsum = np.empty((0, 3, cout), dtype=x.dtype)
        par.run_region(lambda st: _K.direct_region(xf, ro, so, g2, dw, g2, 0, bsum, bounds, 1,
                                                   st), nch, g.size * k)
        return dw.reshape(kp, cout)[:k].reshape(wshape), None
    parts = np.empty(nch * kp * cout, dtype=x.dtype)
    bsum = np.empty((nch if need_b else 0, 3, cout), dtype=x.dtype)
    par.run_region(lambda st: _K.direct_region(xf, ro, so, g2, parts, g2, 0, bsum, bounds, 0, st),
                   nch, g.size * k)
    dw = par.combine(list(parts.reshape(nch, kp, cout)))
    db = par.combine([b[0] for b in bsum]).copy() if need_b else None
    return np.ascontiguousarray(dw[:k]).reshape(wshape), db


def data_grad(g, w, x_shape, padding, dilation):
    """dx [N, D, H, W, Cin] of a stride-1 `forward` (see
    `data_grad_usable`): the flipped, transposed kernel run forward
    over the cotangent."""
    kernel = w.shape[:3]
    wf = np.ascontiguousarray(w[::-1, ::-1, ::-1].swapaxes(3, 4))
    pad = tuple(d * (k - 1) - p for k, p, d in zip(kernel, padding, dilation))
    return forward(g, wf, (1, 1, 1), pad, dilation, out_sp=tuple(x_shape[1:4]))
