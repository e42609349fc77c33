"""yscv.kernels.gemm against NumPy: every tile path (4-row and 1-row tiles,
full tiles, single vectors, the scalar column tail), both dtypes."""
from __future__ import annotations

import numpy as np
import pytest

from yscv.kernels import gemm
from yscv.kernels.gemm import TILE_VECS
from yscv.kernels.simd import VBYTES

L32 = VBYTES // 4  # float32 lanes
W32 = TILE_VECS * L32  # float32 columns of a full tile
# column counts hitting: only the scalar tail, one vector, vectors + tail,
# one full tile, tiles + vectors + tail
COLS = [3, L32, L32 + 5, W32, W32 + 2 * L32 + 7]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 3, 4, 7, 9])
@pytest.mark.parametrize("n", COLS)
def test_matmul_rows_all_rows(dtype, m, n):
    rng = np.random.default_rng(m * 100 + n)
    a = rng.standard_normal((m, 13)).astype(dtype)
    b = rng.standard_normal((13, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype)
    gemm.matmul_rows(a, b, c, 0, m)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=tol, atol=tol)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = c0.copy()
    gemm.matmul_add_rows(a, b, c, 0, m)
    np.testing.assert_allclose(c, c0 + a.astype(np.float64) @ b, rtol=tol, atol=tol)


def test_matmul_rows_touches_only_its_rows_and_splits_bit_identically():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((11, 40)).astype(np.float32)
    b = rng.standard_normal((40, W32 + 9)).astype(np.float32)
    whole = np.zeros((11, b.shape[1]), np.float32)
    gemm.matmul_rows(a, b, whole, 0, 11)
    parts = np.full_like(whole, -7.0)
    gemm.matmul_rows(a, b, parts, 2, 7)
    assert np.all(parts[:2] == -7.0) and np.all(parts[7:] == -7.0)
    gemm.matmul_rows(a, b, parts, 0, 2)
    gemm.matmul_rows(a, b, parts, 7, 11)
    assert np.array_equal(parts, whole)  # the order of a sum never depends on the split


def test_matmul_rows_empty_k_and_nan():
    a = np.zeros((4, 0), np.float32)
    b = np.zeros((0, 5), np.float32)
    c = np.ones((4, 5), np.float32)
    gemm.matmul_rows(a, b, c, 0, 4)
    assert np.all(c == 0)
    a = np.ones((4, 2), np.float64)
    a[2, 1] = np.nan
    b = np.ones((2, 2 * L32), np.float64)
    c = np.empty((4, 2 * L32))
    gemm.matmul_rows(a, b, c, 0, 4)
    assert np.all(np.isnan(c[2])) and np.all(c[[0, 1, 3]] == 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 4, 6])
@pytest.mark.parametrize("n", COLS)
@pytest.mark.parametrize("shift", [0, 1])
def test_matmul_tn_steps(dtype, m, n, shift):
    T, R = 5, 6
    rng = np.random.default_rng(m * 1000 + n * 10 + shift)
    a = rng.standard_normal((T, R, m)).astype(dtype)
    b = rng.standard_normal((T, R, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    t0, t1, i0, i1 = shift, T, 1, 5
    c = c0.copy()
    gemm.matmul_tn_steps(a, b, c, t0, t1, shift, i0, i1, 0, m)
    want = c0.astype(np.float64)
    for t in range(t0, t1):
        want = want + a[t - shift, i0:i1].astype(np.float64).T @ b[t, i0:i1]
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 70), (L32, L32), (2 * L32, 3 * L32),
                                   (2 * L32 + 3, L32 + 5), (128, 512), (512, 64)])
def test_transpose_into(dtype, shape):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    out = np.empty(shape[::-1], dtype)
    gemm.transpose_into(a, out)
    assert np.array_equal(out, a.T)


def test_matmul_tn_steps_row_ranges_and_one_step():
    """c[m0:m1] only, bit-identical to the whole product; one step = a^T b."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 300, 37)).astype(np.float32)
    b = rng.standard_normal((1, 300, W32 + 5)).astype(np.float32)
    whole = np.zeros((37, W32 + 5), np.float32)
    gemm.matmul_tn_steps(a, b, whole, 0, 1, 0, 0, 300, 0, 37)
    np.testing.assert_allclose(whole, a[0].astype(np.float64).T @ b[0], rtol=1e-4, atol=1e-4)
    parts = np.zeros_like(whole)
    for m0, m1 in ((0, 12), (12, 20), (20, 37)):
        gemm.matmul_tn_steps(a, b, parts, 0, 1, 0, 0, 300, m0, m1)
    assert np.array_equal(parts, whole)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalar_fma_rounds_once(dtype):
    """simd.fma: x*y + z rounded once (on a CPU with FMA), in a vectorised loop
    and on the tail; checked against exact rational arithmetic."""
    from fractions import Fraction

    from yscv.kernels import simd
    from yscv.kernels._jit import jit

    @jit
    def apply(x, y, z, out):
        for i in range(x.size):
            out[i] = simd.fma(x[i], y[i], z[i])

    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(203).astype(dtype) for _ in range(3))
    z = -(x * y)                    # cancellation: the fused result is the product's rounding error
    out = np.empty_like(x)
    apply(x, y, z, out)
    exact = [Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)) for a, b, c in zip(x, y, z)]
    if simd._HAS_FMA:
        # every exact result here is representable (the error of a rounded product)
        assert [Fraction(float(v)) for v in out] == exact
        assert np.count_nonzero(out) > 150
    else:
        np.testing.assert_array_equal(out, np.zeros_like(out))  # x*y rounded, then + z
