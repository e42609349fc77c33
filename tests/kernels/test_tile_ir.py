"""yscv.kernels.tile_ir: the register tiles emitted as LLVM IR, bit for bit
against an explicitly ordered loop of simd fused multiply-adds (one
accumulator at a time, in memory) and against a NumPy float64 sum; every
start mode (0 zero, 1 bias row, 2 accumulate on c), both dtypes, the three
tile shapes of the direct convolution, and the row sweeps the callers run
(column counts of 1, 2, 3, 4, 5 and 8 vectors), and the choice between
the 8-row and 6-row tiles."""
from __future__ import annotations

import numba
import numpy as np
import pytest

from yscv.kernels.conv_direct import _rows, _tile6x4, _tile8x1, _tile8x2, _wide, wide_tiles
from yscv.kernels.simd import VBYTES, lanes, vfma, vload, vsplat, vstore, vzero

SHAPES = {(8, 2): _tile8x2, (8, 1): _tile8x1, (6, 4): _tile6x4}


def _caller(tile):
    @numba.njit(error_model="numpy")
    def call(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode):
        tile(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode)
    return call


CALL = {shape: _caller(t) for shape, t in SHAPES.items()}


@numba.njit(error_model="numpy")
def _ordered(R, V, xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode):
    """The tile's sums one accumulator at a time: start value, then one
    fused multiply-add per ``s`` in order, then the store."""
    L = lanes(cf)
    for r in range(R):
        for v in range(V):
            o = cb + (i0 + r) * ldc + j + v * L
            if mode == 2:
                acc = vload(cf, o)
            elif mode == 1:
                acc = vload(init, j + v * L)
            else:
                acc = vzero(cf)
            for s in range(s0, s1):
                acc = vfma(vsplat(xf[ro[i0 + r] + so[s]]), vload(bf, s * ldb + j + v * L), acc)
            vstore(cf, o, acc)


@numba.njit(error_model="numpy")
def _sweep(xf, ro, i0, i1, so, s0, s1, bf, N, cf, cb, init, mode, j0, j1):
    _rows(xf, ro, i0, i1, so, s0, s1, bf, N, cf, cb, init, mode, j0, j1)


def _problem(rng, dtype, rows, S, N, ldc, c_rows):
    xf = rng.standard_normal(997).astype(dtype)
    ro = rng.integers(0, 500, rows).astype(np.int64)
    so = rng.integers(0, 497, S).astype(np.int64)
    bf = rng.standard_normal(S * N).astype(dtype)
    cf = rng.standard_normal(c_rows * ldc + 3 * N).astype(dtype)
    init = rng.standard_normal(N).astype(dtype)
    return xf, ro, so, bf, cf, init


def _float64_sum(xf, ro, i0, R, so, s0, s1, bf, ldb, j, width, start):
    x = xf.astype(np.float64)[ro[i0:i0 + R, None] + so[None, s0:s1]]        # [R, S]
    b = bf.astype(np.float64).reshape(-1, ldb)[s0:s1, j:j + width]           # [S, width]
    return start + x @ b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("steps", [(3, 40), (5, 5), (0, 1)])
def test_tile_same_bits_as_ordered_fma_loop(dtype, shape, mode, steps):
    R, V = shape
    L = VBYTES // np.dtype(dtype).itemsize
    rng = np.random.default_rng(R * 100 + V * 10 + mode)
    N = (V + 2) * L                       # b's rows wider than the tile
    ldc, cb, i0, j = N + L, 2 * N + L, 3, L  # c's rows wider still, offset, not at 0
    xf, ro, so, bf, cf, init = _problem(rng, dtype, i0 + R + 2, 40, N, ldc, i0 + R + 5)
    s0, s1 = steps
    args = (xf, ro, i0, so, s0, s1, bf, N, cf, cb, ldc, j, init, mode)
    got = cf.copy()
    CALL[shape](*args[:8], got, *args[9:])
    want = cf.copy()
    _ordered(R, V, *args[:8], want, *args[9:])
    assert got.tobytes() == want.tobytes()      # the same bits (and nothing else written)
    block = np.s_[i0:i0 + R, j:j + V * L]
    before = cf[cb:cb + (i0 + R + 1) * ldc].reshape(-1, ldc)
    after = got[cb:cb + (i0 + R + 1) * ldc].reshape(-1, ldc)
    start = {0: 0.0, 1: init[j:j + V * L].astype(np.float64), 2: before[block]}[mode]
    ref = _float64_sum(xf, ro, i0, R, so, s0, s1, bf, N, j, V * L, start)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(after[block], ref, rtol=tol, atol=tol)
    after[block] = before[block]
    assert np.array_equal(after, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wide,vecs", [(False, 1), (False, 2), (False, 3), (False, 5),
                                       (True, 4), (True, 8)])
@pytest.mark.parametrize("mode", [0, 2])
def test_row_sweeps_same_bits_as_ordered_fma_loop(dtype, wide, vecs, mode):
    R = 6 if wide else 8
    L = VBYTES // np.dtype(dtype).itemsize
    if wide and VBYTES != 64:
        pytest.skip("the 6 x 4-vector tiles run with AVX-512 only")
    rng = np.random.default_rng(vecs * 10 + mode)
    N, rows, cb = vecs * L, 3 * R, 5
    assert wide_tiles(N, np.dtype(dtype).itemsize) == wide     # the family _rows runs
    xf, ro, so, bf, cf, init = _problem(rng, dtype, rows, 29, N, N, rows)
    got = cf.copy()
    _sweep(xf, ro, R, rows, so, 2, 29, bf, N, got, cb, init, mode, 0, N)
    want = cf.copy()
    j = 0
    while j < N:                       # the tiles' column split: 2 (or 4) vectors, then 1
        V = 4 if wide else (2 if j + 2 * L <= N else 1)
        for i in range(R, rows, R):
            _ordered(R, V, xf, ro, i, so, 2, 29, bf, N, want, cb, N, j, init, mode)
        j += V * L
    assert got.tobytes() == want.tobytes()
    c = got[cb:cb + rows * N].reshape(rows, N)
    start = cf[cb:cb + rows * N].reshape(rows, N)[R:] if mode == 2 else 0.0
    ref = _float64_sum(xf, ro, R, rows - R, so, 2, 29, bf, N, 0, N, start)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(c[R:], ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wide,vecs,cols", [(False, 5, (2, 5)), (False, 6, (0, 2)),
                                            (True, 8, (4, 8)), (True, 12, (4, 8))])
def test_row_sweep_of_a_column_range(dtype, wide, vecs, cols):
    """Columns ``[j0, j1)`` only (the column split of conv_direct's
    ``direct_columns``): those columns get the bits of the whole sweep, every
    other element is left as it was."""
    R = 6 if wide else 8
    L = VBYTES // np.dtype(dtype).itemsize
    if wide and VBYTES != 64:
        pytest.skip("the 6 x 4-vector tiles run with AVX-512 only")
    rng = np.random.default_rng(vecs * 7 + cols[0])
    N, rows, cb = vecs * L, 2 * R, 3
    assert wide_tiles(N, np.dtype(dtype).itemsize) == wide
    xf, ro, so, bf, cf, init = _problem(rng, dtype, rows, 21, N, N, rows)
    whole = cf.copy()
    _sweep(xf, ro, 0, rows, so, 1, 21, bf, N, whole, cb, init, 2, 0, N)
    part = cf.copy()
    j0, j1 = cols[0] * L, cols[1] * L
    _sweep(xf, ro, 0, rows, so, 1, 21, bf, N, part, cb, init, 2, j0, j1)
    c_whole = whole[cb:cb + rows * N].reshape(rows, N)
    c_part = part[cb:cb + rows * N].reshape(rows, N)
    c0 = cf[cb:cb + rows * N].reshape(rows, N)
    assert c_part[:, j0:j1].tobytes() == c_whole[:, j0:j1].tobytes()
    assert np.array_equal(c_part[:, :j0], c0[:, :j0])
    assert np.array_equal(c_part[:, j1:], c0[:, j1:])
    assert np.array_equal(part[:cb], cf[:cb]) and np.array_equal(part[cb + rows * N:],
                                                                 cf[cb + rows * N:])


def test_tile_rejects_bad_arguments():
    rng = np.random.default_rng(0)
    xf, ro, so, bf, cf, init = _problem(rng, np.float32, 16, 8, 32, 32, 16)
    call = CALL[(8, 1)]
    with pytest.raises(numba.core.errors.TypingError):   # int32 offset table
        call(xf, ro.astype(np.int32), 0, so, 0, 8, bf, 32, cf, 0, 32, 0, init, 0)
    with pytest.raises(numba.core.errors.TypingError):   # mixed float dtypes
        call(xf.astype(np.float64), ro, 0, so, 0, 8, bf, 32, cf, 0, 32, 0, init, 0)
    with pytest.raises(numba.core.errors.TypingError):   # a float where an offset goes
        call(xf, ro, 0.0, so, 0, 8, bf, 32, cf, 0, 32, 0, init, 0)


@numba.njit(error_model="numpy")
def _wide_in_kernel(N, cf):
    return _wide(N, cf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_pick_the_tiles_the_callers_pad_for(dtype):
    """The region kernels' choice of tiles (compiled) is wide_tiles' (Python),
    by which the callers pad the rows to 6 or 8."""
    L = VBYTES // np.dtype(dtype).itemsize
    cf = np.zeros(1, dtype)
    for N in (L, 2 * L, 3 * L, 4 * L, 5 * L, 8 * L, 12 * L):
        assert _wide_in_kernel(N, cf) == wide_tiles(N, np.dtype(dtype).itemsize)
    assert _wide_in_kernel(4 * L, cf) == (VBYTES == 64)
