"""Engine behaviour: SPEC sections 1 (the graph), 2 (backward) and 4 (errors)."""
import threading

import numpy as np
import pytest

import yscv
from yscv import Graph, Op
from yscv.engine.namespace import ARRAY


def test_leaves_copy_and_convert_without_aliasing():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    g = Graph()
    x = g.variable(a)
    c = g.constant(a)
    assert g.value(x).dtype == np.float32 and g.value(c).dtype == np.float32
    a[0, 0] = 100.0
    assert g.value(x)[0, 0] == 0.0
    assert a.flags.writeable  # the caller's array is never frozen
    assert g.requires_grad(x) and not g.requires_grad(c)
    assert g.op(x) is Op.LEAF and g.inputs(x) == ()


def test_int_and_bool_inputs_become_graph_dtype():
    g = Graph(np.float64)
    assert g.value(g.variable(np.arange(3))).dtype == np.float64
    assert g.value(g.constant([True, False])).tolist() == [1.0, 0.0]


@pytest.mark.parametrize("bad", [np.ones(2) * 1j, np.array(["a"]), np.array([object()])])
def test_leaf_rejects_complex_string_object(bad):
    g = Graph()
    with pytest.raises(TypeError, match="variable"):
        g.variable(bad)
    assert len(g) == 0


def test_graph_dtype_must_be_float():
    with pytest.raises(TypeError, match="float32 or float64"):
        Graph(np.int32)


def test_values_are_read_only():
    g = Graph()
    x = g.variable(np.ones(3))
    y = x * 2.0
    for n in (x, y):
        v = g.value(n)
        assert v.flags.writeable is False
        with pytest.raises(ValueError):
            v[0] = 5.0


def test_set_value_replaces_leaf_and_checks_shape():
    g = Graph()
    x = g.variable(np.ones(3))
    g.set_value(x, np.array([1, 2, 3]))
    assert g.value(x).tolist() == [1.0, 2.0, 3.0] and g.value(x).dtype == np.float32
    with pytest.raises(yscv.ShapeError, match="set_value"):
        g.set_value(x, np.ones(4))
    y = x + 1.0
    with pytest.raises(TypeError, match="only leaves"):
        g.set_value(y, np.ones(3))


def test_node_ids_are_hashable_immutable_and_checked():
    g = Graph()
    x = g.variable(np.ones(2))
    assert {x: 1}[x] == 1
    assert x.index == 0 and repr(x) == "NodeId(0)"
    with pytest.raises(AttributeError):
        x.index = 3
    other = Graph()
    with pytest.raises(yscv.NodeNotFoundError, match="another graph"):
        other.value(x)
    with pytest.raises(IndexError):  # NodeNotFoundError is also an IndexError
        other.value(x)


def test_truncate_invalidates_ids_even_when_index_is_reused():
    g = Graph()
    w = g.variable(np.ones(2))
    y = w * 3.0
    assert len(g) == 3 and g.node_count() == 3
    g.truncate(1)
    assert len(g) == 1
    with pytest.raises(yscv.NodeNotFoundError, match="truncate"):
        g.value(y)
    z = w * 4.0  # reuses indices 1 and 2
    assert z.index == y.index
    with pytest.raises(yscv.NodeNotFoundError, match="reused"):
        g.value(y)
    assert g.value(z).tolist() == [4.0, 4.0]
    with pytest.raises(IndexError):
        g.truncate(10)


def test_requires_grad_propagates_and_no_grad():
    g = Graph()
    w = g.variable(np.ones(2))
    c = g.constant(np.ones(2))
    assert g.requires_grad(w * c)
    assert not g.requires_grad(c * 2.0)
    with g.no_grad():
        y = w * c
    assert not g.requires_grad(y)
    assert g.requires_grad(w + c)  # restored after the block


def test_operators_and_scalar_operands():
    g = Graph(np.float64)
    a = g.variable(np.array([1.0, 2.0]))
    b = g.variable(np.array([3.0, 4.0]))
    cases = {
        "add": (a + b, [4, 6]), "radd": (1 + a, [2, 3]), "sub": (a - b, [-2, -2]),
        "rsub": (5 - a, [4, 3]), "mul": (a * b, [3, 8]), "rmul": (2 * a, [2, 4]),
        "div": (a / b, [1 / 3, 0.5]), "rdiv": (1 / a, [1, 0.5]), "pow": (a ** 2, [1, 4]),
        "rpow": (2 ** a, [2, 4]), "neg": (-a, [-1, -2]),
    }
    for name, (n, want) in cases.items():
        np.testing.assert_allclose(g.value(n), want, err_msg=name)
    with pytest.raises(TypeError):
        a < b  # comparisons are not overloaded


def test_backward_scalar_seed_and_errors():
    g = Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0, 3.0]))
    y = x * x
    with pytest.raises(yscv.NonScalarTargetError):
        g.backward(y)
    with pytest.raises(yscv.ShapeError, match="grad"):
        g.backward(y, grad=np.ones(2))
    c = g.constant(np.ones(1))
    with pytest.raises(yscv.BackwardError, match="does not require grad"):
        g.backward(c * 2.0)
    g.backward(y, grad=np.array([1.0, 0.5, 2.0]))  # vector-Jacobian product
    np.testing.assert_allclose(g.grad(x), [2.0, 2.0, 12.0])


def test_leaf_grads_accumulate_until_zero_grads():
    g = Graph(np.float64)
    x = g.variable(np.array([2.0]))
    y = x * x
    g.backward(y)
    g.backward(y)  # values are kept: backward can run again
    np.testing.assert_allclose(g.grad(x), [8.0])
    g.zero_grads()
    assert g.grad(x) is None
    g.backward(y)
    np.testing.assert_allclose(g.grad(x), [4.0])


def test_multiple_uses_sum_and_broadcast_reduces():
    g = Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0]))
    b = g.variable(np.array(3.0))
    y = x * x + x * b + b  # x used three times; b broadcast twice
    g.backward(y, grad=np.ones(2))
    np.testing.assert_allclose(g.grad(x), 2 * np.array([1.0, 2.0]) + 3.0)
    np.testing.assert_allclose(g.grad(b), 1.0 + 2.0 + 2.0)
    assert g.grad(b).shape == ()
    assert isinstance(g.grad(b), np.ndarray)


def test_non_leaf_grads_are_transient_unless_retained():
    g = Graph(np.float64)
    x = g.variable(np.array([3.0]))
    h = x * 2.0
    k = x * 5.0
    g.retain_grad(h)
    g.backward(h * k)
    np.testing.assert_allclose(g.grad(h), [15.0])
    assert g.grad(k) is None


def test_zero_grads_inside_a_hook_keeps_later_leaves():
    """A hook that calls zero_grads mid-backward clears what was accumulated
    so far; leaves reached after it still get their gradients."""
    g = Graph(np.float64)
    w = g.variable(np.array([2.0]))
    z = w * 3.0
    b = g.variable(np.array([5.0]))      # index above z: accumulated before z's hook
    y = b * 4.0
    g.register_hook(z, lambda grad: g.zero_grads())
    g.backward(g.sum(z + y))
    assert g.grad(b) is None
    np.testing.assert_allclose(g.grad(w), [3.0])


def test_hooks_replace_gradient_and_post_accumulate_runs():
    g = Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0]))
    h = x * 3.0
    seen = []
    handle = g.register_hook(h, lambda grad: grad * 10.0)
    g.register_hook(x, lambda grad: seen.append(grad.copy()))
    calls = []
    g.register_post_accumulate_hook(x, lambda graph, leaf: calls.append(graph.grad(leaf).copy()))
    g.backward(h, grad=np.ones(2))
    np.testing.assert_allclose(g.grad(x), [30.0, 30.0])
    np.testing.assert_allclose(seen[0], [30.0, 30.0])
    np.testing.assert_allclose(calls[0], [30.0, 30.0])
    handle.remove()
    g.zero_grads()
    g.backward(h, grad=np.ones(2))
    np.testing.assert_allclose(g.grad(x), [3.0, 3.0])


def test_hook_returning_wrong_shape_raises():
    g = Graph()
    x = g.variable(np.ones(2))
    g.register_hook(x, lambda grad: np.ones(3))
    with pytest.raises(yscv.ShapeError, match="hook"):
        g.backward(x * 2.0, grad=np.ones(2))


def test_set_grad_and_clip_grad_norm_and_value():
    g = Graph(np.float64)
    a = g.variable(np.zeros(2))
    b = g.variable(np.zeros(1))
    g.set_grad(a, [3.0, 0.0])
    g.set_grad(b, [4.0])
    total = g.clip_grad_norm([a, b], max_norm=1.0)
    assert total == pytest.approx(5.0)
    np.testing.assert_allclose(np.sqrt(np.sum(g.grad(a) ** 2) + np.sum(g.grad(b) ** 2)), 1.0, rtol=1e-5)
    g.set_grad(a, [3.0, -7.0])
    g.clip_grad_value([a], 2.0)
    np.testing.assert_allclose(g.grad(a), [2.0, -2.0])
    with pytest.raises(yscv.ShapeError):
        g.set_grad(a, [1.0])
    with pytest.raises(ValueError):
        g.clip_grad_norm([a], -1.0)


def test_to_dot_and_summary_report_nodes_and_bytes():
    g = Graph()
    x = g.variable(np.ones((4, 3)))
    y = x * 2.0
    g.backward(y, grad=np.ones((4, 3)))
    dot = g.to_dot()
    assert dot.startswith("digraph") and "n0 -> n2" in dot and "mul" in dot
    s = g.summary()
    assert "variable" in s and "mul" in s and "(4, 3)" in s
    # x: value 48 B + grad 48 B
    assert "96" in s.splitlines()[1]
    mem = g.memory()
    assert mem["values"] == 48 + 4 + 48 and mem["grads"] == 48
    assert mem["total"] == mem["values"] + mem["saved"] + mem["grads"]


def test_anomaly_mode_forward_and_backward():
    g = Graph(detect_anomaly=True)
    x = g.variable(np.array([0.0, 1.0]))
    with np.errstate(divide="ignore"):
        with pytest.raises(yscv.AnomalyError, match=r"log \(node 1\)"):
            g.log(x)
    assert len(g) == 1
    y = g.sqrt(x)  # finite forward, infinite gradient at 0
    with pytest.raises(yscv.AnomalyError, match="backward of sqrt"):
        with np.errstate(divide="ignore"):
            g.backward(y, grad=np.ones(2))


def test_gradcheck_passes_and_reports_a_wrong_gradient():
    assert yscv.gradcheck(lambda g, a, b: a * b + a / b, [np.random.rand(3) + 1, np.random.rand(3) + 1])

    def detached(g, x):  # the constant copy of x hides one path from backward
        return g.mul(x, g.constant(g.value(x)))

    with pytest.raises(yscv.GradcheckError, match="input 0") as info:
        yscv.gradcheck(detached, [np.array([1.0, 2.0])])
    assert isinstance(info.value, AssertionError)


def test_error_hierarchy():
    for cls in (yscv.ShapeError, yscv.NodeNotFoundError, yscv.NonScalarTargetError,
                yscv.BackwardError, yscv.AnomalyError, yscv.GradcheckError, yscv.CheckpointError):
        assert issubclass(cls, yscv.AutogradError)
    assert issubclass(yscv.ShapeError, ValueError)
    assert issubclass(yscv.NodeNotFoundError, IndexError)
    err = yscv.ShapeError("x", op="add", node=3, expected=(2,), got=(3,))
    assert (err.op, err.node, err.expected, err.got) == ("add", 3, (2,), (3,))


def test_param_binding_shares_data_and_accumulates_into_p_grad():
    class P:  # duck-typed stand-in for yscv.nn.Parameter
        def __init__(self, data):
            self.data = data
            self.grad = None

    p = P(np.array([1.0, 2.0], dtype=np.float32))
    g = Graph()
    w = g.param(p)
    assert g.param(p) == w and len(g) == 1
    g.backward(w * w, grad=np.ones(2))
    np.testing.assert_allclose(p.grad, [2.0, 4.0])
    g.backward(w * w, grad=np.ones(2))
    np.testing.assert_allclose(p.grad, [4.0, 8.0])
    p.data -= 1.0  # in-place optimizer update is seen by the graph
    np.testing.assert_allclose(g.value(w), [0.0, 1.0])
    with pytest.raises(TypeError, match="dtype"):
        Graph(np.float64).param(p)


def _chain(seed: int, steps: int = 300):
    rng = np.random.default_rng(seed)
    g = Graph(np.float64)
    x = g.variable(rng.standard_normal(16))
    w = g.variable(rng.standard_normal(16))
    h = x
    for _ in range(steps):
        h = g.sqrt(h * h * w * w + 1.0) - w
    g.backward(h, grad=np.ones(16))
    return g.value(h).copy(), g.grad(x).copy(), g.grad(w).copy()


def test_two_graphs_in_two_threads_match_serial_results():
    serial = [_chain(1), _chain(2)]
    results = [None, None]

    def run(k):
        for _ in range(3):
            results[k] = _chain(k + 1)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for want, got in zip(serial, results):
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


def test_malloc_tuning_runs_once_and_can_be_disabled():
    import subprocess
    import sys
    code = ("import yscv; from yscv import runtime as m; yscv.Graph(); "
            "print(m.malloc_tuned(), m.tune_malloc_once())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]  # applied at the first Graph, not again
    env = {**__import__("os").environ, "YSCV_MALLOC_TUNING": "0"}
    code = "from yscv import runtime as m; print(m.tune_malloc_once())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("build", ["leaf", "add", "reshape", "retained"])
def test_backward_borrows_the_cotangent_without_aliasing_stored_grads(build):
    """backward(grad=a) does not copy ``a`` up front, yet no stored gradient
    aliases it: changing ``a`` afterwards changes nothing, and ``a`` itself is
    never written."""
    g = Graph(np.float64)
    x = g.variable(np.arange(6.0).reshape(2, 3))
    c = g.constant(np.ones((2, 3)))
    if build == "leaf":
        t = x
    elif build == "add":
        t = x + c
    elif build == "reshape":
        t = g.reshape(x, (3, 2))
    else:
        t = x + c
        g.retain_grad(t)
    cot = np.full(g.value(t).shape, 2.0)
    g.backward(t, grad=cot)
    cot[...] = -7.0
    np.testing.assert_array_equal(g.grad(x), np.full((2, 3), 2.0))
    if build == "retained":
        np.testing.assert_array_equal(g.grad(t), np.full((2, 3), 2.0))
    assert g.grad(x).flags.writeable
    g.backward(t, grad=np.ones(g.value(t).shape))   # accumulates into an owned array
    np.testing.assert_array_equal(g.grad(x), np.full((2, 3), 3.0))


# ------------------------------------------------ NodeId.shape / dtype / iter
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_node_shape_and_dtype(dtype):
    g = Graph(dtype)
    x = g.variable(np.ones((2, 3)))
    y = g.sum(x * 2.0, axis=1)
    assert x.shape == (2, 3) and isinstance(x.shape, tuple)
    assert y.shape == (2,)
    assert x.dtype == np.dtype(dtype) and y.dtype == np.dtype(dtype)
    assert isinstance(y.dtype, np.dtype)
    k = len(g)
    g.truncate(k - 1)
    with pytest.raises(yscv.NodeNotFoundError):
        y.shape
    with pytest.raises(yscv.NodeNotFoundError):
        y.dtype


def test_node_is_not_iterable_and_appends_nothing():
    g = Graph()
    x = g.variable(np.ones((2, 3)))
    n = len(g)
    with pytest.raises(TypeError, match="not iterable"):
        iter(x)
    with pytest.raises(TypeError, match="not iterable"):
        list(x)
    with pytest.raises(TypeError, match="not iterable"):
        a, b = x
    with pytest.raises(TypeError):
        [v for v in x]
    assert len(g) == n
    assert g.value(x[0]).shape == (3,)  # explicit indexing still works


# ----------------------------------------------------------- g.gradients
def _torch_pair(dtype):
    torch = pytest.importorskip("torch")
    return torch, (torch.float32 if dtype == np.float32 else torch.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_match_torch_autograd_grad_without_touching_grads(dtype):
    torch, tdt = _torch_pair(dtype)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    g = Graph(dtype)
    x = g.variable(a)
    w = g.variable(b)
    h = g.tanh(g.matmul(x, w))  # an intermediate input
    loss = g.sum(h * h) + g.mean(x)
    g.retain_grad(h)
    g.set_grad(w, np.full((3, 2), 7.0))
    before = len(g)
    dx, dw, dh, dw2 = g.gradients(loss, [x, w, h, w])  # w twice
    assert len(g) == before
    assert g.grad(x) is None and g.grad(h) is None  # nothing stored
    np.testing.assert_array_equal(g.grad(w), np.full((3, 2), 7.0))  # untouched

    tx = torch.tensor(a, dtype=tdt, requires_grad=True)
    tw = torch.tensor(b, dtype=tdt, requires_grad=True)
    th = torch.tanh(tx @ tw)
    tl = (th * th).sum() + tx.mean()
    rx, rw, rh, rw2 = torch.autograd.grad(tl, [tx, tw, th, tw])
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for ours, ref in ((dx, rx), (dw, rw), (dh, rh), (dw2, rw2)):
        assert ours.dtype == np.dtype(dtype)
        np.testing.assert_allclose(ours, ref.numpy(), **tol)
    assert not np.shares_memory(dw, dw2)
    # the same result as backward gives, and backward still works afterwards
    g.set_grad(w, None)
    g.backward(loss)
    np.testing.assert_allclose(g.grad(x), dx, rtol=1e-6)
    np.testing.assert_allclose(g.grad(w), dw, rtol=1e-6)


def test_gradients_vjp_unused_input_zeros_and_hooks():
    torch, tdt = _torch_pair(np.float64)
    g = Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0]))
    unused = g.variable(np.ones((2, 2)))
    const = g.constant(np.array([3.0, 4.0]))
    y = x * 3.0
    z = y * y
    g.register_hook(y, lambda gr: gr * 10.0)
    g.register_hook(x, lambda gr: gr * 100.0)
    post = []
    g.register_post_accumulate_hook(x, lambda graph, leaf: post.append(1))
    ends = []
    g.register_backward_end_hook(lambda graph: ends.append(1))
    seed = np.array([1.0, -1.0])
    dy, dx, du, dc, dlater = g.gradients(z, (y, x, unused, const, z), grad=seed)

    tx = torch.tensor([1.0, 2.0], dtype=tdt, requires_grad=True)
    ty = tx * 3.0
    ty.register_hook(lambda gr: gr * 10.0)
    tx.register_hook(lambda gr: gr * 100.0)
    tz = ty * ty
    ry, rx = torch.autograd.grad(tz, [ty, tx], grad_outputs=torch.tensor([1.0, -1.0], dtype=tdt))
    np.testing.assert_allclose(dy, ry.numpy())  # before y's hook, as torch
    np.testing.assert_allclose(dx, rx.numpy())  # y's and x's hooks applied, as torch
    np.testing.assert_array_equal(du, np.zeros((2, 2)))  # unused: zeros (torch raises)
    np.testing.assert_array_equal(dc, np.zeros(2))  # does not require grad: zeros
    np.testing.assert_array_equal(dlater, seed)  # the target itself: the seed, a copy
    assert not np.shares_memory(dlater, seed)
    assert post == [] and ends == [] and g.grad(x) is None
    # a single NodeId gives a one-tuple
    (only,) = g.gradients(z, x, grad=seed)
    np.testing.assert_allclose(only, dx)


def test_gradients_errors_leave_graph_unchanged():
    g = Graph()
    x = g.variable(np.ones(3))
    y = x * 2.0
    c = g.constant(np.ones(1))
    s = g.sum(y)
    other = Graph().variable(np.ones(3))
    n = len(g)
    with pytest.raises(yscv.NonScalarTargetError, match="gradients"):
        g.gradients(y, [x])
    with pytest.raises(yscv.ShapeError, match="gradients"):
        g.gradients(y, [x], grad=np.ones(2))
    with pytest.raises(yscv.BackwardError, match="gradients"):
        g.gradients(c, [x])
    with pytest.raises(yscv.NodeNotFoundError):
        g.gradients(s, [other])
    with pytest.raises(TypeError, match="gradients"):
        g.gradients(s, 3)
    with pytest.raises(TypeError, match=r"gradients: inputs\[1\]"):
        g.gradients(s, [x, np.ones(3)])
    assert len(g) == n and g.grad(x) is None


def test_gradients_leave_parameter_grads_alone():
    p = yscv.nn.Parameter(np.array([1.0, 2.0]))
    p.grad = np.array([5.0, 5.0], dtype=np.float32)
    g = Graph()
    w = g.param(p)
    (dw,) = g.gradients(g.sum(w * w), [w])
    np.testing.assert_allclose(dw, [2.0, 4.0])
    np.testing.assert_array_equal(p.grad, [5.0, 5.0])


# --------------------------------------------------- backward-end hook
def test_backward_end_hook_runs_once_after_accumulation():
    p = yscv.nn.Parameter(np.array([1.0, 2.0]))
    g = Graph()
    w = g.param(p)
    order = []
    g.register_post_accumulate_hook(w, lambda graph, leaf: order.append("post"))

    def end(graph):
        assert graph is g
        order.append(("end", p.grad.copy()))

    handle = g.register_backward_end_hook(end)
    loss = g.sum(w * w)
    g.backward(loss)
    assert order[0] == "post" and order[1][0] == "end" and len(order) == 2
    np.testing.assert_allclose(order[1][1], [2.0, 4.0])  # p.grad complete when it ran
    g.gradients(loss, [w])
    assert len(order) == 2  # not for functional gradients
    g.backward(loss)
    assert len(order) == 4
    handle.remove()
    handle.remove()  # removing twice is harmless
    g.backward(loss)
    assert len(order) == 5 and order[-1] == "post"


def test_backward_end_hook_not_run_after_a_failed_backward():
    g = Graph()
    x = g.variable(np.ones(2))
    y = x * 2.0
    ends = []
    g.register_backward_end_hook(lambda graph: ends.append(1))
    g.register_hook(y, lambda gr: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        g.backward(y, grad=np.ones(2))
    with pytest.raises(yscv.NonScalarTargetError):
        g.backward(y)
    assert ends == []
    with pytest.raises(TypeError, match="register_backward_end_hook"):
        g.register_backward_end_hook(3)


# ------------------------------------------ clipping parameter-bound nodes
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_graph_clip_grad_norm_clips_parameter_grads(dtype, norm_type):
    torch, tdt = _torch_pair(dtype)
    rng = np.random.default_rng(5)
    ps = [yscv.nn.Parameter(rng.standard_normal(s), dtype=dtype) for s in ((3, 2), (4,))]
    xs = rng.standard_normal((5, 3))
    g = Graph(dtype)
    w, b = (g.param(p) for p in ps)
    loss = g.sum(g.tanh(g.matmul(g.constant(xs), w)) * 4.0) + g.sum(b * b * 3.0)
    g.backward(loss)
    total = g.clip_grad_norm([w, b], 0.5, norm_type)

    tw, tb = (torch.tensor(p.data, requires_grad=True) for p in ps)
    tl = (torch.tanh(torch.tensor(xs, dtype=tdt) @ tw) * 4.0).sum() + (tb * tb * 3.0).sum()
    tl.backward()
    ref = torch.nn.utils.clip_grad_norm_([tw, tb], 0.5, norm_type)
    tol = dict(rtol=1e-5, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    assert total == pytest.approx(ref.item(), rel=tol["rtol"])
    for p, node, t in zip(ps, (w, b), (tw, tb)):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), **tol)
        np.testing.assert_allclose(g.grad(node), t.grad.numpy(), **tol)
        assert p.grad.dtype == np.dtype(dtype)


def test_graph_clip_grad_value_clips_parameter_grads_and_checks_args():
    p = yscv.nn.Parameter(np.array([1.0, -3.0, 0.25]))
    g = Graph()
    w = g.param(p)
    g.backward(g.sum(w * w))
    g.clip_grad_value(w, 1.0)  # a single NodeId is accepted
    np.testing.assert_allclose(p.grad, [1.0, -1.0, 0.5])
    np.testing.assert_allclose(g.grad(w), [1.0, -1.0, 0.5])
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="clip_grad_value"):
            g.clip_grad_value([w], bad)
        with pytest.raises(ValueError, match="clip_grad_norm"):
            g.clip_grad_norm([w], bad)
    with pytest.raises(ValueError, match="norm_type"):
        g.clip_grad_norm([w], 1.0, norm_type=0.0)
    with pytest.raises(TypeError, match="max_norm"):
        g.clip_grad_norm([w], "1")
    np.testing.assert_allclose(p.grad, [1.0, -1.0, 0.5])


def test_buffer_binds_a_view_once_per_graph_without_grad():
    g = Graph()
    arr = np.arange(3, dtype=np.float32)
    b = g.buffer(arr)
    assert g.buffer(arr) == b and len(g) == 1          # bound once
    assert not g.requires_grad(b)
    arr[0] = 7.0                                       # shares memory
    assert g.value(b)[0] == 7.0
    g.truncate(0)
    b2 = g.buffer(arr)                                 # rebound after truncate
    assert b2.index == 0 and len(g) == 1
    with pytest.raises(TypeError, match="running_mean: dtype float64"):
        g.buffer(np.zeros(2), "running_mean")
    with pytest.raises(TypeError, match="buffer: expected a numpy array"):
        g.buffer([1.0])


def test_walk_plain_and_special_paths_agree_bitwise():
    """The walk runs a plain backward without the per-node tests for hooks,
    capture, retained grads and borrowed seeds; with those features on (a
    pass-through hook, a retained node, a read-only seed, gradients()) every
    gradient has the same bits, for the written-out mul/tanh/sigmoid/relu
    rules and the helper-built ones (exp, sub)."""
    rng = np.random.default_rng(3)

    def build():
        g = yscv.Graph(np.float64)
        x = g.variable(rng_x)
        w = g.variable(rng_w)
        h = x
        mids = []
        for k in range(6):
            h = g.tanh(h * w) + g.sigmoid(h) - g.relu(h) * g.exp(h * 0.1)
            mids.append(h)
        return g, x, w, mids, g.sum(h * h)

    rng_x = rng.standard_normal((4, 3))
    rng_w = rng.standard_normal((4, 3))
    g, x, w, _, loss = build()
    g.backward(loss)
    ref = (g.grad(x).copy(), g.grad(w).copy())

    g, x, w, mids, loss = build()
    g.register_hook(mids[2], lambda grad: None)
    g.retain_grad(mids[4])
    seed = np.ones(())
    seed.flags.writeable = False
    g.backward(loss, grad=seed)
    assert g.grad(mids[4]) is not None
    np.testing.assert_array_equal(g.grad(x), ref[0])
    np.testing.assert_array_equal(g.grad(w), ref[1])

    g, x, w, _, loss = build()
    gx, gw = g.gradients(loss, (x, w))
    np.testing.assert_array_equal(gx, ref[0])
    np.testing.assert_array_equal(gw, ref[1])


# ------------------------------------------ bias gradients (sum_rows, issue 16)
from yscv.compute import arrays as _arrays  # noqa: E402


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(32, 64), (1, 5), (0, 7), (7, 3), (200, 64)])
def test_sum_rows_matches_add_reduce(dtype, shape):
    """Small 2-d gradients sum by one ones-vector product, larger ones by
    np.add.reduce; both are the column sums (float64 reference)."""
    g = np.random.default_rng(21).standard_normal(shape).astype(dtype)
    out = _arrays.sum_rows(g)
    assert out.shape == shape[1:] and out.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, g.astype(np.float64).sum(axis=0), rtol=tol, atol=tol)
    if g.size >= _arrays.SUM_ROWS_GEMV_MAX or g.ndim != 2:
        np.testing.assert_array_equal(out, np.add.reduce(g, axis=0))


def test_sum_rows_propagates_nan_and_inf_and_leaves_input():
    g = np.ones((4, 3), dtype=np.float32)
    g[1, 0], g[2, 1], g[3, 1] = np.nan, np.inf, -np.inf
    g[0, 2] = np.inf
    before = g.copy()
    with np.errstate(invalid="ignore"):  # inf - inf (np.add.reduce warns alike)
        out = _arrays.sum_rows(g)
    assert np.isnan(out[0]) and np.isnan(out[1]) and out[2] == np.inf
    np.testing.assert_array_equal(g, before)
    assert out.flags.writeable           # a new array, not the cached ones vector
    out[...] = 0
    np.testing.assert_allclose(_arrays.sum_rows(np.ones((4, 3), np.float32)), [4, 4, 4])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_gradient_is_the_column_sum(dtype):
    """x @ w + b: b's gradient is the seed's column sum (through sum_rows)."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((32, 16)).astype(dtype)
    w = rng.standard_normal((16, 8)).astype(dtype)
    b = rng.standard_normal(8).astype(dtype)
    seed = rng.standard_normal((32, 8)).astype(dtype)
    g = yscv.Graph(dtype)
    bn = g.variable(b)
    g.backward(g.matmul(g.constant(x), g.variable(w)) + bn, grad=seed)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g.grad(bn), seed.astype(np.float64).sum(0), rtol=tol, atol=tol)
    assert g.grad(bn).dtype == dtype
    if dtype == np.float64:
        assert yscv.gradcheck(lambda g, x_, w_, b_: g.tanh(g.matmul(x_, w_) + b_), [x, w, b])


# ------------------------------------------------ ufunc forms of forwards
def _ufunc_ops():
    return [op for op in Op if yscv.registry.UFUNC[int(op)] is not None]


def test_ufunc_forms_cover_the_hot_ops():
    ops = _ufunc_ops()
    assert {Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.ABS, Op.MAXIMUM, Op.MINIMUM} <= set(ops)
    # a forward that silences NumPy's warnings keeps its Python frame
    assert yscv.registry.UFUNC[int(Op.DIV)] is None and yscv.registry.UFUNC[int(Op.EXP)] is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (3, 4)])
def test_ufunc_form_is_the_forward_bit_for_bit(dtype, shape):
    """registry.UFUNC[op] on operands of one ndim gives the registered
    forward's value, bit for bit, and that forward saves nothing; so does
    the graph's node (which calls the ufunc)."""
    rng = np.random.default_rng(30)
    for op in _ufunc_ops():
        uf = yscv.registry.UFUNC[int(op)]
        xs = [rng.uniform(-3.0, 3.0, shape).astype(dtype) for _ in range(uf.nin)]
        value, saved = yscv.registry.FORWARD[int(op)](None, *xs)
        assert saved is None, op
        got = np.asarray(uf(*xs))
        assert got.dtype == np.asarray(value).dtype and got.tobytes() == np.asarray(value).tobytes(), op
        g = Graph(dtype)
        nodes = [g.variable(x) for x in xs]
        n = g._apply1(op, nodes[0]) if uf.nin == 1 else g._apply2(op, *nodes)
        assert g.value(n).shape == shape and g.value(n).tobytes() == got.tobytes(), op


def test_ufunc_form_is_not_used_for_a_row_added_to_a_matrix():
    """add of operands of different ndim goes to the forward (the bias kernel)."""
    calls = []
    table, k = yscv.registry.FORWARD, int(Op.ADD)
    fwd = table[k]
    table[k] = lambda attrs, a, b: calls.append(1) or fwd(attrs, a, b)
    try:
        g = Graph()
        y = g.variable(np.ones((2, 3), np.float32)) + g.variable(np.arange(3, dtype=np.float32))
        assert calls == [1]
        np.testing.assert_array_equal(g.value(y), [[1, 2, 3], [1, 2, 3]])
        g.variable(np.ones(3, np.float32)) + g.variable(np.ones(3, np.float32))
        assert calls == [1]
    finally:
        table[k] = fwd


def test_register_ufunc_refuses_twice_and_before_the_forward():
    with pytest.raises(RuntimeError, match="twice"):
        yscv.registry.register_ufunc(Op.MUL, np.multiply)
    with pytest.raises(RuntimeError, match="before its forward"):
        yscv.registry.register_ufunc(Op.LEAF, np.multiply)


# ------------------------------------------- binary dunders with the fast path
@pytest.mark.parametrize("name", ["__add__", "__sub__", "__mul__", "__truediv__", "__pow__"])
def test_binary_dunders_record_what_apply2_records(name):
    """NodeId's binary dunders hold _apply2's two-NodeId path themselves:
    node for node the same record, value bits and errors."""
    from yscv.node import N_SAVED
    op = {"__add__": Op.ADD, "__sub__": Op.SUB, "__mul__": Op.MUL,
          "__truediv__": Op.DIV, "__pow__": Op.POW}[name]
    rng = np.random.default_rng(5)
    shapes = [((3,), (3,)), ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), ()),
              ((), (3,)), ((1,), (1,))]
    for dtype in (np.float32, np.float64):
        for grad_a, grad_b in ((True, False), (False, False), (True, True)):
            for sa, sb in shapes:
                made = []
                for how in ("dunder", "apply2"):
                    g = Graph(dtype)
                    a = (g.variable if grad_a else g.constant)(rng.uniform(0.5, 2.0, sa))
                    b = (g.variable if grad_b else g.constant)(rng.uniform(0.5, 2.0, sb))
                    y = getattr(a, name)(b) if how == "dunder" else g._apply2(op, a, b)
                    made.append((g, y))
                    rng = np.random.default_rng(5)  # the same operands for both
                (g1, y1), (g2, y2) = made
                r1, r2 = g1._nodes[y1.index], g2._nodes[y2.index]
                assert r1[:N_SAVED] + r1[N_SAVED + 1:] == r2[:N_SAVED] + r2[N_SAVED + 1:]
                assert (r1[N_SAVED] is None) == (r2[N_SAVED] is None)
                assert g1.value(y1).tobytes() == g2.value(y2).tobytes()
                assert g1.value(y1).dtype == g2.value(y2).dtype == dtype
    g = Graph()
    a, b = g.variable(np.ones(3, np.float32)), g.variable(np.ones(2, np.float32))
    with pytest.raises(yscv.ShapeError, match=op.name.lower()):
        getattr(a, name)(b)
    other = Graph().variable(np.ones(3, np.float32))
    with pytest.raises(yscv.NodeNotFoundError, match="another graph"):
        getattr(a, name)(other)
    g.truncate(1)
    with pytest.raises(yscv.NodeNotFoundError):
        getattr(a, name)(b)
    with g.no_grad():
        y = getattr(a, name)(a)
    assert not g.requires_grad(y) and g._saved[y.index] is None
    assert len(g) == 2
    assert getattr(yscv.NodeId, name).__name__ == name


@pytest.mark.parametrize("name", ["neg", "abs", "tanh"])
def test_unary_ufunc_methods_record_what_apply1_records(name):
    """g.neg, g.abs and g.tanh hold _apply1's NodeId path themselves: node
    for node the same record and value bits; other operands and errors as
    _apply1."""
    op = Op[name.upper()]
    for dtype in (np.float32, np.float64):
        for shape in ((3,), (2, 3), (), (1,)):
            for grad in (True, False):
                made = []
                for how in ("method", "apply1"):
                    g = Graph(dtype)
                    x = (g.variable if grad else g.constant)(
                        np.random.default_rng(6).uniform(-2.0, 2.0, shape))
                    y = getattr(g, name)(x) if how == "method" else g._apply1(op, x)
                    made.append((g, y))
                (g1, y1), (g2, y2) = made
                assert g1._nodes[y1.index] == g2._nodes[y2.index]
                assert g1.value(y1).tobytes() == g2.value(y2).tobytes()
                assert g1.value(y1).dtype == dtype and g1.value(y1).shape == shape
    g = Graph()
    y = getattr(g, name)([1.0, -2.0])                  # an array-like: a constant input
    assert len(g) == 2 and g.op(y) == op
    x = g.variable(np.ones(2, np.float32))
    with pytest.raises(yscv.NodeNotFoundError, match="another graph"):
        getattr(g, name)(Graph().variable(np.ones(2, np.float32)))
    g.truncate(2)
    with pytest.raises(yscv.NodeNotFoundError):
        getattr(g, name)(x)
    assert len(g) == 2
    assert getattr(Graph, name).__name__ == name and getattr(Graph, name).__doc__


# ---------------------------------- plain nodes: gradients known to conform
def test_plain_marks_elementwise_nodes_whose_inputs_have_the_output_shape():
    g = Graph()
    x = g.variable(np.ones(3, np.float32))
    w = g.variable(np.full(3, 2.0, np.float32))
    m = g.variable(np.ones((2, 3), np.float32))
    s = g.variable(np.float32(1.0))
    nodes = {"x*w": x * w, "tanh": g.tanh(x), "neg": -x, "m+x": m + x, "m*m": m * m,
             "s*s": s * s, "tanh0d": g.tanh(s), "x/w": x / w, "sum": g.sum(x)}
    got = {k: g._plain[n.index] for k, n in nodes.items()}
    assert got == {"x*w": True, "tanh": True, "neg": True, "m+x": False, "m*m": True,
                   "s*s": False, "tanh0d": False, "x/w": False, "sum": False}
    assert not any(g._plain[n.index] for n in (x, w, m, s))
    assert len(g._plain) == len(g)
    g.truncate(4)
    assert len(g._plain) == 4


# ------------------------------------------------------------ node records
def test_node_records_hold_each_node_and_columns_read_them():
    """One record per node (yscv.node.N_OP ...): its shape is the value's
    shape for every kind of append, needs are the inputs' requires-grad, and
    the column views (g._ops ...) read the records like the old lists."""
    from yscv.node import N_INPUTS, N_NEEDS, N_OP, N_RG, N_SAVED, N_SHAPE
    g = Graph()
    x = g.variable(np.ones(3, np.float32))
    c = g.constant(np.ones((2, 3), np.float32))
    s = g.variable(np.float32(2.0))
    made = [x * x, c + x, s * s, g.tanh(s), g.tanh(x), g.sum(c, axis=0), x * 2.0,
            g.matmul(c, g.reshape(x, (3, 1))), g.var(c + x, axis=1)]
    assert len(g._nodes) == len(g._values) == len(g._uids) == len(g)
    for i, rec in enumerate(g._nodes):
        assert rec[N_SHAPE] == g._values[i].shape
        assert rec[N_NEEDS] == tuple(g._nodes[j][N_RG] for j in rec[N_INPUTS])
        assert rec[N_RG] == (any(rec[N_NEEDS]) if rec[N_INPUTS] else i != c.index and
                             g.requires_grad(g._node_id(i)))
    assert g._ops == [r[N_OP] for r in g._nodes] and len(g._inputs) == len(g)
    assert list(g._rg) == [r[N_RG] for r in g._nodes]
    assert g._inputs[made[1].index] == (c.index, x.index) and g._inputs[-2:] == \
        [r[N_INPUTS] for r in g._nodes[-2:]]
    sm = made[-1].index
    assert g._saved[sm] is not None
    g._saved[sm] = None                       # the saved column takes assignment
    assert g._nodes[sm][N_SAVED] is None and g._nodes[sm][N_OP] == int(Op.VAR)
    with pytest.raises(TypeError, match="read-only"):
        g._ops[0] = 5
    g.truncate(3)
    assert len(g._nodes) == 3 and g._ops == [int(Op.LEAF)] * 3


def test_released_node_keeps_its_record_shape_and_gets_its_saved_back():
    g = Graph(np.float64)
    x = g.variable(np.arange(6.0).reshape(2, 3))
    inner = []

    def body(g, h):
        inner.append(g.var(h * 2.0, axis=1))
        return g.sum(inner[0])

    out = g.checkpoint(body, x)
    k = inner[0].index
    assert g._values[k] is None and g._saved[k] is None   # released
    assert inner[0].shape == (2,)                           # from the record
    g.backward(out)
    ref = Graph(np.float64)
    xr = ref.variable(np.arange(6.0).reshape(2, 3))
    ref.backward(ref.sum(ref.var(xr * 2.0, axis=1)))
    assert g.grad(x).tobytes() == ref.grad(xr).tobytes()
    # the target itself released: the walk recomputes it at its visit and
    # its rule gets the saved data back
    ref.zero_grads()
    ref.backward(ref.var(xr * 2.0))
    g2 = Graph(np.float64)
    x2 = g2.variable(np.arange(6.0).reshape(2, 3))
    loss = g2.var(x2 * 2.0)
    g2.backward(loss, retain_graph=False)                   # released as the walk goes
    assert g2._values[loss.index] is None and g2._saved[loss.index] is None
    assert g2.grad(x2).tobytes() == ref.grad(xr).tobytes()
    g2.zero_grads()
    g2.backward(loss)                                        # recomputed, saved restored
    assert g2.grad(x2).tobytes() == ref.grad(xr).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (3, 4)])
def test_rules_of_ufunc_ops_return_conformed_gradients(dtype, shape):
    """The walk does not conform a plain node's gradients: the backward rule
    of every op with a ufunc form must return, for inputs of the output's
    shape, ndarrays of that shape and the graph dtype (or None)."""
    from yscv.engine.namespace import ARRAY

    rng = np.random.default_rng(31)
    for op in _ufunc_ops():
        uf = yscv.registry.UFUNC[int(op)]
        xs = tuple(rng.uniform(-3.0, 3.0, shape).astype(dtype) for _ in range(uf.nin))
        if uf.nin == 2:
            xs[1][0] = xs[0][0]  # a tie (maximum/minimum split g there)
        out = uf(*xs)
        gy = rng.standard_normal(shape).astype(dtype)
        grads = yscv.registry.BACKWARD[int(op)](ARRAY, gy, xs, out, None, None, (True,) * uf.nin)
        assert len(grads) == uf.nin, op
        for gx in grads:
            assert type(gx) is np.ndarray and gx.shape == shape and gx.dtype == dtype, op


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain_chain_gradients_match_torch(dtype):
    """The scalar chain (every node plain) and a broadcast variant (none
    plain) against PyTorch."""
    torch = pytest.importorskip("torch")
    for wshape in ((1,), (2, 1)):
        g = Graph(dtype)
        x0 = np.array([0.5], dtype)
        w0 = np.full(wshape, 0.9, dtype)
        b0 = np.array([0.1], dtype)
        x, w, b = g.variable(x0), g.variable(w0), g.variable(b0)
        h = x
        for _ in range(20):
            h = g.tanh(h * w + b)
        g.backward(g.sum(h))
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        th = tx
        for _ in range(20):
            th = torch.tanh(th * tw + tb)
        th.sum().backward()
        tol = 1e-5 if dtype == np.float32 else 1e-12
        for n, t in ((x, tx), (w, tw), (b, tb)):
            np.testing.assert_allclose(g.grad(n), t.grad.numpy(), rtol=tol, atol=tol)
            assert g.grad(n).dtype == dtype and g.grad(n).shape == t.grad.shape


def test_anomaly_mode_still_checks_plain_nodes():
    g = Graph(detect_anomaly=True)
    x = g.variable(np.array([1.0, 2.0], np.float32))
    w = g.variable(np.array([1e30, 1.0], np.float32))
    y = x * w                                   # finite: [1e30, 2]
    assert g._plain[y.index]
    with pytest.raises(yscv.AnomalyError, match="backward of mul"):
        g.backward(y, grad=np.array([1e30, 1.0], np.float32))  # 1e30 * 1e30 = inf
