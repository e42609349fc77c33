"""vmap of every OpCase row of tests/ops equals the loop of the row over the
samples: values, first-order gradients of the vmapped output, and
per-sample gradients (``vmap(grad(f))``, the backward recorded under the
batching interpreter); every input batched (float64 and float32), and the
first input alone batched, the others shared (float64)."""
import importlib.util
import pathlib

import numpy as np
import pytest

import yscv
from yscv import func, registry
from yscv.op import Op

OPS_DIR = pathlib.Path(__file__).parent / "ops"
SAMPLES = (1.0, 1.013, 0.991)  # scalings: keep each row's domain and structure


def _rows():
    rows = []
    for path in sorted(OPS_DIR.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_vmap_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        rows += [c for c in getattr(mod, "CASES", []) if c.arrays()]
    return rows


ROWS = _rows()


def _batch(arrays):
    return [np.stack([a * s for s in SAMPLES]) for a in arrays]


def _loop(case, stacked, shared, dtype=np.float64):
    vals, grads = [], []
    for b in range(len(SAMPLES)):
        g = yscv.Graph(dtype=dtype)
        xs = [g.variable(a if shared[k] else a[b]) for k, a in enumerate(stacked)]
        out = case.build(g, *xs)
        vals.append(np.array(g.value(out)))
        u = np.cos(np.arange(vals[-1].size)).reshape(vals[-1].shape).astype(dtype)
        if g.requires_grad(out):
            gr = g.gradients(out, xs, grad=u)
        else:
            gr = [np.zeros(np.shape(a if shared[k] else a[b])) for k, a in enumerate(stacked)]
        grads.append(gr)
    return np.stack(vals), grads


def _check(case, shared, dtype=np.float64):
    arrays = case.arrays()
    stacked = [a if shared[k] else s for k, (a, s) in enumerate(zip(arrays, _batch(arrays)))]
    stacked = [a.astype(dtype) for a in stacked]
    ref_vals, ref_grads = _loop(case, stacked, shared, dtype)
    in_axes = tuple(None if s else 0 for s in shared)
    f32 = dtype == np.float32
    vtol = dict(rtol=1e-4, atol=1e-5) if f32 else dict(rtol=1e-9, atol=1e-11)
    gtol = dict(rtol=1e-3, atol=1e-4) if f32 else dict(rtol=1e-8, atol=1e-10)
    g = yscv.Graph(dtype=dtype)
    xs = [g.variable(a) for a in stacked]
    out = func.vmap(case.build, in_axes=in_axes)(g, *xs)
    np.testing.assert_allclose(g.value(out), ref_vals, **vtol, err_msg=f"{case.id}: values")
    assert g.value(out).dtype == dtype
    # per-sample gradients: vmap(grad(<f, u>))
    u = np.stack([np.cos(np.arange(ref_vals[0].size)).reshape(ref_vals[0].shape)]
                 * len(SAMPLES)).astype(dtype)

    def inner(g, *args):
        *xs_, ub = args
        return g.sum(g.mul(case.build(g, *xs_), ub))

    argnums = tuple(range(len(stacked)))
    per = func.vmap(func.grad(inner, argnums=argnums), in_axes=in_axes + (0,))(*stacked, u)
    for k in range(len(stacked)):
        ref = np.stack([ref_grads[b][k] for b in range(len(SAMPLES))])
        np.testing.assert_allclose(per[k], ref, **gtol,
                                   err_msg=f"{case.id}: per-sample gradient of input {k}")
    # gradients of the vmapped output (the physical walk): sums over shared inputs
    if g.requires_grad(out):
        got = g.gradients(out, xs, grad=u)
        for k in range(len(stacked)):
            ref = np.stack([ref_grads[b][k] for b in range(len(SAMPLES))])
            ref = ref.sum(0) if shared[k] else ref
            np.testing.assert_allclose(got[k], ref, **gtol,
                                       err_msg=f"{case.id}: gradient of input {k}")


GRAD_ROWS = [c for c in ROWS if c.check_grad]


#: what vmap refuses on purpose (yscv.BatchingError naming the op): a user
#: op (no batching rule), dropout under randomness='error', batch norm in
#: training mode updating running statistics
REFUSED = {Op.CUSTOM: "swish|leaky", Op.DROPOUT: "dropout", Op.BATCH_NORM: "batch_norm"}


def _check_or_refused(case, shared, dtype=np.float64):
    try:
        _check(case, shared, dtype)
    except yscv.BatchingError as exc:
        assert case.op in REFUSED, f"{case.id}: refused: {exc}"
        assert exc.op is not None and any(w in exc.op or w in str(exc)
                                          for w in REFUSED[case.op].split("|")), str(exc)
        if case.op is Op.BATCH_NORM:
            assert "untracked" not in case.id and "running statistics" in str(exc)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", GRAD_ROWS, ids=[c.id for c in GRAD_ROWS])
def test_vmap_of_a_row_equals_the_loop(case, dtype):
    _check_or_refused(case, [False] * len(case.arrays()), dtype)


MULTI = [c for c in GRAD_ROWS if len(c.arrays()) > 1]


@pytest.mark.parametrize("case", MULTI, ids=[c.id for c in MULTI])
def test_vmap_of_a_row_with_shared_inputs_equals_the_loop(case):
    _check_or_refused(case, [False] + [True] * (len(case.arrays()) - 1))


def test_every_op_has_a_batching_rule():
    missing = [op.name for op in Op if op is not Op.LEAF and registry.BATCHING[int(op)] is None]
    assert not missing, missing
    assert registry.BATCHING_HOW[int(Op.CUSTOM)] == "refused"


SECOND = [c for c in GRAD_ROWS if c.check_grad2 and c.op not in REFUSED]


@pytest.mark.parametrize("case", SECOND, ids=[c.id for c in SECOND])
def test_second_order_through_vmap_equals_the_loop(case):
    """The per-sample gradients of ``vmap(grad(<f, u>))`` recorded on a graph,
    differentiated again against a direction ``r``, equal the loop's second
    derivatives (float64, every input batched)."""
    arrays = _batch(case.arrays())
    n = len(arrays)
    ref = []
    for b in range(len(SAMPLES)):
        g = yscv.Graph(dtype=np.float64)
        xs = [g.variable(a[b]) for a in arrays]
        out = case.build(g, *xs)
        if not g.requires_grad(out):
            pytest.skip("the row's output depends on no input")
        u = np.cos(np.arange(int(np.prod(out.shape)))).reshape(out.shape)
        gr = g.gradients(out, xs, grad=u, create_graph=True)
        s = None
        for k, gk in enumerate(gr):
            r = np.sin(np.arange(int(np.prod(xs[k].shape))) + k)
            term = g.sum(g.mul(gk, r.reshape(xs[k].shape)))
            s = term if s is None else g.add(s, term)
        ref.append(g.gradients(s, xs) if g.requires_grad(s) else
                   [np.zeros(x.shape) for x in xs])
    g = yscv.Graph(dtype=np.float64)
    xs = [g.variable(a) for a in arrays]

    def inner(g, *args):
        *x_, ub = args
        return g.sum(g.mul(case.build(g, *x_), ub))

    probe = yscv.Graph(np.float64)
    oshape = probe.value(case.build(probe, *[probe.variable(a[0]) for a in arrays])).shape
    u = np.stack([np.cos(np.arange(int(np.prod(oshape)))).reshape(oshape)] * len(SAMPLES))
    per = func.vmap(func.grad(inner, argnums=tuple(range(n))))(g, *xs, g.constant(u))
    s = None
    for k, pk in enumerate(per):
        r = np.sin(np.arange(int(np.prod(arrays[k].shape[1:]))) + k).reshape(arrays[k].shape[1:])
        term = g.sum(g.mul(pk, np.broadcast_to(r, arrays[k].shape)))
        s = term if s is None else g.add(s, term)
    got = g.gradients(s, xs) if g.requires_grad(s) else [np.zeros(a.shape) for a in arrays]
    for k in range(n):
        want = np.stack([ref[b][k] for b in range(len(SAMPLES))])
        np.testing.assert_allclose(got[k], want, rtol=1e-7, atol=1e-9,
                                   err_msg=f"{case.id}: second order, input {k}")
