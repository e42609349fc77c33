"""Direct (implicit-GEMM) convolution: register tiles that read the input
through offset tables instead of a gathered column matrix.

Every product of a convolution on a zero-padded channel-last input ``xp``
(flattened) has the form

    c[i, j] (+)= sum_s xp[ro[i] + so[s]] * b[s, j]

with two int64 offset tables (yscv/compute/conv_direct.py builds them):

* forward (and the data gradient, as a forward on the padded cotangent with
  the flipped kernel): ``i`` = output position, ``ro[i]`` = where its window
  starts in ``xp``; ``s`` = (tap, channel), ``so[s]`` = where that tap and
  channel sit relative to the window start; ``b`` = the weight [K, Cout];
  ``c`` = the output [positions, Cout].
* weight gradient: the roles swap: ``i`` = (tap, channel) with ``ro`` the
  tap table, ``s`` = output position with ``so`` the window table, ``b`` =
  the cotangent [positions, Cout], ``c`` = dW [K, Cout].

So stride, dilation, 1 to 3 spatial axes and the tap order are all in the
tables, and the same tiles do every pass; no column block is written or read.

Tiles: 8 rows of ``c`` x 2 vectors (16 accumulators; per step two vector
loads of ``b``, eight broadcasts of ``xp``, sixteen fused multiply-adds),
and 8 x 1 vector for a last odd vector of columns (rows a multiple of 8);
with AVX-512 and columns in whole groups of four vectors, 6 rows x 4
vectors (24 accumulators; rows a multiple of 6; `wide_tiles`
decides). The tiles are LLVM IR from one generator
(yscv/kernels/tile_ir.py). One region kernel, `direct_region`, holds
all three shapes and does both kinds of pass (a flag picks how chunks
split the work), so a program compiles the tiles once, whatever its
channel counts. ``Cout`` must be a multiple of the vector length (the
caller pads the tables and the output rows to the tile's rows).
Offsets are uint64 (no wrap-around test per load; see yscv/kernels/conv.py).

`pad_region` writes the zero-padded input the tiles read.

Numerics: each element is ``c0 + x0*b0 + x1*b1 + ...`` in ``s`` order with
one rounding per fused multiply-add (``c0`` = the bias row, zero, or the
value in ``c`` when accumulating); the split of rows over threads does not
change it. The weight gradient sums fixed blocks of positions into one
partial per chunk; the caller adds the partials in chunk order.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .simd import VBYTES, copy_run, lanes, vadd, vload, vstore, vzero, zero_run
from .sync import region_chunks
from .tile_ir import register_tile

#: the 6 x 4-vector tile needs 24 accumulators + 4 + 1 registers: AVX-512 (32)
WIDE_TILES = VBYTES == 64


def wide_tiles(n: int, itemsize: int) -> bool:
    """Whether a product with ``n`` columns of ``itemsize`` bytes runs the
    6 x 4-vector tiles (rows in multiples of 6): ``n`` whole groups of four
    vectors, with AVX-512. Otherwise the 8-row tiles (rows in multiples of
    8). The region kernels decide the same in compiled code (`_wide`)."""
    return WIDE_TILES and n % (4 * (VBYTES // itemsize)) == 0


@jit(inline="always")
def _wide(N, cf):
    """`wide_tiles` of ``N`` columns of ``cf``'s dtype, in a kernel."""
    return WIDE_TILES and N % (4 * lanes(cf)) == 0


#: bytes of cotangent rows per block of the weight-gradient sum: the
#: block's rows of ``b`` stay in L1 while every tile reads them
S_BLOCK_BYTES = 16384


#: bytes of a column chunk's ``b`` rows per block of ``s`` (`direct_columns`):
#: the block stays in L2 while every row block of ``c`` reads it
COL_BLOCK_BYTES = 131072


#: the register tiles, rows x vectors of columns (yscv/kernels/tile_ir.py):
#: ``tile(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode)``
#: computes ``c[i0:i0+R, j:j+V*L]`` (row ``i`` of ``cf`` at ``cb + i*ldc``)
#: over ``s`` in ``[s0, s1)``, starting from zero (``mode`` 0), the bias
#: ``init[j:]`` (1) or ``c`` (2). 6 x 4: fewer loads per multiply-add than
#: 8 x 2, and each ``xp`` value read once for four vectors instead of twice.
_tile8x2 = register_tile(8, 2)
_tile8x1 = register_tile(8, 1)
_tile6x4 = register_tile(6, 4)


@jit(inline="always")
def _rows(xf, ro, i0, i1, so, s0, s1, bf, N, cf, cb, init, mode, j0, j1):
    """Rows ``[i0, i1)`` of ``c``, columns ``[j0, j1)``, ``s`` in ``[s0, s1)``,
    on the tiles `wide_tiles` picks for ``N`` columns: 6 x 4-vector tiles
    (rows in multiples of 6, ``N`` and ``j0`` multiples of four vectors),
    else 8 x 2-vector tiles and 8 x 1 for a last odd vector (rows in
    multiples of 8, ``j0`` a multiple of two vectors). One function, not
    one per family: each ``inline="always"`` level copies and re-types its
    body (docs/engine.md, "Cold start")."""
    L = lanes(cf)
    if _wide(N, cf):
        for i in range(i0, i1, 6):
            j = j0
            while j < j1:
                _tile6x4(xf, ro, i, so, s0, s1, bf, N, cf, cb, N, j, init, mode)
                j += 4 * L
    else:
        for i in range(i0, i1, 8):
            j = j0
            while j + 2 * L <= j1:
                _tile8x2(xf, ro, i, so, s0, s1, bf, N, cf, cb, N, j, init, mode)
                j += 2 * L
            if j < j1:
                _tile8x1(xf, ro, i, so, s0, s1, bf, N, cf, cb, N, j, init, mode)


@jit(inline="always")
def _bias_block(bf, s0, s1, N, bsum, k):
    """Column sums of the ``b`` rows ``[s0, s1)`` added to ``bsum[k, 0]``:
    one vector of columns at a time, summed from zero in a register first
    (the block is in L1)."""
    L = lanes(bf)
    tot = bsum[k, 0]
    ub = np.uint64(N)
    for j in range(0, N, L):
        uj = np.uint64(j)
        acc = vzero(bf)
        for s in range(np.uint64(s0), np.uint64(s1)):
            acc = vadd(acc, vload(bf, s * ub + uj))
        vstore(tot, uj, vadd(vload(tot, uj), acc))


@jit(inline="always")
def _fill_rows(cf, cb, i0, i1, N, init, j0, j1):
    """Rows ``[i0, i1)``, columns ``[j0, j1)`` of ``c`` (flat from ``cb``,
    N wide) set to ``init[j0:j1]`` (the bias), one block of a tile's rows at
    a time (still in L1 when the tiles load it).

    The region kernels start the tiles from ``c`` (mode 2) after this, not
    from the bias (mode 1): with one tile call site serving every pass, a
    tile that may take any of the three starts kept its 24 accumulators in
    memory around the loop (LLVM merged three sources per accumulator),
    ~25% slower on the weight gradient's short blocks; with the mode known
    to be 0 or 2 they stay in registers. Same bits: each sum still starts
    from the bias value."""
    L = lanes(cf)
    for i in range(i0, i1):
        o = np.uint64(cb + i * N)
        for j in range(j0, j1, L):
            vstore(cf, o + np.uint64(j), vload(init, np.uint64(j)))


@jit
def direct_region(xf, ro, so, bf, cf, init, mode, bsum, bounds, by_rows, st):
    """The product above on the tiles `wide_tiles` picks for ``N``
    columns, by chunks ``k`` of a region.

    ``by_rows`` (the forward and the data gradient): ``c[i] = init + sum_s
    xp[ro[i] + so[s]] * b[s]``, ``c`` [len(ro), N] flat in ``cf``, chunk
    ``k`` the rows ``[bounds[k], bounds[k+1])`` (multiples of 6 or 8: the
    tiles' rows), ``mode`` 0 (from zero) or 1 (``init`` = the bias [N]).

    Else (the weight gradient): ``cf`` is flat [chunks, len(ro), N],
    ``cf[k] = sum_{s in chunk k} xp[ro[i] + so[s]] * b[s]`` for ``s`` in
    ``[bounds[k], bounds[k+1])``; each chunk goes through its ``s`` in
    blocks of `S_BLOCK_BYTES` of ``b`` (all rows per block: the
    block's ``b`` rows stay in cache while every tile reads them); ``mode``
    0. ``bsum`` [chunks, 3, N] (or [0, 3, N]: not wanted) gets the column
    sums of ``b`` per chunk in row 0 (the bias gradient, while each block
    is in L1): each block is summed from zero in a register, then added to
    row 0, so the error grows with the block length plus the number of
    blocks, not with the chunk length. Rows 1 and 2 keep two chunks off one
    cache line.

    One kernel for both passes and every tile shape (the same arguments'
    types): the tiles are typed, lowered and compiled once per program (a
    program with both tile families compiles one kernel, not two;
    docs/ops/conv.md, "Compile time")."""
    M = ro.shape[0]               # rows of c
    S = so.shape[0]
    zero = M - M                  # a run-time 0 (see _rows)
    nk = bounds.shape[0] - 1
    N = cf.shape[0] // M if by_rows else cf.shape[0] // (nk * M)      # columns
    sb = S_BLOCK_BYTES // (N * bf.itemsize)   # the weight gradient's block of s
    # bounds as conditional expressions, not max()/min(): each builtin compiles
    # a Numba helper of its own on a cold start (docs/engine.md, "Cold start")
    sb = sb if sb > 8 else 8
    pre = by_rows == 1 and mode == 1          # rows start from the bias (_fill_rows)
    for k in region_chunks(st, nk):
        # chunk k: its rows [i0, i1) of c, its s range in blocks of step, the
        # offset of its output in cf
        if by_rows:   # rows of this chunk, every s in one block (at least one)
            i0, i1, s_lo, s_hi, cb = bounds[k], bounds[k + 1], zero, S, zero
            step = S if S > 1 else 1
        else:         # every row, this chunk's s in blocks, its own partial
            i0, i1, s_lo, s_hi, cb, step = zero, M, bounds[k], bounds[k + 1], k * M * N, sb
        if bsum.shape[0] > 0:
            bsum[k, 0, :] = 0
        rb = (6 if _wide(N, cf) else 8) if pre else (i1 - i0 if i1 - i0 > 1 else 1)
        s_end = s_hi if s_hi > s_lo + by_rows else s_lo + by_rows
        for s0 in range(s_lo, s_end, step):
            s1 = s0 + step if s0 + step < s_hi else s_hi
            for r in range(i0, i1, rb):
                if pre:
                    _fill_rows(cf, cb, r, r + rb, N, init, zero, N)
                _rows(xf, ro, r, r + rb if r + rb < i1 else i1, so, s0, s1, bf, N, cf, cb, init,
                      2 if s0 > s_lo or pre else 0, zero, N)
            if bsum.shape[0] > 0:
                _bias_block(bf, s0, s1, N, bsum, k)


@jit
def direct_columns(xf, ro, so, bf, cf, init, mode, bounds, st):
    """`direct_region`'s forward product (``c[i] = init + sum_s xp[ro[i] +
    so[s]] * b[s]``, ``mode`` 0 from zero, 1 from the bias ``init``) with
    chunk ``k`` the columns ``[bounds[k], bounds[k+1])`` (whole groups of
    the tiles' vectors) of every row, ``s`` in blocks of `COL_BLOCK_BYTES`
    of the chunk's ``b`` columns, every row per block.

    For few rows and a large ``b`` (the weight of a conv on a small map): a
    row split reads all of ``b`` once per chunk and once per row block;
    here each chunk reads its columns of ``b`` from memory once. Per element
    the same sum as the row split (``s`` in order from the bias or zero, one
    rounding per fused multiply-add): the same bits. A kernel of its own,
    compiled only by programs that run such a conv: `direct_region`'s code
    stays as it was."""
    M = ro.shape[0]
    S = so.shape[0]
    zero = M - M
    N = cf.shape[0] // M
    pre = mode == 1
    rb = (6 if _wide(N, cf) else 8) if pre else (M if M > 1 else 1)
    s_end = S if S > 1 else 1     # at least one block of s (S may be 0)
    for k in region_chunks(st, bounds.shape[0] - 1):
        j0, j1 = bounds[k], bounds[k + 1]
        step = COL_BLOCK_BYTES // ((j1 - j0) * bf.itemsize)
        step = step if step > 8 else 8
        for s0 in range(zero, s_end, step):
            s1 = s0 + step if s0 + step < S else S
            for r in range(zero, M, rb):
                if pre and s0 == 0:
                    _fill_rows(cf, zero, r, r + rb, N, init, j0, j1)
                _rows(xf, ro, r, r + rb if r + rb < M else M, so, s0, s1, bf, N, cf, zero, init,
                      2 if s0 > 0 or pre else 0, j0, j1)


@jit
def pad_region(xf, dims, pf, pdims, pads, bounds, st):
    """The zero-padded copy ``xp`` of ``x`` in one pass (every element of
    ``xp`` written once: the copy or a zero); a region kernel over chunks of
    ``xp``'s rows ``(n, z, y)``, ``[bounds[k], bounds[k+1])``.

    ``xf``/``pf`` flat; ``dims`` = (D, H, W, C) of x, ``pdims`` = (Dp, Hp,
    Wp) of xp, ``pads`` = the leading padding (pd, ph, pw); x sits at
    ``xp[:, pd:pd+D, ph:ph+H, pw:pw+W]``. Each row is a zeroed run, a copied
    run and a zeroed run (``zero_run`` / ``copy_run``: one memset or memcpy
    each, as fast as the loops were, and ~0.05 s less to compile than four
    vectorised loops with their overlap checks; docs/engine.md, "Cold
    start")."""
    d_, h_, w_, c_ = dims[0], dims[1], dims[2], dims[3]
    dp, hp, wp = pdims[0], pdims[1], pdims[2]
    pd, ph, pw = pads[0], pads[1], pads[2]
    row = np.uint64(wp * c_)
    left = np.uint64(pw * c_)
    run = np.uint64(w_ * c_)
    for k in region_chunks(st, bounds.shape[0] - 1):
        for r in range(bounds[k], bounds[k + 1]):
            y = r % hp
            z = (r // hp) % dp
            n = r // (hp * dp)
            o = np.uint64(r) * row
            if pd <= z < pd + d_ and ph <= y < ph + h_:
                src = np.uint64(((n * d_ + z - pd) * h_ + y - ph) * w_ * c_)
                zero_run(pf, o, left)
                copy_run(pf, o + left, xf, src, run)
                zero_run(pf, o + left + run, row - left - run)
            else:
                zero_run(pf, o, row)
