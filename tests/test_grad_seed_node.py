"""``grad=<NodeId>`` without create_graph (SPEC section 9): the node's value
is the cotangent, for backward (serial and workers=2) and gradients."""
import numpy as np
import pytest

import yscv

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(13)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 5))
U = RNG.standard_normal((3, 5))


def _build():
    g = yscv.Graph(np.float64)
    a, b = g.variable(A), g.variable(B)
    # two branches, so workers=2 has independent rules to run on threads
    y = g.tanh(g.matmul(a, b)) * g.exp(g.matmul(a, b) * 0.5)
    return g, a, b, y


def _torch_grads(u):
    ta = torch.tensor(A, requires_grad=True)
    tb = torch.tensor(B, requires_grad=True)
    ty = torch.tanh(ta @ tb) * torch.exp((ta @ tb) * 0.5)
    return torch.autograd.grad(ty, (ta, tb), grad_outputs=torch.tensor(u))


@pytest.mark.parametrize("workers", [1, 2])
def test_backward_takes_a_node_as_cotangent(workers):
    g, a, b, y = _build()
    u = g.sin(g.variable(U))             # a computed node that requires grad
    g.backward(y, grad=u, workers=workers)
    ta, tb = _torch_grads(np.sin(U))
    np.testing.assert_allclose(g.grad(a), ta.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.grad(b), tb.numpy(), rtol=1e-12, atol=1e-12)
    # the same bits as the array seed, and the stored grad is writable
    g2, a2, b2, y2 = _build()
    g2.backward(y2, grad=np.sin(U), workers=workers)
    assert np.array_equal(g.grad(a), g2.grad(a2)) and np.array_equal(g.grad(b), g2.grad(b2))
    assert g.grad(a).flags.writeable


def test_backward_with_a_node_seed_and_retain_graph_false():
    g, a, b, y = _build()
    c = g.constant(U)
    g.backward(y, grad=c, retain_graph=False)
    ta, _ = _torch_grads(U)
    np.testing.assert_allclose(g.grad(a), ta.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(g.value(c), U)


def test_gradients_takes_a_node_as_cotangent():
    g, a, b, y = _build()
    u = g.constant(U)
    n = len(g)
    ga, gb = g.gradients(y, [a, b], grad=u)
    assert len(g) == n and g.grad(a) is None
    ta, tb = _torch_grads(U)
    np.testing.assert_allclose(ga, ta.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, tb.numpy(), rtol=1e-12, atol=1e-12)
    # results never alias the seed node's value
    (gy,) = g.gradients(y, [y], grad=u)
    assert gy.flags.writeable and not np.may_share_memory(gy, g.value(u))
    np.testing.assert_array_equal(gy, U)


def test_a_node_seed_of_another_graph_or_shape_is_refused():
    g, a, b, y = _build()
    other = yscv.Graph(np.float64)
    foreign = other.constant(U)
    n = len(g)
    with pytest.raises(yscv.NodeNotFoundError, match="another graph"):
        g.backward(y, grad=foreign)
    with pytest.raises(yscv.NodeNotFoundError, match="another graph"):
        g.gradients(y, [a], grad=foreign)
    with pytest.raises(yscv.ShapeError, match=r"backward: grad has shape \(3, 4\)"):
        g.backward(y, grad=a, workers=2)
    assert len(g) == n and g.grad(a) is None and g.grad(b) is None
