"""Forward hooks, Module.apply, the loss modules and PixelShuffle, against
PyTorch's behaviour."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402

RNG = np.random.default_rng(3)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _models():
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    y = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    y.load_state_dict(t.state_dict(), layout="torch")
    return t, y


def _run_t(t, x):
    return t(torch.from_numpy(x)).detach().numpy()


def _run_y(y, x):
    g = yscv.Graph()
    return g.value(y(g, g.constant(x)))


def test_hook_order_replacement_and_removal_match_torch():
    t, y = _models()
    x = _x(2, 4)
    events_t, events_y = [], []

    def install(model, events, scale, shift, is_torch):
        handles = []
        for i, m in enumerate(model):
            def pre(mod, *rest, i=i):
                args = rest[-1]
                events.append(("pre", i, type(mod).__name__, len(args)))
            def post(mod, *rest, i=i):
                events.append(("post", i, type(mod).__name__))
            handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]

        # a pre-hook replacing the input of the first Linear (a non-tuple is wrapped)
        def double(mod, *rest):
            args = rest[-1]
            return scale(rest[0] if not is_torch else None, args[0])
        # a forward hook replacing the output of the last Linear
        def plus_one(mod, *rest):
            out = rest[-1]
            return shift(rest[0] if not is_torch else None, out)
        handles.append(model[0].register_forward_pre_hook(double))
        handles.append(model[2].register_forward_hook(plus_one))
        # the hook on the whole model sees the replaced inputs and output
        def outer(mod, *rest):
            events.append(("outer", tuple(np.asarray(
                rest[-1].detach().numpy() if is_torch else rest[0].value(rest[-1])).shape)))
        handles.append(model.register_forward_hook(outer))
        return handles

    ref = _run_t(t, 2 * x) + 1  # what the hooks below make of the model
    ht = install(t, events_t, lambda g, a: a * 2, lambda g, o: o + 1, True)
    hy = install(y, events_y, lambda g, a: g.mul(a, 2.0), lambda g, o: g.add(o, 1.0), False)
    out_t, out_y = _run_t(t, x), _run_y(y, x)
    assert events_y == events_t
    assert [e[0] for e in events_y[:3]] == ["pre", "post", "pre"]
    np.testing.assert_allclose(out_y, out_t, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out_t, ref, rtol=1e-6)
    assert events_y[-1] == ("outer", (2, 3)) and len(events_y) == 7
    for h in ht + hy:
        h.remove()
        h.remove()  # a second remove does nothing, as PyTorch's
    events_t.clear(), events_y.clear()
    np.testing.assert_allclose(_run_y(y, x), _run_t(t, x), rtol=1e-6, atol=1e-6)
    assert events_t == events_y == []


def test_pre_hook_return_forms_prepend_and_context_manager():
    lin = nn.Linear(3, 2)
    x = _x(1, 3)
    calls = []
    with lin.register_forward_pre_hook(lambda m, g, args: calls.append("a")):
        lin.register_forward_pre_hook(lambda m, g, args: calls.append("b"), prepend=True)
        h = lin.register_forward_pre_hook(lambda m, g, args: g.mul(args[0], 0.0))  # not a tuple
        g = yscv.Graph()
        out = g.value(lin(g, g.constant(x)))
        np.testing.assert_allclose(out, np.broadcast_to(lin.bias.data, (1, 2)))
        assert calls == ["b", "a"]
        h.remove()
    calls.clear()
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(lin(g, g.constant(x))), x @ lin.weight.data + lin.bias.data,
                               rtol=1e-6)
    assert calls == ["b"]
    with pytest.raises(TypeError, match="register_forward_hook: hook must be callable"):
        lin.register_forward_hook(3)


def test_hooks_are_copied_with_the_module_as_torch():
    import copy
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_forward_hook(lambda m, g, a, o: seen.append(m))
    twin = copy.deepcopy(lin)
    g = yscv.Graph()
    twin(g, g.constant(_x(1, 2)))
    assert seen == [twin]


def test_apply_visits_children_first_as_torch():
    def build(lib):
        return lib.Sequential(lib.Sequential(lib.Linear(2, 3), lib.ReLU()),
                              lib.Linear(3, 1), lib.Sequential(lib.Tanh()))
    order_t, order_y = [], []
    tm, ym = build(torch.nn), build(nn)
    assert tm.apply(lambda m: order_t.append(type(m).__name__)) is tm
    assert ym.apply(lambda m: order_y.append(type(m).__name__)) is ym
    assert order_y == order_t
    ym.apply(lambda m: nn.init.zeros_(m.weight) if isinstance(m, nn.Linear) else None)
    assert all(not m.weight.data.any() for m in ym.modules() if isinstance(m, nn.Linear))


# ---------------------------------------------------------------- losses
def _loss_cases():
    w = np.array([0.5, 2.0, 1.0, 0.25], np.float32)
    return [
        ("CrossEntropyLoss", {}, "class"),
        ("CrossEntropyLoss", {"weight": w, "ignore_index": 1, "label_smoothing": 0.2}, "class"),
        ("CrossEntropyLoss", {"reduction": "sum"}, "class"),
        ("CrossEntropyLoss", {"reduction": "none", "weight": w}, "class"),
        ("NLLLoss", {"weight": w, "reduction": "mean"}, "logp"),
        ("NLLLoss", {"ignore_index": 2, "reduction": "none"}, "logp"),
        ("MSELoss", {}, "real"), ("MSELoss", {"reduction": "sum"}, "real"),
        ("L1Loss", {"reduction": "none"}, "real"), ("L1Loss", {}, "real"),
        ("HuberLoss", {"delta": 0.5}, "real"), ("HuberLoss", {"reduction": "sum"}, "real"),
        ("BCEWithLogitsLoss", {}, "binary"),
        ("BCEWithLogitsLoss", {"weight": np.float32([[1.0, 0.5, 2.0, 1.5]]),
                               "pos_weight": np.float32([3.0, 1.0, 0.5, 2.0])}, "binary"),
        ("BCEWithLogitsLoss", {"reduction": "none", "pos_weight": np.float32([2.0] * 4)},
         "binary"),
    ]


@pytest.mark.parametrize("name,kw,kind", _loss_cases())
def test_loss_modules_match_torch(name, kw, kind):
    x = _x(6, 4)
    if kind in ("class", "logp"):
        target = RNG.integers(0, 4, 6)
        target[0] = 1
        if kind == "logp":
            x = x - np.log(np.exp(x).sum(-1, keepdims=True))
        t_target = torch.from_numpy(target)
    elif kind == "binary":
        target = (RNG.random((6, 4)) < 0.5).astype(np.float32)
        t_target = torch.from_numpy(target)
    else:
        target = _x(6, 4)
        t_target = torch.from_numpy(target)
    t_kw = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    t_loss = getattr(torch.nn, name)(**t_kw)
    y_loss = getattr(nn, name)(**kw)
    xt = torch.tensor(x, requires_grad=True)
    want = t_loss(xt, t_target)
    want.sum().backward()
    g = yscv.Graph()
    xn = g.variable(x)
    got = y_loss(g, xn, target)
    g.backward(g.sum(got) if g.value(got).ndim else got)
    np.testing.assert_allclose(g.value(got), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.grad(xn), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert list(y_loss.state_dict()) == list(t_loss.state_dict())


@pytest.mark.parametrize("size_average,reduce", [(None, False), (False, None), (False, True),
                                                 (True, True), (True, False)])
def test_legacy_size_average_and_reduce_map_as_torch(size_average, reduce):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.MSELoss(size_average=size_average, reduce=reduce).reduction
    assert nn.MSELoss(size_average=size_average, reduce=reduce).reduction == want
    assert nn.CrossEntropyLoss(size_average=size_average, reduce=reduce).reduction == want


def test_loss_module_bad_arguments():
    with pytest.raises(ValueError, match="MSELoss: reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="HuberLoss: delta"):
        nn.HuberLoss(delta=0.0)
    with pytest.raises(ValueError, match="CrossEntropyLoss: label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(TypeError, match="NLLLoss: ignore_index"):
        nn.NLLLoss(ignore_index=1.5)
    with pytest.raises(TypeError, match="BCEWithLogitsLoss: pos_weight"):
        nn.BCEWithLogitsLoss(pos_weight=np.array(["a"]))


# ----------------------------------------------------------- PixelShuffle
@pytest.mark.parametrize("r", [1, 2, 3])
def test_pixel_shuffle_module_matches_torch(r):
    x = _x(2, 3 * r * r, 4, 5)  # NCHW
    want = torch.nn.PixelShuffle(r)(torch.from_numpy(x)).numpy()
    g = yscv.Graph()
    xn = g.variable(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    out = nn.PixelShuffle(r)(g, xn)
    np.testing.assert_array_equal(g.value(out).transpose(0, 3, 1, 2), want)
    with pytest.raises(ValueError, match="upscale_factor"):
        nn.PixelShuffle(0)
