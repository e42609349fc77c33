"""Linear algebra at the edges, against PyTorch: eigh's gradient at repeated
eigenvalues, the matrix functions' backward at a singular matrix."""

import warnings

import numpy as np
import pytest

import yscv

torch = pytest.importorskip("torch")

_W = np.array([0.5, -1.0, 2.0])        # a weighting of the eigenvalues


def _eigh_grads(a, weight, dtype, create_graph, vectors_times=None):
    """yscv's gradient of sum(weight * L) (+ vectors_times * sum(V)) wrt a."""
    g = yscv.Graph(dtype)
    x = g.variable(a)
    values, vectors = g.eigh(x)
    y = g.sum(g.mul(values, weight))
    if vectors_times is not None:
        y = g.add(y, g.mul(g.sum(vectors), vectors_times))
    (d,) = g.gradients(y, [x], create_graph=create_graph)
    return g.value(d) if create_graph else d


def _torch_eigh_grad(a, weight):
    t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    (d,) = torch.autograd.grad((torch.linalg.eigh(t)[0] * torch.tensor(weight)).sum(), [t])
    return d.numpy()


# (matrix, a weighting equal on each repeated pair, so that the loss is
# differentiable whatever basis LAPACK picks in the repeated eigenspace)
_REPEATED = {
    "identity": (np.eye(3), np.ones(3)),
    "batch_identity_and_1_2_2": (np.stack([np.eye(3), np.diag([1.0, 2.0, 2.0])]), np.ones(3)),
    "rotated_double": ((lambda q: q @ np.diag([3.0, -1.0, -1.0]) @ q.T)(
        np.linalg.qr(np.random.default_rng(3).standard_normal((3, 3)))[0]),
        np.array([0.5, 0.5, 2.0])),
    "diag_1_2_2": (np.diag([1.0, 2.0, 2.0]), np.array([-1.5, 0.5, 0.5])),
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(_REPEATED))
def test_eigh_eigenvalue_gradient_at_repeated_eigenvalues_matches_pytorch(name, dtype,
                                                                          create_graph):
    """A loss on the eigenvalues only: V diag(gL) V^T, finite (torch's
    branch for an undefined eigenvector cotangent), never 0 / 0."""
    a, weight = _REPEATED[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _eigh_grads(a, weight, dtype, create_graph)
    assert got.dtype == dtype and np.all(np.isfinite(got))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, _torch_eigh_grad(a, weight), rtol=tol, atol=tol)


@pytest.mark.parametrize("create_graph", [False, True])
def test_eigh_gradient_of_sum_of_eigenvalues_at_identity_is_identity(create_graph):
    np.testing.assert_array_equal(_eigh_grads(np.eye(4), np.ones(4), np.float64, create_graph),
                                  np.eye(4))


@pytest.mark.parametrize("create_graph", [False, True])
def test_eigh_zero_eigenvector_cotangent_counts_as_unused(create_graph):
    """0 * sum(V) adds a cotangent of zeros: the gradient is the eigenvalues'
    alone (torch, with a defined zero gV, computes 0 / 0 there)."""
    got = _eigh_grads(np.eye(3), _W, np.float64, create_graph, vectors_times=0.0)
    np.testing.assert_allclose(got, np.diag(_W), atol=1e-15)


@pytest.mark.parametrize("create_graph", [False, True])
def test_eigh_batch_with_vectors_used_for_one_matrix_only(create_graph):
    """Matrix by matrix: the identity's vectors are unused (finite, identity),
    the other's are used (torch's rule, distinct eigenvalues)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 3))
    a = np.stack([np.eye(3), x + x.T])
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    values, vectors = g.eigh(v)
    y = g.add(g.sum(values), g.sum(g.mul(g.select(vectors, 0, 1), g.select(vectors, 0, 1))))
    (d,) = g.gradients(y, [v], create_graph=create_graph)
    d = g.value(d) if create_graph else d
    t = torch.tensor(a, requires_grad=True)
    tl, tv = torch.linalg.eigh(t)
    (ref,) = torch.autograd.grad(tl.sum() + (tv[1] * tv[1]).sum(), [t])   # [0] is NaN
    np.testing.assert_array_equal(d[0], np.eye(3))
    np.testing.assert_allclose(d[1], ref[1].numpy(), rtol=1e-10, atol=1e-12)


def test_eigh_used_vectors_at_repeated_eigenvalues_stay_torchs_rule():
    """With an eigenvector cotangent the quotient by L_j - L_i is torch's:
    not finite where eigenvalues repeat; distinct ones are unaffected."""
    a = np.stack([np.eye(3), np.diag([1.0, 2.0, 3.0])])
    with np.errstate(divide="ignore", invalid="ignore"):
        got = _eigh_grads(a, _W, np.float64, False, vectors_times=1.0)
    t = torch.tensor(a, requires_grad=True)
    tl, tv = torch.linalg.eigh(t)
    (ref,) = torch.autograd.grad((tl * torch.tensor(_W)).sum() + tv.sum(), [t])
    assert not np.all(np.isfinite(got[0]))
    np.testing.assert_allclose(got[1], ref[1].numpy(), rtol=1e-12, atol=1e-12)


def test_eigh_second_derivative_at_repeated_eigenvalues_matches_pytorch():
    """Through the recorded gradient (identity at I): the second derivative
    is torch's double backward, which is not finite at a repeated eigenvalue
    and finite for a batch member with distinct ones."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 3))
    a = np.stack([np.eye(3), x + x.T])
    w = rng.standard_normal((2, 3, 3))
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    values, _ = g.eigh(v)
    (d,) = g.gradients(g.sum(g.mul(values, values)), [v], create_graph=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        (h,) = g.gradients(g.sum(g.mul(d, w)), [v])
    t = torch.tensor(a, requires_grad=True)
    (td,) = torch.autograd.grad((torch.linalg.eigh(t)[0] ** 2).sum(), [t], create_graph=True)
    (th,) = torch.autograd.grad((td * torch.tensor(w)).sum(), [t])
    np.testing.assert_allclose(g.value(d), td.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h, th.numpy(), rtol=1e-10, atol=1e-12)   # NaN where torch's is
    assert np.all(np.isfinite(h[1]))


# ------------------------------------------------ singular matrices
_RANK2 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, -1.0]])
_ZERO_COLUMN = np.array([[1.0, 0.0, 3.0], [2.0, 0.0, 6.0], [0.0, 0.0, 1.0]])


@pytest.mark.parametrize("create_graph", [False, True])
def test_slogdet_gradient_at_a_singular_matrix_raises_naming_slogdet(create_graph):
    """torch's gradient there is not finite (inv(a) does not exist): yscv
    raises its BackwardError naming slogdet and the batch index instead of
    NumPy's bare LinAlgError (first order: nothing appended; the recorded
    walk has appended its seed by then)."""
    a = np.stack([np.diag([2.0, 1.0, 0.5]), _ZERO_COLUMN])
    t = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.slogdet(t)[1].sum(), [t])
    assert not np.all(np.isfinite(tg[1].numpy()))
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    _, logabs = g.slogdet(v)
    before = len(g)
    with pytest.raises(yscv.BackwardError,
                       match=r"slogdet: .*singular matrix .*batch index \(1,\)") as info:
        g.gradients(logabs, [v], grad=np.ones(2), create_graph=create_graph)
    assert info.value.op == "slogdet" and isinstance(info.value, yscv.AutogradError)
    assert create_graph or len(g) == before


def test_slogdet_gradient_of_an_invertible_batch_is_unchanged():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    _, logabs = g.slogdet(v)
    (d,) = g.gradients(logabs, [v], grad=np.array([1.0, -2.0]))
    t = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.slogdet(t)[1], [t], torch.tensor([1.0, -2.0]))
    np.testing.assert_allclose(d, tg.numpy(), rtol=1e-12)


_SINGULAR = {
    "rank2_3x3": _RANK2,
    "rank1_2x2": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "batch_with_invertible": np.stack([_RANK2, np.diag([2.0, -1.0, 0.5]), _ZERO_COLUMN]),
}


@pytest.mark.parametrize("name", sorted(_SINGULAR))
def test_det_create_graph_at_a_singular_matrix_matches_pytorch(name):
    """The recorded gradient of det at a singular matrix is the cofactor
    matrix (from the minors' determinants), first and second order equal
    to torch's double backward."""
    a = _SINGULAR[name]
    rng = np.random.default_rng(9)
    u = rng.standard_normal(a.shape[:-2])
    w = rng.standard_normal(a.shape)
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    (d1,) = g.gradients(g.det(v), [v], grad=u, create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(g.mul(d1, d1), w)), [v])
    t = torch.tensor(a, requires_grad=True)
    (t1,) = torch.autograd.grad(torch.linalg.det(t), [t], torch.tensor(u), create_graph=True)
    (t2,) = torch.autograd.grad((t1 * t1 * torch.tensor(w)).sum(), [t])
    np.testing.assert_allclose(g.value(d1), t1.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d2, t2.numpy(), rtol=1e-9, atol=1e-11)


def _cofactors_by_minors(m):
    n = m.shape[-1]
    return np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(m, i, 0), j, 1))
                      for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("a", [np.zeros((3, 3)), np.diag([1.0, 0.0, 0.0])],
                         ids=["zero", "rank1_3x3"])
def test_det_create_graph_below_rank_n_minus_1_is_the_cofactors_derivative(a):
    """Rank n-2 and below: the cofactors are 0 and their derivative is
    checked by central differences (torch's SVD formula gives NaN there)."""
    w = np.random.default_rng(10).standard_normal((3, 3))
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    (d1,) = g.gradients(g.det(v), [v], create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(d1, w)), [v])
    fd = np.zeros((3, 3))
    for i, j in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[i, j] = 1e-6
        fd[i, j] = ((_cofactors_by_minors(a + e) - _cofactors_by_minors(a - e)) * w).sum() / 2e-6
    np.testing.assert_array_equal(g.value(d1), np.zeros((3, 3)))
    np.testing.assert_allclose(d2, fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_create_graph_at_a_singular_matrix_keeps_the_dtype_and_third_order(dtype):
    """The cofactors' DET nodes are differentiated again (third order against
    torch); a 1x1 matrix's gradient is the constant 1."""
    g = yscv.Graph(dtype)
    v = g.variable(_RANK2)
    (d1,) = g.gradients(g.det(v), [v], create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(d1, d1)), [v], create_graph=True)
    (d3,) = g.gradients(g.sum(g.mul(d2, d2)), [v])
    assert g.value(d1).dtype == dtype and d3.dtype == dtype
    t = torch.tensor(_RANK2, requires_grad=True)
    (t1,) = torch.autograd.grad(torch.linalg.det(t), [t], create_graph=True)
    (t2,) = torch.autograd.grad((t1 * t1).sum(), [t], create_graph=True)
    (t3,) = torch.autograd.grad((t2 * t2).sum(), [t])
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(d3, t3.numpy(), rtol=tol, atol=tol * np.abs(t3.numpy()).max())
    g1 = yscv.Graph(dtype)
    x = g1.variable(np.zeros((2, 1, 1)))
    (e,) = g1.gradients(g1.det(x), [x], grad=np.array([2.0, 3.0]), create_graph=True)
    np.testing.assert_array_equal(g1.value(e), np.array([2.0, 3.0]).reshape(2, 1, 1))
