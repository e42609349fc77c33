"""The engine's own ops: ``Op.CUSTOM`` (an op a user defines with
`yscv.custom_op`) and ``Op.VJP`` (a fused op's input gradient recorded as one
node by ``create_graph=True``). NumPy forward reference, float64 gradcheck,
the second-order column against PyTorch, bad arguments."""
import numpy as np

import yscv
from yscv import Op
from yscv.testing import BadCase, OpCase, make_op_tests, make_second_order_tests


# ------------------------------------------------------------------ Op.CUSTOM
def _swish_forward(x, beta):
    """x * sigmoid(beta x), arrays in, the inputs' dtype out."""
    return x / (1.0 + np.exp(-beta * x))


def _swish_rule(ns, g, xs, y, attrs, saved, needs):
    """d/dx = s + beta x s (1 - s), d/dbeta = x^2 s (1 - s), s = sigmoid(beta x);
    beta's gradient comes at x's shape (the walk sums it back)."""
    x, beta = xs
    s = ns.reciprocal(ns.add(ns.exp(ns.neg(ns.mul(beta, x))), 1.0))
    ds = ns.mul(s, ns.sub(1.0, s))
    gx = ns.mul(g, ns.add(s, ns.mul(ns.mul(beta, x), ds))) if needs[0] else None
    gb = ns.mul(g, ns.mul(ns.mul(x, x), ds)) if needs[1] else None
    return gx, gb


SWISH = yscv.custom_op("swish", _swish_forward, _swish_rule)


def _leaky_forward(x, slope):
    """A leaky ReLU that saves its mask (``saves=True``)."""
    mask = x > 0
    return np.where(mask, x, slope * x), mask


def _leaky_rule(ns, g, xs, y, attrs, saved, needs):
    return (ns.where(saved, g, ns.mul(g, attrs["slope"])),)


LEAKY = yscv.custom_op("leaky", _leaky_forward, _leaky_rule, saves=True)


def _np_swish(x, beta):
    return x / (1.0 + np.exp(-beta * x))


def _away_from_zero(shape):
    def make(rng):
        return (rng.uniform(0.3, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape),)
    return make


CASES = [
    OpCase(Op.CUSTOM, lambda g, x, b: SWISH(g, x, b), [(3, 4), ()], _np_swish, name="custom_swish",
           inputs=lambda rng: (rng.uniform(-2, 2, (3, 4)), np.array(1.3)),
           torch_build=lambda t, x, b: x * t.sigmoid(b * x)),
    OpCase(Op.CUSTOM, lambda g, x, b: SWISH(g, x, b), [(2, 3), (3,)], _np_swish,
           name="custom_swish_broadcast_beta",
           inputs=lambda rng: (rng.uniform(-2, 2, (2, 3)), rng.uniform(0.5, 1.5, (3,))),
           torch_build=lambda t, x, b: x * t.sigmoid(b * x)),
    OpCase(Op.CUSTOM, lambda g, x: LEAKY(g, x, slope=0.1), [(3, 4)],
           lambda x: np.where(x > 0, x, 0.1 * x), name="custom_leaky_saved_mask",
           inputs=_away_from_zero((3, 4)),
           torch_build=lambda t, x: t.nn.functional.leaky_relu(x, 0.1)),
]


# --------------------------------------------------------------------- Op.VJP
_C = 5
_U = np.random.default_rng(11).standard_normal((3, _C))   # the cotangent of the layer norm


def _ln_vjp(g, x, gamma=None):
    """The recorded input gradient of a layer norm: one Op.VJP node."""
    return g.gradients(g.layer_norm(x, gamma), [x], grad=_U, create_graph=True)[0]


def _np_ln_vjp(x, gamma=None, eps=1e-5):
    """d<u, layer_norm(x)>/dx = (u' - mean(u') - xhat mean(u' xhat)) / sigma with
    u' = u gamma, per row."""
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    xhat = (x - mu) / sigma
    u = _U if gamma is None else _U * gamma
    return (u - u.mean(axis=-1, keepdims=True)
            - xhat * (u * xhat).mean(axis=-1, keepdims=True)) / sigma


def _torch_ln_vjp(t, x, gamma=None, eps=1e-5):
    """PyTorch's layer-norm input gradient, differentiable again. The layer norm
    is spelled out in primitive ops: the derivative of PyTorch's own
    ``F.layer_norm`` double backward differs from finite differences (by 0.7
    on this row, torch 2.13), the spelled-out one agrees to 1e-10."""
    if not x.requires_grad:   # the forward check passes plain tensors
        x = x.clone().requires_grad_()
    mu = x.mean(dim=-1, keepdim=True)
    y = (x - mu) / t.sqrt(((x - mu) ** 2).mean(dim=-1, keepdim=True) + eps)
    if gamma is not None:
        y = y * gamma
    return t.autograd.grad(y, x, grad_outputs=t.tensor(_U, dtype=x.dtype), create_graph=True)[0]


CASES += [
    OpCase(Op.VJP, lambda g, x: _ln_vjp(g, x), [(3, _C)], _np_ln_vjp, name="vjp_layer_norm",
           torch_build=_torch_ln_vjp),
    OpCase(Op.VJP, lambda g, x, w: _ln_vjp(g, x, w), [(3, _C), (_C,)], _np_ln_vjp,
           name="vjp_layer_norm_gamma", inputs=lambda rng: (rng.uniform(-2, 2, (3, _C)),
                                                            rng.uniform(0.5, 1.5, (_C,))),
           torch_build=_torch_ln_vjp),
]


# ------------------------------------------------------------- bad arguments
def _x(g):
    return (g.variable(np.ones((2, 3))),)


_WRONG_COUNT = yscv.custom_op("two_grads", lambda x: 2.0 * x,
                              lambda ns, g, xs, y, a, s, n: (g, g))
_PROMOTES = yscv.custom_op("promotes", lambda x: x.astype(np.float64),
                           lambda ns, g, xs, y, a, s, n: (g,))
_NUMPY_RULE = yscv.custom_op("numpy_rule", lambda x: 2.0 * x,
                             lambda ns, g, xs, y, a, s, n: (2.0 * ns.value(g),))

_WRONG_SHAPE = yscv.custom_op("wrong_shape", lambda x: 2.0 * x,
                              lambda ns, g, xs, y, a, s, n: (ns.const(np.ones(7)),))


def _wrong_count(g):
    (x,) = _x(g)
    return x, _WRONG_COUNT(g, x)


def _numpy_rule(g):
    (x,) = _x(g)
    return x, _NUMPY_RULE(g, x)


def _wrong_shape(g):
    (x,) = _x(g)
    return x, _WRONG_SHAPE(g, x)


def _ln(g):
    x = g.variable(np.ones((3, _C)))
    return x, g.layer_norm(x)


BAD = [
    BadCase(Op.CUSTOM, "custom_forward_not_callable", lambda g: (),
            lambda g: yscv.custom_op("swish", None, _swish_rule), TypeError, "swish: forward"),
    BadCase(Op.CUSTOM, "custom_rule_not_callable", lambda g: (),
            lambda g: yscv.custom_op("swish", _swish_forward, "rule"), TypeError, "swish: rule"),
    BadCase(Op.CUSTOM, "custom_name_not_identifier", lambda g: (),
            lambda g: yscv.custom_op("my op", _swish_forward, _swish_rule), ValueError, "name"),
    BadCase(Op.CUSTOM, "custom_array_attribute", _x,
            lambda g, x: LEAKY(g, x, slope=np.ones(3)), TypeError, "leaky: attribute slope"),
    BadCase(Op.CUSTOM, "custom_string_input", _x,
            lambda g, x: SWISH(g, x, "beta"), TypeError, "swish: input 1"),
    BadCase(Op.CUSTOM, "custom_foreign_node", _x,
            lambda g, x: SWISH(g, x, yscv.Graph().variable(1.0)), yscv.NodeNotFoundError,
            "another graph"),
    BadCase(Op.CUSTOM, "custom_no_inputs", lambda g: (), lambda g: SWISH(g), TypeError, "swish"),
    BadCase(Op.CUSTOM, "custom_not_a_graph", lambda g: (np.ones(2),),
            lambda g, x: SWISH(x, x, 1.0), TypeError, "swish: the first argument"),
    BadCase(Op.CUSTOM, "custom_forward_promotes_float32", _x,
            lambda g, x: _PROMOTES(g, x), TypeError, "promotes: forward returned a float64"),
    BadCase(Op.CUSTOM, "custom_rule_wrong_count", _wrong_count,
            lambda g, x, y: g.gradients(y, [x], grad=np.ones((2, 3))), TypeError,
            "two_grads: rule must return a tuple of 1"),
    BadCase(Op.CUSTOM, "custom_rule_wrong_count_recorded", _wrong_count,
            lambda g, x, y: g.gradients(y, [x], grad=np.ones((2, 3)), create_graph=True),
            TypeError, "two_grads: rule must return a tuple of 1"),
    BadCase(Op.CUSTOM, "custom_rule_numpy_under_create_graph", _numpy_rule,
            lambda g, x, y: g.gradients(y, [x], grad=np.ones((2, 3)), create_graph=True),
            TypeError, "numpy_rule: rule returned a ndarray for input 0"),
    BadCase(Op.CUSTOM, "custom_rule_gradient_shape", _wrong_shape,
            lambda g, x, y: g.gradients(y, [x], grad=np.ones((2, 3))), yscv.ShapeError,
            r"wrong_shape: rule returned a gradient of shape \(7,\) for input 0"),
    BadCase(Op.CUSTOM, "custom_rule_gradient_shape_recorded", _wrong_shape,
            lambda g, x, y: g.gradients(y, [x], grad=np.ones((2, 3)), create_graph=True),
            yscv.ShapeError, r"wrong_shape: rule returned a gradient of shape \(7,\)"),
    BadCase(Op.VJP, "vjp_cotangent_shape", _ln,
            lambda g, x, y: g.gradients(y, [x], grad=np.ones((3,)), create_graph=True),
            yscv.ShapeError, "gradients"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
