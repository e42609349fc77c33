"""Activations: NumPy forward references, float64 gradcheck, bad arguments,
stability at large |x|, both size paths, dropout masks, and PyTorch cross-checks."""
import math
import os
import warnings

import numpy as np
import pytest

import yscv
from yscv import Op, registry
from yscv.compute.activation import TINY
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_same_bits_on_threads,
                          check_torch_second_order, make_op_tests, make_second_order_tests)

_erf = np.vectorize(math.erf, otypes=[float])


# ------------------------------------------------------------ references
def np_relu(x):
    return np.maximum(x, 0.0)


def np_leaky(slope):
    return lambda x: np.where(x > 0, x, slope * x)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_gelu_sigmoid(x):
    return x * np_sigmoid(1.702 * x)


def np_silu(x):
    return x * np_sigmoid(x)


def np_softplus_ref(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


def np_mish(x):
    return x * np.tanh(np.log1p(np.exp(x)))


def np_gelu_grad(kind):
    """g * gelu'(x), the forward of gelu_backward."""
    def f(g, x):
        if kind == "none":
            d = 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        elif kind == "tanh":
            b, k = math.sqrt(2.0 / math.pi), 0.044715
            t = np.tanh(b * (x + k * x ** 3))
            d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * b * (1.0 + 3.0 * k * x * x)
        else:
            s = np_sigmoid(1.702 * x)
            d = s + 1.702 * x * s * (1.0 - s)
        return g * d
    return f


def torch_gelu_grad(kind):
    """PyTorch's gelu_backward (sigmoid form: autograd of x sigmoid(1.702 x))."""
    def f(t, g, x):
        if kind == "sigmoid":
            return t.autograd.grad(x * t.sigmoid(1.702 * x), x, g, create_graph=True)[0]
        return t.ops.aten.gelu_backward(g, x, approximate=kind)
    return f


def _torch_prelu(t, x, a):
    """F.prelu on yscv's channel-last layout (channels moved to dim 1 and back)."""
    if x.dim() < 2:
        return t.nn.functional.prelu(x, a)
    return t.nn.functional.prelu(x.movedim(-1, 1), a).movedim(1, -1)


def np_prelu(x, alpha):
    return np.where(x > 0, x, alpha * x)


def np_softmax(axis):
    def f(x):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    return f


def np_log_softmax(axis):
    def f(x):
        m = x.max(axis=axis, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return f


def ref_mask(seed, shape, p):
    """The documented dropout mask, recomputed with the same generator."""
    return np.random.default_rng(seed).random(shape, dtype=np.float32) >= np.float32(p)


def np_dropout(p, seed):
    return lambda x: x * ref_mask(seed, x.shape, p) / (1.0 - p)


# ------------------------------------------------------------ input domains
def _away_from_zero(*shapes, low=0.1, high=2.0):
    def make(rng):
        return tuple(rng.uniform(low, high, size=s) * rng.choice([-1.0, 1.0], size=s)
                     for s in shapes)
    return make


def _softplus_inputs(rng):
    # beta=2, threshold=1: the kink sits at x=0.5; keep away from it
    x = rng.uniform(-2.0, 2.0, size=(4, 5))
    x[np.abs(x - 0.5) < 0.05] += 0.2
    return (x,)


def _prelu_inputs(shape_x, shape_a):
    def make(rng):
        x = rng.uniform(0.1, 2.0, size=shape_x) * rng.choice([-1.0, 1.0], size=shape_x)
        return x, rng.uniform(0.05, 0.5, size=shape_a)
    return make


P_DROP, SEED = 0.3, 1234
LONG = 67

CASES = [
    OpCase(Op.RELU, lambda g, x: g.relu(x), [(3, 4)], np_relu, name="relu",
           torch_build=lambda t, x: t.relu(x),
           inputs=_away_from_zero((3, 4))),
    OpCase(Op.RELU, lambda g, x: g.relu(x), [(2, 3, 4, 2)], np_relu, name="relu_4d",
           torch_build=lambda t, x: t.relu(x),
           inputs=_away_from_zero((2, 3, 4, 2))),
    OpCase(Op.LEAKY_RELU, lambda g, x: g.leaky_relu(x), [(3, 4)], np_leaky(0.01),
           name="leaky_relu_default",
           torch_build=lambda t, x: t.nn.functional.leaky_relu(x), inputs=_away_from_zero((3, 4))),
    OpCase(Op.LEAKY_RELU, lambda g, x: g.leaky_relu(x, negative_slope=0.2), [(5, 3)],
           np_leaky(0.2), name="leaky_relu_0.2",
           torch_build=lambda t, x: t.nn.functional.leaky_relu(x, 0.2), inputs=_away_from_zero((5, 3))),
    OpCase(Op.SIGMOID, lambda g, x: g.sigmoid(x), [(3, 4)], np_sigmoid, name="sigmoid",
           torch_build=lambda t, x: t.sigmoid(x), low=-6, high=6),
    OpCase(Op.SIGMOID, lambda g, x: g.sigmoid(x), [()], np_sigmoid, name="sigmoid_0d",
           torch_build=lambda t, x: t.sigmoid(x)),
    OpCase(Op.TANH, lambda g, x: g.tanh(x), [(3, 4)], np.tanh, name="tanh",
           torch_build=lambda t, x: t.tanh(x), low=-3, high=3),
    OpCase(Op.TANH, lambda g, x: g.tanh(x), [(1,)], np.tanh, name="tanh_size1",
           torch_build=lambda t, x: t.tanh(x)),
    # one-element arrays take a scalar fast path in forward and/or backward
    OpCase(Op.TANH, lambda g, x: g.tanh(x), [()], np.tanh, name="tanh_0d",
           torch_build=lambda t, x: t.tanh(x)),
    OpCase(Op.TANH, lambda g, x: g.tanh(x), [(1, 1)], np.tanh, name="tanh_1x1",
           torch_build=lambda t, x: t.tanh(x)),
    OpCase(Op.SIGMOID, lambda g, x: g.sigmoid(x), [(1,)], np_sigmoid, name="sigmoid_size1",
           torch_build=lambda t, x: t.sigmoid(x), low=-4, high=4),
    OpCase(Op.SIGMOID, lambda g, x: g.sigmoid(x), [(1, 1)], np_sigmoid, name="sigmoid_1x1",
           torch_build=lambda t, x: t.sigmoid(x)),
    OpCase(Op.RELU, lambda g, x: g.relu(x), [()], np_relu, name="relu_0d_positive",
           torch_build=lambda t, x: t.relu(x),
           inputs=lambda rng: (np.array(0.7),)),
    OpCase(Op.RELU, lambda g, x: g.relu(x), [(1,)], np_relu, name="relu_size1_negative",
           torch_build=lambda t, x: t.relu(x),
           inputs=lambda rng: (np.array([-0.7]),)),
    OpCase(Op.GELU, lambda g, x: g.gelu(x), [(4, 5)], np_gelu_erf, name="gelu_none",
           torch_build=lambda t, x: t.nn.functional.gelu(x), low=-4, high=4),
    OpCase(Op.GELU, lambda g, x: g.gelu(x, approximate="tanh"), [(4, 5)], np_gelu_tanh,
           name="gelu_tanh",
           torch_build=lambda t, x: t.nn.functional.gelu(x, approximate="tanh"), low=-4, high=4),
    OpCase(Op.GELU, lambda g, x: g.gelu(x, approximate="sigmoid"), [(4, 5)], np_gelu_sigmoid,
           name="gelu_sigmoid",
           torch_build=lambda t, x: x * t.sigmoid(1.702 * x), low=-4, high=4),
    OpCase(Op.GELU_BACKWARD, lambda g, gr, x: g.gelu_backward(gr, x), [(3, 4), (3, 4)],
           np_gelu_grad("none"), name="gelu_backward_none", low=-3, high=3,
           torch_build=torch_gelu_grad("none")),
    OpCase(Op.GELU_BACKWARD, lambda g, gr, x: g.gelu_backward(gr, x, "tanh"), [(3, 4), (3, 4)],
           np_gelu_grad("tanh"), name="gelu_backward_tanh", low=-3, high=3,
           torch_build=torch_gelu_grad("tanh")),
    OpCase(Op.GELU_BACKWARD, lambda g, gr, x: g.gelu_backward(gr, x, approximate="sigmoid"),
           [(3, 4), (3, 4)], np_gelu_grad("sigmoid"), name="gelu_backward_sigmoid", low=-3,
           high=3, torch_build=torch_gelu_grad("sigmoid")),
    OpCase(Op.TANH_BACKWARD, lambda g, gr, y: g.tanh_backward(gr, y), [(3, 4), (3, 4)],
           lambda gr, y: gr * (1 - y * y), name="tanh_backward", low=-0.9, high=0.9,
           torch_build=lambda t, gr, y: t.ops.aten.tanh_backward(gr, y)),
    OpCase(Op.SIGMOID_BACKWARD, lambda g, gr, y: g.sigmoid_backward(gr, y), [(3, 4), (3, 4)],
           lambda gr, y: gr * y * (1 - y), name="sigmoid_backward", low=0.05, high=0.95,
           torch_build=lambda t, gr, y: t.ops.aten.sigmoid_backward(gr, y)),
    OpCase(Op.SILU, lambda g, x: g.silu(x), [(4, 5)], np_silu, name="silu",
           torch_build=lambda t, x: t.nn.functional.silu(x), low=-5, high=5),
    OpCase(Op.MISH, lambda g, x: g.mish(x), [(4, 5)], np_mish, name="mish",
           torch_build=lambda t, x: t.nn.functional.mish(x), low=-5, high=5),
    OpCase(Op.SOFTPLUS, lambda g, x: g.softplus(x), [(4, 5)], np_softplus_ref, name="softplus",
           torch_build=lambda t, x: t.nn.functional.softplus(x),
           low=-5, high=5),
    OpCase(Op.SOFTPLUS, lambda g, x: g.softplus(x, beta=2.0, threshold=1.0), [(4, 5)],
           lambda x: np_softplus_ref(x, 2.0, 1.0), name="softplus_beta2_threshold1",
           torch_build=lambda t, x: t.nn.functional.softplus(x, 2.0, 1.0),
           inputs=_softplus_inputs),
    OpCase(Op.PRELU, lambda g, x, a: g.prelu(x, a), (), np_prelu, name="prelu_alpha_C",
           torch_build=lambda t, x, a: _torch_prelu(t, x, a),
           inputs=_prelu_inputs((2, 3, 4), (4,))),
    OpCase(Op.PRELU, lambda g, x, a: g.prelu(x, a), (), np_prelu, name="prelu_alpha_1",
           torch_build=lambda t, x, a: _torch_prelu(t, x, a),
           inputs=_prelu_inputs((3, 5), (1,))),
    OpCase(Op.PRELU, lambda g, x, a: g.prelu(x, a), (), lambda x, a: np_prelu(x, a[0]),
           name="prelu_0d_x",
           torch_build=lambda t, x, a: _torch_prelu(t, x, a), inputs=_prelu_inputs((), (1,))),
    OpCase(Op.PRELU, lambda g, x: g.prelu(x, np.array([0.1, 0.3, 0.7])), [(4, 3)],
           lambda x: np_prelu(x, np.array([0.1, 0.3, 0.7])), name="prelu_constant_alpha",
           torch_build=lambda t, x: _torch_prelu(t, x, t.tensor([0.1, 0.3, 0.7], dtype=t.float64)),
           inputs=_away_from_zero((4, 3))),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x), [(3, 5)], np_softmax(-1), name="softmax_last",
           torch_build=lambda t, x: t.softmax(x, -1)),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x, axis=0), [(4, 3)], np_softmax(0), name="softmax_axis0",
           torch_build=lambda t, x: t.softmax(x, 0)),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x, axis=1), [(2, 4, 3)], np_softmax(1),
           name="softmax_middle_axis",
           torch_build=lambda t, x: t.softmax(x, 1)),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x, axis=-2), [(2, 3, 2, 2)], np_softmax(-2),
           name="softmax_axis_neg2",
           torch_build=lambda t, x: t.softmax(x, -2)),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x), [(6,)], np_softmax(-1), name="softmax_1d",
           torch_build=lambda t, x: t.softmax(x, -1)),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x, axis=0), [()], lambda x: np.ones(()),
           name="softmax_0d",
           torch_build=lambda t, x: t.softmax(x, 0)),
    OpCase(Op.LOG_SOFTMAX, lambda g, x: g.log_softmax(x), [(3, 5)], np_log_softmax(-1),
           name="log_softmax_last",
           torch_build=lambda t, x: t.log_softmax(x, -1)),
    OpCase(Op.LOG_SOFTMAX, lambda g, x: g.log_softmax(x, axis=0), [(4, 3)], np_log_softmax(0),
           name="log_softmax_axis0",
           torch_build=lambda t, x: t.log_softmax(x, 0)),
    OpCase(Op.LOG_SOFTMAX, lambda g, x: g.log_softmax(x, axis=1), [(2, 4, 3)], np_log_softmax(1),
           name="log_softmax_middle_axis",
           torch_build=lambda t, x: t.log_softmax(x, 1)),
    OpCase(Op.LOG_SOFTMAX, lambda g, x: g.log_softmax(x, axis=-3), [(3, 2, 4)], np_log_softmax(0),
           name="log_softmax_axis_neg3",
           torch_build=lambda t, x: t.log_softmax(x, -3)),
    # long rows: the kernels' 8-lane max/sum loops plus their remainder loop
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x), [(2, LONG)], np_softmax(-1),
           name="softmax_long_last_axis",
           torch_build=lambda t, x: t.softmax(x, -1)),
    OpCase(Op.SOFTMAX, lambda g, x: g.softmax(x, axis=0), [(LONG, 2)], np_softmax(0),
           name="softmax_long_axis0",
           torch_build=lambda t, x: t.softmax(x, 0)),
    OpCase(Op.LOG_SOFTMAX, lambda g, x: g.log_softmax(x), [(2, LONG)], np_log_softmax(-1),
           name="log_softmax_long_last_axis",
           torch_build=lambda t, x: t.log_softmax(x, -1)),
    OpCase(Op.LOG_SOFTMAX, lambda g, x: g.log_softmax(x, axis=1), [(1, LONG, 2)],
           np_log_softmax(1), name="log_softmax_long_middle_axis",
           torch_build=lambda t, x: t.log_softmax(x, 1)),
    OpCase(Op.DROPOUT, lambda g, x: g.dropout(x, P_DROP, seed=SEED), [(6, 7)],
           np_dropout(P_DROP, SEED), name="dropout_train_seeded",
           torch_build=lambda t, x: x * t.tensor(ref_mask(SEED, tuple(x.shape), P_DROP)) / (1.0 - P_DROP)),
    OpCase(Op.DROPOUT, lambda g, x: g.dropout(x, 0.5, training=True, seed=7), [(2, 3, 4)],
           np_dropout(0.5, 7), name="dropout_train_p0.5_3d",
           torch_build=lambda t, x: x * t.tensor(ref_mask(7, tuple(x.shape), 0.5)) / 0.5),
    OpCase(Op.DROPOUT, lambda g, x: g.dropout(x, P_DROP, training=False, seed=SEED), [(4, 5)],
           lambda x: x, name="dropout_eval",
           torch_build=lambda t, x: t.nn.functional.dropout(x, P_DROP, training=False)),
    OpCase(Op.DROPOUT, lambda g, x: g.dropout(x, 0.0, seed=SEED), [(4, 5)], lambda x: x,
           name="dropout_p0",
           torch_build=lambda t, x: t.nn.functional.dropout(x, 0.0)),
    OpCase(Op.DROPOUT, lambda g, x: g.dropout(x, 1.0, seed=SEED), [(4, 5)], np.zeros_like,
           name="dropout_p1",
           torch_build=lambda t, x: t.nn.functional.dropout(x, 1.0)),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.RELU, "relu_not_node", lambda g: ("x",), lambda g, x: g.relu(x), TypeError, "relu"),
    BadCase(Op.LEAKY_RELU, "leaky_relu_slope_str", _leaves((2,)),
            lambda g, x: g.leaky_relu(x, "0.1"), TypeError, "leaky_relu: negative_slope"),
    BadCase(Op.LEAKY_RELU, "leaky_relu_slope_nan", _leaves((2,)),
            lambda g, x: g.leaky_relu(x, float("nan")), ValueError, "negative_slope"),
    BadCase(Op.SIGMOID, "sigmoid_complex", lambda g: (np.ones(2) * 1j,), lambda g, x: g.sigmoid(x),
            TypeError, "sigmoid"),
    BadCase(Op.TANH, "tanh_foreign_node", lambda g: (yscv.Graph().variable(1.0),),
            lambda g, x: g.tanh(x), yscv.NodeNotFoundError, "another graph"),
    BadCase(Op.GELU, "gelu_bad_approximate", _leaves((2,)), lambda g, x: g.gelu(x, "erf"),
            ValueError, "gelu: approximate"),
    BadCase(Op.GELU, "gelu_approximate_not_str", _leaves((2,)), lambda g, x: g.gelu(x, None),
            ValueError, "gelu: approximate"),
    BadCase(Op.GELU_BACKWARD, "gelu_backward_shapes", _leaves((2, 3), (3,)),
            lambda g, gr, x: g.gelu_backward(gr, x), yscv.ShapeError, "gelu_backward: grad has shape"),
    BadCase(Op.GELU_BACKWARD, "gelu_backward_bad_approximate", _leaves((2,), (2,)),
            lambda g, gr, x: g.gelu_backward(gr, x, "erf"), ValueError, "gelu_backward: approximate"),
    BadCase(Op.TANH_BACKWARD, "tanh_backward_shapes", _leaves((2, 3), (3,)),
            lambda g, gr, y: g.tanh_backward(gr, y), yscv.ShapeError, "tanh_backward: grad has shape"),
    BadCase(Op.SIGMOID_BACKWARD, "sigmoid_backward_shapes", _leaves((2, 3), (2, 2)),
            lambda g, gr, y: g.sigmoid_backward(gr, y), yscv.ShapeError,
            "sigmoid_backward: grad has shape"),
    BadCase(Op.SILU, "silu_object", lambda g: (np.array([object()]),), lambda g, x: g.silu(x),
            TypeError, "silu"),
    BadCase(Op.MISH, "mish_string", lambda g: (np.array(["a"]),), lambda g, x: g.mish(x),
            TypeError, "mish"),
    BadCase(Op.SOFTPLUS, "softplus_beta_zero", _leaves((2,)), lambda g, x: g.softplus(x, beta=0),
            ValueError, "softplus: beta"),
    BadCase(Op.SOFTPLUS, "softplus_threshold_str", _leaves((2,)),
            lambda g, x: g.softplus(x, threshold="20"), TypeError, "softplus: threshold"),
    BadCase(Op.PRELU, "prelu_alpha_wrong_C", _leaves((2, 4), (3,)), lambda g, x, a: g.prelu(x, a),
            yscv.ShapeError, r"prelu: alpha must have shape \(4,\)"),
    BadCase(Op.PRELU, "prelu_alpha_2d", _leaves((2, 4), (1, 4)), lambda g, x, a: g.prelu(x, a),
            yscv.ShapeError, "prelu: alpha"),
    BadCase(Op.PRELU, "prelu_alpha_complex", _leaves((2, 4)),
            lambda g, x: g.prelu(x, np.ones(4) * 1j), TypeError, "prelu"),
    BadCase(Op.SOFTMAX, "softmax_axis_out_of_range", _leaves((2, 3)),
            lambda g, x: g.softmax(x, axis=2), ValueError, "softmax: axis=2"),
    BadCase(Op.SOFTMAX, "softmax_axis_float", _leaves((2, 3)),
            lambda g, x: g.softmax(x, axis=1.0), TypeError, "softmax: axis"),
    BadCase(Op.LOG_SOFTMAX, "log_softmax_axis_out_of_range", _leaves((2, 3)),
            lambda g, x: g.log_softmax(x, axis=-3), ValueError, "log_softmax: axis=-3"),
    BadCase(Op.DROPOUT, "dropout_p_above_1", _leaves((2,)), lambda g, x: g.dropout(x, 1.5),
            ValueError, r"dropout: p must be in \[0, 1\]"),
    BadCase(Op.DROPOUT, "dropout_p_negative", _leaves((2,)), lambda g, x: g.dropout(x, -0.1),
            ValueError, "dropout: p"),
    BadCase(Op.DROPOUT, "dropout_p_str", _leaves((2,)), lambda g, x: g.dropout(x, "0.5"),
            TypeError, "dropout: p"),
    BadCase(Op.DROPOUT, "dropout_training_str", _leaves((2,)),
            lambda g, x: g.dropout(x, 0.5, training="yes"), TypeError, "dropout: training"),
    BadCase(Op.DROPOUT, "dropout_seed_negative", _leaves((2,)),
            lambda g, x: g.dropout(x, 0.5, seed=-1), ValueError, "dropout: seed"),
    BadCase(Op.DROPOUT, "dropout_seed_float", _leaves((2,)),
            lambda g, x: g.dropout(x, 0.5, seed=1.5), ValueError, "dropout: seed"),
]


# ------------------------------------------------ SPEC section 11 activations
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def np_elu(alpha=1.0):
    return lambda x: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def np_selu(x):
    return SELU_SCALE * np_elu(SELU_ALPHA)(x)


def np_celu(alpha=1.0):
    return lambda x: np.maximum(x, 0.0) + np.minimum(0.0, alpha * np.expm1(x / alpha))


def np_hardtanh(lo=-1.0, hi=1.0):
    return lambda x: np.clip(x, lo, hi)


def np_hardsigmoid(x):
    return np.clip(x / 6.0 + 0.5, 0.0, 1.0)


def np_hardswish(x):
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def np_softsign(x):
    return x / (1.0 + np.abs(x))


def np_logsigmoid(x):
    return -np.logaddexp(0.0, -x)


def np_glu(axis):
    def f(x):
        a, b = np.split(x, 2, axis=axis)
        return a * np_sigmoid(b)
    return f


def _away_from(shape, kinks, low, high, gap=0.1):
    """Uniform in [low, high) with every element at least ``gap`` from the kinks."""
    def make(rng):
        x = rng.uniform(low, high, size=shape)
        for k in kinks:
            near = np.abs(x - k) < gap
            x[near] = k + np.where(x[near] >= k, gap, -gap) * 2.0
        return (x,)
    return make


def _torch_hardsigmoid(t, x):
    """relu6(x + 3) / 6: F.hardsigmoid itself, except that PyTorch 2.13
    has no double backward for hardsigmoid (its second derivative is 0
    away from -3 and 3, and 0 at them too: relu6's gradient is 0 at 0 and 6)."""
    return t.nn.functional.relu6(x + 3.0) / 6.0


CASES += [
    OpCase(Op.ELU, lambda g, x: g.elu(x), [(3, 4)], np_elu(), name="elu_default",
           torch_build=lambda t, x: t.nn.functional.elu(x), inputs=_away_from_zero((3, 4))),
    OpCase(Op.ELU, lambda g, x: g.elu(x, alpha=0.5), [(2, 3, 2)], np_elu(0.5), name="elu_alpha0.5",
           torch_build=lambda t, x: t.nn.functional.elu(x, 0.5),
           inputs=_away_from((2, 3, 2), [0.0], -3.0, 3.0)),
    OpCase(Op.ELU, lambda g, x: g.elu(x, 1.5), [()], np_elu(1.5), name="elu_0d",
           torch_build=lambda t, x: t.nn.functional.elu(x, 1.5), inputs=lambda rng: (np.array(-0.8),)),
    OpCase(Op.SELU, lambda g, x: g.selu(x), [(3, 4)], np_selu, name="selu",
           torch_build=lambda t, x: t.nn.functional.selu(x), inputs=_away_from_zero((3, 4), high=3.0)),
    OpCase(Op.CELU, lambda g, x: g.celu(x), [(3, 4)], np_celu(), name="celu_default",
           torch_build=lambda t, x: t.nn.functional.celu(x), inputs=_away_from_zero((3, 4))),
    OpCase(Op.CELU, lambda g, x: g.celu(x, alpha=2.0), [(4, 3)], np_celu(2.0), name="celu_alpha2",
           torch_build=lambda t, x: t.nn.functional.celu(x, 2.0),
           inputs=_away_from((4, 3), [0.0], -4.0, 3.0)),
    OpCase(Op.CELU, lambda g, x: g.celu(x, alpha=-0.7), [(3, 4)], np_celu(-0.7),
           name="celu_negative_alpha",
           torch_build=lambda t, x: t.nn.functional.celu(x, -0.7), inputs=_away_from_zero((3, 4))),
    OpCase(Op.HARDTANH, lambda g, x: g.hardtanh(x), [(3, 5)], np_hardtanh(), name="hardtanh_default",
           torch_build=lambda t, x: t.nn.functional.hardtanh(x),
           inputs=_away_from((3, 5), [-1.0, 1.0], -2.0, 2.0)),
    OpCase(Op.HARDTANH, lambda g, x: g.hardtanh(x, min_val=-0.5, max_val=2.0), [(4, 4)],
           np_hardtanh(-0.5, 2.0), name="hardtanh_bounds",
           torch_build=lambda t, x: t.nn.functional.hardtanh(x, -0.5, 2.0),
           inputs=_away_from((4, 4), [-0.5, 2.0], -2.0, 3.0)),
    OpCase(Op.RELU6, lambda g, x: g.relu6(x), [(3, 5)], np_hardtanh(0.0, 6.0), name="relu6",
           torch_build=lambda t, x: t.nn.functional.relu6(x),
           inputs=_away_from((3, 5), [0.0, 6.0], -2.0, 8.0)),
    OpCase(Op.HARDSIGMOID, lambda g, x: g.hardsigmoid(x), [(3, 5)], np_hardsigmoid,
           name="hardsigmoid", torch_build=_torch_hardsigmoid,
           inputs=_away_from((3, 5), [-3.0, 3.0], -5.0, 5.0)),
    OpCase(Op.HARDSWISH, lambda g, x: g.hardswish(x), [(3, 5)], np_hardswish, name="hardswish",
           torch_build=lambda t, x: t.nn.functional.hardswish(x),
           inputs=_away_from((3, 5), [-3.0, 3.0], -5.0, 5.0)),
    OpCase(Op.SOFTSIGN, lambda g, x: g.softsign(x), [(3, 4)], np_softsign, name="softsign",
           torch_build=lambda t, x: t.nn.functional.softsign(x), inputs=_away_from_zero((3, 4), high=4.0)),
    OpCase(Op.LOGSIGMOID, lambda g, x: g.logsigmoid(x), [(3, 4)], np_logsigmoid, name="logsigmoid",
           torch_build=lambda t, x: t.nn.functional.logsigmoid(x), low=-6.0, high=6.0),
    OpCase(Op.LOGSIGMOID, lambda g, x: g.logsigmoid(x), [()], np_logsigmoid, name="logsigmoid_0d",
           torch_build=lambda t, x: t.nn.functional.logsigmoid(x)),
    OpCase(Op.GLU, lambda g, x: g.glu(x), [(3, 4)], np_glu(-1), name="glu_last_axis",
           torch_build=lambda t, x: t.nn.functional.glu(x), low=-3.0, high=3.0),
    OpCase(Op.GLU, lambda g, x: g.glu(x, axis=0), [(4, 3)], np_glu(0), name="glu_axis0",
           torch_build=lambda t, x: t.nn.functional.glu(x, 0), low=-3.0, high=3.0),
    OpCase(Op.GLU, lambda g, x: g.glu(x, axis=1), [(2, 6, 2)], np_glu(1), name="glu_middle_axis",
           torch_build=lambda t, x: t.nn.functional.glu(x, 1), low=-3.0, high=3.0),
    OpCase(Op.GLU, lambda g, x: g.glu(x, axis=-1), [(2,)], np_glu(-1), name="glu_1d_pair",
           torch_build=lambda t, x: t.nn.functional.glu(x, -1)),
]

BAD += [
    BadCase(Op.ELU, "elu_alpha_str", _leaves((2,)), lambda g, x: g.elu(x, "1.0"), TypeError,
            "elu: alpha"),
    BadCase(Op.ELU, "elu_alpha_nan", _leaves((2,)), lambda g, x: g.elu(x, float("nan")), ValueError,
            "elu: alpha"),
    BadCase(Op.SELU, "selu_complex", lambda g: (np.ones(2) * 1j,), lambda g, x: g.selu(x), TypeError,
            "selu"),
    BadCase(Op.CELU, "celu_alpha_zero", _leaves((2,)), lambda g, x: g.celu(x, 0.0), ValueError,
            "celu: alpha must not be 0"),
    BadCase(Op.CELU, "celu_alpha_bool", _leaves((2,)), lambda g, x: g.celu(x, True), TypeError,
            "celu: alpha"),
    BadCase(Op.HARDTANH, "hardtanh_min_above_max", _leaves((2,)), lambda g, x: g.hardtanh(x, 1.0, -1.0),
            ValueError, "hardtanh: min_val=1.0 is greater than max_val=-1.0"),
    BadCase(Op.HARDTANH, "hardtanh_max_none", _leaves((2,)), lambda g, x: g.hardtanh(x, max_val=None),
            TypeError, "hardtanh: max_val"),
    BadCase(Op.RELU6, "relu6_object", lambda g: (np.array([object()]),), lambda g, x: g.relu6(x),
            TypeError, "relu6"),
    BadCase(Op.HARDSIGMOID, "hardsigmoid_string", lambda g: (np.array(["a"]),),
            lambda g, x: g.hardsigmoid(x), TypeError, "hardsigmoid"),
    BadCase(Op.HARDSWISH, "hardswish_foreign_node", lambda g: (yscv.Graph().variable(1.0),),
            lambda g, x: g.hardswish(x), yscv.NodeNotFoundError, "another graph"),
    BadCase(Op.SOFTSIGN, "softsign_complex", lambda g: (np.ones(3) * 1j,), lambda g, x: g.softsign(x),
            TypeError, "softsign"),
    BadCase(Op.LOGSIGMOID, "logsigmoid_not_node", lambda g: ("x",), lambda g, x: g.logsigmoid(x),
            TypeError, "logsigmoid"),
    BadCase(Op.GLU, "glu_odd_axis", _leaves((2, 5)), lambda g, x: g.glu(x), yscv.ShapeError,
            "glu: the length of axis -1 must be even to halve it, got 5"),
    BadCase(Op.GLU, "glu_0d", _leaves(()), lambda g, x: g.glu(x), yscv.ShapeError, "glu: x must have"),
    BadCase(Op.GLU, "glu_axis_out_of_range", _leaves((2, 4)), lambda g, x: g.glu(x, axis=2),
            ValueError, "glu: axis=2"),
    BadCase(Op.GLU, "glu_axis_float", _leaves((2, 4)), lambda g, x: g.glu(x, axis=1.0), TypeError,
            "glu: axis"),
]


test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)

# At the kinks (x exactly 0, softplus exactly at its threshold) the first
# derivative takes PyTorch's side and the second is that side's: compared with
# PyTorch's double backward only (a finite difference would straddle the kink).
_KINK_X = np.array([[-1.0, 0.0, 0.5], [0.0, 2.0, -0.0]])
KINKS = [
    OpCase(Op.RELU, lambda g, x: g.relu(x), name="relu_at_zero", inputs=lambda rng: (_KINK_X,),
           torch_build=lambda t, x: t.relu(x)),
    OpCase(Op.LEAKY_RELU, lambda g, x: g.leaky_relu(x, 0.2), name="leaky_relu_at_zero",
           inputs=lambda rng: (_KINK_X,), torch_build=lambda t, x: t.nn.functional.leaky_relu(x, 0.2)),
    OpCase(Op.PRELU, lambda g, x, a: g.prelu(x, a), name="prelu_at_zero",
           inputs=lambda rng: (_KINK_X, np.array([0.1, 0.2, 0.3])), torch_build=_torch_prelu),
    OpCase(Op.SOFTPLUS, lambda g, x: g.softplus(x, beta=2.0, threshold=1.0),
           name="softplus_at_threshold", inputs=lambda rng: (np.array([0.25, 0.5, 0.75]),),
           torch_build=lambda t, x: t.nn.functional.softplus(x, 2.0, 1.0)),
]


# SPEC section 11 activations at their kinks: PyTorch's side at 0 (elu,
# selu, celu: the slope alpha, its derivative 0), at hardtanh's / relu6's
# bounds (0), at hardswish's -3 and 3 (0 and 1, second derivative 0), at
# softsign's 0 (abs's derivative 0 there).
_BOUNDS_X = np.array([[-1.0, 1.0, 0.3], [-2.0, 2.0, -0.5]])
_RELU6_X = np.array([[0.0, 6.0, 3.0], [-1.0, 7.0, -0.0]])
_THREES_X = np.array([[-3.0, 3.0, 0.5], [-4.0, 4.0, -1.0]])
KINKS += [
    OpCase(Op.ELU, lambda g, x: g.elu(x, 0.5), name="elu_at_zero", inputs=lambda rng: (_KINK_X,),
           torch_build=lambda t, x: t.nn.functional.elu(x, 0.5)),
    OpCase(Op.SELU, lambda g, x: g.selu(x), name="selu_at_zero", inputs=lambda rng: (_KINK_X,),
           torch_build=lambda t, x: t.nn.functional.selu(x)),
    OpCase(Op.CELU, lambda g, x: g.celu(x, 2.0), name="celu_at_zero", inputs=lambda rng: (_KINK_X,),
           torch_build=lambda t, x: t.nn.functional.celu(x, 2.0)),
    OpCase(Op.HARDTANH, lambda g, x: g.hardtanh(x), name="hardtanh_at_bounds",
           inputs=lambda rng: (_BOUNDS_X,), torch_build=lambda t, x: t.nn.functional.hardtanh(x)),
    OpCase(Op.RELU6, lambda g, x: g.relu6(x), name="relu6_at_0_and_6",
           inputs=lambda rng: (_RELU6_X,), torch_build=lambda t, x: t.nn.functional.relu6(x)),
    OpCase(Op.HARDSIGMOID, lambda g, x: g.hardsigmoid(x), name="hardsigmoid_at_3",
           inputs=lambda rng: (_THREES_X,), torch_build=_torch_hardsigmoid),
    OpCase(Op.HARDSWISH, lambda g, x: g.hardswish(x), name="hardswish_at_3",
           inputs=lambda rng: (_THREES_X,), torch_build=lambda t, x: t.nn.functional.hardswish(x)),
    OpCase(Op.SOFTSIGN, lambda g, x: g.softsign(x), name="softsign_at_zero",
           inputs=lambda rng: (_KINK_X,), torch_build=lambda t, x: t.nn.functional.softsign(x)),
]


@pytest.mark.parametrize("case", KINKS, ids=[c.id for c in KINKS])
def test_second_order_at_kinks_matches_pytorch(case):
    pytest.importorskip("torch")
    check_torch_second_order(case)


@pytest.mark.parametrize("name", ["gelu", "log_softmax"])
def test_third_derivative_matches_pytorch(name):
    """d/dx of sum(d2) where d2 = d/dx sum(d1 * v), d1 = d/dx sum(f(x) * w)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, w, v = (rng.uniform(-2.0, 2.0, (2, 5)) for _ in range(3))
    g = yscv.Graph(np.float64)
    xn = g.variable(x)
    y = getattr(g, name)(xn)
    (d1,) = g.gradients(g.sum(g.mul(y, w)), [xn], create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(d1, v)), [xn], create_graph=True)
    (d3,) = g.gradients(g.sum(d2), [xn])
    xt = torch.tensor(x, requires_grad=True)
    yt = getattr(torch.nn.functional, name)(xt, **({"dim": -1} if name == "log_softmax" else {}))
    (t1,) = torch.autograd.grad((yt * torch.tensor(w)).sum(), xt, create_graph=True)
    (t2,) = torch.autograd.grad((t1 * torch.tensor(v)).sum(), xt, create_graph=True)
    (t3,) = torch.autograd.grad(t2.sum(), xt)
    for mine, theirs in ((d1, t1), (d2, t2), (d3, t3)):
        mine = g.value(mine) if isinstance(mine, yscv.NodeId) else mine
        np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ kinks
def _grad(build, x, dtype=np.float64):
    g = yscv.Graph(dtype)
    n = g.variable(x)
    out = build(g, n)
    g.backward(out, grad=np.ones(g.value(out).shape))
    return g.grad(n)


def test_relu_gradient_is_zero_at_zero():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(_grad(lambda g, n: g.relu(n), x), [0.0, 0.0, 1.0])
    for shape in ((), (1,), (1, 1)):   # the one-element fast path too
        np.testing.assert_array_equal(_grad(lambda g, n: g.relu(n), np.zeros(shape)), np.zeros(shape))


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_element_fast_paths_match_the_array_paths(shape, dtype):
    """Forward and backward of sigmoid / tanh / relu on one element (Python
    scalar path) agree with the same element inside a larger array."""
    values = np.array([-30.0, -2.5, -0.3, 0.4, 3.0, 25.0])
    for name, build in (("sigmoid", lambda g, n: g.sigmoid(n)), ("tanh", lambda g, n: g.tanh(n)),
                        ("relu", lambda g, n: g.relu(n))):
        g = yscv.Graph(dtype)
        n = g.variable(values)
        y = build(g, n)
        g.backward(y, grad=np.full(values.shape, 0.75))
        for k, v in enumerate(values):
            g1 = yscv.Graph(dtype)
            n1 = g1.variable(np.full(shape, v))
            y1 = build(g1, n1)
            g1.backward(y1, grad=np.full(shape, 0.75))
            assert g1.value(y1).dtype == dtype and g1.grad(n1).dtype == dtype
            assert g1.value(y1).shape == shape and g1.grad(n1).shape == shape
            # the outputs may differ by an ulp; y(1-y) and 1-y^2 amplify that
            # where y ~ 1, so gradients are compared to a few ulps of 1
            tol = 8 * np.finfo(dtype).eps
            np.testing.assert_allclose(g1.value(y1).reshape(()), g.value(y)[k], rtol=tol, err_msg=name)
            np.testing.assert_allclose(g1.grad(n1).reshape(()), g.grad(n)[k], rtol=tol, atol=tol,
                                       err_msg=name)


def test_leaky_relu_gradient_at_zero_is_the_slope():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(_grad(lambda g, n: g.leaky_relu(n, 0.1), x), [0.1, 0.1, 1.0])


def test_prelu_gradient_at_zero_goes_to_alpha_side():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([[-2.0, 0.0], [3.0, -1.0]]))
    a = g.variable(np.array([0.25, 0.5]))
    g.backward(g.prelu(x, a), grad=np.ones((2, 2)))
    np.testing.assert_allclose(g.grad(x), [[0.25, 0.5], [1.0, 0.5]])
    np.testing.assert_allclose(g.grad(a), [-2.0, -1.0])


@pytest.mark.parametrize("alpha_shape", [(3,), (1,)])
def test_prelu_alpha_gradient_over_many_rows_float32(alpha_shape):
    """The fused backward sums the alpha gradient in row blocks: float32 stays
    close to the float64 value over thousands of rows; x may be a constant."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5000, 3))
    cot = rng.standard_normal((5000, 3))
    a = np.full(alpha_shape, 0.2)
    grads = {}
    for dtype in (np.float32, np.float64):
        g = yscv.Graph(dtype)
        an = g.variable(a)
        y = g.prelu(g.constant(x), an)
        g.backward(y, grad=cot)
        grads[dtype] = g.grad(an)
    expect = np.where(x > 0, 0.0, cot * x).sum(axis=0)
    if alpha_shape == (1,):
        expect = expect.sum(keepdims=True)
    np.testing.assert_allclose(grads[np.float64], expect, rtol=1e-12)
    np.testing.assert_allclose(grads[np.float32], expect, rtol=2e-5)


EMPTY_BUILDS = {
    "relu": lambda g, n: g.relu(n), "leaky_relu": lambda g, n: g.leaky_relu(n),
    "sigmoid": lambda g, n: g.sigmoid(n), "tanh": lambda g, n: g.tanh(n),
    "gelu": lambda g, n: g.gelu(n), "silu": lambda g, n: g.silu(n), "mish": lambda g, n: g.mish(n),
    "softplus": lambda g, n: g.softplus(n), "prelu": lambda g, n: g.prelu(n, np.ones(1)),
    "softmax": lambda g, n: g.softmax(n, axis=0), "log_softmax": lambda g, n: g.log_softmax(n),
    "dropout": lambda g, n: g.dropout(n, 0.5, seed=1),
}


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)])
@pytest.mark.parametrize("name", sorted(EMPTY_BUILDS))
def test_empty_inputs(name, shape):
    g = yscv.Graph()
    n = g.variable(np.zeros(shape))
    y = EMPTY_BUILDS[name](g, n)
    assert g.value(y).shape == shape and g.value(y).dtype == np.float32
    g.backward(y, grad=np.zeros(shape))
    assert g.grad(n).shape == shape


# ------------------------------------------------------------ stability, both size paths
SMOOTH = {
    "sigmoid": (lambda g, n: g.sigmoid(n), np_sigmoid),
    "tanh": (lambda g, n: g.tanh(n), np.tanh),
    "silu": (lambda g, n: g.silu(n), np_silu),
    "mish": (lambda g, n: g.mish(n), np_mish),
    "softplus": (lambda g, n: g.softplus(n), np_softplus_ref),
    "gelu_none": (lambda g, n: g.gelu(n), np_gelu_erf),
    "gelu_tanh": (lambda g, n: g.gelu(n, "tanh"), np_gelu_tanh),
    "gelu_sigmoid": (lambda g, n: g.gelu(n, "sigmoid"), np_gelu_sigmoid),
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
@pytest.mark.parametrize("size", [7, TINY + 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_inputs_are_finite_without_warnings(name, size, dtype):
    """(Under NUMBA_DISABLE_JIT=1 the kernels run as Python on NumPy scalars,
    which warn on overflow where compiled code is silent: only values are
    checked then.)"""
    build, _ = SMOOTH[name]
    x = np.linspace(-1000.0, 1000.0, size)
    x[:3] = [-1e30, -89.5, 1e30]
    g = yscv.Graph(dtype)
    n = g.variable(x)
    with warnings.catch_warnings():
        if os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0"):
            warnings.simplefilter("error")
        out = build(g, n)
        g.backward(out, grad=np.ones(size))
    y, gx = g.value(out), g.grad(n)
    assert y.dtype == dtype and gx.dtype == dtype
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(gx))
    # the far tails: the identity-like activations give x and slope 1, the
    # squashing ones their asymptotes and slope 0
    if name in ("sigmoid",):
        np.testing.assert_array_equal(y[[0, 2]], [0.0, 1.0])
    elif name == "tanh":
        np.testing.assert_array_equal(y[[0, 2]], [-1.0, 1.0])
    else:
        np.testing.assert_array_equal(y[[0, 2]], np.array([0.0, 1e30], dtype=dtype))
        np.testing.assert_array_equal(gx[[0, 2]], [0.0, 1.0])


@pytest.mark.parametrize("name", sorted(SMOOTH))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_and_large_paths_match_reference(name, dtype):
    """Values and gradients below and above the TINY threshold (NumPy path and
    fused kernel) agree with the float64 reference and each other."""
    build, ref = SMOOTH[name]
    rng = np.random.default_rng(5)
    big = rng.uniform(-8.0, 8.0, size=TINY * 2)
    gbig = _grad(build, big, dtype)
    gsmall = _grad(build, big[:50], dtype)
    h = 1e-6
    numeric = (ref(big + h) - ref(big - h)) / (2 * h)
    rtol, atol = (1e-6, 1e-8) if dtype == np.float64 else (2e-5, 2e-6)
    np.testing.assert_allclose(gbig, numeric, rtol=rtol, atol=atol)
    np.testing.assert_allclose(gsmall, numeric[:50], rtol=rtol, atol=atol)
    np.testing.assert_allclose(gsmall, gbig[:50], rtol=rtol, atol=atol)
    g = yscv.Graph(dtype)
    yb = g.value(build(g, g.variable(big)))
    ys = g.value(build(g, g.variable(big[:50])))
    np.testing.assert_allclose(yb, ref(big), rtol=rtol, atol=atol)
    np.testing.assert_allclose(ys, ref(big[:50]), rtol=rtol, atol=atol)


def test_sigmoid_relative_accuracy_in_the_negative_tail():
    x = np.array([-30.0, -60.0, -80.0])
    g = yscv.Graph(np.float32)
    y = g.value(g.sigmoid(g.variable(x)))
    np.testing.assert_allclose(y, np.exp(x) / (1 + np.exp(x)), rtol=1e-5)


def test_gelu_erf_float32_absolute_error_is_bounded():
    """float32 uses a rational erf: |error| <= 3e-7 * max(1, |x|) on the whole
    line (PyTorch's float32 CPU gelu: 3.5e-7), so the far tail is absolute."""
    x = np.linspace(-9.0, 9.0, 36001).astype(np.float32)
    x64 = x.astype(np.float64)
    expect = 0.5 * x64 * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x64])
    cdf = 0.5 * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x64])
    dexpect = cdf + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2.0 * math.pi)
    g = yscv.Graph(np.float32)
    xn = g.variable(x)
    y = g.gelu(xn)
    g.backward(g.sum(y))
    bound = 3e-7 * np.maximum(1.0, np.abs(x64))
    assert np.all(np.abs(g.value(y) - expect) <= bound)
    assert np.all(np.abs(g.grad(xn) - dexpect) <= bound)


def test_gelu_erf_float64_relative_accuracy_in_the_negative_tail():
    """float64 calls libm's erfc, which keeps the relative accuracy that
    1 + erf loses."""
    x = np.array([-3.0, -5.0, -7.0, -20.0])
    expect = 0.5 * x * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x])
    g = yscv.Graph(np.float64)
    np.testing.assert_allclose(g.value(g.gelu(g.variable(x))), expect, rtol=1e-13)


# ------------------------------------------------------------ softmax
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_is_shift_invariant_and_normalised(axis):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5))
    g = yscv.Graph(np.float64)
    y = g.value(g.softmax(g.variable(x + 1000.0), axis=axis))
    np.testing.assert_allclose(y, np_softmax(axis)(x), rtol=1e-12)
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=1e-12)
    ly = g.value(g.log_softmax(g.variable(x - 1000.0), axis=axis))
    np.testing.assert_allclose(ly, np_log_softmax(axis)(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(70, 33), (33, 70), (4, 100, 3)])
def test_softmax_backward_formulas_on_large_inputs(shape):
    """Both paths (kernel for short axes, NumPy for long ones), every axis."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    cot = rng.standard_normal(shape)
    for axis in range(len(shape)):
        g = yscv.Graph(np.float64)
        n = g.variable(x)
        y = g.softmax(n, axis=axis)
        g.backward(y, grad=cot)
        yv = g.value(y)
        expect = yv * (cot - (cot * yv).sum(axis=axis, keepdims=True))
        np.testing.assert_allclose(g.grad(n), expect, rtol=1e-10, atol=1e-13)
        g = yscv.Graph(np.float64)
        n = g.variable(x)
        y = g.log_softmax(n, axis=axis)
        g.backward(y, grad=cot)
        expect = cot - np.exp(g.value(y)) * cot.sum(axis=axis, keepdims=True)
        np.testing.assert_allclose(g.grad(n), expect, rtol=1e-10, atol=1e-13)


def test_softmax_forward_accepts_non_contiguous_values():
    x = np.random.default_rng(3).standard_normal((5, 4)).T
    for log, ref in ((False, np_softmax(1)), (True, np_log_softmax(1))):
        op = Op.LOG_SOFTMAX if log else Op.SOFTMAX
        y, saved = registry.FORWARD[int(op)](1, x)
        assert saved is None
        np.testing.assert_allclose(y, ref(x), rtol=1e-12)


def test_softmax_row_with_nan_is_nan_and_others_are_unaffected():
    x = np.array([[1.0, np.nan, 0.0], [1.0, 2.0, 3.0]])
    g = yscv.Graph(np.float64)
    y = g.value(g.softmax(g.variable(x)))
    assert np.all(np.isnan(y[0]))
    np.testing.assert_allclose(y[1], np_softmax(-1)(x[1:])[0])


def test_softmax_empty_axis():
    g = yscv.Graph(np.float64)
    n = g.variable(np.zeros((3, 0)))
    y = g.softmax(n)
    assert g.value(y).shape == (3, 0)
    g.backward(y, grad=np.zeros((3, 0)))
    assert g.grad(n).shape == (3, 0)


# ------------------------------------------------------------ dropout
def test_dropout_mask_matches_the_generator_and_gradient_uses_it():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, size=(41, 51))   # not a multiple of 8 elements
    for dtype in (np.float32, np.float64):
        g = yscv.Graph(dtype)
        n = g.variable(x)
        y = g.dropout(n, 0.25, seed=99)
        mask = ref_mask(99, x.shape, 0.25)
        scale = dtype(1.0 / 0.75)
        np.testing.assert_array_equal(g.value(y), x.astype(dtype) * mask * scale)
        g.backward(y, grad=np.ones(x.shape))
        np.testing.assert_array_equal(g.grad(n), mask * scale)


def test_dropout_drops_a_fraction_p():
    g = yscv.Graph()
    for p in (0.1, 0.5, 0.9):
        y = g.value(g.dropout(g.variable(np.ones((300, 400))), p, seed=42))
        assert abs(np.mean(y == 0) - p) < 0.005


def test_dropout_without_seed_draws_from_the_library_generator_and_records_it():
    x = np.ones((20, 30))
    yscv.manual_seed(11)
    g1 = yscv.Graph()
    y1 = g1.dropout(g1.variable(x), 0.5)
    yscv.manual_seed(11)
    g2 = yscv.Graph()
    y2 = g2.dropout(g2.variable(x), 0.5)
    np.testing.assert_array_equal(g1.value(y1), g2.value(y2))
    p, training, seed = g1._attrs[y1.index]
    assert (p, training) == (0.5, True) and isinstance(seed, int)
    np.testing.assert_array_equal(g1.value(y1), x * ref_mask(seed, x.shape, 0.5) * 2.0)
    # a second dropout draws a different seed, hence a different mask
    y3 = g1.dropout(g1.variable(x), 0.5)
    assert not np.array_equal(g1.value(y1), g1.value(y3))


def test_dropout_forward_is_pure_and_replays_the_same_mask():
    g = yscv.Graph()
    n = g.variable(np.ones((8, 9)))
    y = g.dropout(n, 0.4)
    attrs = g._attrs[y.index]
    again, _ = registry.FORWARD[int(Op.DROPOUT)](attrs, g.value(n))
    np.testing.assert_array_equal(again, g.value(y))


def test_dropout_saves_the_mask_as_bits():
    g = yscv.Graph()
    n = g.variable(np.ones((61, 64)))
    g.dropout(n, 0.5, seed=3)
    assert g.memory()["saved"] == (61 * 64 + 7) // 8
    g.dropout(n, 0.5, training=False)
    g.dropout(n, 1.0)
    with g.no_grad():
        g.dropout(n, 0.5, seed=3)
    assert g.memory()["saved"] == (61 * 64 + 7) // 8


def test_dropout_identity_cases_do_not_consume_the_generator():
    yscv.manual_seed(5)
    state = yscv.random.get_rng_state()
    g = yscv.Graph()
    n = g.variable(np.arange(6.0))
    for y in (g.dropout(n, 0.5, training=False), g.dropout(n, 0.0), g.dropout(n, 1.0)):
        assert g.op(y) == Op.DROPOUT
    assert yscv.random.get_rng_state() == state
    g.backward(g.dropout(n, 0.5, training=False), grad=np.arange(6.0))
    np.testing.assert_array_equal(g.grad(n), np.arange(6.0))


def test_dropout_p1_gives_zeros_and_zero_gradient():
    g = yscv.Graph()
    n = g.variable(np.full((3, 3), np.inf))
    y = g.dropout(n, 1.0)
    np.testing.assert_array_equal(g.value(y), np.zeros((3, 3)))
    g.backward(y, grad=np.ones((3, 3)))
    np.testing.assert_array_equal(g.grad(n), np.zeros((3, 3)))


def test_failed_dropout_does_not_draw_a_seed():
    yscv.manual_seed(8)
    state = yscv.random.get_rng_state()
    g = yscv.Graph()
    with pytest.raises(TypeError, match="dropout"):
        g.dropout(np.array(["a"]), 0.5)
    assert yscv.random.get_rng_state() == state and len(g) == 0


# ------------------------------------------------------------ PyTorch cross-checks
def _torch_pair(build_y, build_t, x, dtype):
    torch = pytest.importorskip("torch")
    g = yscv.Graph(dtype)
    n = g.variable(x)
    y = build_y(g, n)
    cot = np.random.default_rng(0).standard_normal(g.value(y).shape)
    g.backward(y, grad=cot)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    xt = torch.tensor(x, dtype=tdt, requires_grad=True)
    yt = build_t(torch, xt)
    yt.backward(torch.tensor(cot, dtype=tdt))
    return g.value(y), yt.detach().numpy(), g.grad(n), xt.grad.numpy()


TORCH_CASES = {
    "gelu_none": (lambda g, n: g.gelu(n), lambda t, x: t.nn.functional.gelu(x)),
    "gelu_tanh": (lambda g, n: g.gelu(n, "tanh"),
                  lambda t, x: t.nn.functional.gelu(x, approximate="tanh")),
    "gelu_sigmoid": (lambda g, n: g.gelu(n, "sigmoid"), lambda t, x: x * t.sigmoid(1.702 * x)),
    "softplus": (lambda g, n: g.softplus(n), lambda t, x: t.nn.functional.softplus(x)),
    "softplus_beta": (lambda g, n: g.softplus(n, beta=1.5, threshold=3.0),
                      lambda t, x: t.nn.functional.softplus(x, beta=1.5, threshold=3.0)),
    "silu": (lambda g, n: g.silu(n), lambda t, x: t.nn.functional.silu(x)),
    "mish": (lambda g, n: g.mish(n), lambda t, x: t.nn.functional.mish(x)),
    "sigmoid": (lambda g, n: g.sigmoid(n), lambda t, x: t.sigmoid(x)),
    "tanh": (lambda g, n: g.tanh(n), lambda t, x: t.tanh(x)),
    "leaky_relu": (lambda g, n: g.leaky_relu(n, 0.2),
                   lambda t, x: t.nn.functional.leaky_relu(x, 0.2)),
    "softmax_axis1": (lambda g, n: g.softmax(n, axis=1), lambda t, x: t.softmax(x, dim=1)),
    "log_softmax_last": (lambda g, n: g.log_softmax(n), lambda t, x: t.log_softmax(x, dim=-1)),
}


@pytest.mark.parametrize("name", sorted(TORCH_CASES))
@pytest.mark.parametrize("size", [(3, 5, 4), (32, 40)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_pytorch(name, size, dtype):
    x = np.random.default_rng(4).uniform(-6.0, 6.0, size=size)
    y, yt, gx, gt = _torch_pair(*TORCH_CASES[name], x, dtype)
    rtol, atol = (1e-12, 1e-12) if dtype == np.float64 else (2e-6, 2e-6)
    np.testing.assert_allclose(y, yt, rtol=rtol, atol=atol)
    np.testing.assert_allclose(gx, gt, rtol=rtol * 10, atol=atol * 10)


def test_prelu_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4))
    a = rng.uniform(0.1, 0.4, 4)
    g = yscv.Graph(np.float64)
    xn, an = g.variable(x), g.variable(a)
    cot = rng.standard_normal(x.shape)
    y = g.prelu(xn, an)
    g.backward(y, grad=cot)
    xt = torch.tensor(x, requires_grad=True)
    at = torch.tensor(a, requires_grad=True)
    # PyTorch's channel axis is dim 1: move ours (the last) there and back
    yt = torch.nn.functional.prelu(xt.movedim(-1, 1), at).movedim(1, -1)
    yt.backward(torch.tensor(cot))
    np.testing.assert_allclose(g.value(y), yt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.grad(xn), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.grad(an), at.grad.numpy(), rtol=1e-12)


# ------------------------------------------------- NaN inputs (issue 12.10)
NAN_ACTIVATIONS = {
    "relu": (lambda g, n: g.relu(n), lambda t, x: t.relu(x)),
    "leaky_relu": (lambda g, n: g.leaky_relu(n, 0.2),
                   lambda t, x: t.nn.functional.leaky_relu(x, 0.2)),
}


@pytest.mark.parametrize("name", sorted(NAN_ACTIVATIONS))
@pytest.mark.parametrize("x", [[np.nan], [[np.nan, -1.0, 0.0, 2.0, -0.0, np.inf, -np.inf, np.nan]]],
                         ids=["size1", "array"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_input_gradient_matches_pytorch(name, x, dtype):
    """relu's backward at NaN passes the gradient on as PyTorch's
    threshold_backward does (it gave 0, hiding the NaN); leaky_relu uses the
    slope there. Values (NaN included) and gradients equal torch's."""
    x = np.asarray(x, dtype=np.float64)
    y, yt, gx, gt = _torch_pair(*NAN_ACTIVATIONS[name], x, dtype)
    np.testing.assert_array_equal(y, yt)
    np.testing.assert_array_equal(gx, gt)
    if name == "relu":
        assert np.all(gx[np.isnan(x)] != 0)


def test_prelu_nan_input_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.array([[np.nan, -1.0, 0.0, 2.0], [1.0, np.nan, -3.0, 0.5]])
    a = np.array([0.25, 0.1, 0.3, 0.2])
    cot = np.arange(1.0, 9.0).reshape(2, 4)
    g = yscv.Graph(np.float64)
    xn, an = g.variable(x), g.variable(a)
    g.backward(g.prelu(xn, an), grad=cot)
    xt = torch.tensor(x, requires_grad=True)
    at = torch.tensor(a, requires_grad=True)
    torch.nn.functional.prelu(xt, at).backward(torch.tensor(cot))  # 2-d: channel axis is 1 = last
    np.testing.assert_array_equal(g.grad(xn), xt.grad.numpy())
    np.testing.assert_array_equal(g.grad(an), at.grad.numpy())


# ------------------------------------------- tanh paths (per-node work, issue 16)
from yscv.compute import activation as _act  # noqa: E402


@pytest.mark.parametrize("simd", [True, False])
def test_tanh_float32_forward_paths(monkeypatch, simd):
    """float32 tanh is np.tanh itself where NumPy's tanh is vectorised
    (NUMPY_SIMD_TANH), else the rational kernel from TANH_TINY elements;
    both within the kernel's documented error of the float64 tanh."""
    monkeypatch.setattr(_act, "NUMPY_SIMD_TANH", simd)
    # the flag is read once at import: with it, the graph's hot path calls
    # np.tanh itself (registry.UFUNC); without it, the forward chooses
    table, k = yscv.registry.UFUNC, int(yscv.Op.TANH)
    prev = table[k]
    table[k] = np.tanh if simd else None
    x = np.random.default_rng(3).uniform(-9.0, 9.0, (32, 64)).astype(np.float32)
    assert x.size >= _act.TANH_TINY
    try:
        g = yscv.Graph()
        y = g.value(g.tanh(g.variable(x)))
    finally:
        table[k] = prev
    assert y.dtype == np.float32 and y.shape == x.shape
    if simd:
        np.testing.assert_array_equal(y, np.tanh(x))
    else:
        np.testing.assert_array_equal(y, _act.unary_forward(x, _act.TANH))
    np.testing.assert_allclose(y, np.tanh(x.astype(np.float64)), rtol=0, atol=5e-7)


def test_numpy_simd_tanh_probe_is_a_bool():
    assert isinstance(_act.NUMPY_SIMD_TANH, bool)
    assert _act._numpy_simd_tanh() is _act.NUMPY_SIMD_TANH


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3,), (32, 64)])
def test_tanh_and_sigmoid_grads_in_place_are_the_three_ufuncs(dtype, shape):
    """The small-array backward passes (one temporary, written in place) give
    the bits of the plain NumPy formulas g (1 - y^2) and (g y)(1 - y)."""
    rng = np.random.default_rng(4)
    gr = rng.standard_normal(shape).astype(dtype)
    y = np.tanh(rng.standard_normal(shape)).astype(dtype)
    one = dtype(1.0)
    np.testing.assert_array_equal(_act.tanh_grad(gr, y), gr * (one - y * y))
    s = (0.5 + 0.5 * y).astype(dtype)
    np.testing.assert_array_equal(_act.sigmoid_grad(gr, s), (gr * s) * (one - s))
    ro = y.copy()
    ro.flags.writeable = False           # values are read-only: never written
    _act.tanh_grad(gr, ro)
    _act.sigmoid_grad(gr, ro)
    np.testing.assert_array_equal(ro, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_tanh_and_sigmoid_grads_one_element_are_numpys_python_float_product(dtype, shape):
    """The one-element tier hands its Python-float factor to the multiply as
    a 0-d array of the graph dtype: the bits, dtype, shape and the overflow
    warning of NumPy's own ``g * factor`` (factor rounded once to the dtype)."""
    rng = np.random.default_rng(12)
    for _ in range(2000):
        gr = np.full(shape, rng.standard_normal() * 10.0 ** int(rng.integers(-30, 30)), dtype)
        y = np.full(shape, rng.uniform(-1.5, 1.5), dtype)
        v = y.item()
        for got, want in ((_act.tanh_grad(gr, y), gr * (1.0 - v * v)),
                          (_act.sigmoid_grad(gr, y), gr * (v * (1.0 - v)))):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()
    if dtype == np.float32:  # 1 - y*y = -1e40 does not fit: -inf, as NumPy warns
        with pytest.warns(RuntimeWarning, match="overflow"):
            got = _act.tanh_grad(np.ones(shape, dtype), np.full(shape, 1e20, dtype))
        assert got.dtype == dtype and np.isneginf(got).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_large_arrays_take_the_threaded_kernel(monkeypatch, dtype):
    """From RELU_BIG elements relu forward and backward run the one-pass
    kernel (several chunks); values equal NumPy's max / threshold_backward
    bit for bit: NaN input stays NaN and passes its gradient on, x = 0
    and -0.0 give 0 and a zero gradient, a -0.0 input gives +0.0."""
    from yscv.compute import activation as A

    calls = []
    real = A.K.relu_select
    monkeypatch.setattr(A.K, "relu_select", lambda *a: (calls.append(1), real(*a))[1],
                        raising=False)
    rng = np.random.default_rng(31)
    x = rng.standard_normal((A.RELU_BIG + 37,)).astype(dtype).reshape(-1, 1)
    x[:5, 0] = [np.nan, 0.0, -0.0, np.inf, -np.inf]
    cot = rng.standard_normal(x.shape).astype(dtype)
    g = yscv.Graph(dtype)
    v = g.variable(x)
    y = g.relu(v)
    g.backward(y, grad=cot)
    assert len(calls) == 2
    want = np.where(x <= 0, 0.0, x).astype(dtype)
    np.testing.assert_array_equal(g.value(y), want)
    assert not np.signbit(g.value(y)[2, 0])
    np.testing.assert_array_equal(g.grad(v), np.where(x <= 0, 0.0, cot).astype(dtype))
    assert g.grad(v)[0, 0] == cot[0, 0]


def test_relu_kernel_path_gradcheck_and_threads(monkeypatch):
    """float64 gradcheck on the kernel path (RELU_BIG lowered), and the same
    bits on one thread and two (a large float32 array, several chunks)."""
    from yscv.compute import activation as A
    from yscv.gradcheck import gradcheck

    monkeypatch.setattr(A, "RELU_BIG", 8)
    x = np.random.default_rng(32).standard_normal((3, 5, 4))
    x[np.abs(x) < 1e-3] = 0.5                    # keep the kink out of the difference step
    assert gradcheck(lambda g, n: g.relu(g.relu(n) * 2.0 - 0.5), [x])
    monkeypatch.undo()

    big = np.random.default_rng(33).standard_normal((4, 64, 1024)).astype(np.float32)
    cot = np.cos(big)

    def run():
        g = yscv.Graph(np.float32)
        v = g.variable(big)
        y = g.relu(v)
        g.backward(y, grad=cot)
        return g.value(y).copy(), g.grad(v).copy()

    check_same_bits_on_threads(run)


@pytest.mark.parametrize("n", [1, 7, 1500, 70000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_gradient_has_np_where_bits_at_every_size(n, dtype):
    """relu's array rule (every size tier of relu_grad) gives the bits of
    its ns rule ``where(not x <= 0, g, 0)``: +0.0 where dropped, even for a
    negative, infinite or NaN g there; NaN in x passes g on."""
    from yscv.compute.activation import relu_grad

    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    x[::5] = np.nan
    g[1::7] = np.inf
    g[2::11] = -0.0
    g[3::13] = np.nan
    expect = np.where(~(x <= 0), g, dtype(0.0))
    assert relu_grad(g, x).tobytes() == expect.tobytes()


def test_a_rule_returning_an_array_under_the_graph_interpreter_is_refused(monkeypatch):
    """create_graph=True through a rule that returns an ndarray instead of a
    node (a gradient detached from the graph) raises BackwardError naming the
    op and node; the plain walk of the same rule still works."""
    table = list(registry.RULES)
    monkeypatch.setattr(registry, "RULES", table)
    import yscv.engine.walk_recorded as wr
    monkeypatch.setattr(wr, "_RULES", table)
    rule = table[int(Op.TANH)]

    def detached(ns, g, inputs, out, attrs, saved, needs):
        (gx,) = rule(ns, g, inputs, out, attrs, saved, needs)
        return (ns.value(gx),)

    table[int(Op.TANH)] = detached
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([0.5, -1.0]))
    y = g.sum(g.tanh(x))
    with pytest.raises(yscv.BackwardError,
                       match=r"recorded backward of tanh \(node 1\) returned a ndarray"):
        g.gradients(y, [x], create_graph=True)
    (gx,) = g.gradients(y, [x])
    np.testing.assert_allclose(gx, 1.0 - np.tanh(g.value(x)) ** 2, rtol=1e-12)


# ------------------------------------- SPEC section 11 activations vs PyTorch
SECTION11 = {
    "elu": (lambda g, n: g.elu(n), lambda t, x: t.nn.functional.elu(x)),
    "elu_alpha": (lambda g, n: g.elu(n, 0.3), lambda t, x: t.nn.functional.elu(x, 0.3)),
    "selu": (lambda g, n: g.selu(n), lambda t, x: t.nn.functional.selu(x)),
    "celu": (lambda g, n: g.celu(n, 1.5), lambda t, x: t.nn.functional.celu(x, 1.5)),
    "hardtanh": (lambda g, n: g.hardtanh(n, -2.0, 3.0), lambda t, x: t.nn.functional.hardtanh(x, -2.0, 3.0)),
    "relu6": (lambda g, n: g.relu6(n), lambda t, x: t.nn.functional.relu6(x)),
    "hardsigmoid": (lambda g, n: g.hardsigmoid(n), lambda t, x: t.nn.functional.hardsigmoid(x)),
    "hardswish": (lambda g, n: g.hardswish(n), lambda t, x: t.nn.functional.hardswish(x)),
    "softsign": (lambda g, n: g.softsign(n), lambda t, x: t.nn.functional.softsign(x)),
    "logsigmoid": (lambda g, n: g.logsigmoid(n), lambda t, x: t.nn.functional.logsigmoid(x)),
}
# every kink of the ten, signed zeros, infinities and NaN; 64 elements, so
# that PyTorch runs its vectorised kernels on every element (its scalar loop,
# used for tensors shorter than a vector register, passes the gradient on at
# NaN where the vectorised one gives 0 or NaN: yscv follows the vectorised one
# at every size)
_EDGES = np.array([np.nan, 0.0, -0.0, -3.0, 3.0, -1.0, 1.0, 6.0, -2.0, np.inf, -np.inf,
                   1e30, -1e30, 100.0, -100.0, 0.5])


@pytest.mark.parametrize("name", sorted(SECTION11))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_section11_activations_match_pytorch_at_edges_and_nan(name, dtype):
    """Values and gradients equal torch's on random inputs, at every kink,
    at +-inf, +-1e30 and at NaN, without warnings. hardsigmoid's gradient:
    PyTorch's float64 kernel multiplies by 1/6 rounded to float32
    (0.1666666716...); yscv's is 1/6 (a relative 3e-8 apart). celu's alpha
    is one float32 represents exactly: PyTorch's float64 celu gradient uses
    1 / float32(alpha) (see test_celu_gradient_uses_the_exact_alpha)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([_EDGES, rng.uniform(-8.0, 8.0, 48)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, yt, gx, gt = _torch_pair(*SECTION11[name], x, dtype)
    rtol, atol = (1e-12, 1e-15) if dtype == np.float64 else (2e-6, 1e-7)
    np.testing.assert_allclose(y, yt, rtol=rtol, atol=atol)
    grtol = 1e-7 if name == "hardsigmoid" and dtype == np.float64 else rtol
    if name == "softsign":   # PyTorch's composite cancels at huge |x| (NaN at inf)
        big = np.abs(x) > 1e6
        assert np.all(np.abs(gx[big].astype(np.float64)) < 1e-50)   # g / (1 + |x|)^2: 1e-60 at 1e30, 0 at inf
        gx, gt = gx[~big], gt[~big]
    np.testing.assert_allclose(gx, gt, rtol=grtol, atol=atol)
    assert np.array_equal(np.isnan(gx), np.isnan(gt))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_glu_matches_pytorch(axis, dtype):
    """Values and gradients against PyTorch's float64 (inputs of either
    graph dtype), along every axis."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = np.asarray(rng.uniform(-4.0, 4.0, (4, 6, 2)), dtype)
    g = yscv.Graph(dtype)
    n = g.variable(x)
    y = g.glu(n, axis)
    cot = np.asarray(rng.standard_normal(g.value(y).shape), dtype)
    g.backward(y, grad=cot)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    yt = torch.nn.functional.glu(xt, axis)
    yt.backward(torch.tensor(cot, dtype=torch.float64))
    rtol, atol = (1e-12, 1e-15) if dtype == np.float64 else (2e-6, 1e-7)
    assert g.value(y).dtype == dtype and g.grad(n).dtype == dtype
    np.testing.assert_allclose(g.value(y), yt.detach().numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(g.grad(n), xt.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_glu_gate_gradient_keeps_relative_accuracy_where_the_gate_saturates(dtype):
    """The gate half's gradient is g a s sigmoid(-b), not g a s (1 - s): 1 - s
    cancels where s is near 1 (float32 at b = 13 is 3% off that way, as
    PyTorch's float32 kernel is; float64 at b = 30 0.1%)."""
    a = np.array([0.7, -1.3, 2.0, 0.4])
    b = np.array([13.1, 30.0, -17.0, 5.0])
    x = np.concatenate([a, b]).astype(dtype)
    a64, b64 = x[:4].astype(np.float64), x[4:].astype(np.float64)
    s_pos, s_neg = 1.0 / (1.0 + np.exp(-b64)), 1.0 / (1.0 + np.exp(b64))
    gx = _grad(lambda g, n: g.glu(n), x, dtype)
    assert gx.dtype == dtype
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(gx[4:], a64 * s_pos * s_neg, rtol=rtol)
    np.testing.assert_allclose(gx[:4], s_pos, rtol=rtol)


def test_celu_gradient_uses_the_exact_alpha():
    """PyTorch's float64 celu gradient is exp(x * c) with c = 1 / float32(alpha)
    (its derivatives.yaml rounds alpha with toFloat()); yscv's uses 1 / alpha:
    the exact derivative, a relative ~1e-7 from PyTorch's at alpha = 1.7."""
    torch = pytest.importorskip("torch")
    x = np.linspace(-6.0, -0.5, 12)
    gx = _grad(lambda g, n: g.celu(n, 1.7), x)
    np.testing.assert_allclose(gx, np.exp(x / 1.7), rtol=1e-14)
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.celu(xt, 1.7).sum().backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=5e-7)


SECTION11_EMPTY = {name: build for name, (build, _) in SECTION11.items()}
SECTION11_EMPTY["glu"] = lambda g, n: g.glu(n, axis=0)


@pytest.mark.parametrize("name", sorted(SECTION11_EMPTY))
def test_section11_empty_inputs(name):
    g = yscv.Graph()
    n = g.variable(np.zeros((0, 4)))
    y = SECTION11_EMPTY[name](g, n)
    assert g.value(y).shape == (0, 4) and g.value(y).dtype == np.float32
    g.backward(y, grad=np.zeros((0, 4)))
    assert g.grad(n).shape == (0, 4)


def test_celu_negative_alpha_overflows_like_pytorch_without_warnings():
    """celu(x, alpha < 0) takes exp(x / alpha) of a positive number for x < 0:
    -inf for large |x| in value and gradient, as PyTorch, quietly."""
    torch = pytest.importorskip("torch")
    x = np.array([-1000.0, -1.0, 0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, yt, gx, gt = _torch_pair(lambda g, n: g.celu(n, -0.5),
                                    lambda t, x: t.nn.functional.celu(x, -0.5), x, np.float64)
    np.testing.assert_allclose(y, yt, rtol=1e-12)
    np.testing.assert_allclose(gx, gt, rtol=1e-12)
    assert y[0] == -np.inf


def test_selu_uses_pytorchs_constants():
    torch = pytest.importorskip("torch")
    g = yscv.Graph(np.float64)
    y = g.value(g.selu(np.array([-50.0, 1.0])))
    ref = torch.nn.functional.selu(torch.tensor([-50.0, 1.0], dtype=torch.float64)).numpy()
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_erf_backward_reads_phi_from_the_output(dtype):
    """The erf-GELU backward takes Phi(x) = y / x from the forward's output
    (no second erf): the same gradient as recomputing erf, within a few
    ulps, also at 0, tiny and subnormal x, in both tails, at +-inf and NaN."""
    from yscv.compute import activation as act
    from yscv.kernels.activation_kinds import GELU_ERF, GELU_ERF_FROM_OUTPUT
    tiny = np.finfo(dtype).tiny
    edges = np.array([0.0, -0.0, 1e-35, -1e-35, tiny / 4, -tiny / 4, 1e-20, -3.0, -7.5,
                      -12.0, -30.0, 4.0, 9.0, 40.0, np.inf, np.nan], dtype=dtype)
    rng = np.random.default_rng(11)
    x = np.concatenate([edges, (3 * rng.standard_normal(4096)).astype(dtype)])
    g = rng.standard_normal(x.size).astype(dtype)
    y = act.unary_forward(x, GELU_ERF)
    got = act.unary_backward(g, x, y, GELU_ERF_FROM_OUTPUT)
    ref = act.unary_backward(g, x, x, GELU_ERF)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    atol = 4e-7 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(got, ref, rtol=8 * np.finfo(dtype).eps, atol=atol)
    assert got[:6].tolist() == (0.5 * g[:6]).tolist()      # 0, tiny, subnormal: Phi = 1/2
    np.testing.assert_array_equal(act.gelu_grad(g, x, y, GELU_ERF), got)
    # the graph's rule: g.gelu's gradient is this one
    gr = yscv.Graph(dtype)
    xn = gr.variable(x[16:])
    gr.backward(gr.gelu(xn), grad=g[16:])
    np.testing.assert_array_equal(gr.grad(xn), got[16:])


# ------------------------------------------- hardswish / hardsigmoid kernels
def _hard_input(n, dtype):
    """Values around -3, 0 and 3, the special values, on both sides of the
    kernels' size tier (and of a chunk boundary of the threaded pass)."""
    x = np.random.default_rng(11).uniform(-7.0, 7.0, n)
    x[:14] = [np.nan, np.inf, -np.inf, 3.0, -3.0, 0.0, -0.0, 6.0, -6.0, 1e-30,
              np.nextafter(3.0, 0.0), np.nextafter(-3.0, 0.0), -1e30, 1e30]
    return x.astype(dtype)


HARD = {"hardswish": (lambda g, n: g.hardswish(n), lambda t, x: t.nn.functional.hardswish(x),
                      True),
        "hardsigmoid": (lambda g, n: g.hardsigmoid(n),
                        lambda t, x: t.nn.functional.hardsigmoid(x), False)}


@pytest.mark.parametrize("name", sorted(HARD))
@pytest.mark.parametrize("n", [100, 4096, 70_001, 300_000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hard_activation_kernels_give_the_numpy_formulas_bits(name, n, dtype):
    """Forward: the bits of ``x * clip(x + 3, 0, 6) / 6`` (hardswish) and
    ``clip(x + 3, 0, 6) / 6``; backward: the array rule (the one-pass kernel
    from `HARD_KERNEL` elements) gives the bits of the ns rule, NaN and
    infinities included, and the same bits on one thread and two."""
    from yscv.compute.activation import HARD_KERNEL
    from yscv.engine.namespace import ARRAY
    build, _, swish = HARD[name]
    x = _hard_input(n, dtype).reshape(-1, 1) if n % 2 else _hard_input(n, dtype).reshape(-1, 2)
    with np.errstate(invalid="ignore"):
        ref = x * np.clip(x + 3.0, 0.0, 6.0) if swish else np.clip(x + 3.0, 0.0, 6.0)
    ref /= 6.0
    gy = np.random.default_rng(12).standard_normal(x.shape).astype(dtype)
    gy[1, 0] = np.nan

    def run():
        g = yscv.Graph(dtype)
        v = g.variable(x)
        y = build(g, v)
        g.backward(y, grad=gy)
        return g.value(y), g.grad(v)

    y, gx = run()
    assert y.dtype == dtype and gx.dtype == dtype
    assert y.tobytes() == ref.astype(dtype).tobytes()
    op = Op.HARDSWISH if swish else Op.HARDSIGMOID
    rule = registry.RULES[op](ARRAY, gy, (x,), y, None, None, (True,))[0]
    assert rule.dtype == dtype and gx.tobytes() == rule.tobytes()
    from yscv.compute.activation import hard_activation_grad
    assert (hard_activation_grad(gy, x, swish) is not None) == (n >= HARD_KERNEL)
    check_same_bits_on_threads(run)


@pytest.mark.parametrize("name", sorted(HARD))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hard_activation_kernels_match_pytorch(name, dtype):
    """Values and gradients of the kernel path equal PyTorch's at -3, 3 and
    the special values (NaN where PyTorch gives NaN)."""
    torch = pytest.importorskip("torch")
    build, build_t, _ = HARD[name]
    x = _hard_input(70_001, dtype).astype(np.float64)
    y, yt, gx, gt = _torch_pair(build, build_t, x, dtype)
    # PyTorch's float64 hardsigmoid multiplies by a float32 1/6 (3e-8 off)
    tol = 1e-15 if dtype == np.float64 and name == "hardswish" else 1e-7
    np.testing.assert_allclose(y, yt, rtol=tol, atol=tol)
    np.testing.assert_allclose(gx, gt, rtol=tol, atol=tol)
