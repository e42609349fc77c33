"""Ops that users define (`yscv.custom_op`): one forward on arrays, one rule
against ``ns``. Checked with numbers: first and second derivatives against
finite differences and against PyTorch's ``torch.autograd.Function`` with the
same forward and backward, the same bits on two workers and under activation
checkpointing (the forward is replayed), float32 kept, bad arguments refused
naming the op with the graph unchanged, ONNX export refused naming it, and
the op's name in ``g.summary()``."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.engine import walk_parallel
from yscv.engine.namespace import FALLBACK_NAMES

CALLS = {"forward": 0}


def swish_forward(x, beta):
    """x * sigmoid(beta x)."""
    CALLS["forward"] += 1
    return x / (1.0 + np.exp(-beta * x))


def swish_rule(ns, g, xs, y, attrs, saved, needs):
    """d/dx = s + beta x s (1 - s), d/dbeta = x^2 s (1 - s), s = sigmoid(beta x)."""
    x, beta = xs
    s = ns.reciprocal(ns.add(ns.exp(ns.neg(ns.mul(beta, x))), 1.0))
    ds = ns.mul(s, ns.sub(1.0, s))
    gx = ns.mul(g, ns.add(s, ns.mul(ns.mul(beta, x), ds))) if needs[0] else None
    gb = ns.mul(g, ns.mul(ns.mul(x, x), ds)) if needs[1] else None
    return gx, gb


swish = yscv.custom_op("swish", swish_forward, swish_rule)

RNG = np.random.default_rng(0)
X = RNG.uniform(-2.0, 2.0, (4, 5))
BETA = np.array([0.7, 1.1, 1.3, 0.9, 1.6])
U = RNG.standard_normal((4, 5))
V = RNG.standard_normal((4, 5))
W = RNG.standard_normal(5)


def _torch_swish():
    import torch

    class Swish(torch.autograd.Function):
        """The same forward and the same backward formulas, in torch ops (so
        the backward is differentiable again)."""

        @staticmethod
        def forward(ctx, x, beta):
            ctx.save_for_backward(x, beta)
            return x / (1.0 + torch.exp(-beta * x))

        @staticmethod
        def backward(ctx, g):
            x, beta = ctx.saved_tensors
            s = 1.0 / (torch.exp(-(beta * x)) + 1.0)
            ds = s * (1.0 - s)
            gx = g * (s + beta * x * ds)
            gb = (g * (x * x * ds)).sum(dim=0)
            return gx, gb

    return torch, Swish.apply


def test_the_node_is_op_custom_and_summary_and_dot_show_its_name():
    g = yscv.Graph(dtype=np.float64)
    x = g.variable(X)
    y = swish(g, x, g.variable(BETA))
    assert g.op(y) == Op.CUSTOM
    row = g.summary().splitlines()[1 + y.index]
    assert "swish (custom)" in row
    assert "swish (custom)" in g.to_dot()
    assert repr(swish) == "yscv.custom_op('swish')"


def test_gradcheck_and_gradgradcheck():
    build = lambda g, x, b: swish(g, x, b)   # noqa: E731
    assert yscv.gradcheck(build, (X, BETA))
    assert yscv.gradgradcheck(build, (X, BETA))


def test_first_and_second_derivatives_equal_pytorch_autograd_function():
    torch, tswish = _torch_swish()
    tx = torch.tensor(X, requires_grad=True)
    tb = torch.tensor(BETA, requires_grad=True)
    ty = tswish(tx, tb)
    tgx, tgb = torch.autograd.grad(ty, (tx, tb), grad_outputs=torch.tensor(U), create_graph=True)
    tsx, tsb = torch.autograd.grad((tgx * torch.tensor(V)).sum() + (tgb * torch.tensor(W)).sum(),
                                   (tx, tb))

    g = yscv.Graph(dtype=np.float64)
    x, b = g.variable(X), g.variable(BETA)
    y = swish(g, x, b)
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), rtol=1e-14, atol=1e-15)
    plain = g.gradients(y, [x, b], grad=U)
    gx, gb = g.gradients(y, [x, b], grad=U, create_graph=True)
    second = g.gradients(g.add(g.sum(g.mul(gx, V)), g.sum(g.mul(gb, W))), [x, b])
    for mine, theirs in [(plain[0], tgx), (plain[1], tgb), (g.value(gx), tgx), (g.value(gb), tgb),
                         (second[0], tsx), (second[1], tsb)]:
        np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-12, atol=1e-13)
    # the first-order bits do not depend on create_graph
    assert plain[0].tobytes() == g.value(gx).tobytes()
    assert plain[1].tobytes() == g.value(gb).tobytes()


def _branchy(dtype, workers):
    """Three swish branches of one input, summed: the parallel walk has
    independent branches to run at once."""
    g = yscv.Graph(dtype=dtype)
    x = g.variable(X)
    betas = [g.variable(BETA * s) for s in (1.0, 0.5, 2.0)]
    outs = [g.sum(g.mul(swish(g, g.tanh(g.mul(x, float(k + 1))), b), U)) for k, b in enumerate(betas)]
    total = g.add(g.add(outs[0], outs[1]), outs[2])
    if workers > 1:
        assert walk_parallel._Plan(g, total.index).branchy
    g.backward(total, workers=workers)
    return [g.grad(n) for n in [x] + betas]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_two_workers_give_the_bits_of_one(dtype):
    one = _branchy(dtype, 1)
    two = _branchy(dtype, 2)
    for a, b in zip(one, two):
        assert a.dtype == np.dtype(dtype) and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_checkpointing_replays_the_forward_and_gives_the_same_bits(dtype):
    def run(checkpointed):
        g = yscv.Graph(dtype=dtype)
        x, b = g.variable(X), g.variable(BETA)
        block = lambda g, h: g.tanh(swish(g, g.mul(h, 1.5), b))   # noqa: E731
        h = g.checkpoint(block, x) if checkpointed else block(g, x)
        h = g.checkpoint(block, h) if checkpointed else block(g, h)
        loss = g.sum(g.mul(h, U))
        before = CALLS["forward"]
        g.backward(loss)
        return [g.grad(x), g.grad(b)], CALLS["forward"] - before

    plain, replays_plain = run(False)
    ckpt, replays = run(True)
    assert replays_plain == 0
    assert replays >= 1   # the released custom node was recomputed by its forward
    for a, c in zip(plain, ckpt):
        assert a.tobytes() == c.tobytes()


def test_float32_stays_float32_to_the_second_order():
    g = yscv.Graph(dtype=np.float32)
    x, b = g.variable(X), g.variable(BETA)
    y = swish(g, x, b)
    assert g.value(y).dtype == np.float32
    plain = g.gradients(y, [x, b], grad=U)
    firsts = g.gradients(y, [x, b], grad=U, create_graph=True)
    seconds = g.gradients(g.add(g.sum(g.mul(firsts[0], V)), g.sum(g.mul(firsts[1], W))), [x, b])
    for a in list(plain) + [g.value(d) for d in firsts] + list(seconds):
        assert a.dtype == np.float32


def test_a_forward_that_promotes_float32_is_refused_naming_the_op():
    up = yscv.custom_op("widen", lambda x: x.astype(np.float64), lambda ns, g, xs, y, a, s, n: (g,))
    g = yscv.Graph(dtype=np.float32)
    x = g.variable(X)
    n = len(g)
    with pytest.raises(TypeError, match="widen: forward returned a float64 array for float32"):
        up(g, x)
    assert len(g) == n


def test_attributes_reach_forward_and_rule_and_saved_data_reaches_the_rule():
    seen = {}

    def forward(x, *, scale, shift=0.0):
        return scale * x + shift, np.float64(scale)

    def rule(ns, g, xs, y, attrs, saved, needs):
        seen.update(attrs=attrs, saved=saved)
        return (ns.mul(g, attrs["scale"]),)

    affine = yscv.custom_op("affine", forward, rule, saves=True)
    g = yscv.Graph(dtype=np.float64)
    x = g.variable(X)
    y = affine(g, x, scale=3.0, shift=(1, 2)[0])
    np.testing.assert_array_equal(g.value(y), 3.0 * X + 1)
    (gx,) = g.gradients(y, [x], grad=U)
    np.testing.assert_array_equal(gx, 3.0 * U)
    assert seen == {"attrs": {"scale": 3.0, "shift": 1}, "saved": 3.0}


def test_a_rule_may_return_none_and_may_use_names_outside_the_array_namespace():
    """``ns.sigmoid`` runs through a scratch graph on arrays if the array
    namespace has no method of that name (correct, slower); the first-order
    bits still do not depend on create_graph."""
    def rule(ns, g, xs, y, attrs, saved, needs):
        x, beta = xs
        s = ns.sigmoid(ns.mul(beta, x))
        return ns.mul(g, ns.add(s, ns.mul(ns.mul(beta, x), ns.mul(s, ns.sub(1.0, s))))), None

    op = yscv.custom_op("swish_x_only", lambda x, b: x / (1.0 + np.exp(-b * x)), rule)
    g = yscv.Graph(dtype=np.float64)
    x, b = g.variable(X), g.variable(BETA)
    y = op(g, x, b)
    gx, gb = g.gradients(y, [x, b], grad=U)
    rx, rb = g.gradients(y, [x, b], grad=U, create_graph=True)
    assert gx.tobytes() == g.value(rx).tobytes()
    np.testing.assert_array_equal(gb, 0.0)
    ref = g.gradients(swish(g, x, b), [x], grad=U)[0]
    np.testing.assert_allclose(gx, ref, rtol=1e-13, atol=1e-14)
    assert yscv.gradgradcheck(lambda g, x: op(g, x, BETA), (X,))


def test_bad_arguments_name_the_op_and_leave_the_graph_unchanged():
    g = yscv.Graph(dtype=np.float64)
    x = g.variable(X)
    n = len(g)
    with pytest.raises(TypeError, match="swish: forward must be callable"):
        yscv.custom_op("swish", 1.0, swish_rule)
    with pytest.raises(TypeError, match="swish: rule must be callable"):
        yscv.custom_op("swish", swish_forward, None)
    with pytest.raises(TypeError, match="swish: attribute k=.* must be a number"):
        swish(g, x, BETA, k=[1, 2])
    with pytest.raises(TypeError, match="swish: attribute k=.* must be a number"):
        swish(g, x, BETA, k=np.ones(2))
    with pytest.raises(TypeError, match="swish: input 1"):
        swish(g, x, "1.0")
    assert len(g) == n

    three = yscv.custom_op("three", lambda x: 2.0 * x, lambda ns, g, xs, y, a, s, n: (g, g, g))
    y = three(g, x)
    n = len(g)
    for create_graph in (False, True):
        with pytest.raises(TypeError, match="three: rule must return a tuple of 1 gradients"):
            g.gradients(y, [x], grad=U, create_graph=create_graph)
        assert len(g) == n


def test_onnx_export_is_refused_naming_the_op(tmp_path):
    from yscv.onnx import ExportError

    with pytest.raises(ExportError, match="custom op 'swish' .*has no ONNX form") as info:
        yscv.onnx.export(lambda g, x: swish(g, x, BETA), (X,), tmp_path / "swish.onnx")
    assert "swish" in str(info.value.op)
    assert not (tmp_path / "swish.onnx").exists()


def test_a_user_rule_takes_the_fast_way_when_it_uses_array_namespace_names():
    before = dict(FALLBACK_NAMES)
    g = yscv.Graph(dtype=np.float64)
    x, b = g.variable(X), g.variable(BETA)
    g.gradients(swish(g, x, b), [x, b], grad=U)
    assert dict(FALLBACK_NAMES) == before


def test_the_api_reference_and_the_guide_list_custom_op():
    import pathlib
    import re

    docs = pathlib.Path(__file__).resolve().parents[1] / "docs"
    api = (docs / "api.md").read_text(encoding="utf-8")
    block = re.search(r"^::: yscv\.custom_op\n(?:    .*\n)*", api, re.MULTILINE)
    assert block and "- custom_op" in block.group(0) and "- CustomOp" in block.group(0)
    assert "## An op of your own" in (docs / "adding_an_op.md").read_text(encoding="utf-8")


def test_function_transforms_hessian_and_jvp_equal_torch_func():
    """`yscv.func` reaches a custom op through its recorded rule: the Hessian
    of sum(swish(x, beta)) in x and a forward-mode JVP equal torch.func's on
    the `torch.autograd.Function` twin."""
    torch, tswish = _torch_swish()
    x0 = X[0]
    f = lambda g, x: g.sum(swish(g, x, BETA))   # noqa: E731
    mine = yscv.func.hessian(f)(x0)
    theirs = torch.autograd.functional.hessian(
        lambda x: tswish(x, torch.tensor(BETA)).sum(), torch.tensor(x0))
    np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(mine, np.diag(np.diag(mine)), atol=0)   # elementwise in x
    out, tangent = yscv.func.jvp(lambda g, x, b: swish(g, x, b), (X, BETA), (V, W))
    _, ttangent = torch.autograd.functional.jvp(
        tswish, (torch.tensor(X), torch.tensor(BETA)), (torch.tensor(V), torch.tensor(W)))
    np.testing.assert_allclose(tangent, ttangent.numpy(), rtol=1e-12, atol=1e-13)
