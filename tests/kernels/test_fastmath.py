"""The contract of yscv/kernels/fastmath.py, function by function, for float32
and float64, against libm / NumPy over wide ranges and the special values
(+-inf, NaN, signed zeros, subnormals, the overflow and underflow edges)."""
import math

import numba
import numpy as np
import pytest

from yscv.kernels.fastmath import (fast_erf, fast_exp, fast_log1p_unit, fast_sigmoid, fast_tanh,
                                   row_dot, row_max, row_sum)

F32, F64 = np.float32, np.float64
TINY32 = np.float32(2.0 ** -126)                   # smallest normal float32
SUB32 = np.float32(1e-45)                          # smallest subnormal float32


def _mapper(fn):
    @numba.njit(error_model="numpy")
    def apply(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
        return out
    return apply


_MAP = {f: _mapper(f) for f in (fast_exp, fast_tanh, fast_erf, fast_sigmoid, fast_log1p_unit)}


@numba.njit(error_model="numpy")
def _row_max(a, n):
    return row_max(a, n)


@numba.njit(error_model="numpy")
def _row_sum(a, n):
    return row_sum(a, n)


@numba.njit(error_model="numpy")
def _row_dot(a, b, n):
    return row_dot(a, b, n)


def run(fn, values, dtype):
    x = np.asarray(values, dtype=dtype)
    y = _MAP[fn](x)
    assert y.dtype == dtype
    return x, y


def specials(dtype):
    fi = np.finfo(dtype)
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.tiny, -fi.tiny,
                     fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max], dtype)


def wide(dtype, lo, hi, n=200_001):
    return np.concatenate([np.linspace(lo, hi, n), specials(dtype).astype(np.float64)]).astype(dtype)


def libm(fn, x):
    return np.array([fn(float(v)) for v in x], dtype=np.float64)


# ------------------------------------------------------------------- float64 = libm
@pytest.mark.parametrize("fn, ref", [(fast_exp, math.exp), (fast_tanh, math.tanh), (fast_erf, math.erf)])
def test_float64_is_libm(fn, ref):
    x = np.concatenate([np.linspace(-800, 800, 40_001), np.linspace(-5, 5, 40_001), specials(F64)])
    _, y = run(fn, x, F64)
    with np.errstate(over="ignore"):
        expect = np.array([ref(v) if not (ref is math.exp and v > 709.78) else math.inf for v in x])
    np.testing.assert_array_equal(y, expect)


def test_float64_log1p_unit_and_sigmoid():
    e = np.concatenate([np.linspace(0, 1, 10_001), [5e-324, 1e-300]])
    _, y = run(fast_log1p_unit, e, F64)
    np.testing.assert_array_equal(y, libm(math.log1p, e))
    x = np.concatenate([np.linspace(-800, 800, 40_001), specials(F64)])
    _, s = run(fast_sigmoid, x, F64)
    expect = []
    for v in x:
        ev = math.exp(-abs(v))
        r = 1.0 / (1.0 + ev)
        expect.append(r if v >= 0 else ev * r)
    np.testing.assert_array_equal(s, np.array(expect))
    assert s[np.isposinf(x)][0] == 1.0 and s[np.isneginf(x)][0] == 0.0


# ------------------------------------------------------------------------ float32 exp
def test_exp32_contract():
    x = wide(F32, -120, 120)
    _, y = run(fast_exp, x, F32)
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(F64))
    nan = np.isnan(x)
    assert np.isnan(y[nan]).all()
    under = x < F32(-87.33654)                      # below the smallest normal: exactly +0
    assert (y[under] == 0).all() and not np.signbit(y[under]).any()
    over = x >= F32(88.38)                          # 127.5 ln 2 and up: +inf
    assert np.isposinf(y[over]).all()
    assert np.isposinf(y[x > F32(88.72284)]).all()  # np.exp's overflow: inf too
    mid = ~nan & ~under & (x <= F32(88.37))
    rel = np.abs(y[mid].astype(F64) - ref[mid]) / ref[mid]
    assert rel.max() < 1.2e-7                       # < 1 ulp
    assert (y[mid] >= TINY32).all() and np.isfinite(y[mid]).all()


def test_exp32_exact_points():
    x, y = run(fast_exp, [0.0, -0.0, 1e-45, -1e-45, -np.inf, np.inf, np.nan], F32)
    assert y[0] == 1 and y[1] == 1 and y[2] == 1 and y[3] == 1
    assert y[4] == 0 and np.isposinf(y[5]) and np.isnan(y[6])


def test_exp32_underflow_edge():
    lo = F32(-87.33654)
    x = np.array([lo, np.nextafter(lo, F32(-np.inf)), np.nextafter(lo, F32(0))], F32)
    _, y = run(fast_exp, x, F32)
    assert y[1] == 0
    assert abs(float(y[0]) - math.exp(float(x[0]))) / math.exp(float(x[0])) < 1.8e-7
    assert y[2] >= TINY32


# ------------------------------------------------------------------ float32 tanh, erf
def test_tanh32_contract():
    x = wide(F32, -20, 20)
    _, y = run(fast_tanh, x, F32)
    ref = np.tanh(x.astype(F64))
    fin = np.isfinite(x)
    err = np.abs(y[fin].astype(F64) - ref[fin])
    assert err.max() <= 4.5e-7
    ulp = err / np.spacing(np.abs(ref[fin]).astype(F32)).astype(F64)
    assert ulp.max() <= 7
    assert np.isnan(y[np.isnan(x)]).all()
    assert (y[np.isposinf(x)] == 1).all() and (y[np.isneginf(x)] == -1).all()
    small = np.array([0.0, -0.0, SUB32, -SUB32, TINY32, 3e-4, -3e-4], F32)
    _, ys = run(fast_tanh, small, F32)
    np.testing.assert_array_equal(ys, small)        # |x| < 4e-4: x itself, sign of zero kept
    assert np.signbit(ys[1])
    big = np.array([8.0, 1e30, -8.0, -1e30], F32)
    np.testing.assert_array_equal(run(fast_tanh, big, F32)[1], [1, 1, -1, -1])


def test_erf32_contract():
    x = wide(F32, -10, 10)
    _, y = run(fast_erf, x, F32)
    fin = np.isfinite(x)
    ref = libm(math.erf, x[fin])
    assert np.abs(y[fin].astype(F64) - ref).max() <= 5e-7
    assert np.isnan(y[np.isnan(x)]).all()
    assert (y[np.isposinf(x)] == 1).all() and (y[np.isneginf(x)] == -1).all()
    assert (np.abs(y[fin]) <= 1 + 2.5e-7).all()     # up to 2 ulp above 1 just inside +-4
    z = run(fast_erf, [0.0, -0.0], F32)[1]
    assert z[0] == 0 and z[1] == 0 and np.signbit(z[1])


# ----------------------------------------------------------- float32 sigmoid, log1p
def test_sigmoid32_contract():
    x = wide(F32, -120, 120)
    _, y = run(fast_sigmoid, x, F32)
    xf = x.astype(F64)
    with np.errstate(over="ignore"):
        ref = 1.0 / (1.0 + np.exp(-xf))
    fin = np.isfinite(x)
    assert np.abs(y[fin].astype(F64) - ref[fin]).max() <= 1.2e-7
    normal = fin & (ref > 1e-37)                    # relative accuracy where the result is normal
    assert (np.abs(y[normal].astype(F64) - ref[normal]) / ref[normal]).max() < 3e-7
    assert (y[fin] >= 0).all() and (y[fin] <= 1).all()
    assert np.isnan(y[np.isnan(x)]).all()
    assert (y[np.isposinf(x)] == 1).all() and (y[np.isneginf(x)] == 0).all()
    assert (y[x < F32(-87.34)] == 0).all()          # exp(-|x|) below 2**-126 is 0
    assert run(fast_sigmoid, [0.0], F32)[1][0] == 0.5


def test_log1p_unit32():
    e = np.concatenate([np.linspace(0, 1, 100_001), [TINY32, 1e-30]]).astype(F32)
    _, y = run(fast_log1p_unit, e, F32)
    ref = libm(math.log1p, e)
    pos = e > 0
    assert (np.abs(y[pos].astype(F64) - ref[pos]) / ref[pos]).max() < 2.5e-7
    assert y[~pos][0] == 0
    sub = run(fast_log1p_unit, [SUB32, 4 * SUB32], F32)[1]   # subnormal e: absolute accuracy only
    assert np.abs(sub.astype(F64) - [SUB32, 4 * SUB32]).max() <= float(SUB32)
    assert np.isnan(run(fast_log1p_unit, [np.nan], F32)[1]).all()


# ----------------------------------------------------------------- row reductions
def _lane_sum(vals):
    """The documented order: lane j % 8, the tail to lane 0, then the tree."""
    n = len(vals)
    s = [vals.dtype.type(0)] * 8
    full = n - n % 8
    for j in range(full):
        s[j % 8] = s[j % 8] + vals[j]
    for j in range(full, n):
        s[0] = s[0] + vals[j]
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 16, 23, 100])
def test_row_sum_dot_order(dtype, n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n + 5).astype(dtype) * dtype(1e3)
    b = rng.standard_normal(n + 5).astype(dtype)
    s = _row_sum(a, n)
    assert dtype(s) == _lane_sum(a[:n])
    d = _row_dot(a, b, n)
    assert dtype(d) == _lane_sum((a * b)[:n])
    assert abs(float(s) - math.fsum(map(float, a[:n]))) <= 1e-4 * max(1.0, np.abs(a[:n]).sum())


@pytest.mark.parametrize("dtype", [F32, F64])
def test_row_sum_propagates_nan_inf(dtype):
    a = np.ones(19, dtype)
    a[11] = np.inf
    assert np.isposinf(_row_sum(a, 19))
    a[3] = -np.inf
    assert np.isnan(_row_sum(a, 19))
    a[:] = 1
    a[17] = np.nan
    assert np.isnan(_row_sum(a, 19)) and _row_sum(a, 17) == 17
    assert np.isnan(_row_dot(a, np.ones(19, dtype), 19))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_row_max_ignores_nan(dtype):
    rng = np.random.default_rng(0)
    for n in (1, 5, 8, 9, 17, 64, 65):
        a = rng.standard_normal(n).astype(dtype)
        assert _row_max(a, n) == a.max()
        a[rng.integers(n)] = np.nan
        if n > 1:
            assert _row_max(a, n) == np.nanmax(a)
        a[0] = np.nan
        a[-1] = dtype(7)
        assert _row_max(a, n) == 7
    a = np.full(13, np.nan, dtype)
    assert np.isneginf(_row_max(a, 13))                     # every value NaN: -inf
    assert np.isneginf(_row_max(a, 0))                      # empty: -inf
    a = np.array([-np.inf, np.nan, -np.inf], dtype)
    assert np.isneginf(_row_max(a, 3))
    a = np.array([1, np.inf, np.nan, 2, 3, 4, 5, 6, 7], dtype)
    assert np.isposinf(_row_max(a, 9))
    a = np.array([5, 1, 9, 2], dtype)
    assert _row_max(a, 2) == 5                              # only a[:n]
