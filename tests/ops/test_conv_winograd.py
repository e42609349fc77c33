"""Winograd F(2x2, 3x3) path of conv2d (yscv/compute/conv_winograd.py):
float64 gradcheck through it, values against PyTorch, float32 error against
the direct tiles', the gate, the same bits on one thread and two."""
import numpy as np
import pytest

import yscv
from yscv.compute import conv_winograd
from yscv.gradcheck import gradcheck
from yscv.testing import check_same_bits_on_threads


@pytest.fixture
def calls(monkeypatch):
    """The Winograd forwards run (the data gradient is one too), by input shape."""
    seen = []
    fwd = conv_winograd.forward

    def counted(x, *a, **k):
        seen.append(x.shape)
        return fwd(x, *a, **k)

    monkeypatch.setattr(conv_winograd, "forward", counted)
    return seen


@pytest.fixture
def small_gate(monkeypatch):
    """The size gate lowered so that shapes small enough for a gradcheck take
    the path (the gate is a speed choice, not a limit of the algorithm)."""
    monkeypatch.setattr(conv_winograd, "MIN_SIDE", 1)
    monkeypatch.setattr(conv_winograd, "MIN_CHANNELS", 8)


def _grads(build, arrays, dtype, cot_seed=1):
    g = yscv.Graph(dtype)
    nodes = [g.variable(np.asarray(a, dtype=dtype)) for a in arrays]
    out = build(g, *nodes)
    cot = np.random.default_rng(cot_seed).standard_normal(g.value(out).shape)
    g.backward(out, grad=cot.astype(dtype))
    return g.value(out), [g.grad(n) for n in nodes]


@pytest.mark.parametrize("hw", [(5, 6), (4, 7)])
@pytest.mark.parametrize("padding", [0, 1, 2, (2, 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_gradcheck_through_winograd(small_gate, calls, hw, padding, bias):
    """forward, bias and dx through the path (8 channels: one float64 vector),
    odd and even output sides (partial tiles at the edges), batch 2."""
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(-1, 1, (2, *hw, 8)), rng.uniform(-1, 1, (3, 3, 8, 8))]
    if bias:
        arrays.append(rng.uniform(-1, 1, 8))
    gradcheck(lambda g, x, w, *b: g.conv2d(x, w, *b, padding=padding), arrays)
    assert len(calls) >= 2     # the forward and the data gradient, at least once each


def _torch_conv(arrays, padding, dtype):
    torch = pytest.importorskip("torch")
    x, w, b = arrays
    tx = torch.tensor(x.transpose(0, 3, 1, 2), dtype=dtype, requires_grad=True)
    tw = torch.tensor(w.transpose(3, 2, 0, 1), dtype=dtype, requires_grad=True)
    tb = torch.tensor(b, dtype=dtype, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, tb, padding=padding)
    cot = np.random.default_rng(1).standard_normal(ty.shape[:1] + ty.shape[2:] + ty.shape[1:2])
    ty.backward(torch.tensor(cot.transpose(0, 3, 1, 2), dtype=dtype))
    return (ty.detach().numpy().transpose(0, 2, 3, 1), tx.grad.numpy().transpose(0, 2, 3, 1),
            tw.grad.numpy().transpose(2, 3, 1, 0), tb.grad.numpy())


def _arrays(n, h, w, cin, cout, seed=4):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, h, w, cin)), rng.standard_normal((3, 3, cin, cout)) / 10,
            rng.standard_normal(cout)]


SHAPES = [(2, 17, 16, 32, 64, 1), (1, 18, 19, 64, 32, 2), (3, 18, 18, 32, 32, 0)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_torch_float64(calls, shape):
    """Default gate, float64: every value and gradient to 1e-10."""
    torch = pytest.importorskip("torch")
    *dims, padding = shape
    arrays = _arrays(*dims)
    y, grads = _grads(lambda g, x, w, b: g.conv2d(x, w, b, padding=padding), arrays, np.float64)
    assert len(calls) == 2
    for got, ref in zip([y, *grads], _torch_conv(arrays, padding, torch.float64)):
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_float32_error_near_direct(calls, monkeypatch, shape):
    """float32 output and dx against a float64 reference: Winograd's error
    is no larger than the direct tiles' (measured 0.26-0.33x of it on these
    shapes: sums of Cin products instead of 9*Cin; docs/ops/conv.md) and
    below 1e-6 of the largest value (measured <= 3e-7)."""
    torch = pytest.importorskip("torch")
    *dims, padding = shape
    arrays = _arrays(*dims)
    ref = _torch_conv(arrays, padding, torch.float64)
    build = lambda g, x, w, b: g.conv2d(x, w, b, padding=padding)  # noqa: E731
    y_w, (dx_w, _, _) = _grads(build, arrays, np.float32)
    assert len(calls) == 2
    monkeypatch.setattr(conv_winograd, "usable", lambda *a: False)
    y_d, (dx_d, _, _) = _grads(build, arrays, np.float32)
    assert len(calls) == 2
    for w_, d_, r in ((y_w, y_d, ref[0]), (dx_w, dx_d, ref[1])):
        err_w, err_d = np.abs(w_ - r).max(), np.abs(d_ - r).max()
        assert err_w <= err_d and err_w <= 1e-6 * np.abs(r).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", [
    dict(shape=(2, 16, 16, 16, 32), kw=dict(padding=1)),           # 16 < MIN_CHANNELS
    dict(shape=(2, 14, 14, 32, 32), kw=dict(padding=1)),           # 14 < MIN_SIDE
    dict(shape=(2, 18, 18, 32, 32), kw=dict(padding=1, stride=2)),
    dict(shape=(2, 20, 20, 32, 32), kw=dict(padding=1, dilation=2)),
    dict(shape=(2, 18, 18, 32, 32), kw=dict(padding=1, groups=2)),
    dict(shape=(2, 18, 18, 32, 36), kw=dict(padding=1)),           # 36: not whole vectors
    dict(shape=(2, 18, 18, 32, 32), kw=dict(padding=3)),
], ids=["narrow", "small", "stride", "dilation", "groups", "ragged", "pad3"])
def test_not_taken_outside_gate(calls, dtype, case):
    n, h, w, cin, cout = case["shape"]
    kw = case["kw"]
    rng = np.random.default_rng(5)
    groups = kw.get("groups", 1)
    arrays = [rng.standard_normal((n, h, w, cin)), rng.standard_normal((3, 3, cin // groups, cout))]
    _grads(lambda g, x, wt: g.conv2d(x, wt, **kw), arrays, dtype)
    assert calls == []


def test_taken_for_float32_and_both_passes(calls):
    """The default gate takes 32 -> 64 channels on 16 x 16 outputs, float32:
    the forward (x) and the data gradient (the cotangent)."""
    arrays = _arrays(2, 16, 16, 32, 64)
    _grads(lambda g, x, w, b: g.conv2d(x, w, b, padding=1), arrays, np.float32)
    assert [s[-1] for s in calls] == [32, 64]


def test_conv_transpose_stride_1_matches_torch(calls):
    """conv_transpose2d with stride 1 runs conv2d's dx pass forward: Winograd."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 16, 17, 32)), rng.standard_normal((3, 3, 32, 32)) / 10
    g = yscv.Graph(np.float64)
    y = g.value(g.conv_transpose2d(g.variable(x), g.variable(w), padding=1))
    ref = torch.nn.functional.conv_transpose2d(
        torch.tensor(x.transpose(0, 3, 1, 2)), torch.tensor(w.transpose(3, 2, 0, 1)), padding=1)
    np.testing.assert_allclose(y, ref.numpy().transpose(0, 2, 3, 1), rtol=1e-10, atol=1e-10)
    assert calls


def test_same_bits_on_one_thread_and_two(calls):
    """Several chunks of tiles, several blocks each: the split is a function
    of the sizes only and every output depends on its own tile alone."""
    arrays = [a.astype(np.float32) for a in _arrays(4, 32, 32, 32, 64)]

    def run():
        y, grads = _grads(lambda g, x, w, b: g.conv2d(x, w, b, padding=1), arrays, np.float32)
        return [y, *grads]

    check_same_bits_on_threads(run)
    assert len(calls) == 4


def test_weight_transform_is_g_w_gt():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 3, 2, 5))
    u = conv_winograd.weight_transform(w).reshape(4, 4, 2, 5)
    ref = np.einsum("ai,ijcd,bj->abcd", conv_winograd.G, w, conv_winograd.G)
    np.testing.assert_allclose(u, ref, rtol=1e-14, atol=1e-14)
    assert conv_winograd.weight_transform(w.astype(np.float32)).dtype == np.float32


def test_conv3d_with_a_flat_kernel_matches_torch(small_gate, calls):
    """conv3d with a 1x3x3 kernel: the depth axis folded into the batch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x, w, b = rng.standard_normal((2, 3, 6, 5, 8)), rng.standard_normal((1, 3, 3, 8, 16)), \
        rng.standard_normal(16)
    kw = dict(padding=(0, 1, 2))
    y, grads = _grads(lambda g, xx, ww, bb: g.conv3d(xx, ww, bb, **kw), [x, w, b], np.float64)
    assert len(calls) == 2
    tx = torch.tensor(x.transpose(0, 4, 1, 2, 3), requires_grad=True)
    tw = torch.tensor(w.transpose(4, 3, 0, 1, 2), requires_grad=True)
    ty = torch.nn.functional.conv3d(tx, tw, torch.tensor(b), **kw)
    cot = np.random.default_rng(1).standard_normal(y.shape)
    ty.backward(torch.tensor(cot.transpose(0, 4, 1, 2, 3)))
    np.testing.assert_allclose(y, ty.detach().numpy().transpose(0, 2, 3, 4, 1), atol=1e-10)
    np.testing.assert_allclose(grads[0], tx.grad.numpy().transpose(0, 2, 3, 4, 1), atol=1e-10)
    np.testing.assert_allclose(grads[1], tw.grad.numpy().transpose(2, 3, 4, 1, 0), atol=1e-10)
