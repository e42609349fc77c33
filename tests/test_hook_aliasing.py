"""Hooks cannot corrupt another node's gradient (serial and parallel walk).

``add`` hands one gradient array to both of its inputs, so a hook that wrote
to its argument in place would change the sibling's gradient too (and with
``workers=2`` do so depending on which thread got there first). A hook gets
a read-only view (an in-place write raises BackwardError naming the hook and
the node); a post-accumulate hook gets a stored gradient of its own."""
import numpy as np
import pytest

import yscv


def _branchy(g, rng):
    """x -> a = tanh(x), b = exp(x); loss = sum((a + b) * c) + sum(tanh(a + b)):
    the sum node s = a + b is consumed twice (a fork, so workers=2 runs
    threads), and its backward hands one array to a and b."""
    x = g.variable(rng.standard_normal((32, 48)))
    c = g.constant(rng.standard_normal((32, 48)))
    a = g.tanh(x)
    b = g.exp(x * 0.5)
    s = a + b
    loss = g.sum(s * c) + g.sum(g.tanh(s))
    return x, a, b, loss


def _torch_branchy(torch, x_np, c_np, scale_a):
    x = torch.tensor(x_np, requires_grad=True)
    c = torch.tensor(c_np)
    a = torch.tanh(x)
    b = torch.exp(x * 0.5)
    a.register_hook(lambda gr: gr * scale_a)
    s = a + b
    loss = (s * c).sum() + torch.tanh(s).sum()
    loss.backward()
    return x.grad.numpy()


@pytest.mark.parametrize("workers", [1, 2])
def test_in_place_write_in_a_hook_raises_the_same_error_every_run(workers):
    nodes = set()
    for _ in range(25):
        g = yscv.Graph(np.float64)
        x, a, b, loss = _branchy(g, np.random.default_rng(0))
        g.register_hook(a, lambda gr: gr.__imul__(2.0))
        with pytest.raises(yscv.BackwardError, match="in place") as e:
            g.backward(loss, workers=workers)
        nodes.add(e.value.node)
        assert g.grad(x) is None   # as any failed backward: x is below a
    assert nodes == {g._index(a)}


@pytest.mark.parametrize("workers", [1, 2])
def test_in_place_write_in_a_hook_raises_and_leaves_the_sibling_alone(workers):
    g = yscv.Graph(np.float64)
    x, a, b, loss = _branchy(g, np.random.default_rng(0))
    seen_b = []
    g.register_hook(b, lambda gr: seen_b.append(gr.copy()))

    def scale_in_place(grad):
        grad *= 2.0

    g.register_hook(a, scale_in_place)
    with pytest.raises(yscv.BackwardError, match=r"hook .*scale_in_place on node \d+ \(tanh\)"
                                                 r".*in place") as e:
        g.backward(loss, workers=workers)
    assert e.value.node == g._index(a) and e.value.op == "hook"
    assert isinstance(e.value.__cause__, ValueError)   # numpy's read-only error
    # b's hook saw the unscaled gradient (its index is above a's: it ran first
    # serially; in parallel it may run after a's hook, which wrote nothing)
    if seen_b:
        ref = yscv.Graph(np.float64)
        _, _, rb, rloss = _branchy(ref, np.random.default_rng(0))
        ref.retain_grad(rb)
        ref.backward(rloss)
        np.testing.assert_array_equal(seen_b[0], ref.grad(rb))


def test_np_ufunc_out_in_a_hook_raises_too():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(3))
    y = g.variable(np.ones(3))
    g.register_hook(x, lambda gr: np.multiply(gr, 3.0, out=gr))
    with pytest.raises(yscv.BackwardError, match="in place"):
        g.backward(g.sum(x + y))


def test_hook_replacement_same_bits_every_run_and_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((32, 48))
    c_np = rng.standard_normal((32, 48))
    expect = _torch_branchy(torch, x_np, c_np, 3.0)

    def run(workers):
        g = yscv.Graph(np.float64)
        x, a, b, loss = _branchy(g, np.random.default_rng(0))
        g.register_hook(a, lambda gr: gr * 3.0)
        g.backward(loss, workers=workers)
        return g.grad(x)

    ref = run(1)
    np.testing.assert_allclose(ref, expect, rtol=1e-12, atol=1e-12)
    for _ in range(30):
        for workers in (1, 2):
            assert np.array_equal(run(workers), ref)


def test_leaf_siblings_of_add_keep_their_own_gradient():
    torch = pytest.importorskip("torch")
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0, 3.0]))
    y = g.variable(np.array([4.0, 5.0, 6.0]))
    g.register_hook(y, lambda gr: gr * 10.0)
    g.backward(g.sum((x + y) * 2.0))
    tx = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    ty = torch.tensor([4.0, 5.0, 6.0], dtype=torch.float64, requires_grad=True)
    ty.register_hook(lambda gr: gr * 10.0)
    ((tx + ty) * 2.0).sum().backward()
    np.testing.assert_array_equal(g.grad(x), tx.grad.numpy())
    np.testing.assert_array_equal(g.grad(y), ty.grad.numpy())


def test_hook_returning_its_argument_or_a_view_of_it_stores_a_writable_grad():
    for fn in (lambda gr: gr, lambda gr: gr.reshape(2, 2), lambda gr: gr[...]):
        g = yscv.Graph(np.float64)
        x = g.variable(np.ones((2, 2)))
        g.register_hook(x, fn)
        g.backward(g.sum(x * 3.0))
        gx = g.grad(x)
        np.testing.assert_array_equal(gx, np.full((2, 2), 3.0))
        assert gx.flags.writeable
        gx *= 2.0   # the stored gradient is the caller's to change


def test_gradients_hooks_are_read_only_too():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(3))
    y = g.variable(np.ones(3))
    g.register_hook(x, lambda gr: gr.fill(5.0))
    with pytest.raises(yscv.BackwardError, match="in place"):
        g.gradients(g.sum(x + y), (x, y))


def _post_leak_graph(g, x_np, y_np):
    """s = x + y (leaves) consumed twice: add gives x and y one array."""
    x = g.variable(x_np)
    y = g.variable(y_np)
    s = x + y
    return x, y, g.sum(g.tanh(s)) + g.sum(s * s)


@pytest.mark.parametrize("workers", [1, 2])
def test_post_accumulate_hook_changing_its_grad_in_place_leaves_the_sibling_alone(workers):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x_np, y_np = rng.standard_normal(5), rng.standard_normal(5)
    for hooked in ("x", "y"):   # y is above x (runs first), x below
        g = yscv.Graph(np.float64)
        x, y, loss = _post_leak_graph(g, x_np, y_np)
        leaf = {"x": x, "y": y}[hooked]

        def triple(graph, n):
            graph.grad(n)[...] *= 3.0     # PyTorch: p.grad.mul_(3)

        g.register_post_accumulate_hook(leaf, triple)
        g.backward(loss, workers=workers)

        tx = torch.tensor(x_np, requires_grad=True)
        ty = torch.tensor(y_np, requires_grad=True)

        def ttriple(p):
            p.grad.mul_(3.0)

        {"x": tx, "y": ty}[hooked].register_post_accumulate_grad_hook(ttriple)
        ts = tx + ty
        (torch.tanh(ts).sum() + (ts * ts).sum()).backward()
        np.testing.assert_allclose(g.grad(x), tx.grad.numpy(), rtol=1e-13)
        np.testing.assert_allclose(g.grad(y), ty.grad.numpy(), rtol=1e-13)
        assert not np.shares_memory(g.grad(x), g.grad(y))


@pytest.mark.parametrize("workers", [1, 2])
def test_parameter_grad_and_stored_grad_never_leak_through_post_hooks(workers):
    rng = np.random.default_rng(4)
    w_np, v_np = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def run(hook_on):
        p = yscv.nn.Parameter(w_np.copy(), np.float64)
        g = yscv.Graph(np.float64)
        w = g.param(p)
        v = g.variable(v_np)
        s = w + v
        loss = g.sum(g.tanh(s)) + g.sum(s * s)
        if hook_on == "w":   # the optimizer-in-backward pattern: change p.grad in place
            g.register_post_accumulate_hook(w, lambda graph, n: p.grad.__imul__(0.5))
        elif hook_on == "v":
            g.register_post_accumulate_hook(v, lambda graph, n: graph.grad(n).__imul__(0.5))
        g.backward(loss, workers=workers)
        return p.grad.copy(), g.grad(w).copy(), g.grad(v).copy()

    pg, wg, vg = run(None)
    np.testing.assert_array_equal(pg, wg)
    np.testing.assert_array_equal(wg, vg)          # d loss/dw == d loss/dv
    pg1, wg1, vg1 = run("w")
    np.testing.assert_array_equal(pg1, pg * 0.5)
    np.testing.assert_array_equal(wg1, wg)         # the graph's stored copy untouched
    np.testing.assert_array_equal(vg1, vg)
    pg2, wg2, vg2 = run("v")
    np.testing.assert_array_equal(vg2, vg * 0.5)
    np.testing.assert_array_equal(pg2, pg)
    np.testing.assert_array_equal(wg2, wg)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("create_graph", [False, True])
def test_parameters_handed_one_array_by_add_get_grads_of_their_own(workers, create_graph):
    """``w1 + w2`` hands one gradient array to both parameters: each ``.grad``
    is its own memory, so clipping one in place leaves the other alone."""
    rng = np.random.default_rng(5)
    p1 = yscv.nn.Parameter(rng.standard_normal((3, 4)), np.float64)
    p2 = yscv.nn.Parameter(rng.standard_normal((3, 4)), np.float64)
    g = yscv.Graph(np.float64)
    w1, w2 = g.param(p1), g.param(p2)
    s = w1 + w2
    loss = g.sum(g.tanh(s)) + g.sum(s * s)
    if create_graph:
        g.backward(loss, create_graph=True)
    else:
        g.backward(loss, workers=workers)
    assert not np.shares_memory(p1.grad, p2.grad)
    assert not np.shares_memory(p1.grad, g.grad(w2))
    ref = p2.grad.copy()
    np.testing.assert_array_equal(p1.grad, ref)
    yscv.nn.utils.clip_grad_norm_([p1], 1e-3)
    np.testing.assert_array_equal(p2.grad, ref)
    np.testing.assert_array_equal(g.grad(w2), ref)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_parameters_own_gradient_is_taken_without_a_copy(workers):
    """A gradient the walk made for one parameter alone becomes its ``.grad``
    as it is (no copy: the first gradient of a big model costs no extra
    pass over its memory); it is also the graph's stored gradient of the
    parameter's leaf, as PyTorch's ``w.grad`` is the one gradient of ``w``."""
    rng = np.random.default_rng(6)
    lin = yscv.nn.Linear(4, 3, dtype=np.float64)
    g = yscv.Graph(np.float64)
    x = g.constant(rng.standard_normal((5, 4)))
    y = lin(g, x)
    g.backward(g.sum(g.tanh(y)) + g.sum(y * y), workers=workers)
    w = g.param(lin.weight)
    assert lin.weight.grad is g.grad(w)
    assert lin.weight.grad.flags.writeable and lin.weight.grad.flags.owndata
    assert not np.shares_memory(lin.weight.grad, lin.bias.grad)


def test_a_retained_nodes_gradient_passed_to_a_parameter_is_copied():
    """``s = w + v`` with ``s`` retained: ``add`` passes s's gradient array on
    to ``w`` and ``v`` unchanged; ``w``'s ``.grad`` must not be it."""
    rng = np.random.default_rng(7)
    p = yscv.nn.Parameter(rng.standard_normal((3, 4)), np.float64)
    g = yscv.Graph(np.float64)
    w = g.param(p)
    v = g.variable(rng.standard_normal((3, 4)))
    s = w + v
    g.retain_grad(s)
    g.backward(g.sum(g.tanh(s)))
    ref = g.grad(s).copy()
    p.grad *= 0.0
    np.testing.assert_array_equal(g.grad(s), ref)
    np.testing.assert_array_equal(g.grad(v), ref)


def test_a_backward_inside_a_hook_leaves_the_outer_walks_parameters_checked():
    """A hook that runs a second backward on the same graph: the parameters
    ``w1 + w2`` reached in the outer walk still get arrays of their own."""
    rng = np.random.default_rng(8)
    p1 = yscv.nn.Parameter(rng.standard_normal((3, 4)), np.float64)
    p2 = yscv.nn.Parameter(rng.standard_normal((3, 4)), np.float64)
    p3 = yscv.nn.Parameter(rng.standard_normal((3, 4)), np.float64)
    g = yscv.Graph(np.float64)
    w1, w2, w3 = g.param(p1), g.param(p2), g.param(p3)
    side = g.sum(w3 * w3)
    s = w1 + w2
    h = g.tanh(s)
    g.register_hook(h, lambda gr: g.backward(side) or None)
    g.backward(g.sum(h * h))
    assert not np.shares_memory(p1.grad, p2.grad)
    np.testing.assert_array_equal(p3.grad, 2 * p3.data)
