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
