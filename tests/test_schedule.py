"""The one schedule of the backward walks (yscv/engine/schedule.py): the visit
plan as data, and the seeding, hooks, conform checks and accumulation that
the serial, threaded and recorded runners share; the recorded walk sums a
broadcast gradient with the sum_to op, to the array walk's bits."""
import pathlib

import numpy as np
import pytest

import yscv
from yscv import Op, registry
from yscv.engine import schedule
from yscv.engine import walk, walk_parallel, walk_recorded

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _diamond():
    g = yscv.Graph()
    x = g.variable(np.array([0.5, -1.0, 2.0]))
    c = g.constant(np.ones(3))
    a = g.exp(x)
    b = g.mul(a, c)
    d = g.add(a, b)
    return g, x, c, a, b, g.sum(d)


def test_the_plan_is_data_from_the_target_down():
    g, x, c, a, b, t = _diamond()
    plan = schedule.Schedule(g, t.index)
    assert plan.target == t.index
    assert plan.visit == sorted(plan.visit, reverse=True)
    assert plan.visit[0] == t.index
    assert c.index not in plan.visit        # a constant: no slot needs it
    assert plan.slots[b.index] == (0,)      # mul(a, constant): only a
    assert plan.remaining[a.index] == 2     # consumed by b and by d
    assert plan.leaves == [x.index]
    assert plan.branchy                     # a is consumed twice
    assert plan.capture is None


def test_a_captured_plan_stops_below_its_lowest_node():
    g, x, c, a, b, t = _diamond()
    plan = schedule.Schedule(g, t.index, {b.index: None})
    assert min(plan.visit) >= b.index
    assert plan.capture == frozenset({b.index})


def test_a_chain_is_not_branchy():
    g = yscv.Graph()
    h = g.variable(np.ones(3))
    for _ in range(4):
        h = g.tanh(h)
    assert not schedule.Schedule(g, g.sum(h).index).branchy


def test_the_runners_call_the_one_definition():
    assert walk_parallel._Plan is schedule.Schedule
    assert walk_parallel.conform is schedule.conform
    assert walk_parallel.run_hooks is schedule.run_hooks
    assert walk._conform is schedule.conform
    assert walk._accumulate_leaf is schedule.accumulate_leaf
    assert walk_recorded.conform_node is schedule.conform_node
    for gone in ("_seed", "_conform_grad", "_run_hooks", "_accumulate_leaf",
                 "_accumulate_stored"):
        assert not hasattr(yscv.Graph, gone), gone
    for gone in ("seed_node", "unbroadcast_node"):
        assert not hasattr(walk_recorded, gone), gone


def test_no_module_of_the_package_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "yscv").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws", [((5, 3), (3,)), ((2, 3, 4), (3, 1)), ((4, 2, 3), (1, 2, 1)),
                                   ((3,), ())])
def test_the_recorded_walk_sums_broadcasts_with_sum_to_bit_for_bit(xs, ws, dtype):
    rng = np.random.default_rng(5)
    X = rng.standard_normal(xs).astype(dtype)
    W = rng.standard_normal(ws).astype(dtype)
    g = yscv.Graph(dtype=dtype)
    x, w = g.variable(X), g.variable(W)
    out = g.mul(g.add(x, w), g.constant(rng.standard_normal(xs).astype(dtype)))
    u = rng.standard_normal(xs).astype(dtype)
    plain = g.gradients(out, [w], grad=u)[0]
    n0 = len(g._nodes)
    (rec,) = g.gradients(out, [w], grad=u, create_graph=True)
    assert g.value(rec).tobytes() == plain.tobytes()
    if xs != ws:
        ops = [g._nodes[i][0] for i in range(n0, len(g._nodes))]
        assert int(Op.SUM_TO) in ops


def test_second_order_through_a_broadcast_sum():
    """d/dw of sum((x + w)^2)'s gradient: the sum_to node is differentiable."""
    g = yscv.Graph()
    x = g.variable(np.arange(6.0).reshape(2, 3))
    w = g.variable(np.array([0.5, -1.0, 2.0]))
    loss = g.sum(g.mul(g.add(x, w), g.add(x, w)))
    (gw,) = g.gradients(loss, [w], create_graph=True)
    (hw,) = g.gradients(g.sum(gw), [w])
    np.testing.assert_allclose(hw, np.full(3, 4.0))   # d/dw sum(2 (x + w)) = 2 * rows


@pytest.fixture
def bad_exp():
    """Install a wrong array rule for exp (``result(g)``) for one test."""
    k = int(Op.EXP)
    keep = registry.BACKWARD[k]

    def install(result):
        registry.BACKWARD[k] = lambda ns, g, xs, y, attrs, saved, needs: (result(g),)
    yield install
    registry.BACKWARD[k] = keep


@pytest.mark.parametrize("workers", [1, 2])
def test_a_wrong_dtype_gradient_is_refused_by_every_array_runner(bad_exp, workers):
    bad_exp(lambda g: g.astype(np.float32))
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(3))
    y = g.exp(x)
    loss = g.sum(g.add(g.tanh(y), g.sin(y)))   # a fork: the threaded runner really runs
    with pytest.raises(yscv.BackwardError, match="backward of exp .*float32 gradient"):
        g.backward(loss, workers=workers)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_wrong_shape_gradient_is_a_shape_error_in_every_runner(bad_exp, workers):
    bad_exp(lambda g: np.ones(2))
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(3))
    y = g.exp(x)
    loss = g.sum(g.add(g.tanh(y), g.sin(y)))
    with pytest.raises(yscv.ShapeError, match="backward of exp .*shape \\(2,\\) for input"):
        g.backward(loss, workers=workers)


def test_a_wrong_shape_recorded_gradient_is_a_shape_error(monkeypatch):
    rules = list(walk_recorded._RULES)
    monkeypatch.setattr(walk_recorded, "_RULES", rules)
    rules[int(Op.EXP)] = lambda ns, g, xs, y, a, s, n: (ns.const(np.ones(2)),)
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(3))
    n0 = len(g._nodes)
    loss = g.sum(g.exp(x))
    n1 = len(g._nodes)
    with pytest.raises(yscv.ShapeError, match="recorded backward of exp"):
        g.gradients(loss, [x], create_graph=True)
    assert len(g._nodes) == n1 and n1 == n0 + 2   # nothing of the failed walk stays


@pytest.mark.parametrize("create_graph", [False, True])
def test_anomaly_mode_checks_every_runner(create_graph):
    g = yscv.Graph()
    g.detect_anomaly = True
    x = g.variable(np.array([0.0, 1.0]))
    loss = g.sum(g.sqrt(x))
    # first order: the walk's conform check names the rule; recorded: the
    # forward check of the recorded gradient's nodes comes first
    match = "forward of" if create_graph else "backward of sqrt"
    with np.errstate(divide="ignore"), pytest.raises(yscv.AnomalyError, match=match):
        g.gradients(loss, [x], create_graph=create_graph)


@pytest.mark.parametrize("create_graph", [False, True])
def test_seeding_is_checked_once_for_both_walks(create_graph):
    g = yscv.Graph()
    x = g.variable(np.ones(3))
    y = g.exp(x)
    with pytest.raises(yscv.NonScalarTargetError, match="backward: target node"):
        g.backward(y, create_graph=create_graph)
    with pytest.raises(yscv.ShapeError, match="gradients: grad"):
        g.gradients(y, [x], grad=np.ones(2), create_graph=create_graph)
    c = g.constant(np.ones(()))
    with pytest.raises(yscv.BackwardError, match="does not require grad"):
        g.backward(c, create_graph=create_graph)


def test_a_seed_node_of_another_shape_is_refused():
    g = yscv.Graph()
    x = g.variable(np.ones(3))
    y = g.exp(x)
    with pytest.raises(yscv.ShapeError, match="grad node"):
        g.gradients(y, [x], grad=g.constant(np.ones(2)), create_graph=True)


@pytest.mark.parametrize("workers", [1, 2])
def test_hooks_and_accumulation_alike_in_every_runner(workers):
    """A hook's replacement, a retained node and a leaf used twice: the same
    stored gradients from the serial, threaded and recorded runners."""
    def run(mode):
        g = yscv.Graph()
        x = g.variable(np.array([0.3, -0.7, 1.1]))
        y = g.exp(x)
        g.retain_grad(y)
        g.register_hook(y, lambda gr: gr * 2.0)
        loss = g.sum(g.add(g.tanh(y), g.mul(y, x)))
        if mode == "recorded":
            g.backward(loss, create_graph=True)
        else:
            g.backward(loss, workers=workers)
        return g.grad(x), g.grad(y)
    plain = run("plain")
    rec = run("recorded")
    for p, r in zip(plain, rec):
        assert p.tobytes() == r.tobytes()
