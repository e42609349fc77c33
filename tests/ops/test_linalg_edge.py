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
