"""nn.init: trunc_normal_ (bounds, moments, CDF, PyTorch's semantics),
orthogonal_ (W W^T = gain^2 I, shapes, PyTorch's split), constant_/zeros_/ones_,
reproducibility under yscv.manual_seed, bad arguments."""
from __future__ import annotations

import math

import numpy as np
import pytest

import yscv
from yscv.nn import Parameter, init


def _phi(z):
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _truncated_moments(mean, std, a, b):
    al, be = (a - mean) / std, (b - mean) / std
    if al > 0:  # mirror for precision, like the implementation under test
        m, v = _truncated_moments(-mean, std, -b, -a)
        return -m, v
    Z = _cdf(be) - _cdf(al)
    d = (_phi(al) - _phi(be)) / Z
    tail = al * _phi(al) - (be * _phi(be) if math.isfinite(be) else 0.0)
    var = std * std * (1 + tail / Z - d * d)
    return mean + std * d, var


def _ks_truncated(x, mean, std, a, b):
    """Kolmogorov-Smirnov distance of the sample to the truncated normal CDF."""
    x = np.sort(x)
    al, be = (a - mean) / std, (b - mean) / std
    lo, hi = _cdf(al), _cdf(be)
    cdf = np.frompyfunc(lambda v: (_cdf((v - mean) / std) - lo) / (hi - lo), 1, 1)(x)
    cdf = cdf.astype(np.float64)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))


CASES = [
    (0.0, 1.0, -2.0, 2.0),        # PyTorch's defaults
    (1.0, 2.0, 0.0, 3.0),         # asymmetric around the mean
    (0.0, 0.02, -0.04, 0.04),     # the ViT-style init: std 0.02, bounds at 2 std
    (0.0, 1.0, 3.0, 6.0),         # upper tail only (mirrored path)
    (0.0, 1.0, -9.0, -7.0),       # far lower tail
    (5.0, 1.0, -1.0, 20.0),       # mean inside, one bound far away
]


@pytest.mark.parametrize("mean,std,a,b", CASES)
def test_trunc_normal_bounds_moments_and_distribution(mean, std, a, b):
    yscv.manual_seed(0)
    n = 100_000
    x = init.trunc_normal_(np.empty(n), mean, std, a, b)
    assert np.all((x >= a) & (x <= b))
    m, v = _truncated_moments(mean, std, a, b)
    se = math.sqrt(v / n)
    assert abs(x.mean() - m) < 5 * se, (x.mean(), m)
    assert abs(x.var() - v) < 0.03 * v, (x.var(), v)
    assert _ks_truncated(x[:20_000], mean, std, a, b) < 1.63 / math.sqrt(20_000)  # 1% level


def test_trunc_normal_is_reproducible_and_in_place():
    p = Parameter(np.zeros((40, 30), np.float32))
    data = p.data
    yscv.manual_seed(11)
    out = init.trunc_normal_(p, std=0.5, a=-0.3, b=0.4)
    assert out is p and p.data is data and p.data.dtype == np.float32
    yscv.manual_seed(11)
    again = init.trunc_normal_(np.empty((40, 30)), std=0.5, a=-0.3, b=0.4)
    np.testing.assert_allclose(p.data, again, rtol=1e-6)   # float32 = float64 draws, rounded
    assert p.data.min() >= np.float32(-0.3) and p.data.max() <= np.float32(0.4)
    assert len(np.unique(p.data)) > 1000


def test_trunc_normal_bounds_are_absolute_like_torch():
    """a, b are absolute values (not multiples of std), as in PyTorch: both
    libraries' samples lie in [a, b] and follow the same distribution
    (two-sample KS test at the 0.1% level: a bound read as a multiple of
    std, or a different shape, moves the distance far past it)."""
    torch = pytest.importorskip("torch")
    for mean, std, a, b in [(10.0, 3.0, 9.0, 11.0), (0.0, 1.0, -0.5, 2.5), (0.0, 0.02, -2, 2)]:
        torch.manual_seed(0)
        theirs = torch.nn.init.trunc_normal_(torch.empty(20_000, dtype=torch.float64), mean, std,
                                             a, b).numpy()
        yscv.manual_seed(0)
        ours = init.trunc_normal_(np.empty(20_000), mean, std, a, b)
        for x in (ours, theirs):
            assert x.min() >= a and x.max() <= b
        both = np.sort(np.concatenate([ours, theirs]))
        d = np.max(np.abs(np.searchsorted(np.sort(ours), both, "right") / 20_000
                          - np.searchsorted(np.sort(theirs), both, "right") / 20_000))
        assert d < 1.95 * math.sqrt(2 / 20_000), (mean, std, a, b, d)   # 0.1% level


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (2, 3, 4), (6, 2, 2), (1, 7), (8, 1)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal_rows_or_columns_orthonormal(shape, gain):
    yscv.manual_seed(1)
    w = init.orthogonal_(np.empty(shape), gain=gain)
    assert w.shape == shape
    m = w.reshape(shape[0], -1)
    rows, cols = m.shape
    gram = m @ m.T if rows <= cols else m.T @ m
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(min(rows, cols)), atol=1e-12)


def test_orthogonal_float32_parameter_reproducible_and_unbiased():
    p = Parameter(np.zeros((16, 16), np.float32))
    yscv.manual_seed(2)
    assert init.orthogonal_(p) is p
    np.testing.assert_allclose(p.data @ p.data.T, np.eye(16), atol=1e-5)
    yscv.manual_seed(2)
    np.testing.assert_allclose(init.orthogonal_(np.empty((16, 16))), p.data, rtol=1e-6, atol=1e-7)
    # a random orthogonal matrix (R's signs folded in): entries are centred, variance 1/n
    draws = np.array([init.orthogonal_(np.empty((4, 4))) for _ in range(2000)])
    assert abs(draws[:, 0, 0].mean()) < 5 * math.sqrt(0.25 / 2000)
    assert abs(draws.var() - 0.25) < 0.01


def test_orthogonal_matches_torch_semantics():
    """Same split as PyTorch (axis 0 vs the rest) and the same Gram matrices."""
    torch = pytest.importorskip("torch")
    for shape in [(3, 2, 4), (10, 2, 2), (5, 5)]:
        t = torch.nn.init.orthogonal_(torch.empty(shape, dtype=torch.float64), gain=3.0)
        tm = t.reshape(shape[0], -1).numpy()
        yscv.manual_seed(0)
        m = init.orthogonal_(np.empty(shape), gain=3.0).reshape(shape[0], -1)
        for x in (tm, m):
            gram = x @ x.T if x.shape[0] <= x.shape[1] else x.T @ x
            np.testing.assert_allclose(gram, 9.0 * np.eye(min(x.shape)), atol=1e-12)
        # both: the [rows, rows] Gram W W^T has min(rows, cols) eigenvalues gain^2, rest 0
        for x in (tm, m):
            ev = np.sort(np.linalg.eigvalsh(x @ x.T))[::-1]
            k = min(x.shape)
            np.testing.assert_allclose(ev[:k], 9.0, atol=1e-10)
            np.testing.assert_allclose(ev[k:], 0.0, atol=1e-10)


def test_orthogonal_bad_arguments_and_empty():
    with pytest.raises(ValueError, match=r"orthogonal_: only arrays with 2 or more dim.*\(5,\)"):
        init.orthogonal_(np.empty(5))
    with pytest.raises(TypeError, match="orthogonal_: gain must be a finite real number"):
        init.orthogonal_(np.empty((2, 2)), gain="x")
    empty = np.empty((0, 3))
    assert init.orthogonal_(empty) is empty


def test_trunc_normal_bad_arguments():
    with pytest.raises(ValueError, match="trunc_normal_: std must be > 0, got 0.0"):
        init.trunc_normal_(np.empty(3), std=0.0)
    with pytest.raises(ValueError, match="a < b"):
        init.trunc_normal_(np.empty(3), a=1.0, b=1.0)
    with pytest.raises(TypeError, match="trunc_normal_: mean must be a finite real number"):
        init.trunc_normal_(np.empty(3), mean="0")
    with pytest.raises(TypeError, match="trunc_normal_: b must be a finite real number"):
        init.trunc_normal_(np.empty(3), b=float("inf"))
    with pytest.raises(TypeError, match="trunc_normal_: expected an ndarray or Parameter, got"):
        init.trunc_normal_([0.0, 1.0])
    with pytest.raises(TypeError, match="floating-point array, got dtype int64"):
        init.trunc_normal_(np.zeros(3, np.int64))


def test_constant_zeros_ones_match_torch():
    torch = pytest.importorskip("torch")
    for fn, args in [("constant_", (0.3,)), ("constant_", (-2,)), ("zeros_", ()), ("ones_", ())]:
        for dtype, tdtype in [(np.float32, torch.float32), (np.float64, torch.float64)]:
            ours = Parameter(np.full((3, 4), 7.0), dtype=dtype)
            assert getattr(init, fn)(ours, *args) is ours
            theirs = getattr(torch.nn.init, fn)(torch.full((3, 4), 7.0, dtype=tdtype), *args)
            assert ours.data.dtype == dtype
            np.testing.assert_array_equal(ours.data, theirs.numpy())
            arr = np.full((2, 2), 7.0, dtype)
            assert getattr(init, fn)(arr, *args) is arr
            np.testing.assert_array_equal(arr, theirs.numpy()[:2, :2])


def test_constant_zeros_ones_bad_arguments():
    with pytest.raises(TypeError, match="constant_: val must be a real number, got 'x'"):
        init.constant_(np.empty(2), "x")
    with pytest.raises(TypeError, match="zeros_: expected an ndarray or Parameter"):
        init.zeros_(3.0)
    with pytest.raises(TypeError, match="ones_: expected a floating-point array"):
        init.ones_(np.zeros(2, np.int32))
