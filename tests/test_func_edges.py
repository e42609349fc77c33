"""yscv.func at the edges: empty inputs and outputs, aux containers, and the
error for a function or call of the wrong arity."""
import collections

import numpy as np
import pytest

import yscv
from yscv import func as F

torch = pytest.importorskip("torch")
TF = torch.func

X = np.array([0.3, -0.7, 1.1])
E = np.zeros((0,))
E2 = np.zeros((2, 0))


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


def same(a, b):
    b = b.detach().numpy()
    assert np.asarray(a).shape == b.shape
    np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians_of_empty_outputs_and_inputs_have_torchs_shapes(jac):
    ours, theirs = getattr(F, jac), getattr(TF, jac)
    # empty output, three inputs: (0, 3)
    same(ours(lambda g, x: g.getitem(x, slice(0, 0)))(X), theirs(lambda x: x[0:0])(_t(X)))
    # empty input: (2, 0) and (2, 2, 0)
    same(ours(lambda g, x: g.expand(g.sum(x), (2,)))(E),
         theirs(lambda x: x.sum().expand(2))(_t(E)))
    same(ours(lambda g, x: g.sum(x, axis=1))(E2), theirs(lambda x: x.sum(1))(_t(E2)))
    # both empty: (0, 0)
    same(ours(lambda g, x: x * 2.0)(E), theirs(lambda x: x * 2)(_t(E)))
    # an empty argument beside a full one
    ja, jb = ours(lambda g, a, b: g.sum(a) * b, argnums=(0, 1))(E, X)
    ta, tb = theirs(lambda a, b: a.sum() * b, argnums=(0, 1))(_t(E), _t(X))
    same(ja, ta)
    same(jb, tb)


def test_hessian_of_an_empty_input():
    same(F.hessian(lambda g, x: g.sum(x * x))(E), TF.hessian(lambda x: (x * x).sum())(_t(E)))


def test_jacrev_of_an_empty_output_inside_a_graph():
    g = yscv.Graph(np.float64)
    x = g.variable(X)
    j = F.jacrev(lambda g2, y: g2.getitem(y, slice(0, 0)))(g, x)
    assert type(j) is yscv.NodeId and j.shape == (0, 3)


def test_aux_containers_become_arrays_recursively():
    Pair = collections.namedtuple("Pair", "first second")

    def fa(g, x):
        s = g.sum(x * x)
        return s, {"x": x, "inner": {"s": s, "list": [x, (s, 3)]}, "pair": Pair(x, "tag")}

    _, aux = F.grad(fa, has_aux=True)(X)
    assert set(aux) == {"x", "inner", "pair"}
    np.testing.assert_array_equal(aux["x"], X)
    np.testing.assert_allclose(aux["inner"]["s"], np.sum(X * X))
    lst = aux["inner"]["list"]
    assert isinstance(lst, list) and isinstance(lst[1], tuple) and lst[1][1] == 3
    np.testing.assert_array_equal(lst[0], X)
    assert type(aux["pair"]) is Pair and aux["pair"].second == "tag"
    np.testing.assert_array_equal(aux["pair"].first, X)
    (_, aux_v), _ = F.value_and_grad(fa, has_aux=True)(X)
    _, aux_r = F.jacrev(fa, has_aux=True)(X)
    _, aux_f = F.jacfwd(fa, has_aux=True)(X)
    for aux in (aux_v, aux_r, aux_f):
        assert type(aux["inner"]["s"]) is np.ndarray and type(aux["x"]) is np.ndarray
    *_, aux = F.vjp(fa, X, has_aux=True)
    assert type(aux["inner"]["list"][0]) is np.ndarray
    *_, aux = F.jvp(fa, (X,), (X,), has_aux=True)
    assert type(aux["pair"].first) is np.ndarray


_FORMS = r"f\(g, \*nodes\) -> NodeId.*F\(g, \*nodes\) inside a graph or F\(\*arrays\)"


@pytest.mark.parametrize("name", ["grad", "value_and_grad", "jacrev", "jacfwd", "hessian"])
def test_a_function_without_its_graph_parameter_is_named(name):
    def loss(x):
        return x

    with pytest.raises(TypeError, match=rf"^{name}: f = .*loss\(x\) cannot be called with "
                                        rf"the graph and 1 argument\(s\).*{_FORMS}"):
        getattr(F, name)(loss)(X)


def test_a_transformed_function_called_with_the_wrong_count_is_named():
    def loss(g, x, w):
        return g.sum(x * w)

    with pytest.raises(TypeError, match=rf"^grad: f = .*loss\(g, x, w\) cannot be called "
                                        rf"with the graph and 1 argument\(s\).*{_FORMS}"):
        F.grad(loss)(X)
    with pytest.raises(TypeError, match=r"with the graph and 3 argument\(s\)"):
        F.jacrev(loss)(X, X, X)
    # inside a graph: the error comes before anything is appended
    g = yscv.Graph(np.float64)
    x = g.variable(X)
    n = len(g)
    with pytest.raises(TypeError, match=rf"^grad: f = .*loss.*1 argument\(s\).*{_FORMS}"):
        F.grad(loss)(g, x)
    with pytest.raises(TypeError, match=r"3 argument\(s\)"):
        F.grad(loss)(g, x, np.ones(3), np.ones(3))
    assert len(g) == n
    # *args functions and the transformed functions themselves bind any count
    np.testing.assert_allclose(F.grad(lambda g2, *xs: g2.sum(xs[0] * xs[1]))(X, 2 * X), 2 * X)


def test_primals_forms_name_their_calling_forms():
    with pytest.raises(TypeError, match=r"^vjp: f = .*\(x\) .*vjp\(f, \*arrays\) or "
                                        r"vjp\(f, g, \*nodes\)"):
        F.vjp(lambda x: x, X)
    with pytest.raises(TypeError, match=r"^jvp: .*jvp\(f, arrays, tangents\) or "
                                        r"jvp\(f, \(g, \*nodes\), tangents\)"):
        F.jvp(lambda x: x, (X,), (X,))
    with pytest.raises(TypeError, match=r"^hvp: .*2 argument\(s\).*hvp\(f, arrays, tangents\)"):
        F.hvp(lambda g, x: g.sum(x), (X, X), (X, X))
    with pytest.raises(TypeError, match=r"^grad: f must be a function f\(g, \*nodes\) -> "
                                        r"NodeId, got int"):
        F.grad(3)
