"""Reductions: NumPy forward reference, float64 gradcheck, bad arguments,
plus tie splitting, ddof edge cases and stability."""
import warnings

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_second_order,
                          make_op_tests, make_second_order_tests)


def _np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _ties(rng):
    return (np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, 2.0, -1.0], [0.0, -4.0, 5.0, 5.0]]),)


def _large(rng):
    return (rng.uniform(-1.0, 1.0, size=(3, 4)) + np.array([[1000.0], [-1000.0], [0.0]]),)


S = (2, 3, 4)

CASES = [
    # sum
    OpCase(Op.SUM, lambda g, x: g.sum(x), [S], np.sum, name="sum_all", torch_build=lambda t, x: x.sum()),
    OpCase(Op.SUM, lambda g, x: g.sum(x, axis=1), [S], lambda x: np.sum(x, axis=1), name="sum_axis1", torch_build=lambda t, x: x.sum(1)),
    OpCase(Op.SUM, lambda g, x: g.sum(x, axis=-1, keepdims=True), [S],
           lambda x: np.sum(x, axis=-1, keepdims=True), name="sum_neg_axis_keepdims", torch_build=lambda t, x: x.sum(-1, keepdim=True)),
    OpCase(Op.SUM, lambda g, x: g.sum(x, axis=(0, 2)), [S], lambda x: np.sum(x, axis=(0, 2)),
           name="sum_tuple", torch_build=lambda t, x: x.sum((0, 2))),
    OpCase(Op.SUM, lambda g, x: g.sum(x, axis=[2, -3], keepdims=True), [S],
           lambda x: np.sum(x, axis=(0, 2), keepdims=True), name="sum_list_keepdims", torch_build=lambda t, x: x.sum((0, 2), keepdim=True)),
    OpCase(Op.SUM, lambda g, x: g.sum(x, keepdims=True), [S], lambda x: np.sum(x, keepdims=True),
           name="sum_all_keepdims", torch_build=lambda t, x: x.sum((0, 1, 2), keepdim=True)),
    OpCase(Op.SUM, lambda g, x: g.sum(x, axis=()), [(3, 4)], lambda x: np.sum(x, axis=()),
           name="sum_empty_tuple_identity", torch_build=lambda t, x: x * 1.0),
    OpCase(Op.SUM, lambda g, x: g.sum(x, axis=0), [()], lambda x: x, name="sum_0d_axis0", torch_build=lambda t, x: x.sum(0)),
    OpCase(Op.SUM, lambda g, x: g.sum_axis(x, 0), [(3, 4)], lambda x: np.sum(x, axis=0),
           name="sum_axis_alias", torch_build=lambda t, x: x.sum(0)),
    # mean
    OpCase(Op.MEAN, lambda g, x: g.mean(x), [S], np.mean, name="mean_all", torch_build=lambda t, x: x.mean()),
    OpCase(Op.MEAN, lambda g, x: g.mean(x, axis=-2), [S], lambda x: np.mean(x, axis=-2),
           name="mean_neg_axis", torch_build=lambda t, x: x.mean(-2)),
    OpCase(Op.MEAN, lambda g, x: g.mean(x, axis=(0, 1), keepdims=True), [S],
           lambda x: np.mean(x, axis=(0, 1), keepdims=True), name="mean_tuple_keepdims", torch_build=lambda t, x: x.mean((0, 1), keepdim=True)),
    OpCase(Op.MEAN, lambda g, x: g.mean_axis(x, 1), [(3, 4)], lambda x: np.mean(x, axis=1),
           name="mean_axis_alias", torch_build=lambda t, x: x.mean(1)),
    # max / min
    OpCase(Op.MAX, lambda g, x: g.max(x), [S], np.max, name="max_all", torch_build=lambda t, x: t.amax(x)),
    OpCase(Op.MAX, lambda g, x: g.max(x, axis=1), [S], lambda x: np.max(x, axis=1), name="max_axis1", torch_build=lambda t, x: t.amax(x, 1)),
    OpCase(Op.MAX, lambda g, x: g.max(x, axis=(0, -1), keepdims=True), [S],
           lambda x: np.max(x, axis=(0, 2), keepdims=True), name="max_tuple_keepdims", torch_build=lambda t, x: t.amax(x, (0, -1), keepdim=True)),
    OpCase(Op.MAX, lambda g, x: g.max(x, axis=1), (), lambda x: np.max(x, axis=1),
           name="max_ties_forward", inputs=_ties, check_grad=False),
    OpCase(Op.MIN, lambda g, x: g.min(x), [S], np.min, name="min_all", torch_build=lambda t, x: t.amin(x)),
    OpCase(Op.MIN, lambda g, x: g.min(x, axis=-1, keepdims=True), [S],
           lambda x: np.min(x, axis=-1, keepdims=True), name="min_neg_axis_keepdims", torch_build=lambda t, x: t.amin(x, -1, keepdim=True)),
    OpCase(Op.MIN, lambda g, x: g.min(x, axis=(1, 2)), [S], lambda x: np.min(x, axis=(1, 2)),
           name="min_tuple", torch_build=lambda t, x: t.amin(x, (1, 2))),
    # var
    OpCase(Op.VAR, lambda g, x: g.var(x), [S], np.var, name="var_all_ddof0", torch_build=lambda t, x: x.var(correction=0)),
    OpCase(Op.VAR, lambda g, x: g.var(x, ddof=1), [S], lambda x: np.var(x, ddof=1),
           name="var_all_ddof1", torch_build=lambda t, x: x.var()),
    OpCase(Op.VAR, lambda g, x: g.var(x, axis=0, ddof=1), [(4, 3)],
           lambda x: np.var(x, axis=0, ddof=1), name="var_axis0_ddof1", torch_build=lambda t, x: x.var(0)),
    OpCase(Op.VAR, lambda g, x: g.var(x, axis=(0, 2), keepdims=True), [S],
           lambda x: np.var(x, axis=(0, 2), keepdims=True), name="var_tuple_keepdims", torch_build=lambda t, x: x.var((0, 2), keepdim=True, correction=0)),
    OpCase(Op.VAR, lambda g, x: g.var(x, axis=-1), [S], lambda x: np.var(x, axis=-1),
           name="var_neg_axis", torch_build=lambda t, x: x.var(-1, correction=0)),
    # logsumexp
    OpCase(Op.LOGSUMEXP, lambda g, x: g.logsumexp(x, None), [S], _np_logsumexp,
           name="logsumexp_all", torch_build=lambda t, x: t.logsumexp(x, (0, 1, 2))),
    OpCase(Op.LOGSUMEXP, lambda g, x: g.logsumexp(x, -1), [S], lambda x: _np_logsumexp(x, -1),
           name="logsumexp_neg_axis", torch_build=lambda t, x: t.logsumexp(x, -1)),
    OpCase(Op.LOGSUMEXP, lambda g, x: g.logsumexp(x, (0, 1), keepdims=True), [S],
           lambda x: _np_logsumexp(x, (0, 1), True), name="logsumexp_tuple_keepdims", torch_build=lambda t, x: t.logsumexp(x, (0, 1), keepdim=True)),
    OpCase(Op.LOGSUMEXP, lambda g, x: g.logsumexp(x, 1), (), lambda x: _np_logsumexp(x, 1),
           name="logsumexp_large_values", torch_build=lambda t, x: t.logsumexp(x, 1), inputs=_large),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.SUM, "sum_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.sum(x, axis=2),
            ValueError, "sum: axis=2"),
    BadCase(Op.SUM, "sum_axis_float", _leaves((2, 3)), lambda g, x: g.sum(x, axis=1.0),
            TypeError, "sum: axis"),
    BadCase(Op.SUM, "sum_axis_repeated", _leaves((2, 3)), lambda g, x: g.sum(x, axis=(1, -1)),
            ValueError, "sum: axis.*repeats"),
    BadCase(Op.SUM, "sum_keepdims_not_bool", _leaves((2, 3)), lambda g, x: g.sum(x, 0, "yes"),
            TypeError, "sum: keepdims"),
    BadCase(Op.SUM, "sum_axis_alias_bad", _leaves((2, 3)), lambda g, x: g.sum_axis(x, -3),
            ValueError, "sum: axis=-3"),
    BadCase(Op.SUM, "sum_complex", lambda g: (np.ones(2) * 1j,), lambda g, x: g.sum(x),
            TypeError, "sum"),
    BadCase(Op.MEAN, "mean_axis_tuple_float", _leaves((2, 3)), lambda g, x: g.mean(x, (0, 0.5)),
            TypeError, "mean: axis"),
    BadCase(Op.MAX, "max_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.max(x, axis=5),
            ValueError, "max: axis=5"),
    BadCase(Op.MAX, "max_empty", _leaves((0, 3)), lambda g, x: g.max(x, axis=0),
            ValueError, "max: cannot reduce over an empty axis"),
    BadCase(Op.MIN, "min_empty_all", _leaves((0,)), lambda g, x: g.min(x),
            ValueError, "min: cannot reduce"),
    BadCase(Op.MIN, "min_axis_bool", _leaves((2, 3)), lambda g, x: g.min(x, axis=True),
            TypeError, "min: axis"),
    BadCase(Op.VAR, "var_negative_ddof", _leaves((2, 3)), lambda g, x: g.var(x, ddof=-1),
            ValueError, "var: ddof"),
    BadCase(Op.VAR, "var_ddof_string", _leaves((2, 3)), lambda g, x: g.var(x, ddof="1"),
            TypeError, "var: ddof"),
    BadCase(Op.VAR, "var_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.var(x, axis=(0, 3)),
            ValueError, "var: axis=3"),
    BadCase(Op.LOGSUMEXP, "logsumexp_axis_out_of_range", _leaves((2, 3)),
            lambda g, x: g.logsumexp(x, -4), ValueError, "logsumexp: axis=-4"),
    BadCase(Op.LOGSUMEXP, "logsumexp_axis_string", _leaves((2, 3)),
            lambda g, x: g.logsumexp(x, "0"), TypeError, "logsumexp: axis"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)

# Ties split the gradient evenly (a constant mask / count, as PyTorch's
# amax/amin): compared with PyTorch's double backward only, as a finite
# difference would break the tie.
TIES = [
    OpCase(Op.MAX, lambda g, x: g.max(x, axis=1), name="max_ties_axis1", inputs=_ties,
           torch_build=lambda t, x: t.amax(x, 1)),
    OpCase(Op.MAX, lambda g, x: g.max(x), name="max_ties_all",
           inputs=lambda rng: (np.array([[1.0, 5.0], [5.0, 5.0]]),), torch_build=lambda t, x: t.amax(x)),
    OpCase(Op.MIN, lambda g, x: g.min(x, axis=(0,), keepdims=True), name="min_ties_keepdims",
           inputs=lambda rng: (np.array([[1.0, -2.0, 0.5], [1.0, -2.0, 3.0]]),),
           torch_build=lambda t, x: t.amin(x, 0, keepdim=True)),
]


@pytest.mark.parametrize("case", TIES, ids=[c.id for c in TIES])
def test_second_order_at_ties_matches_pytorch(case):
    pytest.importorskip("torch")
    check_torch_second_order(case)


def _grad(build, x, dtype=np.float64):
    g = yscv.Graph(dtype)
    v = g.variable(x)
    out = build(g, v)
    g.backward(out, grad=np.ones(g.value(out).shape))
    return g.grad(v)


def test_max_ties_split_gradient_evenly_per_row():
    (x,) = _ties(None)
    gx = _grad(lambda g, v: g.max(v, axis=1), x)
    np.testing.assert_allclose(gx, [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0], [0, 0, 0.5, 0.5]])


def test_min_ties_split_gradient_evenly_over_all_axes():
    x = np.array([[0.0, 2.0], [0.0, 0.0]])
    np.testing.assert_allclose(_grad(lambda g, v: g.min(v), x), [[1 / 3, 0], [1 / 3, 1 / 3]])


def test_max_keepdims_three_way_tie_matches_torch_amax():
    # torch.amax(torch.tensor([[5., 5., 1., 5.]]), -1, keepdim=True).backward -> 1/3 each
    x = np.array([[5.0, 5.0, 1.0, 5.0]])
    gx = _grad(lambda g, v: g.max(v, axis=-1, keepdims=True), x)
    np.testing.assert_allclose(gx, [[1 / 3, 1 / 3, 0, 1 / 3]])


def test_max_routes_gradient_to_nan():
    x = np.array([1.0, np.nan, 3.0])
    g = yscv.Graph(np.float64)
    v = g.variable(x)
    out = g.max(v)
    assert np.isnan(g.value(out))
    g.backward(out)
    np.testing.assert_array_equal(g.grad(v), [0.0, 1.0, 0.0])


@pytest.mark.parametrize("ddof", [2, 3])
def test_var_ddof_at_least_count_warns_and_gives_inf_or_nan(ddof):
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0]))
    with pytest.warns(RuntimeWarning, match="var: degrees of freedom"):
        v = g.var(x, ddof=ddof)
    assert np.isinf(g.value(v))  # sum of squares 0.5 / max(2 - ddof, 0) = inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g.backward(v)
    assert np.all(np.isinf(g.grad(x)))


def test_var_constant_input_ddof_equal_count_is_nan():
    g = yscv.Graph(np.float64)
    x = g.variable(np.full(3, 2.0))
    with pytest.warns(RuntimeWarning):
        v = g.var(x, ddof=3)
    assert np.isnan(g.value(v))


def test_var_ddof1_matches_unbiased_formula_and_saves_only_the_mean():
    x = np.arange(12.0).reshape(3, 4) ** 1.5
    g = yscv.Graph(np.float64)
    v = g.var(g.variable(x), axis=0, ddof=1)
    np.testing.assert_allclose(g.value(v), ((x - x.mean(0)) ** 2).sum(0) / 2)
    assert g.memory()["saved"] == 4 * 8  # the (1, 4) mean only


def test_logsumexp_is_stable_and_handles_minus_inf_rows():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [-np.inf, 0.0]], dtype=np.float32)
    g = yscv.Graph()
    out = g.value(g.logsumexp(g.variable(x), 1))
    np.testing.assert_allclose(out, [1000.0 + np.log(2.0), -np.inf, 0.0], rtol=1e-6)
    assert out.dtype == np.float32


def test_logsumexp_gradient_is_softmax():
    x = np.array([[0.5, -1.0, 2.0], [3.0, 3.0, 3.0]])
    gx = _grad(lambda g, v: g.logsumexp(v, 1), x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(gx, e / e.sum(1, keepdims=True))


def test_empty_reductions_follow_numpy():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones((0, 3)))
    np.testing.assert_array_equal(g.value(g.sum(x, axis=0)), np.zeros(3))
    assert np.all(np.isneginf(g.value(g.logsumexp(x, 0))))
    with pytest.warns(RuntimeWarning):
        assert np.isnan(g.value(g.mean(x)))
    assert g.value(g.max(x, axis=1)).shape == (0,)  # no empty slice: no error


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var", "logsumexp"])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_float32_values_and_grads_stay_float32(name, axis):
    x = np.random.default_rng(1).uniform(-1, 1, size=(2, 3, 4))
    g = yscv.Graph(np.float32)
    v = g.variable(x)
    out = getattr(g, name)(v, axis)
    assert g.value(out).dtype == np.float32
    assert isinstance(g.value(out), np.ndarray)
    g.backward(out, grad=np.ones(g.value(out).shape))
    gr = g.grad(v)
    assert gr.dtype == np.float32 and gr.shape == x.shape


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_broadcast_gradient_is_an_ordinary_writable_array(name):
    g = yscv.Graph(np.float64)
    v = g.variable(np.ones((3, 4)))
    g.backward(getattr(g, name)(v))
    gr = g.grad(v)
    assert gr.flags.c_contiguous and gr.flags.writeable and 0 not in gr.strides
    np.testing.assert_allclose(gr, np.full((3, 4), 1.0 if name == "sum" else 1 / 12))


def test_reduction_of_array_operand_and_graph_unchanged_on_failure():
    g = yscv.Graph(np.float64)
    out = g.sum(np.arange(6.0).reshape(2, 3), axis=1)
    np.testing.assert_array_equal(g.value(out), [3.0, 12.0])
    n = len(g)
    with pytest.raises(ValueError, match="mean: axis=4"):
        g.mean(np.ones((2, 3)), axis=4)
    assert len(g) == n


def test_var_warning_as_error_leaves_graph_unchanged():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="var"):
            g.var(x, ddof=2)
    assert len(g) == 1


def test_attribute_cache_does_not_let_bad_arguments_through():
    g = yscv.Graph(np.float64)
    x = g.variable(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(g.value(g.sum(x, 1)), [3.0, 12.0])
    np.testing.assert_array_equal(g.value(g.sum(x, 1)), [3.0, 12.0])  # cached attrs
    with pytest.raises(TypeError, match="sum: axis"):
        g.sum(x, True)  # True == 1 and hashes alike, but is not an axis
    with pytest.raises(TypeError, match="sum: keepdims"):
        g.sum(x, 1, 1)
    e = g.variable(np.ones((0, 3)))
    with pytest.raises(ValueError, match="max: cannot reduce"):
        g.max(e, 0)
    with pytest.raises(ValueError, match="max: cannot reduce"):
        g.max(e, 0)
