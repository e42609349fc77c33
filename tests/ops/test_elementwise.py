"""Elementwise ops: NumPy forward reference, float64 gradcheck, bad arguments."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import BadCase, OpCase, make_op_tests, make_second_order_tests


def _positive(*shapes, low=0.5, high=2.0):
    return lambda rng: tuple(rng.uniform(low, high, size=s) for s in shapes)


def _away_from_zero(*shapes):
    def make(rng):
        return tuple(rng.uniform(0.3, 2.0, size=s) * rng.choice([-1.0, 1.0], size=s) for s in shapes)
    return make


def _tied(rng):
    a = rng.uniform(-1, 1, size=(3, 4))
    b = rng.uniform(-1, 1, size=(3, 4))
    b[0, :2] = a[0, :2]  # exact ties split the gradient evenly
    return a, b


COND = np.array([[True, False, True, False]] * 3)

CASES = [
    OpCase(Op.ADD, lambda g, a, b: g.add(a, b), [(3, 4), (3, 4)], np.add, name="add", torch_build=lambda t, a, b: a + b),
    OpCase(Op.ADD, lambda g, a, b: g.add(a, b), [(2, 3, 4), (4,)], np.add, name="add_broadcast", torch_build=lambda t, a, b: a + b),
    OpCase(Op.ADD, lambda g, a: a + 2.5, [(3,)], lambda a: a + 2.5, name="add_scalar_operator", torch_build=lambda t, a: a + 2.5),
    OpCase(Op.ADD, lambda g, a: 1.0 + a, [(3,)], lambda a: 1.0 + a, name="radd_scalar", torch_build=lambda t, a: 1.0 + a),
    OpCase(Op.SUB, lambda g, a, b: a - b, [(3, 1), (1, 4)], np.subtract, name="sub_broadcast_both", torch_build=lambda t, a, b: a - b),
    OpCase(Op.SUB, lambda g, a: 2.0 - a, [(3,)], lambda a: 2.0 - a, name="rsub_scalar", torch_build=lambda t, a: 2.0 - a),
    OpCase(Op.MUL, lambda g, a, b: a * b, [(3, 4), (3, 4)], np.multiply, name="mul", torch_build=lambda t, a, b: a * b),
    OpCase(Op.MUL, lambda g, a, b: g.mul(a, b), [(2, 3), ()], np.multiply, name="mul_0d", torch_build=lambda t, a, b: a * b),
    OpCase(Op.DIV, lambda g, a, b: a / b, [(3, 4), (4,)], np.divide, name="div", torch_build=lambda t, a, b: a / b,
           inputs=lambda rng: (rng.uniform(-2, 2, (3, 4)), rng.uniform(0.5, 2, (4,)))),
    OpCase(Op.DIV, lambda g, a: 1.0 / a, [(3,)], lambda a: 1.0 / a, name="rdiv_scalar", torch_build=lambda t, a: 1.0 / a,
           inputs=_positive((3,))),
    OpCase(Op.POW, lambda g, a, b: g.pow(a, b), [(3, 4), (3, 4)], np.power, name="pow_both", torch_build=lambda t, a, b: a ** b,
           inputs=_positive((3, 4), (3, 4))),
    OpCase(Op.POW, lambda g, a: a ** 3.0, [(5,)], lambda a: a ** 3.0, name="pow_scalar_exponent", torch_build=lambda t, a: a ** 3.0),
    OpCase(Op.POW, lambda g, a: 2.0 ** a, [(5,)], lambda a: 2.0 ** a, name="rpow_scalar_base", torch_build=lambda t, a: 2.0 ** a),
    OpCase(Op.NEG, lambda g, a: -a, [(3, 4)], np.negative, name="neg", torch_build=lambda t, a: -a),
    OpCase(Op.ABS, lambda g, a: g.abs(a), [(3, 4)], np.abs, name="abs", torch_build=lambda t, a: a.abs(), inputs=_away_from_zero((3, 4))),
    OpCase(Op.EXP, lambda g, a: g.exp(a), [(3, 4)], np.exp, name="exp", torch_build=lambda t, a: a.exp()),
    OpCase(Op.LOG, lambda g, a: g.log(a), [(3, 4)], np.log, name="log", torch_build=lambda t, a: a.log(), inputs=_positive((3, 4))),
    OpCase(Op.SQRT, lambda g, a: g.sqrt(a), [(3, 4)], np.sqrt, name="sqrt", torch_build=lambda t, a: a.sqrt(), inputs=_positive((3, 4))),
    OpCase(Op.CLAMP, lambda g, a: g.clamp(a, -0.5, 0.7), [(4, 5)], lambda a: np.clip(a, -0.5, 0.7),
           name="clamp_both", torch_build=lambda t, a: a.clamp(-0.5, 0.7), inputs=lambda rng: (np.array([-1.3, -0.2, 0.3, 0.9, 1.7] * 4).reshape(4, 5),)),
    OpCase(Op.CLAMP, lambda g, a: g.clamp(a, min=0.1), [(6,)], lambda a: np.maximum(a, 0.1),
           name="clamp_min_only", torch_build=lambda t, a: a.clamp(min=0.1), inputs=lambda rng: (np.array([-1.0, -0.3, 0.4, 0.8, 1.5, 2.0]),)),
    OpCase(Op.CLAMP, lambda g, a: g.clamp(a, max=0.1), [(6,)], lambda a: np.minimum(a, 0.1),
           name="clamp_max_only", torch_build=lambda t, a: a.clamp(max=0.1), inputs=lambda rng: (np.array([-1.0, -0.3, 0.4, 0.8, 1.5, 2.0]),)),
    OpCase(Op.MAXIMUM, lambda g, a, b: g.maximum(a, b), [(3, 4), (4,)], np.maximum, name="maximum", torch_build=lambda t, a, b: t.maximum(a, b)),
    OpCase(Op.MINIMUM, lambda g, a, b: g.minimum(a, b), [(3, 4), (3, 1)], np.minimum, name="minimum", torch_build=lambda t, a, b: t.minimum(a, b)),
    OpCase(Op.MAXIMUM, lambda g, a, b: g.maximum(a, b), (), np.maximum, name="maximum_ties",
           inputs=_tied, check_grad=False),
    OpCase(Op.WHERE, lambda g, a, b: g.where(COND, a, b), [(3, 4), (3, 4)],
           lambda a, b: np.where(COND, a, b), name="where", torch_build=lambda t, a, b: t.where(t.tensor(COND), a, b)),
    OpCase(Op.WHERE, lambda g, a, b: g.where(COND, a, b), [(4,), (3, 1)],
           lambda a, b: np.where(COND, a, b), name="where_broadcast", torch_build=lambda t, a, b: t.where(t.tensor(COND), a, b)),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.ADD, "add_shapes", _leaves((3, 4), (5,)), lambda g, a, b: g.add(a, b), yscv.ShapeError, "add"),
    BadCase(Op.ADD, "add_scalar_shapes", _leaves((3, 4)), lambda g, a: g.add(a, np.ones(5)), yscv.ShapeError, "add"),
    BadCase(Op.SUB, "sub_shapes", _leaves((2,), (3,)), lambda g, a, b: a - b, yscv.ShapeError, "sub"),
    BadCase(Op.MUL, "mul_complex", _leaves((2,)), lambda g, a: a * np.array([1j, 2j]), TypeError, "complex"),
    BadCase(Op.DIV, "div_object", _leaves((2,)), lambda g, a: a / np.array(["x", "y"]), TypeError, "div"),
    BadCase(Op.POW, "pow_shapes", _leaves((2,), (3,)), lambda g, a, b: a ** b, yscv.ShapeError, "pow"),
    BadCase(Op.NEG, "neg_not_node", lambda g: ("x",), lambda g, a: g.neg(a), TypeError, "neg"),
    BadCase(Op.ABS, "abs_complex", lambda g: (np.ones(2) * 1j,), lambda g, a: g.abs(a), TypeError, "complex"),
    BadCase(Op.EXP, "exp_foreign_node", lambda g: (yscv.Graph().variable(1.0),), lambda g, a: g.exp(a),
            yscv.NodeNotFoundError, "another graph"),
    BadCase(Op.LOG, "log_object", lambda g: (np.array([object()]),), lambda g, a: g.log(a), TypeError, "log"),
    BadCase(Op.SQRT, "sqrt_string", lambda g: (np.array(["a"]),), lambda g, a: g.sqrt(a), TypeError, "sqrt"),
    BadCase(Op.CLAMP, "clamp_min_gt_max", _leaves((2,)), lambda g, a: g.clamp(a, 1.0, 0.0), ValueError, "clamp"),
    BadCase(Op.CLAMP, "clamp_no_bounds", _leaves((2,)), lambda g, a: g.clamp(a), ValueError, "clamp"),
    BadCase(Op.CLAMP, "clamp_array_bound", _leaves((2,)), lambda g, a: g.clamp(a, np.zeros(2)), TypeError, "clamp"),
    BadCase(Op.MAXIMUM, "maximum_shapes", _leaves((2,), (3,)), lambda g, a, b: g.maximum(a, b), yscv.ShapeError, "maximum"),
    BadCase(Op.MINIMUM, "minimum_shapes", _leaves((2,), (3,)), lambda g, a, b: g.minimum(a, b), yscv.ShapeError, "minimum"),
    BadCase(Op.WHERE, "where_float_cond", _leaves((2,), (2,)), lambda g, a, b: g.where(np.ones(2), a, b), TypeError, "where"),
    BadCase(Op.WHERE, "where_shapes", _leaves((2,), (2,)), lambda g, a, b: g.where(np.ones(3, bool), a, b), yscv.ShapeError, "where"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)


def test_maximum_ties_split_gradient_evenly():
    g = yscv.Graph(np.float64)
    a = g.variable(np.array([1.0, 2.0, 3.0]))
    b = g.variable(np.array([1.0, 1.0, 4.0]))
    g.backward(g.maximum(a, b), grad=np.ones(3))
    np.testing.assert_array_equal(g.grad(a), [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(g.grad(b), [0.5, 0.0, 1.0])


def test_abs_gradient_is_zero_at_zero():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([-2.0, 0.0, 3.0]))
    g.backward(g.abs(x), grad=np.ones(3))
    np.testing.assert_array_equal(g.grad(x), [-1.0, 0.0, 1.0])


def test_pow_gradients_at_zero_base_match_pytorch():
    g = yscv.Graph(np.float64)
    base = g.variable(np.array([0.0, 0.0, 2.0]))
    e = g.variable(np.array([0.0, 2.0, 3.0]))
    g.backward(g.pow(base, e), grad=np.ones(3))
    np.testing.assert_array_equal(g.grad(base), [0.0, 0.0, 12.0])
    np.testing.assert_allclose(g.grad(e), [0.0, 0.0, 8.0 * np.log(2.0)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("workers", [1, 2])
def test_domain_edges_are_silent_inf_and_nan_as_pytorch(dtype, workers):
    """log(0), sqrt(-1), x/0, 0/0, pow(-1, 0.5), exp(1000) and their
    derivatives give inf/nan without a RuntimeWarning (an error under
    ``-W error``), with PyTorch's values; the gradients of the six branches
    meet (inf + -inf) in the walk, on one thread and on two."""
    import warnings

    torch = pytest.importorskip("torch")
    xv = np.array([0.0, -1.0, 2.0], dtype=dtype)
    g = yscv.Graph(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = g.variable(xv)
        ys = [g.log(x), g.sqrt(x), g.div(x, x), g.div(1.0, x), g.pow(x, 0.5),
              g.exp(g.mul(x, 1000.0))]
        total = ys[0]
        for y in ys[1:]:
            total = g.add(total, y)
        g.backward(g.sum(total), workers=workers)
    xt = torch.tensor(xv, requires_grad=True)
    yts = [xt.log(), xt.sqrt(), xt / xt, 1.0 / xt, xt ** 0.5, (xt * 1000.0).exp()]
    sum(yts).sum().backward()
    tol = 1e-6 if dtype == np.float32 else 1e-13   # the libraries' log may differ in the last bit
    for y, yt in zip(ys, yts):
        np.testing.assert_allclose(g.value(y), yt.detach().numpy(), rtol=tol)   # inf, nan equal
    np.testing.assert_allclose(g.grad(x), xt.grad.numpy(), rtol=tol)
    assert g.grad(x).dtype == dtype


def test_scalar_operand_keeps_float32():
    g = yscv.Graph()
    x = g.variable(np.ones(3))
    y = x * 2.5 + np.float64(1.0)
    assert g.value(y).dtype == np.float32


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_failure_leaves_graph_unchanged(name):
    g = yscv.Graph()
    a = g.variable(np.ones((2, 3)))
    with pytest.raises(yscv.ShapeError, match=name):
        getattr(g, name)(a, np.ones((4,)))
    assert len(g) == 1


# ------------------------------------------------ bias add (row broadcast)
from yscv.compute import elementwise as elementwise_ops  # noqa: E402


@pytest.fixture
def bias_kernel_calls(monkeypatch):
    """Counts calls of the bias-add kernel path."""
    calls = []
    real = elementwise_ops._bias_add

    def counting(x, bias):
        calls.append((x.shape, bias.shape))
        return real(x, bias)

    monkeypatch.setattr(elementwise_ops, "_bias_add", counting)
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(512, 128), (8, 64, 96), (4096, 3)])
def test_bias_add_kernel_is_bit_identical_to_numpy(dtype, shape, bias_kernel_calls):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(shape[-1]).astype(dtype)
    x.flat[:4] = [np.nan, np.inf, -np.inf, 1e30]
    b[0] = -np.inf
    g = yscv.Graph(dtype)
    xn, bn = g.variable(x), g.variable(b)
    for y in (g.add(xn, bn), g.add(bn, xn), xn + bn, bn + xn):
        v = g.value(y)
        assert v.dtype == dtype and v.shape == shape
        assert np.array_equal(v, x + b, equal_nan=True)
    assert len(bias_kernel_calls) == 4


def test_bias_add_falls_back_to_numpy_when_small_or_not_contiguous(bias_kernel_calls):
    rng = np.random.default_rng(8)
    g = yscv.Graph(np.float64)
    small = rng.standard_normal((4, 8))
    bias8, bias64 = rng.standard_normal(8), rng.standard_normal(64)
    assert np.array_equal(g.value(g.add(g.constant(small), g.constant(bias8))), small + bias8)
    wide = rng.standard_normal((64, 128))
    t = g.transpose(g.constant(wide), (1, 0))      # [128, 64], a non-contiguous view
    assert not g.value(t).flags.c_contiguous
    assert np.array_equal(g.value(g.add(t, g.constant(bias64))), wide.T + bias64)
    assert bias_kernel_calls == []


def test_bias_add_kernel_path_gradcheck(monkeypatch, bias_kernel_calls):
    """float64 gradcheck with the kernel path forced on a small input."""
    monkeypatch.setattr(elementwise_ops, "BIAS_ADD_MIN", 1)
    rng = np.random.default_rng(9)
    assert yscv.gradcheck(lambda g, x, b: g.add(x, b) * g.add(b, x),
                          [rng.standard_normal((3, 2, 5)), rng.standard_normal(5)])
    assert len(bias_kernel_calls) >= 2


# ------------------------------------- NaN operands and ties (issue 12.10)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_minmax_nan_and_tie_gradients_match_pytorch(name, dtype):
    """A NaN in either operand (or both) sends the whole gradient to BOTH
    operands, ties split it in halves, as torch.maximum/minimum; yscv used
    to route it to b alone whenever a was NaN or b was."""
    torch = pytest.importorskip("torch")
    nan = np.nan
    a = np.array([nan, 1.0, nan, 2.0, 1.0, 3.0, -np.inf, np.inf, 0.0])
    b = np.array([1.0, nan, nan, 2.0, 3.0, 1.0, nan, np.inf, -0.0])
    cot = 2.0 ** np.arange(a.size)
    g = yscv.Graph(dtype)
    an, bn = g.variable(a), g.variable(b)
    y = getattr(g, name)(an, bn)
    g.backward(y, grad=cot)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    at, bt = (torch.tensor(v, dtype=tdt, requires_grad=True) for v in (a, b))
    yt = getattr(torch, name)(at, bt)
    yt.backward(torch.tensor(cot, dtype=tdt))
    np.testing.assert_array_equal(g.value(y), yt.detach().numpy())
    np.testing.assert_array_equal(g.grad(an), at.grad.numpy())
    np.testing.assert_array_equal(g.grad(bn), bt.grad.numpy())
    assert g.grad(an)[0] == cot[0] and g.grad(bn)[0] == cot[0]   # NaN in a: both get g


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_minmax_nan_broadcast_operand_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    a = np.array([[np.nan, 0.5, 2.0], [1.0, 1.0, np.nan]])
    b = np.array([1.0, np.nan, 2.0])
    cot = np.arange(1.0, 7.0).reshape(2, 3)
    g = yscv.Graph(np.float64)
    an, bn = g.variable(a), g.variable(b)
    g.backward(getattr(g, name)(an, bn), grad=cot)
    at, bt = (torch.tensor(v, requires_grad=True) for v in (a, b))
    getattr(torch, name)(at, bt).backward(torch.tensor(cot))
    np.testing.assert_array_equal(g.grad(an), at.grad.numpy())
    np.testing.assert_array_equal(g.grad(bn), bt.grad.numpy())
