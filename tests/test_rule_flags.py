"""First-order gradients never depend on ``create_graph`` (issue: one rule per
op): for every OpCase row of tests/ops, in float32 and float64,
``g.gradients(out, inputs, grad=u)`` and the values of
``g.gradients(out, inputs, grad=u, create_graph=True)`` are equal bit for bit,
and so is the parallel walk (``workers=2``)."""
import importlib.util
import pathlib

import numpy as np
import pytest

import yscv
from yscv import registry
from yscv.engine.namespace import ARRAY, FALLBACK_NAMES

OPS_DIR = pathlib.Path(__file__).parent / "ops"


def _rows():
    rows = []
    for path in sorted(OPS_DIR.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_flags_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        rows += [c for c in getattr(mod, "CASES", []) if c.check_grad]
    return rows


ROWS = _rows()


def _first_order(case, dtype, create_graph, workers=1):
    arrays = case.arrays()
    g = yscv.Graph(dtype=dtype)
    nodes = [g.variable(a) for a in arrays]
    out = case.build(g, *nodes)
    u = np.random.default_rng(7).standard_normal(g.value(out).shape).astype(dtype)
    if create_graph:
        return [g.value(d) for d in g.gradients(out, nodes, grad=u, create_graph=True)]
    if workers != 1:
        g2 = yscv.Graph(dtype=dtype)
        leaves = [g2.variable(a) for a in arrays]
        out2 = case.build(g2, *leaves)
        g2.backward(out2, grad=u, workers=workers)
        return [g2.grad(n) if g2.grad(n) is not None else np.zeros_like(a)
                for n, a in zip(leaves, arrays)]
    return list(g.gradients(out, nodes, grad=u))


def _same_bits(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", ROWS, ids=[c.id for c in ROWS])
def test_first_order_does_not_depend_on_create_graph(case, dtype):
    plain = _first_order(case, dtype, False)
    recorded = _first_order(case, dtype, True)
    differ = [k for k, (p, r) in enumerate(zip(plain, recorded)) if not _same_bits(p, r)]
    assert not differ, (
        f"{case.id} ({np.dtype(dtype).name}): inputs {differ} differ; max abs diff "
        f"{[float(np.max(np.abs(np.asarray(plain[k]) - np.asarray(recorded[k])))) for k in differ]}")


WRITTEN_OUT = [c for c in ROWS if c.op in registry.written_out()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", WRITTEN_OUT, ids=[c.id for c in WRITTEN_OUT])
def test_a_written_out_array_rule_gives_its_rules_bits(case, dtype):
    """An op whose array walks call a written-out copy of its rule
    (``register_rule(op, array=...)``): the copy and the rule run on arrays
    give the same bits, for every input (needs all True, and one at a time)."""
    arrays = case.arrays()
    g = yscv.Graph(dtype=dtype)
    nodes = [g.variable(a) for a in arrays]
    out = case.build(g, *nodes)
    i = out.index
    op, ins, attrs, saved = g._nodes[i][:4]
    assert op == int(case.op)
    xs = tuple(g._values[j] for j in ins)
    y = g._values[i]
    gy = np.random.default_rng(3).standard_normal(y.shape).astype(dtype)
    n = len(ins)
    for needs in [(True,) * n] + [tuple(k == m for k in range(n)) for m in range(n)]:
        fast = registry.BACKWARD[op](ARRAY, gy, xs, y, attrs, saved, needs)
        rule = registry.RULES[op](ARRAY, gy, xs, y, attrs, saved, needs)
        for k in range(n):
            if not needs[k]:
                continue
            assert _same_bits(fast[k], rule[k]), (case.id, needs, k)


@pytest.mark.parametrize("case", ROWS, ids=[c.id for c in ROWS])
def test_first_order_walks_never_take_the_slow_way(case):
    """No built-in rule's first-order walk runs a name of the array
    namespace through a scratch graph (the fallback for user ops)."""
    before = dict(FALLBACK_NAMES)
    _first_order(case, np.float64, False)
    used = {k: v - before.get(k, 0) for k, v in FALLBACK_NAMES.items() if v != before.get(k, 0)}
    assert not used, f"{case.id}: ns names run through a scratch graph: {used}"


def test_the_example_of_the_issue_a_over_b_float32():
    """a = 1, b = 1e20 in float32: d(a/b)/db is -1e-40 (a denormal) with and
    without create_graph (it was -0.0 with create_graph)."""
    g = yscv.Graph(dtype=np.float32)
    a = g.variable(np.float32(1.0))
    b = g.variable(np.float32(1e20))
    q = g.div(a, b)
    plain = g.gradients(q, [b])[0]
    rec = g.value(g.gradients(q, [b], create_graph=True)[0])
    assert plain.tobytes() == rec.tobytes()
    np.testing.assert_allclose(plain, -9.99995e-41, rtol=1e-5)
