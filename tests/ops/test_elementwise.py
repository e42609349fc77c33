"""Elementwise ops: NumPy forward reference, float64 gradcheck, bad arguments."""
import math

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, make_op_tests,
                          make_second_order_tests)


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


# ---------------------------------------------------------------- math (SPEC 11)
def _off_grid(shape, halves=False):
    """Values k + f with k in -3..2 and f away from the integers (and, with
    ``halves``, from the halves), where floor/ceil/round/trunc/sign are flat."""
    def make(rng):
        k = rng.integers(-3, 3, size=shape)
        f = rng.uniform(0.1, 0.4, size=shape) + (0.5 * rng.integers(0, 2, size=shape) if halves else 0.0)
        return (k + f,)
    return make


def _remainder_inputs(shape):
    """b away from 0 with either sign; a/b away from the integers (where
    remainder jumps)."""
    def make(rng):
        b = rng.uniform(0.7, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        q = rng.integers(-3, 3, size=shape) + rng.uniform(0.2, 0.8, size=shape)
        return q * b, b
    return make


# a/b of every broadcast pair is at least 0.15 from an integer
_REMAINDER_A = np.array([-3.7, -1.1, 0.45, 2.9])
_REMAINDER_B = np.array([[1.3], [-0.8], [2.0]])


def _np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _np_erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _np_sign(x):
    return np.where(np.isnan(x), 0.0, np.sign(x))


def _np_remainder(a, b):
    return np.remainder(a, b)


def _unary(op, name, np_fn, torch_name=None, **kw):
    torch_name = torch_name or name
    return OpCase(op, lambda g, a: getattr(g, name)(a), [(3, 4)], np_fn, name=name,
                  torch_build=lambda t, a: getattr(t, torch_name)(a), **kw)


CASES += [
    _unary(Op.SIN, "sin", np.sin),
    _unary(Op.COS, "cos", np.cos),
    _unary(Op.TAN, "tan", np.tan, low=-1.2, high=1.2),
    _unary(Op.ASIN, "asin", np.arcsin, low=-0.9, high=0.9),
    _unary(Op.ACOS, "acos", np.arccos, low=-0.9, high=0.9),
    _unary(Op.ATAN, "atan", np.arctan, low=-3.0, high=3.0),
    OpCase(Op.ATAN2, lambda g, y, x: g.atan2(y, x), [(3, 4), (3, 4)], np.arctan2, name="atan2",
           torch_build=lambda t, y, x: t.atan2(y, x), inputs=_away_from_zero((3, 4), (3, 4))),
    OpCase(Op.ATAN2, lambda g, y, x: g.atan2(y, x), [(2, 3), (3,)], np.arctan2, name="atan2_broadcast",
           torch_build=lambda t, y, x: t.atan2(y, x), inputs=_away_from_zero((2, 3), (3,))),
    OpCase(Op.ATAN2, lambda g, y: g.atan2(y, -1.5), [(5,)], lambda y: np.arctan2(y, -1.5),
           name="atan2_scalar_x", torch_build=lambda t, y: t.atan2(y, t.tensor(-1.5, dtype=y.dtype)),
           inputs=_away_from_zero((5,))),
    _unary(Op.SINH, "sinh", np.sinh),
    _unary(Op.COSH, "cosh", np.cosh),
    _unary(Op.ERF, "erf", _np_erf, low=-2.5, high=2.5),
    _unary(Op.ERFC, "erfc", _np_erfc, low=-2.5, high=2.5),
    OpCase(Op.ERFC, lambda g, a: g.erfc(a), [(4,)], _np_erfc, name="erfc_tail",
           torch_build=lambda t, a: t.erfc(a), inputs=lambda rng: (np.array([3.0, 5.0, 7.0, 9.0]),),
           fwd_atol32=0.0),   # relative accuracy where 1 - erf(x) would be 0
    _unary(Op.SIGN, "sign", _np_sign, inputs=_away_from_zero((3, 4))),
    _unary(Op.FLOOR, "floor", np.floor, inputs=_off_grid((3, 4))),
    _unary(Op.CEIL, "ceil", np.ceil, inputs=_off_grid((3, 4))),
    _unary(Op.ROUND, "round", np.round, inputs=_off_grid((3, 4), halves=True)),
    _unary(Op.TRUNC, "trunc", np.trunc, inputs=_off_grid((3, 4))),
    _unary(Op.RECIPROCAL, "reciprocal", np.reciprocal, inputs=_away_from_zero((3, 4))),
    _unary(Op.RSQRT, "rsqrt", lambda a: 1.0 / np.sqrt(a), inputs=_positive((3, 4))),
    _unary(Op.SQUARE, "square", np.square),
    _unary(Op.LOG1P, "log1p", np.log1p, low=-0.6, high=2.0),
    OpCase(Op.LOG1P, lambda g, a: g.log1p(a), [(4,)], np.log1p, name="log1p_tiny",
           torch_build=lambda t, a: t.log1p(a), inputs=lambda rng: (np.array([1e-9, -3e-8, 2e-12, 5e-5]),),
           fwd_atol32=0.0),   # relative accuracy where log(1 + x) would round to 0
    _unary(Op.EXPM1, "expm1", np.expm1),
    OpCase(Op.EXPM1, lambda g, a: g.expm1(a), [(4,)], np.expm1, name="expm1_tiny",
           torch_build=lambda t, a: t.expm1(a), inputs=lambda rng: (np.array([1e-9, -3e-8, 2e-12, 5e-5]),),
           fwd_atol32=0.0),
    _unary(Op.LOG2, "log2", np.log2, inputs=_positive((3, 4), low=0.3, high=5.0)),
    _unary(Op.LOG10, "log10", np.log10, inputs=_positive((3, 4), low=0.3, high=5.0)),
    OpCase(Op.REMAINDER, lambda g, a, b: g.remainder(a, b), [(3, 4), (3, 4)], _np_remainder,
           name="remainder", torch_build=lambda t, a, b: t.remainder(a, b),
           inputs=_remainder_inputs((3, 4))),
    OpCase(Op.REMAINDER, lambda g, a, b: g.remainder(a, b), [(4,), (3, 1)], _np_remainder,
           name="remainder_broadcast", torch_build=lambda t, a, b: t.remainder(a, b),
           inputs=lambda rng: (_REMAINDER_A, _REMAINDER_B)),
    OpCase(Op.REMAINDER, lambda g, a: g.remainder(a, -1.5), [(6,)], lambda a: np.remainder(a, -1.5),
           name="remainder_scalar_divisor", torch_build=lambda t, a: t.remainder(a, -1.5),
           inputs=lambda rng: (np.array([-4.0, -2.2, -0.4, 0.3, 1.9, 5.2]),)),
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

_UNARY_MATH = [(Op.SIN, "sin"), (Op.COS, "cos"), (Op.TAN, "tan"), (Op.ASIN, "asin"),
               (Op.ACOS, "acos"), (Op.ATAN, "atan"), (Op.SINH, "sinh"), (Op.COSH, "cosh"),
               (Op.ERF, "erf"), (Op.ERFC, "erfc"), (Op.SIGN, "sign"), (Op.FLOOR, "floor"),
               (Op.CEIL, "ceil"), (Op.ROUND, "round"), (Op.TRUNC, "trunc"),
               (Op.RECIPROCAL, "reciprocal"), (Op.RSQRT, "rsqrt"), (Op.SQUARE, "square"),
               (Op.LOG1P, "log1p"), (Op.EXPM1, "expm1"), (Op.LOG2, "log2"), (Op.LOG10, "log10")]
for _op, _name in _UNARY_MATH:
    BAD += [
        BadCase(_op, f"{_name}_complex", lambda g: (np.ones(2) * 1j,),
                lambda g, a, _n=_name: getattr(g, _n)(a), TypeError, rf"{_name}: .*complex"),
        BadCase(_op, f"{_name}_string", lambda g: ("x",),
                lambda g, a, _n=_name: getattr(g, _n)(a), TypeError, f"{_name}:"),
        BadCase(_op, f"{_name}_foreign_node", lambda g: (yscv.Graph().variable(1.0),),
                lambda g, a, _n=_name: getattr(g, _n)(a), yscv.NodeNotFoundError, "another graph"),
    ]
for _op, _name in [(Op.ATAN2, "atan2"), (Op.REMAINDER, "remainder")]:
    BAD += [
        BadCase(_op, f"{_name}_shapes", _leaves((2,), (3,)),
                lambda g, a, b, _n=_name: getattr(g, _n)(a, b), yscv.ShapeError, _name),
        BadCase(_op, f"{_name}_complex", _leaves((2,)),
                lambda g, a, _n=_name: getattr(g, _n)(a, np.array([1j, 2j])), TypeError,
                rf"{_name}: .*complex"),
        BadCase(_op, f"{_name}_object_first", _leaves((2,)),
                lambda g, a, _n=_name: getattr(g, _n)(np.array([object(), 1]), a), TypeError, _name),
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


# ------------------------------------------------------------ math (SPEC 11)
_MATH_GRAD_ROWS = [c for c in CASES if c.check_grad and c.op in {op for op, _ in _UNARY_MATH}
                   | {Op.ATAN2, Op.REMAINDER}]


@pytest.mark.parametrize("case", _MATH_GRAD_ROWS, ids=[c.id for c in _MATH_GRAD_ROWS])
def test_math_second_order_keeps_float32(case):
    check_second_order_float32(case)


_EDGES = np.array([-np.inf, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.5, 1e-8, 1e-200,
                   np.inf, np.nan])


def _same(mine, theirs, dtype, what):
    """Equal to PyTorch to the dtype's last bits, NaN where it has NaN, and
    the same sign of every zero and infinity."""
    rtol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(mine, theirs, rtol=rtol, atol=0, err_msg=what)
    real = ~np.isnan(theirs)
    np.testing.assert_array_equal(np.signbit(mine[real]), np.signbit(theirs[real]), err_msg=what)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [n for _, n in _UNARY_MATH])
def test_math_edge_values_and_gradients_match_pytorch(name, dtype):
    """Infinities, signed zeros, NaN, the domain edges (asin(1), log2(0),
    rsqrt(-0)) and underflow: values and gradients equal PyTorch's, with no
    RuntimeWarning; sign(nan) = 0 and the rounding ops' gradient is an array
    of zeros (PyTorch's zeros_like), not None."""
    import warnings

    torch = pytest.importorskip("torch")
    x = _EDGES.astype(dtype)
    cot = np.linspace(0.5, 2.0, x.size)
    g = yscv.Graph(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xn = g.variable(x)
        y = getattr(g, name)(xn)
        g.backward(y, grad=cot)
    xt = torch.tensor(x, requires_grad=True)
    yt = getattr(torch, name)(xt)
    yt.backward(torch.tensor(cot, dtype=xt.dtype))
    assert g.value(y).dtype == dtype and g.grad(xn).dtype == dtype
    _same(g.value(y), yt.detach().numpy(), dtype, f"{name} value")
    _same(g.grad(xn), xt.grad.numpy(), dtype, f"{name} gradient")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["atan2", "remainder"])
def test_binary_math_edge_values_and_gradients_match_pytorch(name, dtype):
    """Every pair of edge values: atan2's quadrants and signed zeros (and its
    zero gradient where x^2 + y^2 is 0 or underflows, as PyTorch), remainder's
    sign convention, -0, division by 0 and infinities."""
    torch = pytest.importorskip("torch")
    a, b = (v.ravel().astype(dtype) for v in np.meshgrid(_EDGES, _EDGES))
    cot = np.linspace(0.5, 2.0, a.size)
    g = yscv.Graph(dtype)
    an, bn = g.variable(a), g.variable(b)
    y = getattr(g, name)(an, bn)
    g.backward(y, grad=cot)
    at, bt = (torch.tensor(v, requires_grad=True) for v in (a, b))
    yt = getattr(torch, name)(at, bt)
    yt.backward(torch.tensor(cot, dtype=at.dtype))
    _same(g.value(y), yt.detach().numpy(), dtype, f"{name} value")
    _same(g.grad(an), at.grad.numpy(), dtype, f"{name} gradient of input 0")
    _same(g.grad(bn), bt.grad.numpy(), dtype, f"{name} gradient of input 1")


def test_atan2_second_derivative_at_origin_matches_pytorch():
    """At (0, 0) PyTorch's gradient is 0 and its second derivative NaN (the
    zeroed 1/(x^2 + y^2) is still differentiated); the recorded rule says the
    same."""
    torch = pytest.importorskip("torch")
    g = yscv.Graph(np.float64)
    y, x = g.variable(np.array([0.0, 1.0])), g.variable(np.array([0.0, 2.0]))
    gy, gx = g.gradients(g.sum(g.atan2(y, x)), [y, x], create_graph=True)
    second = g.gradients(g.sum(g.add(gy, gx)), [y, x])
    yt = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    xt = torch.tensor([0.0, 2.0], dtype=torch.float64, requires_grad=True)
    gyt, gxt = torch.autograd.grad(torch.atan2(yt, xt).sum(), (yt, xt), create_graph=True)
    tsec = torch.autograd.grad((gyt + gxt).sum(), (yt, xt))
    np.testing.assert_array_equal(g.value(gy), gyt.detach().numpy())
    np.testing.assert_array_equal(g.value(gx), gxt.detach().numpy())
    for mine, theirs in zip(second, tsec):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-14)


@pytest.mark.parametrize("name", ["sign", "floor", "ceil", "round", "trunc"])
def test_rounding_ops_recorded_gradient_is_a_constant_zero(name):
    """create_graph=True: the gradient is a zero constant that does not
    require grad (PyTorch's zeros_like(grad)), and the second derivative is 0."""
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([-1.3, 0.2, 2.7]))
    (d,) = g.gradients(g.sum(g.mul(getattr(g, name)(x), x)), [x], create_graph=True)
    np.testing.assert_array_equal(g.value(d), g.value(getattr(g, name)(x)))   # d/dx (f(x) x) = f(x)
    (d2,) = g.gradients(g.sum(d), [x])
    np.testing.assert_array_equal(d2, [0.0, 0.0, 0.0])


def test_round_is_half_to_even_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999999999999994])
    g = yscv.Graph(np.float64)
    np.testing.assert_array_equal(g.value(g.round(g.constant(x))), torch.round(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(g.value(g.round(g.constant(x))), [-2, -2, -0, 0, 2, 2, 4, 0])


def test_remainder_has_the_divisor_sign_as_python():
    g = yscv.Graph(np.float64)
    pairs = [(5, 3), (-5, 3), (5, -3), (-5, -3), (7.5, 2), (-7.5, 2), (1, -0.25)]
    a = g.constant(np.array([p[0] for p in pairs], dtype=float))
    b = g.constant(np.array([p[1] for p in pairs], dtype=float))
    np.testing.assert_array_equal(g.value(g.remainder(a, b)), [p % q for p, q in pairs])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_kernel_takes_views_and_0d_and_keeps_dtype(dtype):
    """erf/erfc run in a kernel: a transposed (non-contiguous) value, a 0-d
    value and an empty one give math.erf's values in the graph's dtype."""
    rng = np.random.default_rng(3)
    base = rng.uniform(-3, 3, size=(4, 5)).astype(dtype)
    g = yscv.Graph(dtype)
    t = g.transpose(g.constant(base))
    assert not g.value(t).flags.c_contiguous
    for name, fn in (("erf", math.erf), ("erfc", math.erfc)):
        y = g.value(getattr(g, name)(t))
        assert y.dtype == dtype and y.shape == (5, 4)
        np.testing.assert_allclose(y, np.vectorize(fn)(base.T.astype(np.float64)),
                                   rtol=1e-6 if dtype == np.float32 else 1e-15)
        z = g.value(getattr(g, name)(g.constant(np.array(0.5, dtype))))
        assert z.shape == () and z.dtype == dtype and np.isclose(z, fn(0.5), rtol=1e-6)
        assert getattr(g, name)(g.constant(np.zeros((0, 3), dtype))).shape == (0, 3)


# ------------------------------------------------ where: a select on the bits
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(32, 8, 8, 16), (5000,), (40, 40), (7, 3)])
def test_where_select_is_np_where_bit_for_bit(dtype, shape):
    """compute.elementwise.where: np.where's values (NaN, signed zeros,
    infinities) and dtype for arrays, Python numbers (weak scalars), NumPy
    scalars of the dtype and of another dtype (which promote), either side,
    and non-contiguous operands (np.where's own path)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype)
    a.flat[:3] = [np.nan, -0.0, np.inf]
    b.flat[3:6] = [np.nan, -0.0, -np.inf]
    c = rng.random(shape) > 0.5
    for other in (b, 0.0, -0.0, 0.5, 3, dtype(0.25), np.float64(0.5), np.float16(1.5)):
        for args in ((c, a, other), (c, other, a)):
            want = np.where(*args)
            got = elementwise_ops.where(*args)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    at, bt, ct = a[::-1], b[::-1], c[::-1]
    np.testing.assert_array_equal(elementwise_ops.where(ct, at, bt), np.where(ct, at, bt))


def test_where_select_takes_large_same_shape_operands_only(monkeypatch):
    """The select runs from SELECT_MIN elements for same-shape float arrays;
    a broadcast operand, an integer array or a small mask use np.where."""
    calls = []
    real = elementwise_ops._select
    monkeypatch.setattr(elementwise_ops, "_select", lambda *a: calls.append(1) or real(*a))
    big = np.ones(elementwise_ops.SELECT_MIN, np.float32)
    mask = np.arange(big.size) % 3 == 0
    elementwise_ops.where(mask, big, 0.0)
    assert calls == [1]
    out = elementwise_ops.where(mask[:10], big[:10], 0.0)      # small: np.where
    assert calls == [1] and out.dtype == np.float32
    np.testing.assert_array_equal(elementwise_ops.where(mask, big[:1], 2.0),
                                  np.where(mask, big[:1], 2.0))   # broadcast: None -> np.where
    ints = np.arange(big.size)
    np.testing.assert_array_equal(elementwise_ops.where(mask, ints, 0), np.where(mask, ints, 0))
