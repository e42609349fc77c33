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
and 8 x 1 vector for a last odd vector of columns (:func:`direct_region`;
rows a multiple of 8); with AVX-512 and columns in whole groups of four
vectors, 6 rows x 4 vectors (24 accumulators; :func:`direct_region_wide`;
rows a multiple of 6; :func:`wide_tiles` decides). Each region kernel does
both kinds of pass (a flag picks how chunks split the work), so a program
compiles each tile shape's tiles once. ``Cout`` must be a multiple of
the vector length (the caller pads the tables and the output rows).
Offsets are uint64 (no wrap-around test per load; see yscv/kernels/conv.py).

:func:`pad_region` writes the zero-padded input the tiles read.

Numerics: each element is ``c0 + x0*b0 + x1*b1 + ...`` in ``s`` order with
one rounding per fused multiply-add (``c0`` = the bias row, zero, or the
value in ``c`` when accumulating); the split of rows over threads does not
change it. The weight gradient sums fixed blocks of positions into one
partial per chunk; the caller adds the partials in chunk order.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .simd import VBYTES, lanes, vadd, vfma, vload, vsplat, vstore, vzero
from .sync import region_chunks

#: the 6 x 4-vector tile needs 24 accumulators + 4 + 1 registers: AVX-512 (32)
WIDE_TILES = VBYTES == 64


def wide_tiles(n: int, itemsize: int) -> bool:
    """Whether a product with ``n`` columns of ``itemsize`` bytes runs the
    6 x 4-vector tiles (:func:`direct_region_wide`, rows in multiples of
    6): ``n`` whole groups of four vectors, with AVX-512. Otherwise the
    8-row tiles (rows in multiples of 8). Two kernels rather than one with
    both tiles: each tile shape adds ~0.7 s to its kernel's first compile,
    and a model compiles only the kernels its channel counts use."""
    return WIDE_TILES and n % (4 * (VBYTES // itemsize)) == 0


#: bytes of cotangent rows per block of the weight-gradient sum: the
#: block's rows of ``b`` stay in L1 while every tile reads them
S_BLOCK_BYTES = 16384


@jit(inline="always")
def _tile8x2(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode):
    """``c[i0:i0+8, j:j+2L]`` of the product above, ``s`` in ``[s0, s1)``.

    ``cf`` flat, row ``i`` at ``cb + i*ldc``; ``mode`` 0: start from zero,
    1: from ``init[j:j+2L]`` (the bias), 2: from ``c`` (accumulate)."""
    L = lanes(cf)
    uj = np.uint64(j)
    ub = np.uint64(ldb)
    o0 = np.uint64(cb + i0 * ldc + j)
    dc = np.uint64(ldc)
    o1 = o0 + dc
    o2 = o1 + dc
    o3 = o2 + dc
    o4 = o3 + dc
    o5 = o4 + dc
    o6 = o5 + dc
    o7 = o6 + dc
    if mode == 2:
        c00 = vload(cf, o0); c01 = vload(cf, o0 + L)
        c10 = vload(cf, o1); c11 = vload(cf, o1 + L)
        c20 = vload(cf, o2); c21 = vload(cf, o2 + L)
        c30 = vload(cf, o3); c31 = vload(cf, o3 + L)
        c40 = vload(cf, o4); c41 = vload(cf, o4 + L)
        c50 = vload(cf, o5); c51 = vload(cf, o5 + L)
        c60 = vload(cf, o6); c61 = vload(cf, o6 + L)
        c70 = vload(cf, o7); c71 = vload(cf, o7 + L)
    else:
        z0 = vload(init, uj) if mode == 1 else vzero(cf)
        z1 = vload(init, uj + L) if mode == 1 else z0
        c00 = z0; c01 = z1; c10 = z0; c11 = z1; c20 = z0; c21 = z1; c30 = z0; c31 = z1
        c40 = z0; c41 = z1; c50 = z0; c51 = z1; c60 = z0; c61 = z1; c70 = z0; c71 = z1
    r0 = np.uint64(ro[i0]); r1 = np.uint64(ro[i0 + 1]); r2 = np.uint64(ro[i0 + 2])
    r3 = np.uint64(ro[i0 + 3]); r4 = np.uint64(ro[i0 + 4]); r5 = np.uint64(ro[i0 + 5])
    r6 = np.uint64(ro[i0 + 6]); r7 = np.uint64(ro[i0 + 7])
    for s in range(s0, s1):
        q = np.uint64(so[s])
        bq = np.uint64(s) * ub + uj
        b0 = vload(bf, bq); b1 = vload(bf, bq + L)
        a = vsplat(xf[r0 + q]); c00 = vfma(a, b0, c00); c01 = vfma(a, b1, c01)
        a = vsplat(xf[r1 + q]); c10 = vfma(a, b0, c10); c11 = vfma(a, b1, c11)
        a = vsplat(xf[r2 + q]); c20 = vfma(a, b0, c20); c21 = vfma(a, b1, c21)
        a = vsplat(xf[r3 + q]); c30 = vfma(a, b0, c30); c31 = vfma(a, b1, c31)
        a = vsplat(xf[r4 + q]); c40 = vfma(a, b0, c40); c41 = vfma(a, b1, c41)
        a = vsplat(xf[r5 + q]); c50 = vfma(a, b0, c50); c51 = vfma(a, b1, c51)
        a = vsplat(xf[r6 + q]); c60 = vfma(a, b0, c60); c61 = vfma(a, b1, c61)
        a = vsplat(xf[r7 + q]); c70 = vfma(a, b0, c70); c71 = vfma(a, b1, c71)
    vstore(cf, o0, c00); vstore(cf, o0 + L, c01)
    vstore(cf, o1, c10); vstore(cf, o1 + L, c11)
    vstore(cf, o2, c20); vstore(cf, o2 + L, c21)
    vstore(cf, o3, c30); vstore(cf, o3 + L, c31)
    vstore(cf, o4, c40); vstore(cf, o4 + L, c41)
    vstore(cf, o5, c50); vstore(cf, o5 + L, c51)
    vstore(cf, o6, c60); vstore(cf, o6 + L, c61)
    vstore(cf, o7, c70); vstore(cf, o7 + L, c71)


@jit(inline="always")
def _tile8x1(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode):
    """As :func:`_tile8x2` for one vector of columns ``c[i0:i0+8, j:j+L]``."""
    uj = np.uint64(j)
    ub = np.uint64(ldb)
    o0 = np.uint64(cb + i0 * ldc + j)
    dc = np.uint64(ldc)
    o1 = o0 + dc
    o2 = o1 + dc
    o3 = o2 + dc
    o4 = o3 + dc
    o5 = o4 + dc
    o6 = o5 + dc
    o7 = o6 + dc
    if mode == 2:
        c0 = vload(cf, o0); c1 = vload(cf, o1); c2 = vload(cf, o2); c3 = vload(cf, o3)
        c4 = vload(cf, o4); c5 = vload(cf, o5); c6 = vload(cf, o6); c7 = vload(cf, o7)
    else:
        z = vload(init, uj) if mode == 1 else vzero(cf)
        c0 = z; c1 = z; c2 = z; c3 = z; c4 = z; c5 = z; c6 = z; c7 = z
    r0 = np.uint64(ro[i0]); r1 = np.uint64(ro[i0 + 1]); r2 = np.uint64(ro[i0 + 2])
    r3 = np.uint64(ro[i0 + 3]); r4 = np.uint64(ro[i0 + 4]); r5 = np.uint64(ro[i0 + 5])
    r6 = np.uint64(ro[i0 + 6]); r7 = np.uint64(ro[i0 + 7])
    for s in range(s0, s1):
        q = np.uint64(so[s])
        b = vload(bf, np.uint64(s) * ub + uj)
        c0 = vfma(vsplat(xf[r0 + q]), b, c0)
        c1 = vfma(vsplat(xf[r1 + q]), b, c1)
        c2 = vfma(vsplat(xf[r2 + q]), b, c2)
        c3 = vfma(vsplat(xf[r3 + q]), b, c3)
        c4 = vfma(vsplat(xf[r4 + q]), b, c4)
        c5 = vfma(vsplat(xf[r5 + q]), b, c5)
        c6 = vfma(vsplat(xf[r6 + q]), b, c6)
        c7 = vfma(vsplat(xf[r7 + q]), b, c7)
    vstore(cf, o0, c0); vstore(cf, o1, c1); vstore(cf, o2, c2); vstore(cf, o3, c3)
    vstore(cf, o4, c4); vstore(cf, o5, c5); vstore(cf, o6, c6); vstore(cf, o7, c7)


@jit(inline="always")
def _tile6x4(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode):
    """As :func:`_tile8x2` for ``c[i0:i0+6, j:j+4L]`` (24 accumulators; per
    step four vector loads of ``b``, six broadcasts, 24 fused multiply-adds:
    fewer loads per multiply-add than 8 x 2, and each ``xp`` value is read
    once for four vectors of columns instead of twice)."""
    L = lanes(cf)
    uj = np.uint64(j)
    ub = np.uint64(ldb)
    o0 = np.uint64(cb + i0 * ldc + j)
    dc = np.uint64(ldc)
    o1 = o0 + dc
    o2 = o1 + dc
    o3 = o2 + dc
    o4 = o3 + dc
    o5 = o4 + dc
    L2 = L + L
    L3 = L2 + L
    if mode == 2:
        c00 = vload(cf, o0); c01 = vload(cf, o0 + L); c02 = vload(cf, o0 + L2); c03 = vload(cf, o0 + L3)
        c10 = vload(cf, o1); c11 = vload(cf, o1 + L); c12 = vload(cf, o1 + L2); c13 = vload(cf, o1 + L3)
        c20 = vload(cf, o2); c21 = vload(cf, o2 + L); c22 = vload(cf, o2 + L2); c23 = vload(cf, o2 + L3)
        c30 = vload(cf, o3); c31 = vload(cf, o3 + L); c32 = vload(cf, o3 + L2); c33 = vload(cf, o3 + L3)
        c40 = vload(cf, o4); c41 = vload(cf, o4 + L); c42 = vload(cf, o4 + L2); c43 = vload(cf, o4 + L3)
        c50 = vload(cf, o5); c51 = vload(cf, o5 + L); c52 = vload(cf, o5 + L2); c53 = vload(cf, o5 + L3)
    else:
        z0 = vload(init, uj) if mode == 1 else vzero(cf)
        z1 = vload(init, uj + L) if mode == 1 else z0
        z2 = vload(init, uj + L2) if mode == 1 else z0
        z3 = vload(init, uj + L3) if mode == 1 else z0
        c00 = z0; c01 = z1; c02 = z2; c03 = z3; c10 = z0; c11 = z1; c12 = z2; c13 = z3
        c20 = z0; c21 = z1; c22 = z2; c23 = z3; c30 = z0; c31 = z1; c32 = z2; c33 = z3
        c40 = z0; c41 = z1; c42 = z2; c43 = z3; c50 = z0; c51 = z1; c52 = z2; c53 = z3
    r0 = np.uint64(ro[i0]); r1 = np.uint64(ro[i0 + 1]); r2 = np.uint64(ro[i0 + 2])
    r3 = np.uint64(ro[i0 + 3]); r4 = np.uint64(ro[i0 + 4]); r5 = np.uint64(ro[i0 + 5])
    for s in range(s0, s1):
        q = np.uint64(so[s])
        bq = np.uint64(s) * ub + uj
        b0 = vload(bf, bq); b1 = vload(bf, bq + L); b2 = vload(bf, bq + L2); b3 = vload(bf, bq + L3)
        a = vsplat(xf[r0 + q])
        c00 = vfma(a, b0, c00); c01 = vfma(a, b1, c01); c02 = vfma(a, b2, c02); c03 = vfma(a, b3, c03)
        a = vsplat(xf[r1 + q])
        c10 = vfma(a, b0, c10); c11 = vfma(a, b1, c11); c12 = vfma(a, b2, c12); c13 = vfma(a, b3, c13)
        a = vsplat(xf[r2 + q])
        c20 = vfma(a, b0, c20); c21 = vfma(a, b1, c21); c22 = vfma(a, b2, c22); c23 = vfma(a, b3, c23)
        a = vsplat(xf[r3 + q])
        c30 = vfma(a, b0, c30); c31 = vfma(a, b1, c31); c32 = vfma(a, b2, c32); c33 = vfma(a, b3, c33)
        a = vsplat(xf[r4 + q])
        c40 = vfma(a, b0, c40); c41 = vfma(a, b1, c41); c42 = vfma(a, b2, c42); c43 = vfma(a, b3, c43)
        a = vsplat(xf[r5 + q])
        c50 = vfma(a, b0, c50); c51 = vfma(a, b1, c51); c52 = vfma(a, b2, c52); c53 = vfma(a, b3, c53)
    vstore(cf, o0, c00); vstore(cf, o0 + L, c01); vstore(cf, o0 + L2, c02); vstore(cf, o0 + L3, c03)
    vstore(cf, o1, c10); vstore(cf, o1 + L, c11); vstore(cf, o1 + L2, c12); vstore(cf, o1 + L3, c13)
    vstore(cf, o2, c20); vstore(cf, o2 + L, c21); vstore(cf, o2 + L2, c22); vstore(cf, o2 + L3, c23)
    vstore(cf, o3, c30); vstore(cf, o3 + L, c31); vstore(cf, o3 + L2, c32); vstore(cf, o3 + L3, c33)
    vstore(cf, o4, c40); vstore(cf, o4 + L, c41); vstore(cf, o4 + L2, c42); vstore(cf, o4 + L3, c43)
    vstore(cf, o5, c50); vstore(cf, o5 + L, c51); vstore(cf, o5 + L2, c52); vstore(cf, o5 + L3, c53)


@jit(inline="always")
def _rows(xf, ro, i0, i1, so, s0, s1, bf, N, cf, cb, init, mode):
    """Rows ``[i0, i1)`` (multiples of 8) of ``c``, every column, ``s`` in
    ``[s0, s1)``: 8 x 2-vector tiles, and 8 x 1 for a last odd vector."""
    L2 = 2 * lanes(cf)
    for i in range(i0, i1, 8):
        j = i0 - i0               # a run-time 0: a literal would be its own specialisation
        while j + L2 <= N:
            _tile8x2(xf, ro, i, so, s0, s1, bf, N, cf, cb, N, j, init, mode)
            j += L2
        if j < N:
            _tile8x1(xf, ro, i, so, s0, s1, bf, N, cf, cb, N, j, init, mode)


@jit(inline="always")
def _rows_wide(xf, ro, i0, i1, so, s0, s1, bf, N, cf, cb, init, mode):
    """As :func:`_rows` with 6 x 4-vector tiles: rows ``[i0, i1)`` in
    multiples of 6, ``N`` a multiple of four vectors (:func:`wide_tiles`)."""
    L4 = 4 * lanes(cf)
    for i in range(i0, i1, 6):
        j = i0 - i0
        while j < N:
            _tile6x4(xf, ro, i, so, s0, s1, bf, N, cf, cb, N, j, init, mode)
            j += L4


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
def _fill_rows(cf, cb, i0, i1, N, init):
    """Rows ``[i0, i1)`` of ``c`` (flat from ``cb``, N wide) set to
    ``init[:N]`` (the bias), one block of a tile's rows at a time (still in
    L1 when the tiles load it).

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
        for j in range(0, N, L):
            vstore(cf, o + np.uint64(j), vload(init, np.uint64(j)))


@jit
def _chunk_plan(ro, so, cf, bf, bounds, by_rows):
    """(M, S, chunks, N, sb, zero) of a :func:`direct_region` call: rows of
    ``c``, length of ``so``, chunks, columns, the weight gradient's block of
    ``s`` (:data:`S_BLOCK_BYTES` of ``b``) and a run-time 0 (see _rows)."""
    M = ro.shape[0]
    S = so.shape[0]
    zero = M - M
    nk = bounds.shape[0] - 1
    N = cf.shape[0] // M if by_rows else cf.shape[0] // (nk * M)
    sb = max(8, S_BLOCK_BYTES // (N * bf.itemsize))
    return M, S, nk, N, sb, zero


@jit
def _chunk(k, M, S, N, sb, zero, cf, init, mode, bsum, bounds, by_rows):
    """Chunk ``k``'s work: ``(i0, i1, s_lo, s_hi, cb, step, pre)``: its rows
    of ``c``, its ``s`` range (in blocks of ``step``), the offset of its
    output in ``cf``, and whether its rows start from the bias (written
    per block of rows by :func:`_fill_rows`); clears its bias-sum row."""
    if by_rows:   # rows of this chunk, every s in one block (at least one)
        i0, i1, s_lo, s_hi, cb, step = bounds[k], bounds[k + 1], zero, S, zero, max(S, 1)
    else:         # every row, this chunk's s in blocks, its own partial
        i0, i1, s_lo, s_hi, cb, step = zero, M, bounds[k], bounds[k + 1], k * M * N, sb
    pre = by_rows == 1 and mode == 1
    if bsum.shape[0] > 0:
        bsum[k, 0, :] = 0
    return i0, i1, s_lo, s_hi, cb, step, pre


@jit
def direct_region(xf, ro, so, bf, cf, init, mode, bsum, bounds, by_rows, st):
    """The product above on the 8-row tiles, by chunks ``k`` of a region.

    ``by_rows`` (the forward and the data gradient): ``c[i] = init + sum_s
    xp[ro[i] + so[s]] * b[s]``, ``c`` [len(ro), N] flat in ``cf``, chunk
    ``k`` the rows ``[bounds[k], bounds[k+1])`` (multiples of 8), ``mode``
    0 (from zero) or 1 (``init`` = the bias [N]).

    Else (the weight gradient): ``cf`` is flat [chunks, len(ro), N],
    ``cf[k] = sum_{s in chunk k} xp[ro[i] + so[s]] * b[s]`` for ``s`` in
    ``[bounds[k], bounds[k+1])``; each chunk goes through its ``s`` in
    blocks of :data:`S_BLOCK_BYTES` of ``b`` (all rows per block: the
    block's ``b`` rows stay in cache while every tile reads them); ``mode``
    0. ``bsum`` [chunks, 3, N] (or [0, 3, N]: not wanted) gets the column
    sums of ``b`` per chunk in row 0 (the bias gradient, while each block
    is in L1): each block is summed from zero in a register, then added to
    row 0, so the error grows with the block length plus the number of
    blocks, not with the chunk length. Rows 1 and 2 keep two chunks off one
    cache line.

    One kernel for both passes (the same arguments' types): the tiles are
    typed, lowered and compiled once per program, not once per pass."""
    M, S, nk, N, sb, zero = _chunk_plan(ro, so, cf, bf, bounds, by_rows)
    for k in region_chunks(st, nk):
        i0, i1, s_lo, s_hi, cb, step, pre = _chunk(k, M, S, N, sb, zero, cf, init, mode, bsum,
                                                   bounds, by_rows)
        rb = 8 if pre else max(i1 - i0, 1)
        for s0 in range(s_lo, max(s_hi, s_lo + by_rows), step):
            s1 = min(s0 + step, s_hi)
            for r in range(i0, i1, rb):
                if pre:
                    _fill_rows(cf, cb, r, r + rb, N, init)
                _rows(xf, ro, r, min(r + rb, i1), so, s0, s1, bf, N, cf, cb, init,
                      2 if s0 > s_lo or pre else 0)
            if bsum.shape[0] > 0:
                _bias_block(bf, s0, s1, N, bsum, k)


@jit
def direct_region_wide(xf, ro, so, bf, cf, init, mode, bsum, bounds, by_rows, st):
    """:func:`direct_region` on the 6 x 4-vector tiles (rows in multiples of
    6; :func:`wide_tiles`)."""
    M, S, nk, N, sb, zero = _chunk_plan(ro, so, cf, bf, bounds, by_rows)
    for k in region_chunks(st, nk):
        i0, i1, s_lo, s_hi, cb, step, pre = _chunk(k, M, S, N, sb, zero, cf, init, mode, bsum,
                                                   bounds, by_rows)
        rb = 6 if pre else max(i1 - i0, 1)
        for s0 in range(s_lo, max(s_hi, s_lo + by_rows), step):
            s1 = min(s0 + step, s_hi)
            for r in range(i0, i1, rb):
                if pre:
                    _fill_rows(cf, cb, r, r + rb, N, init)
                _rows_wide(xf, ro, r, min(r + rb, i1), so, s0, s1, bf, N, cf, cb, init,
                           2 if s0 > s_lo or pre else 0)
            if bsum.shape[0] > 0:
                _bias_block(bf, s0, s1, N, bsum, k)


@jit
def pad_region(xf, dims, pf, pdims, pads, bounds, st):
    """The zero-padded copy ``xp`` of ``x`` in one pass (every element of
    ``xp`` written once: the copy or a zero); a region kernel over chunks of
    ``xp``'s rows ``(n, z, y)``, ``[bounds[k], bounds[k+1])``.

    ``xf``/``pf`` flat; ``dims`` = (D, H, W, C) of x, ``pdims`` = (Dp, Hp,
    Wp) of xp, ``pads`` = the leading padding (pd, ph, pw); x sits at
    ``xp[:, pd:pd+D, ph:ph+H, pw:pw+W]``."""
    d_, h_, w_, c_ = dims[0], dims[1], dims[2], dims[3]
    dp, hp, wp = pdims[0], pdims[1], pdims[2]
    pd, ph, pw = pads[0], pads[1], pads[2]
    zero = pf.dtype.type(0)
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
                for i in range(left):
                    pf[o + i] = zero
                for i in range(run):
                    pf[o + left + i] = xf[src + i]
                for i in range(left + run, row):
                    pf[o + i] = zero
            else:
                for i in range(row):
                    pf[o + i] = zero
