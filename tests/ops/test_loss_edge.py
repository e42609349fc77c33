"""cosine_similarity and pairwise_distance at the edges, against PyTorch:
zero vectors (first and second derivatives, array and recorded rules)."""

import numpy as np
import pytest

import yscv

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
