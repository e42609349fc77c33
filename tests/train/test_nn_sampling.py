"""Upsample, Unfold and Fold modules against torch.nn (NHWC vs NCHW)."""
import numpy as np
import pytest

import yscv
import yscv.nn as nn

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((2, 5, 6, 3))


def _nchw(a):
    return torch.tensor(np.ascontiguousarray(a.transpose(0, 3, 1, 2)))


def _run(module, x):
    g = yscv.Graph(np.float64)
    return g.value(module(g, g.constant(x)))


@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(7, 9), mode="bilinear"),
                                dict(scale_factor=1.5, mode="bilinear", align_corners=True),
                                dict(size=(3, 4))])
def test_upsample_equals_torch(kw):
    ref = torch.nn.Upsample(**kw)(_nchw(X)).numpy().transpose(0, 2, 3, 1)
    np.testing.assert_allclose(_run(nn.Upsample(**kw), X), ref, rtol=1e-12, atol=1e-12)


def test_unfold_then_fold_equal_torch_in_yscv_order():
    kw = dict(kernel_size=(2, 3), dilation=1, padding=1, stride=(1, 2))
    got = _run(nn.Unfold(**kw), X)                           # [N, L, KH*KW*C]
    ref = torch.nn.Unfold(**kw)(_nchw(X)).numpy()            # [N, C*KH*KW, L]
    n, l = ref.shape[0], ref.shape[2]
    ref = ref.reshape(n, 3, 2 * 3, l).transpose(0, 3, 2, 1).reshape(n, l, -1)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    back = _run(nn.Fold((5, 6), **kw), got)
    tref = torch.nn.Fold((5, 6), **kw)(torch.nn.Unfold(**kw)(_nchw(X))).numpy()
    np.testing.assert_allclose(back, tref.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)


def test_upsample_needs_exactly_one_of_size_and_scale():
    with pytest.raises(ValueError, match="Upsample"):
        nn.Upsample()
    with pytest.raises(ValueError, match="Upsample"):
        nn.Upsample(size=3, scale_factor=2)
