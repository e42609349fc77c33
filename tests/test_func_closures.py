"""yscv.func with inner functions that close over the outer argument
(perturbation confusion): every nesting against torch.func in float64."""
import numpy as np
import pytest

import yscv
from yscv import func as F

torch = pytest.importorskip("torch")
TF = torch.func

RNG = np.random.default_rng(4)
X = RNG.uniform(0.2, 0.9, 4)
T = RNG.standard_normal(4)


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=tol, atol=tol)


def test_classic_examples_scalar():
    # d/dx [x * D_y (x + y)|_{y=x}] = 1, and d/dx [D_y (x * y)|_{y=x}] = 1
    x0 = np.array(1.5)
    r1 = F.grad(lambda g, x: x * F.grad(lambda g2, y: x + y)(g, x))(x0)
    r2 = F.grad(lambda g, x: F.grad(lambda g2, y: x * y)(g, x))(x0)
    t1 = TF.grad(lambda x: x * TF.grad(lambda y: x + y)(x))(_t(x0))
    t2 = TF.grad(lambda x: TF.grad(lambda y: x * y)(x))(_t(x0))
    assert float(t1) == 1.0 and float(t2) == 1.0
    close(r1, t1)
    close(r2, t2)
    # the inner point a constant: x * D_y (x * y)|_{y=2} = x^2
    r3 = F.grad(lambda g, x: x * F.grad(lambda g2, y: x * y)(g, g.constant(np.array(2.0))))(x0)
    close(r3, TF.grad(lambda x: x * TF.grad(lambda y: x * y)(_t(2.0)))(_t(x0)))


def _inner(g, x, y):
    return g.sum(g.sin(x * y) * y)


def _tinner(x, y):
    return (torch.sin(x * y) * y).sum()


def test_grad_of_grad_closing_over_the_argument():
    r = F.grad(lambda g, x: g.sum(x * F.grad(lambda g2, y: _inner(g2, x, y))(g, x)))(X)
    t = TF.grad(lambda x: (x * TF.grad(lambda y: _tinner(x, y))(x)).sum())(_t(X))
    close(r, t)


def test_grad_of_jvp_closing_over_the_argument():
    def outer(g, x):
        _, jt = F.jvp(lambda g2, y: g2.tanh(x * y) * y, (g, x), (T,))
        return g.sum(jt * x)

    def touter(x):
        _, jt = TF.jvp(lambda y: torch.tanh(x * y) * y, (x,), (_t(T),))
        return (jt * x).sum()

    close(F.grad(outer)(X), TF.grad(touter)(_t(X)))


def test_jvp_of_grad_closing_over_the_argument():
    out, jt = F.jvp(lambda g, x: F.grad(lambda g2, y: _inner(g2, x, y))(g, x), (X,), (T,))
    tout, tjt = TF.jvp(lambda x: TF.grad(lambda y: _tinner(x, y))(x), (_t(X),), (_t(T),))
    close(out, tout)
    close(jt, tjt)


def test_hessian_closing_over_the_argument():
    def outer(g, x):
        return g.sum(x * F.grad(lambda g2, y: g2.sum(g2.exp(x * y)))(g, x))

    def touter(x):
        return (x * TF.grad(lambda y: torch.exp(x * y).sum())(x)).sum()

    close(F.hessian(outer)(X), TF.hessian(touter)(_t(X)), 1e-11)


def test_jacrev_and_jacfwd_closing_over_the_argument():
    def outer(g, x):
        return x * F.grad(lambda g2, y: g2.sum(g2.sin(x * y)))(g, x)

    def touter(x):
        return x * TF.grad(lambda y: torch.sin(x * y).sum())(x)

    t = TF.jacrev(touter)(_t(X))
    close(F.jacrev(outer)(X), t)
    close(F.jacfwd(outer)(X), t)
    # an inner Jacobian closing over the outer argument: shape (4, 4, 4)
    r = F.jacfwd(lambda g, x: F.jacrev(lambda g2, y: g2.sin(x * y) * y)(g, x))(X)
    t = TF.jacfwd(lambda x: TF.jacrev(lambda y: torch.sin(x * y) * y)(x))(_t(X))
    assert r.shape == (4, 4, 4)
    close(r, t)


def test_graph_form_keeps_positions_apart_and_the_result_differentiable():
    g = yscv.Graph(np.float64)
    x = g.variable(X)
    # the same node at two positions: each gets its own partial, as torch.func
    ga, gb = F.grad(lambda g2, a, b: g2.sum(a * a * b), argnums=(0, 1))(g, x, x)
    ta, tb = TF.grad(lambda a, b: (a * a * b).sum(), argnums=(0, 1))(_t(X), _t(X))
    close(g.value(ga), ta)
    close(g.value(gb), tb)
    # the inner gradient is recorded on g and depends on x through the closure
    inner = F.grad(lambda g2, y: _inner(g2, x, y))(g, x)
    assert g.requires_grad(inner)
    (d,) = g.gradients(g.sum(inner), [x])
    close(d, TF.grad(lambda x: TF.grad(lambda y: _tinner(x, y))(x).sum())(_t(X)))


def test_vjp_jvp_and_hvp_inside_transforms_closing_over_the_argument():
    def outer(g, x):
        _, fn = F.vjp(lambda g2, y: g2.exp(x * y), g, x)
        return fn(g.constant(T))[0] * x

    def touter(x):
        _, fn = TF.vjp(lambda y: torch.exp(x * y), x)
        return fn(_t(T))[0] * x

    close(F.jacrev(outer)(X), TF.jacrev(touter)(_t(X)))
    _, jt = F.jvp(lambda g, x: F.jvp(lambda g2, y: g2.sin(x * y), (g, x), (T,))[1], (X,), (T,))
    _, tjt = TF.jvp(lambda x: TF.jvp(lambda y: torch.sin(x * y), (x,), (_t(T),))[1],
                    (_t(X),), (_t(T),))
    close(jt, tjt)

    def s(g, x):
        return g.sum(x * F.grad(lambda g2, y: g2.sum(g2.tanh(x * y)))(g, x))

    def ts(x):
        return (x * TF.grad(lambda y: torch.tanh(x * y).sum())(x)).sum()

    _, (hv,) = F.hvp(s, (X,), (T,))
    _, thv = torch.autograd.functional.hvp(ts, _t(X), _t(T))
    close(hv, thv, 1e-11)
