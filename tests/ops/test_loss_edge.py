"""cosine_similarity and pairwise_distance, against PyTorch: their
``reduction`` (rows of the op tables: forward, gradcheck, second order) and
zero vectors (first and second derivatives, array and recorded rules)."""

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_build,
                          make_op_tests, make_second_order_tests)

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _derivatives(build, tbuild, arrays, seed=0):
    """((yscv's array gradients, recorded gradients, second derivatives),
    (torch's first, second)) of a two-input op, for a random cotangent u
    and second-order weights vs."""
    rng = np.random.default_rng(seed)
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrays]
    out = build(g, *nodes)
    u = rng.standard_normal(g.value(out).shape)
    vs = [rng.standard_normal(a.shape) for a in arrays]
    first = g.gradients(out, nodes, grad=u)
    rec = g.gradients(out, nodes, grad=u, create_graph=True)
    total = g.add(*(g.sum(g.mul(d, v)) for d, v in zip(rec, vs)))
    if g.requires_grad(total):
        with np.errstate(divide="ignore", invalid="ignore"):
            second = g.gradients(total, nodes)
    else:       # a piecewise-linear norm (p = 1, inf): the gradient is constant
        second = [np.zeros_like(a) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    tout = tbuild(*ts)
    tf = torch.autograd.grad(tout, ts, torch.tensor(u), create_graph=True)
    tsec = torch.autograd.grad(sum((d * torch.tensor(v)).sum() for d, v in zip(tf, vs)), ts,
                               allow_unused=True)
    tf = [d.detach().numpy() for d in tf]
    tsec = [np.zeros_like(a) if d is None else d.numpy(force=True) for d, a in zip(tsec, arrays)]
    return (first, [g.value(d) for d in rec], second), (tf, tsec)


def _assert_like_torch(ours, theirs, rtol=1e-10, atol=1e-12):
    (first, rec, second), (tf, tsec) = ours, theirs
    for k in range(len(tf)):
        np.testing.assert_allclose(first[k], tf[k], rtol=rtol, atol=atol, err_msg=f"first {k}")
        np.testing.assert_allclose(rec[k], tf[k], rtol=rtol, atol=atol, err_msg=f"recorded {k}")
        # NaN exactly where torch's double backward has NaN (a zero vector's own
        # second derivative through its norm), finite and equal elsewhere
        np.testing.assert_allclose(second[k], tsec[k], rtol=rtol, atol=atol,
                                   err_msg=f"second {k}")


_ROWS = np.array([[1.0, 2.0, -1.0], [0.3, -0.2, 1.0], [-0.5, 0.7, 0.1]])


@pytest.mark.parametrize("zero", ["a", "b", "both"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_cosine_similarity_at_a_zero_vector_matches_pytorch(zero, axis):
    """torch floors each norm at eps with no gradient through the floor and
    differentiates the norm as 0 at 0: the recorded gradient is finite."""
    a = _ROWS.copy()
    b = _ROWS[::-1] * np.array([0.5, -1.0, 2.0])
    idx = (0, slice(None)) if axis == -1 else (slice(None), 1)
    if zero in ("a", "both"):
        a[idx] = 0.0
    if zero in ("b", "both"):
        b[idx] = 0.0
    ours, theirs = _derivatives(lambda g, x, y: g.cosine_similarity(x, y, axis=axis),
                                lambda x, y: F.cosine_similarity(x, y, dim=axis), (a, b))
    assert np.all(np.isfinite(ours[1][0])) and np.all(np.isfinite(ours[1][1]))
    _assert_like_torch(ours, theirs, rtol=1e-9)


def test_cosine_similarity_recorded_gradient_at_a_zero_vector_keeps_float32():
    a = _ROWS.copy()
    a[1] = 0.0
    g = yscv.Graph(np.float32)
    x, y = g.variable(a), g.variable(_ROWS[::-1] + 0.5)
    rec = g.gradients(g.sum(g.cosine_similarity(x, y)), [x, y], create_graph=True)
    first = g.gradients(g.sum(g.cosine_similarity(x, y)), [x, y])
    for d, f in zip(rec, first):
        assert g.value(d).dtype == np.float32 and np.all(np.isfinite(g.value(d)))
        np.testing.assert_allclose(g.value(d), f, rtol=1e-6, atol=1e-6 * np.abs(f).max())


@pytest.mark.parametrize("p", [2.0, 1.0, 1.5, 3.0, 0.5, float("inf")])
def test_pairwise_distance_at_a_zero_difference_matches_pytorch(p):
    """a - b + eps == 0 in one row: the norm's gradient there is 0 (torch's
    vector_norm rule), recorded as well as first order."""
    a = _ROWS.copy()
    b = _ROWS.copy()
    b[1:] = b[1:] * np.array([0.5, -1.0, 2.0]) + 0.25
    ours, theirs = _derivatives(lambda g, x, y: g.pairwise_distance(x, y, p=p, eps=0.0),
                                lambda x, y: F.pairwise_distance(x, y, p=p, eps=0.0), (a, b))
    assert np.all(np.isfinite(ours[1][0]))
    _assert_like_torch(ours, theirs, rtol=1e-9)


def test_triplet_margin_loss_at_a_zero_difference_matches_pytorch():
    a = _ROWS.copy()
    pos = _ROWS.copy()
    neg = _ROWS + 0.3
    pos[2] += 0.4
    g = yscv.Graph(np.float64)
    nodes = [g.variable(x) for x in (a, pos, neg)]
    rec = g.gradients(g.triplet_margin_loss(*nodes, margin=1.0, eps=0.0), nodes,
                      create_graph=True)
    ts = [torch.tensor(x, requires_grad=True) for x in (a, pos, neg)]
    tf = torch.autograd.grad(F.triplet_margin_loss(*ts, margin=1.0, eps=0.0), ts)
    for d, t in zip(rec, tf):
        np.testing.assert_allclose(g.value(d), t.numpy(), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------ reduction
# torch's functions have no reduction and return per-row values: the torch
# twins reduce those by hand, as the NumPy references do.
def _np_reduce(values, reduction):
    return np.asarray(values if reduction == "none" else
                      values.sum() if reduction == "sum" else values.mean())


def _t_reduce(v, reduction):
    return v if reduction == "none" else v.sum() if reduction == "sum" else v.mean()


def _np_cosine(axis, reduction):
    def f(a, b):
        a, b = np.broadcast_arrays(a, b)
        na = np.maximum(np.sqrt((a * a).sum(axis=axis, keepdims=True)), 1e-8)
        nb = np.maximum(np.sqrt((b * b).sum(axis=axis, keepdims=True)), 1e-8)
        return _np_reduce(((a / na) * (b / nb)).sum(axis=axis), reduction)
    return f


def _np_pdist(p, keepdim, reduction):
    def f(a, b):
        return _np_reduce(np.linalg.norm(a - b + 1e-6, ord=p, axis=-1, keepdims=keepdim),
                          reduction)
    return f


def _cos_row(reduction, axis=-1, shapes=((3, 4), (3, 4))):
    return OpCase(Op.COSINE_SIMILARITY,
                  lambda g, a, b: g.cosine_similarity(a, b, axis=axis, reduction=reduction),
                  list(shapes), _np_cosine(axis, reduction),
                  name=f"cosine_similarity_axis{axis}_{reduction}",
                  torch_build=lambda t, a, b: _t_reduce(
                      t.nn.functional.cosine_similarity(a, b, dim=axis), reduction))


def _pdist_row(reduction, p=2.0, keepdim=False, shapes=((3, 4), (3, 4))):
    return OpCase(Op.PAIRWISE_DISTANCE,
                  lambda g, a, b: g.pairwise_distance(a, b, p=p, keepdim=keepdim,
                                                      reduction=reduction),
                  list(shapes), _np_pdist(p, keepdim, reduction),
                  name=f"pairwise_distance_p{p}_keepdim{keepdim}_{reduction}",
                  torch_build=lambda t, a, b: _t_reduce(
                      t.nn.functional.pairwise_distance(a, b, p=p, keepdim=keepdim), reduction))


CASES = [
    *(_cos_row(r) for r in ("none", "mean", "sum")),
    _cos_row("mean", axis=0, shapes=((3, 2, 4), (2, 4))),
    _cos_row("sum", axis=1, shapes=((2, 3, 4), (1, 3, 1))),
    *(_pdist_row(r) for r in ("none", "mean", "sum")),
    _pdist_row("mean", p=3.0, keepdim=True),
    _pdist_row("sum", p=1.0, shapes=((3, 4), (4,))),
]

BAD = [
    BadCase(Op.COSINE_SIMILARITY, "cosine_reduction_unknown", lambda g: (
        g.variable(np.ones((2, 3))), g.variable(np.ones((2, 3)))),
        lambda g, a, b: g.cosine_similarity(a, b, reduction="avg"), ValueError,
        "cosine_similarity: reduction must be 'mean', 'sum' or 'none', got 'avg'"),
    BadCase(Op.COSINE_SIMILARITY, "cosine_reduction_not_str", lambda g: (
        g.variable(np.ones((2, 3))), g.variable(np.ones((2, 3)))),
        lambda g, a, b: g.cosine_similarity(a, b, reduction=None), TypeError,
        "cosine_similarity: reduction must be a str"),
    BadCase(Op.PAIRWISE_DISTANCE, "pairwise_reduction_unknown", lambda g: (
        g.variable(np.ones((2, 3))), g.variable(np.ones((2, 3)))),
        lambda g, a, b: g.pairwise_distance(a, b, reduction="batchmean"), ValueError,
        "pairwise_distance: reduction must be 'mean', 'sum' or 'none', got 'batchmean'"),
    BadCase(Op.PAIRWISE_DISTANCE, "pairwise_reduction_not_str", lambda g: (
        g.variable(np.ones((2, 3))), g.variable(np.ones((2, 3)))),
        lambda g, a, b: g.pairwise_distance(a, b, reduction=1), TypeError,
        "pairwise_distance: reduction must be a str"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_torch_build_is_the_rows_function(case):
    check_torch_build(case)


def test_default_reduction_is_none_and_keeps_the_per_row_values():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 5, 3))
    g = yscv.Graph(np.float64)
    x, y = g.variable(a), g.variable(b)
    ta, tb = torch.tensor(a), torch.tensor(b)
    for ours, theirs in ((g.cosine_similarity(x, y), F.cosine_similarity(ta, tb, dim=-1)),
                         (g.pairwise_distance(x, y), F.pairwise_distance(ta, tb))):
        assert g.value(ours).shape == (5,)
        np.testing.assert_allclose(g.value(ours), theirs.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.value(g.pairwise_distance(x, y, reduction="mean")),
                               F.pairwise_distance(ta, tb).mean().numpy(), rtol=1e-12)
