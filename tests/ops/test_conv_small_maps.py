"""Convolutions on small maps with many channels (ResNet's last stages):
the forward's column split, the weight gradient's row split and the data
gradient by ``g @ W.T`` (yscv/compute/conv_direct.py, yscv/compute/conv.py),
against float64 NumPy references, the paths they replace (same bits where
the summation order is the same) and one thread against two."""
import numpy as np
import pytest

import yscv
from yscv.compute import conv as C
from yscv.compute import conv_direct as D
from yscv.testing import check_same_bits_on_threads


def _ref(x, w, b, stride, pad, cot):
    """(y, dx, dw, db) of the channel-last 2-d correlation, float64, tap by tap."""
    x, w, cot = (a.astype(np.float64) for a in (x, w, cot))
    n, h, wd, _ = x.shape
    kh, kw, _, cout = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oh, ow, cout))
    dxp = np.zeros_like(xp)
    dw = np.zeros(w.shape)
    for a in range(kh):
        for c in range(kw):
            win = np.s_[:, a:a + stride * oh:stride, c:c + stride * ow:stride, :]
            y += xp[win] @ w[a, c]
            dxp[win] += cot @ w[a, c].T
            dw[a, c] = np.einsum("nyxi,nyxo->io", xp[win], cot)
    if b is not None:
        y += b
    dx = dxp[:, pad:pad + h, pad:pad + wd]
    return y, dx, dw, cot.sum(axis=(0, 1, 2))


# (batch, side, cin, cout, kernel, stride, bias)
SHAPES = [(8, 2, 128, 128, 3, 1, False),     # all three new paths, several chunks
          (2, 4, 64, 128, 3, 2, True),       # stride 2 with bias: the row split's bias start
          (3, 3, 96, 80, 3, 1, True),        # 80 columns: an odd last vector in a column chunk
          (2, 4, 128, 256, 1, 2, False)]     # the 1x1 stride-2 downsample


def _arrays(shape, dtype, seed=0):
    n, side, cin, cout, k, _, bias = shape
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, side, side, cin)).astype(dtype)
    w = (rng.standard_normal((k, k, cin, cout)) / np.sqrt(k * k * cin)).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype) if bias else None
    return x, w, b


def _run(shape, dtype, x, w, b):
    stride, pad = shape[5], shape[4] // 2
    g = yscv.Graph(dtype)
    xn, wn = g.variable(x), g.variable(w)
    bn = None if b is None else g.variable(b)
    y = g.conv2d(xn, wn, bn, stride=stride, padding=pad)
    cot = np.random.default_rng(7).standard_normal(g.value(y).shape).astype(dtype)
    g.backward(y, grad=cot)
    out = [g.value(y), g.grad(xn), g.grad(wn)] + ([] if b is None else [g.grad(bn)])
    return out, cot


def test_small_map_bias_gradient_is_the_sum_of_g_without_partials():
    """On a small map the direct dW pass splits dW's rows (no partials) and
    leaves the bias gradient to `conv.bias_grad` (an imported conv with a
    folded batch norm has a bias: it took the partials path, 4x slower)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 1, 2, 2, 256)).astype(np.float32)
    w = rng.standard_normal((1, 3, 3, 256, 256)).astype(np.float32)
    g = rng.standard_normal((8, 1, 2, 2, 256)).astype(np.float32)
    dw, db = D.weight_grad(x, g, w.shape, (1, 1, 1), (0, 1, 1), (1, 1, 1), True)
    assert db is None
    dw0, _ = D.weight_grad(x, g, w.shape, (1, 1, 1), (0, 1, 1), (1, 1, 1), False)
    np.testing.assert_array_equal(dw, dw0)
    _, dw1, db1 = C.conv_backward(g, w, (1, 1, 1), (0, 1, 1), (1, 1, 1), 1, x=x,
                                  need_x=False, need_w=True, need_b=True)
    np.testing.assert_array_equal(dw1, dw0)
    np.testing.assert_array_equal(db1, C.bias_grad(g))
    np.testing.assert_allclose(db1, g.astype(np.float64).sum(axis=(0, 1, 2, 3)), rtol=1e-5,
                               atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_small_map_conv_matches_float64_reference(shape, dtype):
    x, w, b = _arrays(shape, dtype)
    got, cot = _run(shape, dtype, x, w, b)
    want = _ref(x, w, b, shape[5], shape[4] // 2, cot)
    tol = 2e-4 if dtype == np.float32 else 1e-11
    for i, (a, r) in enumerate(zip(got, want)):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol, err_msg=f"output {i}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_small_map_conv_same_bits_on_one_thread_and_two(shape, dtype):
    x, w, b = _arrays(shape, dtype, seed=3)
    check_same_bits_on_threads(lambda: _run(shape, dtype, x, w, b)[0])


def test_small_maps_take_the_new_paths():
    """The gates pick the column split, the row split and ``g @ W.T`` for
    ResNet-18's 2x2 stage and keep the old paths for its 16x16 stage."""
    f32 = np.dtype(np.float32)
    small = D._forward_plan((8, 1, 4, 4, 512), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 2, 2),
                            512, f32)
    assert small[4] == 2 and small[2][0] == 0 and small[2][-1] == 512
    large = D._forward_plan((8, 1, 18, 18, 64), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 16, 16),
                            64, f32)
    assert large[4] == 1
    assert D._weight_plan((8, 1, 4, 4, 512), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 2, 2),
                          512, f32, False)[4] == 1
    assert D._weight_plan((8, 1, 4, 4, 512), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 2, 2),
                          512, f32, True)[4] == 1          # with a bias gradient too
    assert D._weight_plan((8, 1, 18, 18, 64), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 16, 16),
                          64, f32, False)[4] == 0
    assert D._weight_plan((2, 1, 16, 16, 256), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 14, 14),
                          256, f32, False)[4] == 1          # ResNet's 14x14 stage at batch 2
    assert D._weight_plan((2, 1, 30, 30, 128), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 28, 28),
                          128, f32, False)[4] == 0          # more positions than taps x channels
    assert C._gemm_data_grad(np.zeros((8, 1, 2, 2, 512), f32), np.zeros((1, 3, 3, 512, 512), f32))
    assert not C._gemm_data_grad(np.zeros((8, 1, 16, 16, 64), f32),
                                 np.zeros((1, 3, 3, 64, 64), f32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
def test_column_split_gives_the_row_split_bits(monkeypatch, dtype, bias):
    """The forward's column split sums each element in the row split's
    order (from the bias or zero, taps and channels in order): the same
    bits, with and without a bias."""
    x, w, b = _arrays((8, 2, 128, 160, 3, 1, bias), dtype, seed=5)
    args = (C.lift_x(x), C.lift_w(w), (1, 1, 1), (0, 1, 1), (1, 1, 1))
    D._forward_plan.cache_clear()
    plan = D._forward_plan((8, 1, 4, 4, 128), (1, 3, 3), (1, 1, 1), (1, 1, 1), (1, 2, 2), 160,
                           np.dtype(dtype))
    assert plan[4] == 2 and len(plan[2]) > 2           # columns, in several chunks
    cols = D.forward(*args, bias=b, out_sp=(1, 2, 2))
    monkeypatch.setattr(D, "COLUMN_SPLIT_RATIO", 1 << 30)
    D._forward_plan.cache_clear()
    rows = D.forward(*args, bias=b, out_sp=(1, 2, 2))
    D._forward_plan.cache_clear()
    assert cols.tobytes() == rows.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weight_row_split_gives_the_one_chunk_bits(monkeypatch, dtype):
    """dW split by rows sums every position in order for each element: the
    bits of the positions-split pass with one chunk."""
    from yscv.compute import regions

    x, w, _ = _arrays((8, 2, 128, 128, 3, 1, False), dtype, seed=9)
    cot = np.random.default_rng(1).standard_normal((8, 1, 2, 2, 128)).astype(dtype)
    args = (C.lift_x(x), cot, C.lift_w(w).shape, (1, 1, 1), (0, 1, 1), (1, 1, 1))
    D._weight_plan.cache_clear()
    by_rows, _ = D.weight_grad(*args)
    monkeypatch.setattr(D, "SMALL_MAP_BYTES", -1)
    monkeypatch.setattr(regions, "MAX_CHUNKS", 1)
    D._weight_plan.cache_clear()
    one_chunk, _ = D.weight_grad(*args)
    D._weight_plan.cache_clear()
    assert by_rows.tobytes() == one_chunk.tobytes()
