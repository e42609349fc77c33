"""PyTorch's tensor methods on a NodeId (yscv.node_methods), PyTorch's
reduction keywords dim=/keepdim= beside axis=/keepdims=, and yscv.no_grad."""
from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
import torch

import yscv


def _graph():
    g = yscv.Graph(dtype=np.float64)
    a = np.random.default_rng(0).uniform(0.5, 2.0, size=(2, 3, 4))
    return g, g.variable(a), a


def _same(g, a, b):
    np.testing.assert_array_equal(g.value(a), g.value(b))
    assert g.op(a) == g.op(b)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), (-1, True), ((0, 2), False)])
def test_reduction_methods_equal_the_graph_ops_and_torch(name, dim, keepdim):
    g, x, a = _graph()
    got = getattr(x, name)(dim=dim, keepdim=keepdim)
    _same(g, got, getattr(g, name)(x, axis=dim, keepdims=keepdim))
    t = torch.tensor(a)
    tname = {"max": "amax", "min": "amin"}.get(name, name)
    if dim is None:
        want = getattr(t, tname)()
    elif name == "prod" and isinstance(dim, tuple):
        want = t.prod(dim=2, keepdim=keepdim).prod(dim=0, keepdim=keepdim)
    else:
        want = getattr(t, tname)(dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(g.value(got), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_methods_are_unbiased_as_torch(name):
    g, x, a = _graph()
    got = getattr(x, name)(dim=1)
    _same(g, got, getattr(g, name)(x, axis=1, correction=1))
    np.testing.assert_allclose(g.value(got), getattr(torch.tensor(a), name)(dim=1).numpy(),
                               rtol=1e-12)


def test_backward_item_grad_numpy():
    g, x, a = _graph()
    loss = (x * x).sum()
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * a)
    assert x.grad is g.grad(x)
    assert isinstance(loss.item(), float) and loss.item() == pytest.approx(float((a * a).sum()))
    v = x.numpy()
    assert v is g.value(x) and not v.flags.writeable
    assert x.requires_grad and not x.detach().requires_grad
    with pytest.raises(ValueError, match=r"item: NodeId\(\d+\) has shape \(2, 3, 4\) \(24 elements\)"):
        x.item()
    y = g.variable(np.ones(3))
    (y * 2).backward(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(y.grad, [2.0, 4.0, 6.0])


def test_shape_methods_equal_the_graph_ops_and_torch():
    g, x, a = _graph()
    t = torch.tensor(a)
    cases = [
        (x.reshape(4, 6), g.reshape(x, (4, 6)), t.reshape(4, 6)),
        (x.reshape((6, -1)), g.reshape(x, (6, -1)), t.reshape((6, -1))),
        (x.view(-1), g.reshape(x, (-1,)), t.view(-1)),
        (x.transpose(0, 2), g.transpose(x, (2, 1, 0)), t.transpose(0, 2)),
        (x.transpose(-1, 1), g.transpose(x, (0, 2, 1)), t.transpose(-1, 1)),
        (x.permute(1, 2, 0), g.transpose(x, (1, 2, 0)), t.permute(1, 2, 0)),
        (x.flatten(), g.flatten(x, 0), t.flatten()),
        (x.flatten(1), g.flatten(x, 1), t.flatten(1)),
        (x.unsqueeze(1), g.unsqueeze(x, 1), t.unsqueeze(1)),
        (x.unsqueeze(1).squeeze(1), g.squeeze(g.unsqueeze(x, 1), 1), t),
        (x.sum(dim=1, keepdim=True).squeeze(), g.squeeze(g.sum(x, 1, True)), t.sum(1).squeeze()),
    ]
    for got, ref, want in cases:
        _same(g, got, ref)
        np.testing.assert_allclose(g.value(got), want.numpy())
    m = g.variable(a[0])
    _same(g, m.T, g.transpose(m))
    np.testing.assert_array_equal(g.value(m.T), a[0].T)
    assert (x.ndim, x.dim(), x.size(), x.size(1), x.numel()) == (3, 3, (2, 3, 4), 3, 24)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu"])
def test_elementwise_methods_equal_the_graph_ops_and_torch(name):
    g, x, a = _graph()
    got = getattr(x, name)()
    _same(g, got, getattr(g, name)(x))
    np.testing.assert_allclose(g.value(got), getattr(torch.tensor(a), name)().numpy(), rtol=1e-12)


def test_softmax_matmul_pow_clamp_methods():
    g, x, a = _graph()
    t = torch.tensor(a)
    for got, ref, want in [
        (x.softmax(1), g.softmax(x, 1), t.softmax(1)),
        (x.log_softmax(-1), g.log_softmax(x, -1), t.log_softmax(-1)),
        (x.matmul(x.transpose(1, 2)), g.matmul(x, g.transpose(x, (0, 2, 1))),
         t.matmul(t.transpose(1, 2))),
        (x.pow(3), g.pow(x, 3), t.pow(3)),
        (x.clamp(0.7, 1.5), g.clamp(x, 0.7, 1.5), t.clamp(0.7, 1.5)),
        (x.logsumexp(2), g.logsumexp(x, 2), t.logsumexp(2)),
        (x.cumsum(1), g.cumsum(x, 1), t.cumsum(1)),
    ]:
        _same(g, got, ref)
        np.testing.assert_allclose(g.value(got), want.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(x.argmax(dim=1), t.argmax(dim=1).numpy())


def test_missing_attribute_names_the_graph_spelling():
    g, x, _ = _graph()
    with pytest.raises(AttributeError, match=r"no attribute 'conv2d'; the graph has it: "
                                             r"g\.conv2d\(node, \.\.\.\)"):
        x.conv2d
    with pytest.raises(AttributeError, match=r"no attribute 'amax'; the graph has it: g\.max\("):
        x.amax
    with pytest.raises(AttributeError, match=r"no attribute 'mm'; the graph has it: g\.matmul\("):
        x.mm
    with pytest.raises(AttributeError, match=r"no attribute 'cuda'$"):
        x.cuda
    assert not hasattr(x, "__array__")


def test_methods_keep_no_reference_cycle():
    g, x, _ = _graph()
    loss = x.exp().sum(dim=1).mean()
    loss.backward()
    ref = weakref.ref(g)
    gc.disable()
    try:
        del g, x, loss
        assert ref() is None
    finally:
        gc.enable()


# ------------------------------------------------------ dim= / keepdim=
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "var", "std",
                                  "logsumexp", "norm"])
def test_dim_keepdim_equal_axis_keepdims(name):
    g, x, _ = _graph()
    _same(g, getattr(g, name)(x, dim=1, keepdim=True), getattr(g, name)(x, axis=1, keepdims=True))
    _same(g, getattr(g, name)(x, dim=(0, 2)), getattr(g, name)(x, axis=(0, 2)))
    with pytest.raises(TypeError, match=rf"{name}: got axis=1 and dim=1; they are one argument"):
        getattr(g, name)(x, axis=1, dim=1)
    n = len(g)
    with pytest.raises(TypeError, match=rf"{name}: got keepdims=True and keepdim=True"):
        getattr(g, name)(x, 1, keepdims=True, keepdim=True)
    assert len(g) == n


def test_dim_in_scans_args_and_sorts():
    g, x, _ = _graph()
    for name in ("cumsum", "cumprod"):
        _same(g, getattr(g, name)(x, dim=2), getattr(g, name)(x, 2))
        with pytest.raises(TypeError, match=rf"{name}: missing the axis to work along"):
            getattr(g, name)(x)
        with pytest.raises(TypeError, match=rf"{name}: got axis=1 and dim=2"):
            getattr(g, name)(x, 1, dim=2)
    for name in ("argmax", "argmin"):
        np.testing.assert_array_equal(getattr(g, name)(x, dim=1, keepdim=True),
                                      getattr(g, name)(x, axis=1, keepdims=True))
    for name in ("topk", "sort"):
        args = (2,) if name == "topk" else ()
        a, ia = getattr(g, name)(x, *args, dim=1)
        b, ib = getattr(g, name)(x, *args, axis=1)
        _same(g, a, b)
        np.testing.assert_array_equal(ia, ib)
    with pytest.raises(TypeError, match="logsumexp: missing the axis"):
        g.logsumexp(x)
    np.testing.assert_allclose(g.value(g.logsumexp(x, None)),           # None: every axis
                               torch.tensor(g.value(x)).logsumexp((0, 1, 2)).numpy())


# ------------------------------------------------------------ no_grad
def test_top_level_no_grad_covers_every_graph_in_this_thread_only():
    g1 = yscv.Graph()
    x = g1.variable(np.ones(3))
    seen = []
    with yscv.no_grad():
        assert not yscv.is_grad_enabled()
        g2 = yscv.Graph()           # a graph made inside the block too
        z = g2.variable(np.ones(2))
        y, w = x * 2, g2.exp(z)
        with g1.no_grad():
            pass                    # leaving g1's own block must not re-enable it here
        u = g1.tanh(x)
        th = threading.Thread(target=lambda: seen.append(g1.requires_grad(x * 3)))
        th.start()
        th.join()
    assert [g1.requires_grad(y), g2.requires_grad(w), g1.requires_grad(u)] == [False] * 3
    assert seen == [True]           # another thread records as usual
    assert yscv.is_grad_enabled()
    assert g1.requires_grad(x * 2) and g2.requires_grad(g2.exp(z))
    assert "_grad_enabled" not in vars(yscv.engine.storage._GraphCore)   # the plain read is back


def test_top_level_no_grad_nests_with_graph_no_grad_and_decorates():
    g = yscv.Graph()
    x = g.variable(np.ones(3))
    with g.no_grad():
        with yscv.no_grad():
            pass
        assert not g.requires_grad(x + 1)   # g's own block still holds
    assert g.requires_grad(x + 1)

    @yscv.no_grad()
    def step():
        return g.requires_grad(g.exp(x))

    assert step() is False and g.requires_grad(g.exp(x))
    with pytest.raises(RuntimeError):
        with yscv.no_grad():
            raise RuntimeError("boom")
    assert yscv.is_grad_enabled() and g.requires_grad(x * 1)
