"""jacfwd (and hessian) as one vmapped JVP over the basis of the inputs:
the same Jacobians as torch.func, a graph whose size does not grow with the
number of columns, the per-column loop where f does what vmap cannot (reads
a value), dropout's one mask for every column, and pytree leaves split
back."""
import numpy as np
import pytest

import yscv
from yscv import func as F

torch = pytest.importorskip("torch")
TF = torch.func

RNG = np.random.default_rng(7)
A = RNG.standard_normal((6, 4))


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


def f(g, x):
    return g.tanh(g.matmul(x, A))


def tf(x):
    return torch.tanh(x @ _t(A))


def test_jacfwd_and_hessian_equal_torch_func():
    x = RNG.standard_normal(6)
    np.testing.assert_allclose(F.jacfwd(f)(x), TF.jacfwd(tf)(_t(x)).numpy(), rtol=1e-12,
                               atol=1e-13)
    h = F.hessian(lambda g, x: g.sum(g.square(f(g, x))))(x)
    ref = TF.hessian(lambda x: (tf(x) ** 2).sum())(_t(x)).numpy()
    np.testing.assert_allclose(h, ref, rtol=1e-12, atol=1e-13)


def test_the_graph_does_not_grow_with_the_columns():
    sizes = []
    for n in (3, 6):
        g = yscv.Graph(dtype=np.float64)
        x = g.constant(RNG.standard_normal(n))
        a = RNG.standard_normal((n, 4))
        start = len(g)
        F.jacfwd(lambda g, x: g.tanh(g.matmul(x, a)))(g, x)
        sizes.append(len(g) - start)
    assert sizes[0] == sizes[1]


def test_a_function_reading_a_value_takes_one_jvp_per_column():
    x = RNG.standard_normal(6)

    def reads(g, x):
        scale = float(g.value(g.sum(x)))   # vmap refuses this on a batched node
        return g.mul(f(g, x), scale)

    got = F.jacfwd(reads)(x)
    s = _t(np.array(x.sum()))
    ref = TF.jacfwd(lambda x: tf(x) * s)(_t(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)


def test_dropout_draws_one_mask_for_every_column():
    yscv.manual_seed(3)
    x = RNG.standard_normal(64) + 3.0
    jac = F.jacfwd(lambda g, x: g.dropout(x, 0.5))(x)
    d = np.diag(jac)
    assert set(np.unique(d)) <= {0.0, 2.0} and 0 < np.count_nonzero(d) < 64
    np.testing.assert_array_equal(jac, np.diag(d))


def test_pytree_leaves_get_their_own_blocks():
    w = {"a": RNG.standard_normal((2, 3)), "b": RNG.standard_normal(3)}
    x = RNG.standard_normal(2)

    def fw(g, p):
        return g.sin(g.add(g.matmul(x, p["a"]), p["b"]))

    got = F.jacfwd(fw)(w)
    ref = TF.jacfwd(lambda p: torch.sin(_t(x) @ p["a"] + p["b"]))(
        {k: _t(v) for k, v in w.items()})
    assert set(got) == {"a", "b"}
    for k in got:
        assert got[k].shape == tuple(ref[k].shape)
        np.testing.assert_allclose(got[k], ref[k].numpy(), rtol=1e-12, atol=1e-13)


def test_vmapped_hessians_equal_a_loop_of_hessians():
    xs = RNG.standard_normal((5, 6))
    h = F.hessian(lambda g, x: g.sum(g.square(f(g, x))))
    batched = F.vmap(h)(xs)
    for k in range(5):
        np.testing.assert_allclose(batched[k], h(xs[k]), rtol=1e-12, atol=1e-13)


def test_hessian_of_a_vector_output_takes_the_forward_columns():
    x = RNG.standard_normal(6)
    got = F.hessian(lambda g, x: g.square(f(g, x)))(x)   # [4] output: [4, 6, 6]
    ref = TF.hessian(lambda x: tf(x) ** 2)(_t(x)).numpy()
    assert got.shape == (4, 6, 6)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)


def test_hessian_of_a_one_element_output_is_one_reverse_walk_per_batch():
    # reverse over reverse: fewer nodes than the forward-mode columns
    g1, g2 = yscv.Graph(dtype=np.float64), yscv.Graph(dtype=np.float64)
    x = RNG.standard_normal(6)
    F.hessian(lambda g, x: g.sum(g.square(f(g, x))))(g1, g1.constant(x))
    F.jacfwd(F.jacrev(lambda g, x: g.sum(g.square(f(g, x)))))(g2, g2.constant(x))
    assert len(g1) < len(g2)
