"""Engine behaviour: SPEC sections 1 (the graph), 2 (backward) and 4 (errors)."""
import threading

import numpy as np
import pytest

import yscv
from yscv import Graph, Op


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
    code = ("import yscv, yscv._malloc as m; yscv.Graph(); print(m._done, m.tune_malloc_once())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]  # applied at the first Graph, not again
    env = {**__import__("os").environ, "YSCV_MALLOC_TUNING": "0"}
    code = "import yscv._malloc as m; print(m.tune_malloc_once())"
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
