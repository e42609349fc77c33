"""create_graph=True (SPEC section 9): the semantics, each against PyTorch
where it defines them. Per-op second derivatives are in the op tables'
second-order column (tests/ops)."""
import numpy as np
import pytest

import yscv
from yscv import Op, registry

torch = pytest.importorskip("torch")


def _t(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def test_spec_example_second_derivative_equals_torch():
    g = yscv.Graph(np.float64)
    xv = np.linspace(-1, 1, 5)
    x = g.variable(xv)
    y = g.sum(g.tanh(x) * x ** 3)
    (dx,) = g.gradients(y, [x], create_graph=True)
    assert type(dx) is yscv.NodeId and g.requires_grad(dx)
    (d2x,) = g.gradients(g.sum(dx), [x])
    xt = _t(xv)
    (dt,) = torch.autograd.grad((torch.tanh(xt) * xt ** 3).sum(), xt, create_graph=True)
    (d2t,) = torch.autograd.grad(dt.sum(), xt)
    np.testing.assert_allclose(g.value(dx), dt.detach().numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(d2x, d2t.numpy(), rtol=1e-13, atol=1e-15)


def test_third_derivative_equals_torch():
    g = yscv.Graph(np.float64)
    xv = np.array([-0.7, 0.2, 1.3])
    x = g.variable(xv)
    y = g.sum(g.exp(g.tanh(x)) * x)
    (d1,) = g.gradients(y, [x], create_graph=True)
    (d2,) = g.gradients(g.sum(d1), [x], create_graph=True)
    (d3,) = g.gradients(g.sum(d2), [x])
    xt = _t(xv)
    (t1,) = torch.autograd.grad((torch.exp(torch.tanh(xt)) * xt).sum(), xt, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), xt, create_graph=True)
    (t3,) = torch.autograd.grad(t2.sum(), xt)
    np.testing.assert_allclose(d3, t3.numpy(), rtol=1e-12, atol=1e-14)


def test_backward_create_graph_accumulates_and_grad_node():
    g = yscv.Graph(np.float64)
    w = g.variable(np.array([1.0, 2.0, 3.0]))
    loss = g.sum(w * w * w)
    g.backward(loss, create_graph=True)
    gn = g.grad_node(w)
    np.testing.assert_array_equal(g.grad(w), [3.0, 12.0, 27.0])
    np.testing.assert_array_equal(g.value(gn), g.grad(w))
    assert g.requires_grad(gn)
    # a second recorded backward accumulates: array and node
    g.backward(loss, create_graph=True)
    gn2 = g.grad_node(w)
    np.testing.assert_array_equal(g.grad(w), [6.0, 24.0, 54.0])
    np.testing.assert_array_equal(g.value(gn2), g.grad(w))
    # differentiate the accumulated gradient node: d/dw sum(2 * 3w^2) = 12 w
    (h,) = g.gradients(g.sum(gn2), [w])
    np.testing.assert_allclose(h, 12 * np.array([1.0, 2.0, 3.0]))
    g.zero_grads()
    assert g.grad_node(w) is None and g.grad(w) is None


def test_plain_backward_leaves_no_grad_node_and_is_unchanged():
    g = yscv.Graph(np.float64)
    w = g.variable(np.array([0.5, -1.0]))
    loss = g.sum(g.tanh(w) * w)
    n = len(g)
    g.backward(loss)
    assert len(g) == n and g.grad_node(w) is None


def test_recorded_gradient_requires_grad_only_if_it_depends_on_a_variable():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0]))
    lin = g.sum(x * 3.0)
    (d,) = g.gradients(lin, [x], create_graph=True)
    np.testing.assert_array_equal(g.value(d), [3.0, 3.0])
    assert not g.requires_grad(d)      # the gradient of a linear function is constant
    quad = g.sum(x * x)
    (d,) = g.gradients(quad, [x], create_graph=True)
    assert g.requires_grad(d)


def test_unused_input_gets_constant_zero_node():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(3))
    z = g.variable(np.ones((2, 2)))
    y = g.sum(x * x)
    dx, dz = g.gradients(y, [x, z], create_graph=True)
    assert type(dz) is yscv.NodeId and not g.requires_grad(dz)
    np.testing.assert_array_equal(g.value(dz), np.zeros((2, 2)))


def test_grad_as_node_is_a_cotangent_that_is_differentiated():
    g = yscv.Graph(np.float64)
    xv, uv = np.array([0.3, -0.4]), np.array([1.5, 2.0])
    x, u = g.variable(xv), g.variable(uv)
    y = g.tanh(x)
    (vjp,) = g.gradients(y, [x], grad=u, create_graph=True)   # u * (1 - tanh^2)
    gx, gu = g.gradients(g.sum(vjp), [x, u])
    xt, ut = _t(xv), _t(uv)
    (tv,) = torch.autograd.grad(torch.tanh(xt), xt, grad_outputs=ut, create_graph=True)
    tx, tu = torch.autograd.grad(tv.sum(), [xt, ut])
    np.testing.assert_allclose(gx, tx.numpy(), rtol=1e-13)
    np.testing.assert_allclose(gu, tu.numpy(), rtol=1e-13)
    with pytest.raises(yscv.ShapeError):
        g.gradients(y, [x], grad=g.variable(np.ones(3)), create_graph=True)


def test_wgan_gp_penalty_changes_parameter_gradients_as_torch():
    """The penalty ||d critic / d x|| must reach the weights (the old
    workaround through g.variable(...) silently did not)."""
    rng = np.random.default_rng(0)
    W1, W2, X = rng.standard_normal((4, 5)), rng.standard_normal((5, 1)), rng.standard_normal((3, 4))
    g = yscv.Graph(np.float64)
    w1, w2, x = g.variable(W1), g.variable(W2), g.variable(X)
    critic = g.sum(g.matmul(g.tanh(g.matmul(x, w1)), w2))
    (dx,) = g.gradients(critic, [x], create_graph=True)
    norms = g.sqrt(g.sum(dx * dx, axis=1))
    penalty = g.mean((norms - 1.0) ** 2)
    g.backward(critic + 10.0 * penalty)
    tw1, tw2, tx = _t(W1), _t(W2), _t(X)
    tc = (torch.tanh(tx @ tw1) @ tw2).sum()
    (tdx,) = torch.autograd.grad(tc, tx, create_graph=True)
    tp = ((tdx.norm(dim=1) - 1) ** 2).mean()
    (tc + 10 * tp).backward()
    np.testing.assert_allclose(g.grad(w1), tw1.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(g.grad(w2), tw2.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_hook_sees_arrays_and_its_replacement_enters_as_a_constant():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([0.5, 1.5]))
    y = g.mul(x, x)
    seen = []

    def hook(gr):
        seen.append(type(gr))
        return np.array([10.0, 20.0])   # a constant cotangent from here on

    handle = g.register_hook(y, hook)
    (dx,) = g.gradients(g.sum(y * x), [x], create_graph=True)
    handle.remove()   # hooks run on every walk through y, as in PyTorch
    assert seen == [np.ndarray]
    # d/dx [sum(y*x)] through y is hook_value * 2x; directly: y = x^2
    np.testing.assert_allclose(g.value(dx), np.array([10.0, 20.0]) * 2 * g.value(x) + g.value(x) ** 2)
    (d2,) = g.gradients(g.sum(dx), [x])
    np.testing.assert_allclose(d2, np.array([20.0, 40.0]) + 2 * g.value(x))


def test_workers_give_the_same_bits_with_create_graph():
    rng = np.random.default_rng(1)
    W = [rng.standard_normal((6, 6)) for _ in range(4)]
    X = rng.standard_normal((3, 6))

    def run(workers):
        g = yscv.Graph(np.float64)
        ws = [g.variable(w) for w in W]
        x = g.constant(X)
        branches = [g.sum(g.tanh(g.matmul(x, w))) for w in ws]
        total = branches[0]
        for b in branches[1:]:
            total = total + b
        g.backward(total, create_graph=True, workers=workers)
        s = g.sum(g.grad_node(ws[0]) * g.grad_node(ws[1]))
        return [g.grad(w) for w in ws] + list(g.gradients(s, ws))

    one, two = run(1), run(2)
    for a, b in zip(one, two):
        assert np.array_equal(a, b)


def test_checkpointing_gives_the_same_higher_derivatives():
    rng = np.random.default_rng(2)
    W1, W2, X = rng.standard_normal((4, 4)), rng.standard_normal((4, 4)), rng.standard_normal((2, 4))

    def run(ckpt):
        g = yscv.Graph(np.float64)
        w1, w2, x = g.variable(W1), g.variable(W2), g.constant(X)

        def seg(g, h):
            return g.tanh(g.matmul(g.tanh(g.matmul(h, w1)), w2))

        out = g.checkpoint(seg, x) if ckpt else seg(g, x)
        loss = g.sum(out * out)
        d1, d2 = g.gradients(loss, [w1, w2], create_graph=True)
        return g.gradients(g.sum(d1 * d1) + g.sum(d2), [w1, w2])

    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)


def test_retain_graph_false_releases_nothing_with_create_graph():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([0.2, 0.9]))
    y = g.sum(g.tanh(x) * x)
    g.backward(y, retain_graph=False, create_graph=True)
    (h,) = g.gradients(g.sum(g.grad_node(x)), [x])
    xt = _t([0.2, 0.9])
    (t1,) = torch.autograd.grad((torch.tanh(xt) * xt).sum(), xt, create_graph=True)
    (t2,) = torch.autograd.grad(t1.sum(), xt)
    np.testing.assert_allclose(h, t2.numpy(), rtol=1e-13)


def _swap_rule(monkeypatch, op, rule):
    """Replace op's rule (what create_graph=True runs) for one test; the
    table is a list (dispatch by index), so a copy is patched in."""
    import yscv.engine.walk_recorded as wr

    table = list(registry.RULES)
    table[int(op)] = rule
    monkeypatch.setattr(wr, "_RULES", table)


def test_a_rule_returning_the_wrong_number_of_gradients_raises_naming_the_op(monkeypatch):
    """Under the graph interpreter (create_graph=True) a rule is checked as
    on arrays; the first-order walk (registry.BACKWARD) is untouched."""
    _swap_rule(monkeypatch, Op.EXP, lambda ns, g, xs, y, attrs, saved, needs: (g, g))
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(2))
    y = g.sum(g.exp(x))
    n = len(g)
    with pytest.raises(yscv.BackwardError, match=r"backward of exp \(node 1\) returned 2 "):
        g.gradients(y, [x], create_graph=True)
    assert len(g) == n   # the failed recorded walk left no node behind
    np.testing.assert_allclose(g.gradients(y, [x])[0], np.exp(np.ones(2)))


def test_a_rule_returning_an_array_is_refused_not_detached(monkeypatch):
    _swap_rule(monkeypatch, Op.EXP, lambda ns, g, xs, y, attrs, saved, needs: (ns.value(y),))
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(2))
    with pytest.raises(yscv.BackwardError, match="detached"):
        g.gradients(g.sum(g.exp(x)), [x], create_graph=True)


def test_first_order_gradients_are_bit_identical_with_and_without_create_graph():
    rng = np.random.default_rng(3)
    W, X = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    g = yscv.Graph()
    w = g.variable(W)
    loss = g.mean(g.tanh(g.matmul(g.constant(X), w)) ** 2)
    plain = g.gradients(loss, [w])[0]
    (rec,) = g.gradients(loss, [w], create_graph=True)
    assert g.value(rec).dtype == np.float32
    assert g.value(rec).tobytes() == plain.tobytes()   # one rule, two interpreters


def test_gradgradcheck_catches_a_wrong_second_derivative(monkeypatch):
    assert yscv.gradgradcheck(lambda g, x: g.sum(g.tanh(x) * x), [np.array([0.3, -0.5])])
    # a rule whose first derivative is right but detached from x (a constant)
    _swap_rule(monkeypatch, Op.TANH, lambda ns, g, xs, y, attrs, saved, needs: (
        ns.mul(g, ns.const(1.0 - ns.value(y) ** 2)),))
    with pytest.raises(yscv.GradcheckError, match="tanh"):
        yscv.gradgradcheck(lambda g, x: g.sum(g.tanh(x) * x), [np.array([0.3, -0.5])])
