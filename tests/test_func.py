"""yscv.func against torch.func (SPEC section 9): values, shapes, both
calling forms, composition, argnums and has_aux, errors."""
import numpy as np
import pytest

import yscv
from yscv import func as F

torch = pytest.importorskip("torch")
TF = torch.func

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 2))
T = RNG.standard_normal((4, 2))
U = RNG.standard_normal((3, 2))


def f(g, x, w):
    return g.sum(g.tanh(g.matmul(x, w)) * g.sum(x * x))


def tf(x, w):
    return (torch.tanh(x @ w) * (x * x).sum()).sum()


def h(g, x, w):
    return g.tanh(g.matmul(x, w))


def th(x, w):
    return torch.tanh(x @ w)


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=tol, atol=tol)


def test_grad_and_value_and_grad_match_torch():
    close(F.grad(f)(X, W), TF.grad(tf)(_t(X), _t(W)))
    ga, gb = F.grad(f, argnums=(0, 1))(X, W)
    ta, tb = TF.grad(tf, argnums=(0, 1))(_t(X), _t(W))
    close(ga, ta)
    close(gb, tb)
    v, gw = F.value_and_grad(f, argnums=1)(X, W)
    close(v, tf(_t(X), _t(W)))
    close(gw, tb)


def test_has_aux_shapes_follow_jax_and_torch():
    def fa(g, x, w):
        return f(g, x, w), g.sum(x)
    gr, aux = F.grad(fa, has_aux=True)(X, W)
    np.testing.assert_allclose(aux, X.sum())
    (v, aux2), gr2 = F.value_and_grad(fa, has_aux=True)(X, W)
    np.testing.assert_allclose(gr, gr2)
    np.testing.assert_allclose(aux2, X.sum())


def test_jacobians_and_hessian_match_torch_shapes_and_values():
    jr = F.jacrev(h, 1)(X, W)
    assert jr.shape == (3, 2, 4, 2)
    close(jr, TF.jacrev(th, 1)(_t(X), _t(W)))
    close(F.jacfwd(h, 1)(X, W), TF.jacfwd(th, 1)(_t(X), _t(W)))
    ja, jb = F.jacrev(h, (0, 1))(X, W)
    ta, tb = TF.jacrev(th, (0, 1))(_t(X), _t(W))
    close(ja, ta)
    close(jb, tb)
    hs = F.hessian(f, 1)(X, W)
    assert hs.shape == (4, 2, 4, 2)
    close(hs, TF.hessian(tf, 1)(_t(X), _t(W)), 1e-11)


def test_vjp_jvp_hvp_match_torch():
    out, fn = F.vjp(h, X, W)
    tout, tfn = TF.vjp(th, _t(X), _t(W))
    close(out, tout)
    for a, b in zip(fn(U), tfn(_t(U))):
        close(a, b)
    o, jt = F.jvp(lambda g, w: h(g, g.constant(X), w), (W,), (T,))
    to, tjt = TF.jvp(lambda w: th(_t(X), w), (_t(W),), (_t(T),))
    close(o, to)
    close(jt, tjt)
    zx = np.zeros_like(X)
    o, (hx, hw) = F.hvp(f, (X, W), (zx, T))
    _, (thx, thw) = torch.autograd.functional.hvp(tf, (_t(X), _t(W)), (_t(zx), _t(T)))
    close(hx, thx, 1e-11)
    close(hw, thw, 1e-11)


def test_composition_grad_of_grad_and_jacfwd_of_jacrev():
    def s(g, x):
        return g.sum(g.tanh(x) * x * x * x)
    xs = np.linspace(-1, 1, 5)
    d2 = F.grad(lambda g, x: g.sum(F.grad(s)(g, x)))(xs)
    ts = lambda x: (torch.tanh(x) * x ** 3).sum()
    close(d2, TF.grad(lambda x: TF.grad(ts)(x).sum())(_t(xs)))
    hs = F.jacfwd(F.jacrev(s))(xs)
    close(hs, TF.jacfwd(TF.jacrev(ts))(_t(xs)))


def test_graph_form_records_on_the_callers_graph():
    g = yscv.Graph(np.float64)
    x, w = g.variable(X), g.variable(W)
    n = len(g)
    gw = F.grad(f, argnums=1)(g, x, w)
    assert type(gw) is yscv.NodeId and len(g) > n and g.requires_grad(gw)
    # differentiable again on the same graph
    (hx,) = g.gradients(g.sum(gw), [w])
    tw = _t(W).requires_grad_(True)
    (tg,) = torch.autograd.grad(tf(_t(X), tw), tw, create_graph=True)
    (tt,) = torch.autograd.grad(tg.sum(), tw)
    close(hx, tt)


def test_graph_form_differentiates_constants_too():
    g = yscv.Graph(np.float64)
    x = g.constant(X)
    w = g.constant(W)
    gx = F.grad(f)(g, x, w)
    close(g.value(gx), TF.grad(tf)(_t(X), _t(W)))


def test_float32_arrays_give_float32_results():
    out = F.grad(f)(X.astype(np.float32), W.astype(np.float32))
    assert out.dtype == np.float32


def test_errors():
    with pytest.raises(yscv.NonScalarTargetError):
        F.grad(h)(X, W)
    with pytest.raises(ValueError, match="argnums"):
        F.grad(f, argnums=2)(X, W)
    with pytest.raises(ValueError, match="argnums"):
        F.grad(f, argnums=(0, 0))(X, W)
    with pytest.raises(ValueError, match="argnums"):
        F.grad(f, argnums=1.5)(X, W)
    with pytest.raises(ValueError, match="tangent"):
        F.jvp(lambda g, w: g.sum(w), (W,), (np.ones(3),))
    with pytest.raises(ValueError, match="has_aux"):
        F.grad(f, has_aux=True)(X, W)
    with pytest.raises(yscv.NonScalarTargetError):
        F.hvp(h, (X, W), (X, W))
