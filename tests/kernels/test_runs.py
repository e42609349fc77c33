"""yscv.kernels.simd.copy_run / zero_run: a run of elements copied or
zeroed inside a kernel with one ``llvm.memcpy`` / ``llvm.memset`` (what
pad_region and the normalisation statistics use instead of loops): the
elements of the run and no others, any offsets and lengths (n <= 0 is
nothing), zeros with a clear sign bit, both float dtypes and integers, and
the argument checks at typing time."""
from __future__ import annotations

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

from yscv.kernels.simd import copy_run, zero_run


@numba.njit(error_model="numpy")
def _copy(dst, i, src, j, n):
    copy_run(dst, i, src, j, n)


@numba.njit(error_model="numpy")
def _zero(a, i, n):
    zero_run(a, i, n)


@numba.njit(error_model="numpy")
def _copy_u64(dst, i, src, j, n):       # the unsigned offsets pad_region passes
    copy_run(dst, np.uint64(i), src, np.uint64(j), np.uint64(n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int16])
@pytest.mark.parametrize("i, j, n", [(0, 0, 17), (5, 3, 1), (40, 0, 23), (7, 9, 0), (3, 2, -4)])
def test_copy_run_copies_the_run_and_nothing_else(dtype, i, j, n):
    rng = np.random.default_rng(0)
    src = (rng.standard_normal(70) * 100).astype(dtype)
    dst = (rng.standard_normal(70) * 100).astype(dtype)
    want = dst.copy()
    if n > 0:
        want[i:i + n] = src[j:j + n]
    _copy(dst, i, src, j, n)
    assert dst.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("i, n", [(0, 64), (13, 1), (31, 33), (9, 0), (4, -2)])
def test_zero_run_zeroes_the_run_and_nothing_else(dtype, i, n):
    a = np.arange(1, 65).astype(dtype)
    want = a.copy()
    if n > 0:
        want[i:i + n] = 0
    _zero(a, i, n)
    assert a.tobytes() == want.tobytes()


def test_zero_run_writes_positive_zero_and_copy_run_keeps_every_bit():
    a = np.array([-0.0, -1.5, np.nan, -np.inf, 2.0], np.float32)
    _zero(a, 0, 4)
    assert a.view(np.uint32).tolist()[:4] == [0, 0, 0, 0] and a[4] == 2.0
    src = np.array([-0.0, np.nan, -np.inf, 1e-45], np.float32)
    src.view(np.uint32)[1] = 0x7FC12345                     # a NaN payload
    dst = np.ones(6, np.float32)
    _copy_u64(dst, 1, src, 0, 4)
    assert dst[1:5].tobytes() == src.tobytes() and dst[0] == dst[5] == 1.0


def test_2d_arrays_are_addressed_flat():
    a = np.ones((3, 4), np.float64)
    b = np.arange(12, dtype=np.float64).reshape(3, 4)
    _copy(a, 3, b, 6, 4)                    # a.flat[3:7] = b.flat[6:10]
    assert a.ravel().tolist() == [1, 1, 1, 6, 7, 8, 9, 1, 1, 1, 1, 1]
    _zero(a, 10, 2)
    assert a.ravel()[10:].tolist() == [0, 0]


def test_bad_arguments_do_not_type():
    f32, f64 = np.zeros(4, np.float32), np.zeros(4, np.float64)
    with pytest.raises(TypingError):
        _copy(f32, 0, f64, 0, 2)            # dtypes differ
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypingError):
        _zero(ro, 0, 2)                     # read-only destination
    with pytest.raises(TypingError):
        _copy(ro, 0, f32, 0, 2)
    with pytest.raises(TypingError):
        _zero(np.zeros((4, 4), np.float32)[:, 1], 0, 2)   # not C-contiguous
    with pytest.raises(TypingError):
        _zero(f32, 0.5, 2)                  # a float offset
