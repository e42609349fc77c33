"""yscv.func transforms over pytree arguments (dicts, tuples, lists, nested)
against torch.func: a dict argument's gradient is a dict, a Jacobian per
leaf; integer arrays pass through and are never differentiated."""
import numpy as np
import pytest

import yscv
from yscv import func as F

torch = pytest.importorskip("torch")
TF = torch.func

RNG = np.random.default_rng(5)
P = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
X = RNG.standard_normal((4, 3))
LABELS = np.array([1, 0, 1, 1])


def _t(tree):
    if isinstance(tree, dict):
        return {k: _t(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_t(v) for v in tree)
    return torch.tensor(tree, dtype=torch.float64)


def close(a, b, tol=1e-12):
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b)
        for k in b:
            close(a[k], b[k], tol)
        return
    if isinstance(b, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for u, v in zip(a, b):
            close(u, v, tol)
        return
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=tol, atol=tol)


def f(g, p, x):
    return g.sum(g.tanh(g.matmul(x, p["w"]) + p["b"]) ** 2)


def tf(p, x):
    return (torch.tanh(x @ p["w"] + p["b"]) ** 2).sum()


def h(g, p, x):
    return g.tanh(g.matmul(x, p["w"]) + p["b"])


def th(p, x):
    return torch.tanh(x @ p["w"] + p["b"])


def test_grad_of_a_dict_is_a_dict_in_both_forms():
    got = F.grad(f)(P, X)
    close(got, TF.grad(tf)(_t(P), _t(X)))
    (v, (gp, gx)) = F.value_and_grad(f, argnums=(0, 1))(P, X)
    tp, tx = TF.grad(tf, argnums=(0, 1))(_t(P), _t(X))
    close(gp, tp)
    close(gx, tx)
    g = yscv.Graph(np.float64)
    nodes = {k: g.variable(v) for k, v in P.items()}
    gn = F.grad(f)(g, nodes, g.constant(X))
    assert list(gn) == ["w", "b"] and all(type(n) is yscv.NodeId for n in gn.values())
    close({k: g.value(n) for k, n in gn.items()}, tp)


def test_nested_tuples_lists_and_named_tuples_keep_their_structure():
    import collections
    Pair = collections.namedtuple("Pair", "w b")

    def fn(g, tree):
        (a, [b, c]), pair = tree
        return g.sum(a * b * c) + g.sum(pair.w * pair.w) + g.sum(pair.b)

    def tfn(tree):
        (a, [b, c]), pair = tree
        return (a * b * c).sum() + (pair[0] * pair[0]).sum() + pair[1].sum()

    a, b, c = RNG.standard_normal((3, 2))
    tree = ((a, [b, c]), Pair(P["w"], P["b"]))
    got = F.grad(fn)(tree)
    assert type(got[1]) is Pair and isinstance(got[0][1], list)
    want = TF.grad(tfn)(((_t(a), [_t(b), _t(c)]), (_t(P["w"]), _t(P["b"]))))
    close((got[0], tuple(got[1])), want)


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians_of_a_dict_argument_are_dicts_of_torchs_shapes(jac):
    got = getattr(F, jac)(h)(P, X)
    want = getattr(TF, jac)(th)(_t(P), _t(X))
    assert got["w"].shape == (4, 2, 3, 2) and got["b"].shape == (4, 2, 2)
    close(got, want)


def test_vjp_jvp_and_hvp_take_dict_primals():
    u = RNG.standard_normal((4, 2))
    out, fn = F.vjp(h, P, X)
    t_out, t_fn = TF.vjp(th, _t(P), _t(X))
    close(out, t_out)
    close(fn(u), t_fn(_t(u)))
    tang = ({"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}, np.zeros_like(X))
    close(F.jvp(h, (P, X), tang), TF.jvp(th, (_t(P), _t(X)), _t(tang)))
    _, hv = F.hvp(f, (P, X), tang)
    _, t_hv = TF.jvp(TF.grad(tf, argnums=(0, 1)), (_t(P), _t(X)), _t(tang))
    close(hv, t_hv, 1e-11)


def test_integer_arrays_pass_through_and_are_never_differentiated():
    def loss(g, p, x, y):
        return g.cross_entropy(g.matmul(x, p["w"]) + p["b"], y)

    def t_loss(p, x, y):
        return torch.nn.functional.cross_entropy(x @ p["w"] + p["b"], y)

    close(F.grad(loss)(P, X, LABELS), TF.grad(t_loss)(_t(P), _t(X), torch.tensor(LABELS)))
    g = yscv.Graph(np.float64)
    got = F.grad(loss)(g, P, X, LABELS)
    close({k: g.value(v) for k, v in got.items()}, TF.grad(t_loss)(_t(P), _t(X), torch.tensor(LABELS)))
    with pytest.raises(TypeError, match=r"^grad: argument 2 is an array of dtype int64; only "
                                        r"floating-point arrays and NodeIds"):
        F.grad(loss, argnums=2)(P, X, LABELS)
    with pytest.raises(TypeError, match=r"^grad: argument 0\['n'\] is an array of dtype int64"):
        F.grad(lambda g, d: g.sum(d["x"]))({"x": X, "n": np.array([1, 2])})


def test_tangents_must_match_the_primals_structure():
    with pytest.raises(ValueError, match=r"^jvp: tangent 0 has structure \{'w': \*\}, "
                                         r"primal 0 has \{'w': \*, 'b': \*\}"):
        F.jvp(h, (P, X), ({"w": P["w"]}, X))
    with pytest.raises(ValueError, match=r"^hvp: tangent 0\['b'\] has shape \(3,\), "
                                         r"primal 0\['b'\] has \(2,\)"):
        F.hvp(f, (P, X), ({"w": P["w"], "b": np.zeros(3)}, X))
