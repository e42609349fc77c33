"""Normalization ops: NumPy references, float64 gradcheck, bad arguments,
running statistics (hand formula and PyTorch), numerical stability, purity."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.registry import FORWARD
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_build,
                          make_op_tests, make_second_order_tests)


# ------------------------------------------------------------- references
def _normalize(x, axes, eps):
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


def _affine(y, gamma, beta):
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def ref_batch_norm_train(x, gamma=None, beta=None, eps=1e-5):
    return _affine(_normalize(x, tuple(range(x.ndim - 1)), eps), gamma, beta)


def ref_batch_norm_eval(x, gamma, beta, rm, rv, eps=1e-5):
    return _affine((x - rm) / np.sqrt(rv + eps), gamma, beta)


def ref_layer_norm(x, gamma=None, beta=None, eps=1e-5):
    return _affine(_normalize(x, -1, eps), gamma, beta)


def ref_instance_norm(x, gamma=None, beta=None, eps=1e-5):
    return _affine(_normalize(x, tuple(range(1, x.ndim - 1)), eps), gamma, beta)


def ref_group_norm(x, gamma, beta, groups, eps=1e-5):
    """Loops over samples and groups: channels [k*C/G, (k+1)*C/G) form group k."""
    n, c = x.shape[0], x.shape[-1]
    cg = c // groups
    y = np.empty_like(x)
    for b in range(n):
        for k in range(groups):
            blk = x[b, ..., k * cg:(k + 1) * cg]
            m = blk.mean()
            v = ((blk - m) ** 2).mean()
            y[b, ..., k * cg:(k + 1) * cg] = (blk - m) / np.sqrt(v + eps)
    return _affine(y, gamma, beta)


RM4 = np.array([0.3, -0.2, 0.1, 0.5])
RV4 = np.array([1.5, 0.7, 2.0, 0.9])


def _bn(training, affine=(True, True), eps=1e-5, alias=False):
    """Build a batch_norm over variables (x, [gamma], [beta]) with fresh running stats."""
    def build(g, x, *ab):
        ab = list(ab)
        gamma = ab.pop(0) if affine[0] else None
        beta = ab.pop(0) if affine[1] else None
        c = x.shape[-1]
        rm = g.constant(RM4[:c])
        rv = g.constant(RV4[:c])
        if alias:
            return g.batch_norm2d_nhwc(x, gamma, beta, rm, rv, eps)
        return g.batch_norm(x, gamma, beta, rm, rv, training=training, eps=eps)
    return build


def _bn_ref(training, affine=(True, True), eps=1e-5):
    def ref(x, *ab):
        ab = list(ab)
        gamma = ab.pop(0) if affine[0] else None
        beta = ab.pop(0) if affine[1] else None
        if training:
            return ref_batch_norm_train(x, gamma, beta, eps)
        c = x.shape[-1]
        return ref_batch_norm_eval(x, gamma, beta, RM4[:c], RV4[:c], eps)
    return ref


def _inputs(xshape, affine=(True, True)):
    """x uniform in [-2, 2), gamma in [0.5, 1.5), beta in [-1, 1)."""
    c = xshape[-1]

    def make(rng):
        out = [rng.uniform(-2, 2, size=xshape)]
        if affine[0]:
            out.append(rng.uniform(0.5, 1.5, size=c))
        if affine[1]:
            out.append(rng.uniform(-1, 1, size=c))
        return out
    return make


def _opt(affine):
    """(g, gamma?, beta?) -> (gamma or None, beta or None)."""
    def split(ab):
        ab = list(ab)
        return (ab.pop(0) if affine[0] else None), (ab.pop(0) if affine[1] else None)
    return split


def _ln(affine=(True, True), eps=1e-5):
    split = _opt(affine)
    return dict(build=lambda g, x, *ab: g.layer_norm(x, *split(ab), eps=eps),
                reference=lambda x, *ab: ref_layer_norm(x, *split(ab), eps=eps))


def _gn(groups, affine=(True, True)):
    split = _opt(affine)
    return dict(build=lambda g, x, *ab: g.group_norm(x, *split(ab), groups),
                reference=lambda x, *ab: ref_group_norm(x, *split(ab), groups))


def _in(affine=(True, True), alias=False, eps=1e-5):
    split = _opt(affine)
    if alias:
        build = lambda g, x, *ab: g.instance_norm_nhwc(x, *split(ab), eps)  # noqa: E731
    else:
        build = lambda g, x, *ab: g.instance_norm(x, *split(ab), eps=eps)  # noqa: E731
    return dict(build=build, reference=lambda x, *ab: ref_instance_norm(x, *split(ab), eps=eps))


# torch_build: the same norm in PyTorch, channel-last moved to [N, C, ...].
# A beta without gamma is added after the norm: PyTorch's double backward of
# a norm given bias= but weight=None fails ("Expected a proper Tensor but got
# None"), and the sum is the same function.
def _t_norm(norm, affine, channel_first=True):
    split = _opt(affine)

    def build(t, x, *ab):
        gamma, beta = split(ab)
        xt = x.movedim(-1, 1) if channel_first else x
        y = norm(t.nn.functional, xt, gamma, beta if gamma is not None else None)
        y = y.movedim(1, -1) if channel_first else y
        return y + beta if gamma is None and beta is not None else y
    return build


def _t_bn(training, affine=(True, True), eps=1e-5, tracked=True):
    def norm(F, x, gamma, beta):
        c = x.shape[1]
        rm, rv = (x.new_tensor(RM4[:c]), x.new_tensor(RV4[:c])) if tracked else (None, None)
        return F.batch_norm(x, rm, rv, gamma, beta, training, eps=eps)
    return _t_norm(norm, affine)


def _t_ln(affine=(True, True), eps=1e-5):
    return _t_norm(lambda F, x, gamma, beta: F.layer_norm(x, x.shape[-1:], gamma, beta, eps),
                   affine, channel_first=False)


def _t_gn(groups, affine=(True, True)):
    return _t_norm(lambda F, x, gamma, beta: F.group_norm(x, groups, gamma, beta), affine)


def _t_in(affine=(True, True), eps=1e-5):
    return _t_norm(lambda F, x, gamma, beta: F.instance_norm(x, weight=gamma, bias=beta,
                                                             eps=eps), affine)


NO = (False, False)
G_ONLY = (True, False)
B_ONLY = (False, True)

CASES = [
    # batch norm: training (batch statistics) and eval (running statistics)
    OpCase(Op.BATCH_NORM, _bn(True), reference=_bn_ref(True), inputs=_inputs((6, 4)),
           name="batch_norm_train_2d",
           torch_build=_t_bn(True)),
    OpCase(Op.BATCH_NORM, _bn(True), reference=_bn_ref(True), inputs=_inputs((3, 5, 4)),
           name="batch_norm_train_3d",
           torch_build=_t_bn(True)),
    OpCase(Op.BATCH_NORM, _bn(True), reference=_bn_ref(True), inputs=_inputs((2, 3, 2, 4)),
           name="batch_norm_train_4d",
           torch_build=_t_bn(True)),
    OpCase(Op.BATCH_NORM, _bn(True, NO), reference=_bn_ref(True, NO),
           inputs=_inputs((3, 2, 2, 3), NO), name="batch_norm_train_no_affine",
           torch_build=_t_bn(True, NO)),
    OpCase(Op.BATCH_NORM, _bn(True, G_ONLY, eps=1e-2), reference=_bn_ref(True, G_ONLY, eps=1e-2),
           inputs=_inputs((5, 3), G_ONLY), name="batch_norm_train_gamma_only_eps",
           torch_build=_t_bn(True, G_ONLY, eps=1e-2)),
    OpCase(Op.BATCH_NORM, lambda g, x, a, b: g.batch_norm(x, a, b, None, None, training=True),
           reference=_bn_ref(True), inputs=_inputs((4, 2, 3)), name="batch_norm_train_untracked",
           torch_build=_t_bn(True, tracked=False)),
    OpCase(Op.BATCH_NORM, _bn(False), reference=_bn_ref(False), inputs=_inputs((2, 3, 2, 4)),
           name="batch_norm_eval_4d",
           torch_build=_t_bn(False)),
    OpCase(Op.BATCH_NORM, _bn(False), reference=_bn_ref(False), inputs=_inputs((5, 4)),
           name="batch_norm_eval_2d",
           torch_build=_t_bn(False)),
    OpCase(Op.BATCH_NORM, _bn(False, B_ONLY), reference=_bn_ref(False, B_ONLY),
           inputs=_inputs((3, 4, 3), B_ONLY), name="batch_norm_eval_beta_only",
           torch_build=_t_bn(False, B_ONLY)),
    OpCase(Op.BATCH_NORM, _bn(False, alias=True), reference=_bn_ref(False),
           inputs=_inputs((2, 2, 3, 4)), name="batch_norm2d_nhwc_alias",
           torch_build=_t_bn(False)),
    # layer norm over the last axis, gamma/beta each optional
    OpCase(Op.LAYER_NORM, **_ln(), inputs=_inputs((4, 6)), name="layer_norm_2d",
           torch_build=_t_ln()),
    OpCase(Op.LAYER_NORM, **_ln(), inputs=_inputs((2, 3, 5)), name="layer_norm_3d",
           torch_build=_t_ln()),
    OpCase(Op.LAYER_NORM, **_ln(NO), inputs=_inputs((2, 2, 2, 5), NO), name="layer_norm_4d_no_affine",
           torch_build=_t_ln(NO)),
    OpCase(Op.LAYER_NORM, **_ln(G_ONLY), inputs=_inputs((3, 7), G_ONLY), name="layer_norm_gamma_only",
           torch_build=_t_ln(G_ONLY)),
    OpCase(Op.LAYER_NORM, **_ln(B_ONLY), inputs=_inputs((3, 7), B_ONLY), name="layer_norm_beta_only",
           torch_build=_t_ln(B_ONLY)),
    OpCase(Op.LAYER_NORM, **_ln(eps=1e-2), inputs=_inputs((9,)), name="layer_norm_1d_eps",
           torch_build=_t_ln(eps=1e-2)),
    OpCase(Op.LAYER_NORM, **_ln(), inputs=_inputs((2, 19)), name="layer_norm_odd_width",
           torch_build=_t_ln()),
    # group norm: one group (layer-norm-like over space and channels) .. C groups (instance)
    OpCase(Op.GROUP_NORM, **_gn(1), inputs=_inputs((2, 3, 4)), name="group_norm_1_group",
           torch_build=_t_gn(1)),
    OpCase(Op.GROUP_NORM, **_gn(2), inputs=_inputs((2, 3, 4)), name="group_norm_2_groups_3d",
           torch_build=_t_gn(2)),
    OpCase(Op.GROUP_NORM, **_gn(3), inputs=_inputs((2, 2, 2, 6)), name="group_norm_3_groups_4d",
           torch_build=_t_gn(3)),
    OpCase(Op.GROUP_NORM, **_gn(4), inputs=_inputs((2, 3, 4)), name="group_norm_C_groups",
           torch_build=_t_gn(4)),
    OpCase(Op.GROUP_NORM, **_gn(2), inputs=_inputs((3, 6)), name="group_norm_2d",
           torch_build=_t_gn(2)),
    OpCase(Op.GROUP_NORM, **_gn(2, NO), inputs=_inputs((2, 4, 4), NO), name="group_norm_no_affine",
           torch_build=_t_gn(2, NO)),
    OpCase(Op.GROUP_NORM, **_gn(2, B_ONLY), inputs=_inputs((2, 3, 4), B_ONLY),
           name="group_norm_beta_only",
           torch_build=_t_gn(2, B_ONLY)),
    # instance norm: per (sample, channel) over the spatial axes
    OpCase(Op.INSTANCE_NORM, **_in(), inputs=_inputs((2, 5, 3)), name="instance_norm_3d",
           torch_build=_t_in()),
    OpCase(Op.INSTANCE_NORM, **_in(), inputs=_inputs((2, 2, 3, 3)), name="instance_norm_4d",
           torch_build=_t_in()),
    OpCase(Op.INSTANCE_NORM, **_in(NO), inputs=_inputs((2, 4, 3), NO), name="instance_norm_no_affine",
           torch_build=_t_in(NO)),
    OpCase(Op.INSTANCE_NORM, **_in(G_ONLY, eps=1e-3), inputs=_inputs((2, 4, 3), G_ONLY),
           name="instance_norm_gamma_only_eps",
           torch_build=_t_in(G_ONLY, eps=1e-3)),
    OpCase(Op.INSTANCE_NORM, **_in(alias=True), inputs=_inputs((2, 3, 2, 3)),
           name="instance_norm_nhwc_alias",
           torch_build=_t_in()),
]


def _leaves(x_shape, c=None, stats=True):
    """(x, gamma, beta, running_mean, running_var) leaves for bad-argument rows."""
    def setup(g):
        cc = x_shape[-1] if c is None else c
        out = (g.variable(np.ones(x_shape)), g.variable(np.ones(cc)), g.variable(np.zeros(cc)))
        if stats:
            out += (g.constant(np.zeros(cc)), g.constant(np.ones(cc)))
        return out
    return setup


def _bn_call(**kw):
    return lambda g, x, a, b, rm, rv: g.batch_norm(x, a, b, rm, rv, **kw)


BAD = [
    BadCase(Op.BATCH_NORM, "batch_norm_x_1d", _leaves((4,)), _bn_call(), yscv.ShapeError,
            "batch_norm: x must be at least 2-d"),
    BadCase(Op.BATCH_NORM, "batch_norm_gamma_size", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(x, np.ones(3), None, rm, rv),
            yscv.ShapeError, "batch_norm: gamma"),
    BadCase(Op.BATCH_NORM, "batch_norm_beta_size", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(x, a, np.zeros(5), rm, rv),
            yscv.ShapeError, "batch_norm: beta"),
    BadCase(Op.BATCH_NORM, "batch_norm_running_mean_shape",
            lambda g: _leaves((3, 4))(g)[:3] + (g.constant(np.zeros(3)), g.constant(np.ones(4))),
            _bn_call(), yscv.ShapeError, "batch_norm: running_mean"),
    BadCase(Op.BATCH_NORM, "batch_norm_running_var_not_leaf",
            lambda g: _leaves((3, 4))(g)[:4] + (g.exp(g.constant(np.ones(4))),),
            _bn_call(training=True), TypeError, "batch_norm: running_var must be a leaf"),
    BadCase(Op.BATCH_NORM, "batch_norm_running_mean_array", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(x, a, b, np.zeros(4), rv),
            TypeError, "batch_norm: running_mean must be a NodeId"),
    BadCase(Op.BATCH_NORM, "batch_norm_eval_without_running_stats", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(x, a, b, None, None),
            ValueError, "batch_norm: eval mode"),
    BadCase(Op.BATCH_NORM, "batch_norm_only_one_running_stat", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(x, a, b, rm, None, training=True),
            TypeError, "batch_norm: running_var must be a NodeId"),
    BadCase(Op.BATCH_NORM, "batch_norm_same_running_stat_node", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(x, a, b, rm, rm, training=True),
            ValueError, "batch_norm: running_mean and running_var are the same node"),
    BadCase(Op.BATCH_NORM, "batch_norm_momentum_above_1", _leaves((3, 4)),
            _bn_call(training=True, momentum=1.5), ValueError, "batch_norm: momentum"),
    BadCase(Op.BATCH_NORM, "batch_norm_momentum_negative", _leaves((3, 4)),
            _bn_call(training=True, momentum=-0.1), ValueError, "batch_norm: momentum"),
    BadCase(Op.BATCH_NORM, "batch_norm_momentum_not_number", _leaves((3, 4)),
            _bn_call(training=True, momentum="0.1"), TypeError, "batch_norm: momentum"),
    BadCase(Op.BATCH_NORM, "batch_norm_eps_zero", _leaves((3, 4)), _bn_call(eps=0.0),
            ValueError, "batch_norm: eps"),
    BadCase(Op.BATCH_NORM, "batch_norm_eps_negative", _leaves((3, 4)), _bn_call(eps=-1e-5),
            ValueError, "batch_norm: eps"),
    BadCase(Op.BATCH_NORM, "batch_norm_training_not_bool", _leaves((3, 4)),
            _bn_call(training="yes"), TypeError, "batch_norm: training"),
    BadCase(Op.BATCH_NORM, "batch_norm_train_one_value_per_channel", _leaves((1, 4)),
            _bn_call(training=True), ValueError, "batch_norm: training needs more than 1"),
    BadCase(Op.BATCH_NORM, "batch_norm2d_nhwc_3d", _leaves((2, 3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm2d_nhwc(x, a, b, rm, rv, 1e-5),
            yscv.ShapeError, "batch_norm2d_nhwc: x must be 4-d"),
    BadCase(Op.BATCH_NORM, "batch_norm_complex_x", _leaves((3, 4)),
            lambda g, x, a, b, rm, rv: g.batch_norm(np.ones((3, 4)) * 1j, a, b, rm, rv),
            TypeError, "batch_norm: x"),
    BadCase(Op.LAYER_NORM, "layer_norm_x_0d", lambda g: (g.variable(1.0),),
            lambda g, x: g.layer_norm(x), yscv.ShapeError, "layer_norm: x must be at least 1-d"),
    BadCase(Op.LAYER_NORM, "layer_norm_gamma_size", _leaves((3, 4), c=3, stats=False),
            lambda g, x, a, b: g.layer_norm(x, a), yscv.ShapeError, "layer_norm: gamma"),
    BadCase(Op.LAYER_NORM, "layer_norm_beta_2d", _leaves((3, 4), stats=False),
            lambda g, x, a, b: g.layer_norm(x, a, np.zeros((1, 4))), yscv.ShapeError,
            "layer_norm: beta"),
    BadCase(Op.LAYER_NORM, "layer_norm_eps_zero", _leaves((3, 4), stats=False),
            lambda g, x, a, b: g.layer_norm(x, a, b, eps=0), ValueError, "layer_norm: eps"),
    BadCase(Op.LAYER_NORM, "layer_norm_eps_nan", _leaves((3, 4), stats=False),
            lambda g, x, a, b: g.layer_norm(x, eps=float("nan")), ValueError, "layer_norm: eps"),
    BadCase(Op.LAYER_NORM, "layer_norm_no_channels", lambda g: (g.variable(np.ones((3, 0))),),
            lambda g, x: g.layer_norm(x), yscv.ShapeError, "layer_norm: x has no channels"),
    BadCase(Op.GROUP_NORM, "group_norm_groups_not_dividing", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.group_norm(x, a, b, 3), ValueError, "group_norm: num_groups=3"),
    BadCase(Op.GROUP_NORM, "group_norm_groups_zero", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.group_norm(x, a, b, 0), ValueError, "group_norm: num_groups=0"),
    BadCase(Op.GROUP_NORM, "group_norm_groups_negative", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.group_norm(x, a, b, -2), ValueError, "group_norm: num_groups=-2"),
    BadCase(Op.GROUP_NORM, "group_norm_groups_float", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.group_norm(x, a, b, 2.0), TypeError, "group_norm: num_groups"),
    BadCase(Op.GROUP_NORM, "group_norm_x_1d", _leaves((4,), stats=False),
            lambda g, x, a, b: g.group_norm(x, a, b, 2), yscv.ShapeError,
            "group_norm: x must be at least 2-d"),
    BadCase(Op.GROUP_NORM, "group_norm_gamma_size", _leaves((2, 3, 4), c=2, stats=False),
            lambda g, x, a, b: g.group_norm(x, a, None, 2), yscv.ShapeError, "group_norm: gamma"),
    BadCase(Op.GROUP_NORM, "group_norm_eps_negative", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.group_norm(x, a, b, 2, eps=-1.0), ValueError, "group_norm: eps"),
    BadCase(Op.INSTANCE_NORM, "instance_norm_one_spatial_position", _leaves((3, 4), stats=False),
            lambda g, x, a, b: g.instance_norm(x, a, b), ValueError,
            "instance_norm: .* needs more than 1"),
    BadCase(Op.INSTANCE_NORM, "instance_norm_x_1d", _leaves((4,), stats=False),
            lambda g, x, a, b: g.instance_norm(x, a, b), yscv.ShapeError,
            "instance_norm: x must be at least 2-d"),
    BadCase(Op.INSTANCE_NORM, "instance_norm_beta_size", _leaves((2, 3, 4), c=5, stats=False),
            lambda g, x, a, b: g.instance_norm(x, None, b), yscv.ShapeError,
            "instance_norm: beta"),
    BadCase(Op.INSTANCE_NORM, "instance_norm_eps_string", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.instance_norm(x, a, b, eps="1e-5"), TypeError,
            "instance_norm: eps"),
    BadCase(Op.INSTANCE_NORM, "instance_norm_nhwc_3d", _leaves((2, 3, 4), stats=False),
            lambda g, x, a, b: g.instance_norm_nhwc(x, a, b), yscv.ShapeError,
            "instance_norm_nhwc: x must be 4-d"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_torch_build_is_the_rows_function(case):
    pytest.importorskip("torch")
    check_torch_build(case)


# ------------------------------------------------------ running statistics
def _torch_layout(a):
    """Channel-last [N, ..., C] -> PyTorch's [N, C, ...]."""
    return np.moveaxis(a, -1, 1)


def _hand_running(rm, rv, x, momentum):
    flat = x.reshape(-1, x.shape[-1])
    n = flat.shape[0]
    mean = flat.mean(axis=0)
    unbiased = ((flat - mean) ** 2).sum(axis=0) / (n - 1)
    return (1 - momentum) * rm + momentum * mean, (1 - momentum) * rv + momentum * unbiased


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("momentum", [0.1, 0.25, 0.0, 1.0])
def test_running_stats_after_one_and_two_training_steps(dtype, momentum):
    rng = np.random.default_rng(1)
    x1 = rng.normal(2.0, 3.0, size=(4, 3, 5, 6))
    x2 = rng.normal(-1.0, 0.5, size=(4, 3, 5, 6))
    rm0, rv0 = rng.uniform(-1, 1, 6), rng.uniform(0.5, 2, 6)
    g = yscv.Graph(dtype)
    rm, rv = g.constant(rm0), g.constant(rv0)
    gamma, beta = g.variable(np.ones(6)), g.variable(np.zeros(6))
    held = g.value(rm)  # the array a layer would hold as its buffer
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-6, atol=2e-6)

    g.batch_norm(g.variable(x1), gamma, beta, rm, rv, training=True, momentum=momentum)
    e_mean, e_var = _hand_running(rm0, rv0, x1, momentum)
    np.testing.assert_allclose(g.value(rm), e_mean, **tol)
    np.testing.assert_allclose(g.value(rv), e_var, **tol)
    assert g.value(rm).dtype == np.dtype(dtype)
    assert held is g.value(rm)  # updated in place, not replaced

    g.batch_norm(g.variable(x2), gamma, beta, rm, rv, training=True, momentum=momentum)
    e_mean, e_var = _hand_running(e_mean, e_var, x2, momentum)
    np.testing.assert_allclose(g.value(rm), e_mean, **tol)
    np.testing.assert_allclose(g.value(rv), e_var, **tol)
    np.testing.assert_allclose(held, e_mean, **tol)


def test_running_stats_update_without_grad_and_not_in_eval():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 3))
    g = yscv.Graph(np.float64)
    rm, rv = g.constant(np.zeros(3)), g.constant(np.ones(3))
    with g.no_grad():  # the node keeps no saved data, the update must still happen
        g.batch_norm(g.variable(x), None, None, rm, rv, training=True)
    e_mean, e_var = _hand_running(np.zeros(3), np.ones(3), x, 0.1)
    np.testing.assert_allclose(g.value(rm), e_mean, rtol=1e-13)
    np.testing.assert_allclose(g.value(rv), e_var, rtol=1e-13)
    g.batch_norm(g.constant(x), None, None, rm, rv, training=True)  # constant input too
    e_mean, e_var = _hand_running(e_mean, e_var, x, 0.1)
    np.testing.assert_allclose(g.value(rm), e_mean, rtol=1e-13)
    before = (np.array(g.value(rm)), np.array(g.value(rv)))
    y = g.batch_norm(g.variable(x), None, None, rm, rv, training=False)
    np.testing.assert_array_equal(g.value(rm), before[0])
    np.testing.assert_array_equal(g.value(rv), before[1])
    np.testing.assert_allclose(g.value(y), (x - before[0]) / np.sqrt(before[1] + 1e-5), rtol=1e-13)


def test_failed_batch_norm_leaves_running_stats_alone():
    g = yscv.Graph(np.float64)
    rm, rv = g.constant(np.zeros(3)), g.constant(np.ones(3))
    x = g.variable(np.arange(12.0).reshape(4, 3))
    with pytest.raises(yscv.ShapeError):
        g.batch_norm(x, np.ones(2), None, rm, rv, training=True)
    np.testing.assert_array_equal(g.value(rm), 0.0)
    np.testing.assert_array_equal(g.value(rv), 1.0)


def test_forward_is_pure_running_stats_only_updated_by_the_method():
    """A replayed forward (activation checkpointing) must not touch the running stats."""
    rng = np.random.default_rng(3)
    g = yscv.Graph(np.float64)
    rm, rv = g.constant(np.zeros(4)), g.constant(np.ones(4))
    x = g.variable(rng.standard_normal((5, 4)))
    y = g.batch_norm(x, None, None, rm, rv, training=True)
    after_one = (np.array(g.value(rm)), np.array(g.value(rv)))
    attrs = g._attrs[y.index]
    vals = [g._values[j] for j in g._inputs[y.index]]
    v1, s1 = FORWARD[Op.BATCH_NORM](attrs, *vals)
    v2, s2 = FORWARD[Op.BATCH_NORM](attrs, *vals)
    np.testing.assert_array_equal(v1, g.value(y))
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(s1[0], s2[0])
    np.testing.assert_array_equal(g.value(rm), after_one[0])
    np.testing.assert_array_equal(g.value(rv), after_one[1])
    # the saved batch statistics: mean and biased variance per channel
    xv = g.value(x)
    np.testing.assert_allclose(s1[0][0], xv.mean(0), rtol=1e-13)
    np.testing.assert_allclose(s1[1][0], xv.var(0), rtol=1e-13)


def test_running_stats_get_no_gradient_even_as_variables():
    g = yscv.Graph(np.float64)
    rm, rv = g.variable(np.zeros(3)), g.variable(np.ones(3))
    x = g.variable(np.random.default_rng(0).standard_normal((4, 3)))
    for training in (True, False):
        y = g.batch_norm(x, None, None, rm, rv, training=training)
        g.backward(y, grad=np.ones((4, 3)))
    assert g.grad(rm) is None and g.grad(rv) is None
    assert g.grad(x) is not None


def test_eval_gradients_use_running_statistics():
    rng = np.random.default_rng(4)
    x0, gam0, bet0 = rng.standard_normal((6, 3)), rng.uniform(0.5, 2, 3), rng.standard_normal(3)
    rm0, rv0 = rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    cot = rng.standard_normal((6, 3))
    g = yscv.Graph(np.float64)
    x, gam, bet = g.variable(x0), g.variable(gam0), g.variable(bet0)
    y = g.batch_norm(x, gam, bet, g.constant(rm0), g.constant(rv0), training=False, eps=1e-3)
    g.backward(y, grad=cot)
    inv = 1 / np.sqrt(rv0 + 1e-3)
    np.testing.assert_allclose(g.grad(x), cot * gam0 * inv, rtol=1e-13)
    np.testing.assert_allclose(g.grad(gam), (cot * (x0 - rm0) * inv).sum(0), rtol=1e-12)
    np.testing.assert_allclose(g.grad(bet), cot.sum(0), rtol=1e-13)


# ---------------------------------------------------------- PyTorch checks
def _torch_run(torch, build_t, arrays, cot):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    y = build_t(*ts)
    y.backward(torch.tensor(cot))
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _yscv_run(build, arrays, cot):
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrays]
    y = build(g, *nodes)
    g.backward(y, grad=cot)
    return np.array(g.value(y)), [g.grad(n) for n in nodes]


def test_batch_norm_matches_torch_including_running_stats():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    xs = [rng.normal(1.0, 2.0, size=(4, 5, 3, 6)) for _ in range(2)]
    gam0, bet0 = rng.uniform(0.5, 1.5, 6), rng.standard_normal(6)
    rm_t, rv_t = torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
    g = yscv.Graph(np.float64)
    rm, rv = g.constant(np.zeros(6)), g.constant(np.ones(6))
    for x0 in xs:  # two training steps
        cot = rng.standard_normal(x0.shape)
        want, wgrads = _torch_run(
            torch, lambda x, a, b: F.batch_norm(x, rm_t, rv_t, a, b, training=True, momentum=0.2),
            [_torch_layout(x0), gam0, bet0], _torch_layout(cot))
        got, ggrads = _yscv_run(
            lambda g_, x, a, b: g_.batch_norm(x, a, b, g_.constant(np.zeros(6)),
                                              g_.constant(np.ones(6)), training=True),
            [x0, gam0, bet0], cot)
        np.testing.assert_allclose(_torch_layout(got), want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_torch_layout(ggrads[0]), wgrads[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ggrads[1], wgrads[1], rtol=1e-9)
        np.testing.assert_allclose(ggrads[2], wgrads[2], rtol=1e-9)
        g.batch_norm(g.variable(x0), None, None, rm, rv, training=True, momentum=0.2)
        np.testing.assert_allclose(g.value(rm), rm_t.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g.value(rv), rv_t.numpy(), rtol=1e-12)
    # eval mode with the accumulated statistics
    x0, cot = xs[0], rng.standard_normal(xs[0].shape)
    want, wgrads = _torch_run(torch, lambda x, a, b: F.batch_norm(x, rm_t, rv_t, a, b),
                              [_torch_layout(x0), gam0, bet0], _torch_layout(cot))
    got, ggrads = _yscv_run(lambda g_, x, a, b: g_.batch_norm(
        x, a, b, g_.constant(rm_t.numpy()), g_.constant(rv_t.numpy())), [x0, gam0, bet0], cot)
    np.testing.assert_allclose(_torch_layout(got), want, rtol=1e-10, atol=1e-12)
    for a, b in zip([_torch_layout(ggrads[0])] + ggrads[1:], wgrads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_batch_norm_float32_running_stats_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    rm_t, rv_t = torch.zeros(8), torch.ones(8)
    g = yscv.Graph(np.float32)
    rm, rv = g.constant(np.zeros(8)), g.constant(np.ones(8))
    for _ in range(2):
        x0 = rng.normal(3.0, 2.0, size=(16, 4, 4, 8)).astype(np.float32)
        want = torch.nn.functional.batch_norm(torch.tensor(_torch_layout(x0)), rm_t, rv_t,
                                              training=True)
        y = g.batch_norm(g.variable(x0), None, None, rm, rv, training=True)
        np.testing.assert_allclose(_torch_layout(g.value(y)), want.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g.value(rm), rm_t.numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g.value(rv), rv_t.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", ["layer", "group1", "group2", "group4", "instance"])
def test_layer_group_instance_norm_match_torch(kind):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    x0 = rng.normal(0.5, 2.0, size=(3, 4, 5, 4))
    gam0, bet0 = rng.uniform(0.5, 1.5, 4), rng.standard_normal(4)
    cot = rng.standard_normal(x0.shape)
    if kind == "layer":
        tb = lambda x, a, b: F.layer_norm(x, (4,), a, b)  # noqa: E731
        yb = lambda g, x, a, b: g.layer_norm(x, a, b)  # noqa: E731
        tl = lambda a: a  # noqa: E731
    elif kind == "instance":
        tb = lambda x, a, b: F.instance_norm(x, weight=a, bias=b)  # noqa: E731
        yb = lambda g, x, a, b: g.instance_norm(x, a, b)  # noqa: E731
        tl = _torch_layout
    else:
        k = int(kind[-1])
        tb = lambda x, a, b: F.group_norm(x, k, a, b)  # noqa: E731
        yb = lambda g, x, a, b: g.group_norm(x, a, b, k)  # noqa: E731
        tl = _torch_layout
    want, wgrads = _torch_run(torch, tb, [tl(x0), gam0, bet0], tl(cot))
    got, ggrads = _yscv_run(yb, [x0, gam0, bet0], cot)
    np.testing.assert_allclose(tl(got), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tl(ggrads[0]), wgrads[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ggrads[1], wgrads[1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ggrads[2], wgrads[2], rtol=1e-9, atol=1e-12)


# ------------------------------------------------ precision, dtype, layout
_ALL_OPS = {
    "batch_norm": lambda g, x, a, b: g.batch_norm(x, a, b, g.constant(np.zeros(8)),
                                                  g.constant(np.ones(8)), training=True),
    "layer_norm": lambda g, x, a, b: g.layer_norm(x, a, b),
    "group_norm": lambda g, x, a, b: g.group_norm(x, a, b, 2),
    "instance_norm": lambda g, x, a, b: g.instance_norm(x, a, b),
}


@pytest.mark.parametrize("name", sorted(_ALL_OPS))
def test_float32_stable_for_large_mean(name):
    """mean 1e4, std 1 in float32: no E[x^2]-E[x]^2 cancellation, no float32
    rounding of the mean in the normalisation."""
    rng = np.random.default_rng(8)
    x0 = (1e4 + rng.standard_normal((16, 6, 6, 8))).astype(np.float32)
    gam0 = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    bet0 = rng.standard_normal(8).astype(np.float32)
    cot = rng.standard_normal(x0.shape).astype(np.float32)
    build = _ALL_OPS[name]
    res = {}
    for dtype in (np.float32, np.float64):
        g = yscv.Graph(dtype)
        nodes = [g.variable(a) for a in (x0, gam0, bet0)]
        y = build(g, *nodes)
        g.backward(y, grad=cot)
        res[dtype] = [g.value(y)] + [g.grad(n) for n in nodes]
        assert all(r.dtype == np.dtype(dtype) for r in res[dtype])
    y32, dx32, dg32, db32 = res[np.float32]
    y64, dx64, dg64, db64 = res[np.float64]
    # float32 rounding of the result only (measured ~4e-7, 1e-7); x - float32(mean)
    # alone would be off by up to 5e-4
    assert np.max(np.abs(y32 - y64)) < 2e-6
    assert np.max(np.abs(dx32 - dx64)) < 1e-6 * np.max(np.abs(dx64))
    np.testing.assert_allclose(dg32, dg64, rtol=1e-6)
    np.testing.assert_allclose(db32, db64, rtol=1e-6)


def test_float32_large_reduction_accumulates_in_float64():
    rng = np.random.default_rng(9)
    x0 = rng.normal(5.0, 0.01, size=(1 << 20, 2)).astype(np.float32)
    g = yscv.Graph(np.float32)
    rm, rv = g.constant(np.zeros(2)), g.constant(np.ones(2))
    g.batch_norm(g.variable(x0), None, None, rm, rv, training=True, momentum=1.0)
    x64 = x0.astype(np.float64)
    np.testing.assert_allclose(g.value(rm), x64.mean(0), rtol=1e-7)
    np.testing.assert_allclose(g.value(rv), x64.var(0, ddof=1), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(_ALL_OPS))
def test_non_contiguous_input_and_gradient(name):
    """x a transposed view, upstream gradient a broadcast view (from sum)."""
    rng = np.random.default_rng(10)
    base = rng.standard_normal((3, 2, 4, 8))
    gam0, bet0 = rng.uniform(0.5, 1.5, 8), rng.standard_normal(8)
    w0 = rng.standard_normal((2, 3, 4, 8))
    build = _ALL_OPS[name]
    g = yscv.Graph(np.float64)
    xb, gam, bet = g.variable(base), g.variable(gam0), g.variable(bet0)
    xt = g.transpose(xb, (1, 0, 2, 3))
    assert not g.value(xt).flags.c_contiguous
    y = build(g, xt, gam, bet)
    g.backward(g.sum(y * w0))
    h = yscv.Graph(np.float64)
    xc, gam2, bet2 = h.variable(np.ascontiguousarray(base.transpose(1, 0, 2, 3))), \
        h.variable(gam0), h.variable(bet0)
    y2 = build(h, xc, gam2, bet2)
    h.backward(y2, grad=w0)
    np.testing.assert_allclose(g.value(y), h.value(y2), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(g.grad(xb), h.grad(xc).transpose(1, 0, 2, 3), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(g.grad(gam), h.grad(gam2), rtol=1e-12)


def test_saved_data_is_statistics_only():
    g = yscv.Graph(np.float32)
    x = g.variable(np.random.default_rng(11).standard_normal((8, 4, 4, 16)))
    base = g.memory()["saved"]
    g.batch_norm(x, None, None, g.constant(np.zeros(16)), g.constant(np.ones(16)), training=True)
    assert g.memory()["saved"] - base == 2 * 16 * 8           # float64 mean, var per channel
    base = g.memory()["saved"]
    g.group_norm(x, None, None, 4)
    assert g.memory()["saved"] - base == 2 * 8 * 4 * 8         # per (sample, group)
    base = g.memory()["saved"]
    g.layer_norm(x)
    assert g.memory()["saved"] - base == 2 * 8 * 4 * 4 * 8     # per row


def test_gradients_only_where_needed():
    """Constant gamma/beta get no gradient; x constant still gives dgamma/dbeta."""
    rng = np.random.default_rng(12)
    x0, gam0, bet0 = rng.standard_normal((5, 2, 3)), rng.uniform(0.5, 1.5, 3), rng.standard_normal(3)
    cot = rng.standard_normal((5, 2, 3))
    for name in ("layer_norm", "instance_norm", "group_norm"):
        build = {"layer_norm": lambda g, x, a, b: g.layer_norm(x, a, b),
                 "instance_norm": lambda g, x, a, b: g.instance_norm(x, a, b),
                 "group_norm": lambda g, x, a, b: g.group_norm(x, a, b, 3)}[name]
        full = _yscv_run(build, [x0, gam0, bet0], cot)[1]
        g = yscv.Graph(np.float64)
        x, gam, bet = g.constant(x0), g.variable(gam0), g.constant(bet0)
        g.backward(build(g, x, gam, bet), grad=cot)
        assert g.grad(x) is None and g.grad(bet) is None
        np.testing.assert_allclose(g.grad(gam), full[1], rtol=1e-13)


@pytest.mark.parametrize("shape,groups", [((1, 300, 257), None), ((2, 700, 128), 4),
                                          ((2, 40, 3000), None)])
def test_statistics_merged_across_chunks(shape, groups):
    """Inputs spanning several blocks of the blocked two-pass statistics
    (Chan merge), with a large offset; float64 to 1e-12."""
    rng = np.random.default_rng(13)
    x0 = 50.0 + rng.standard_normal(shape) * rng.uniform(0.1, 3, shape[-1])
    g = yscv.Graph(np.float64)
    x = g.variable(x0)
    if groups is None:
        y = g.batch_norm(x, None, None, g.constant(np.zeros(shape[-1])),
                         g.constant(np.ones(shape[-1])), training=True)
        want = ref_batch_norm_train(x0)
        y2 = g.instance_norm(x)
        np.testing.assert_allclose(g.value(y2), ref_instance_norm(x0), rtol=1e-12, atol=1e-12)
    else:
        y = g.group_norm(x, None, None, groups)
        want = ref_group_norm(x0, None, None, groups)
    np.testing.assert_allclose(g.value(y), want, rtol=1e-12, atol=1e-12)


def test_two_threads_give_the_same_results():
    """Kernels are serial and nogil with no shared state: graphs built in two
    threads at once match a single-threaded run."""
    import threading

    rng = np.random.default_rng(14)
    data = [rng.standard_normal((8, 6, 6, 16)).astype(np.float32) for _ in range(4)]
    cot = rng.standard_normal((8, 6, 6, 16)).astype(np.float32)

    def run(x0):
        g = yscv.Graph(np.float32)
        x, gam = g.variable(x0), g.variable(np.ones(16))
        rm, rv = g.constant(np.zeros(16)), g.constant(np.ones(16))
        y = g.batch_norm(x, gam, None, rm, rv, training=True)
        y = g.group_norm(g.layer_norm(y, gam), gam, None, 4)
        g.backward(y, grad=cot)
        return [np.array(g.value(y)), g.grad(x), g.grad(gam), np.array(g.value(rv))]

    want = [run(x0) for x0 in data]
    got = [None] * len(data)

    def worker(k):
        for _ in range(3):
            got[k] = run(data[k])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(data))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w, r in zip(want, got):
        for a, b in zip(w, r):
            np.testing.assert_array_equal(a, b)


# ------------------------------------------- row chunks on several threads
import yscv.compute.regions as par  # noqa: E402
from yscv import runtime  # noqa: E402
import yscv.compute.norm as norm_ops  # noqa: E402
from yscv.gradcheck import gradcheck  # noqa: E402

_GRAINS = ("GRAIN_LN_FORWARD", "GRAIN_LN_BACKWARD", "GRAIN_STATS", "GRAIN_APPLY",
           "GRAIN_GRAD_SUMS")


@pytest.fixture
def small_grains(monkeypatch):
    """Split every kernel call of >= 8K elements into chunks (at most
    par.MAX_CHUNKS), so moderate inputs take the threaded path."""
    for name in _GRAINS:
        monkeypatch.setattr(norm_ops, name, 4096)


def _big_case(name, dtype, seed=20):
    """(x, gamma, beta, cot, build, ref-axes info) for a split-size input."""
    rng = np.random.default_rng(seed)
    shape = {"batch_norm": (8, 24, 24, 16), "layer_norm": (600, 120),
             "instance_norm": (4, 40, 30, 12), "group_norm": (3, 36, 36, 24)}[name]
    c = shape[-1]
    x0 = (3.0 + 2.0 * rng.standard_normal(shape)).astype(dtype)
    gam0 = rng.uniform(0.5, 1.5, c).astype(dtype)
    bet0 = rng.standard_normal(c).astype(dtype)
    cot = rng.standard_normal(shape).astype(dtype)
    return x0, gam0, bet0, cot


_BIG_BUILD = {
    "batch_norm": lambda g, x, a, b: g.batch_norm(
        x, a, b, g.constant(np.zeros(g.value(x).shape[-1])),
        g.constant(np.ones(g.value(x).shape[-1])), training=True),
    "layer_norm": lambda g, x, a, b: g.layer_norm(x, a, b),
    "instance_norm": lambda g, x, a, b: g.instance_norm(x, a, b),
    "group_norm": lambda g, x, a, b: g.group_norm(x, a, b, 4),
}


def _run_big(name, dtype, x0, gam0, bet0, cot):
    g = yscv.Graph(dtype)
    nodes = [g.variable(a) for a in (x0, gam0, bet0)]
    y = _BIG_BUILD[name](g, *nodes)
    g.backward(y, grad=cot)
    return [np.array(g.value(y))] + [np.array(g.grad(n)) for n in nodes]


def _ref_big(name, x, gam, bet, cot, eps=1e-5):
    """float64 NumPy forward and gradients: statistics over ``axes`` of a
    view in which the channel axes come last."""
    shape = x.shape
    if name == "group_norm":
        k = shape[-1] // 4
        view = shape[:-1] + (4, k)
        x, cot = x.reshape(view), cot.reshape(view)
        gam, bet = gam.reshape(4, k), bet.reshape(4, k)
        axes, chan = tuple(range(1, x.ndim - 2)) + (x.ndim - 1,), 2
    else:
        axes = {"batch_norm": tuple(range(x.ndim - 1)), "layer_norm": (x.ndim - 1,),
                "instance_norm": tuple(range(1, x.ndim - 1))}[name]
        chan = 1
    mu = x.mean(axes, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mu) ** 2).mean(axes, keepdims=True) + eps)
    xhat = (x - mu) * inv
    h = cot * gam
    dx = inv * (h - h.mean(axes, keepdims=True) - xhat * (h * xhat).mean(axes, keepdims=True))
    outer = tuple(range(x.ndim - chan))
    return [(xhat * gam + bet).reshape(shape), dx.reshape(shape),
            (cot * xhat).sum(outer).reshape(-1), cot.sum(outer).reshape(-1)]


@pytest.mark.parametrize("name", sorted(_BIG_BUILD))
def test_split_path_matches_float64_reference_and_stays_float32(name, small_grains):
    """Inputs of 100K-150K values split into row chunks run on two threads:
    float32 values and gradients match a float64 NumPy reference to float32
    rounding, and keep their dtype."""
    x0, gam0, bet0, cot = _big_case(name, np.float32)
    got = _run_big(name, np.float32, x0, gam0, bet0, cot)
    assert all(a.dtype == np.float32 for a in got)
    want = _ref_big(name, *(a.astype(np.float64) for a in (x0, gam0, bet0, cot)))
    y, dx, dgam, dbet = got
    assert np.max(np.abs(y - want[0])) < 5e-6 * np.max(np.abs(want[0]))
    assert np.max(np.abs(dx - want[1])) < 5e-6 * np.max(np.abs(want[1]))
    np.testing.assert_allclose(dgam, want[2], rtol=2e-6, atol=1e-6 * np.abs(want[2]).max())
    np.testing.assert_allclose(dbet, want[3], rtol=2e-6, atol=1e-6 * np.abs(want[3]).max())


@pytest.mark.parametrize("name", sorted(_BIG_BUILD))
def test_split_path_is_deterministic_and_thread_count_independent(name, small_grains,
                                                                  monkeypatch):
    """Same bytes run to run, and with the chunks run in sequence on one
    thread (a one-core machine): the split depends on the sizes only."""
    case = _big_case(name, np.float32)
    first = _run_big(name, np.float32, *case)
    again = _run_big(name, np.float32, *case)
    monkeypatch.setattr(runtime.threads, "_num_threads", 0 + 1)
    serial = _run_big(name, np.float32, *case)
    for a, b, c in zip(first, again, serial):
        assert a.tobytes() == b.tobytes() == c.tobytes()


@pytest.mark.parametrize("name", sorted(_BIG_BUILD))
def test_split_and_unsplit_agree(name, small_grains, monkeypatch):
    """float64: four chunks and one chunk differ only in summation order."""
    case = _big_case(name, np.float64)
    split = _run_big(name, np.float64, *case)
    for grain in _GRAINS:
        monkeypatch.setattr(norm_ops, grain, 1 << 40)
    whole = _run_big(name, np.float64, *case)
    for a, b in zip(split, whole):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())


def test_default_grains_split_a_large_layer_norm_and_batch_norm():
    """At the default sizes a 2M-value call is split (4 chunks of rows) and
    still matches the float64 reference; two runs give the same bytes."""
    assert par.num_chunks(4096, 4096 * 512, norm_ops.GRAIN_LN_BACKWARD) == 4
    assert par.num_chunks(32768, 1 << 21, norm_ops.GRAIN_STATS) == 4
    rng = np.random.default_rng(21)
    for name, shape in (("layer_norm", (4096, 512)), ("batch_norm", (32, 32, 32, 64))):
        c = shape[-1]
        x0 = (1.0 + rng.standard_normal(shape)).astype(np.float32)
        gam0 = rng.uniform(0.5, 1.5, c).astype(np.float32)
        bet0 = rng.standard_normal(c).astype(np.float32)
        cot = rng.standard_normal(shape).astype(np.float32)
        got = _run_big(name, np.float32, x0, gam0, bet0, cot)
        assert got[0].tobytes() == _run_big(name, np.float32, x0, gam0, bet0, cot)[0].tobytes()
        want = _ref_big(name, *(a.astype(np.float64) for a in (x0, gam0, bet0, cot)))
        for a, w in zip(got, want):
            assert a.dtype == np.float32
            assert np.max(np.abs(a - w)) < 1e-5 * np.max(np.abs(w))


def test_two_threads_share_the_pool_on_split_calls(small_grains):
    """Two Python threads running split calls at once (one worker pool) give
    the same bytes as one thread alone."""
    import threading

    cases = {name: _big_case(name, np.float32, seed) for seed, name in
             enumerate(sorted(_BIG_BUILD))}
    want = {name: _run_big(name, np.float32, *case) for name, case in cases.items()}
    got = {}
    errors = []

    def worker(name):
        try:
            for _ in range(3):
                got[name] = _run_big(name, np.float32, *cases[name])
        except BaseException as e:  # noqa: BLE001 -- reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(name,)) for name in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for name in cases:
        for a, b in zip(want[name], got[name]):
            assert a.tobytes() == b.tobytes()


def test_chunk_planning_helpers():
    assert par.split(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert par.bounds(par.split(10, 3)).tolist() == [0, 3, 6, 10]
    assert par.num_chunks(10, 100, 1000) == 1
    assert par.num_chunks(3, 10 ** 9, 1) == 3                 # never more chunks than rows
    assert par.num_chunks(10 ** 6, 10 ** 9, 1) == par.MAX_CHUNKS
    parts = np.array([[1e16, 1.0], [1.0, 1.0], [-1e16, 1.0]])
    np.testing.assert_array_equal(par.combine(parts), [0.0, 3.0])   # index order


def _python_region(n, seen, delay=0.0, fail_at=None):
    """A region call written in Python (the kernels' protocol, with the sync
    helpers called from Python): claims chunks until none is left; sleeping
    releases the GIL as the nogil kernels do."""
    import threading
    import time

    from yscv.kernels import sync

    def call(st):
        sync.region_enter(st)
        c = sync.region_claim(st)
        while c < n:
            if c == fail_at:
                raise RuntimeError(f"chunk {c} failed")
            seen.append((c, threading.current_thread().name))
            time.sleep(delay)
            c = sync.region_claim(st)
    return call


@pytest.mark.parametrize("workers", [0, 1])
def test_region_runs_each_chunk_once_and_raises_errors(workers, monkeypatch):
    monkeypatch.setattr(runtime.threads, "_num_threads", workers + 1)
    for _ in range(20):
        seen = []
        par.run_region(_python_region(7, seen), 7)
        assert sorted(c for c, _ in seen) == list(range(7))
    with pytest.raises(RuntimeError, match="chunk 2 failed"):
        par.run_region(_python_region(4, [], fail_at=2), 4)
    seen = []
    par.run_region(_python_region(5, seen), 5)          # the pool still works after an error
    assert sorted(c for c, _ in seen) == list(range(5))


def test_region_helper_joins_and_a_busy_pool_runs_on_the_caller(monkeypatch):
    import threading

    monkeypatch.setattr(runtime.threads, "_num_threads", 1 + 1)
    seen = []
    par.run_region(_python_region(4, seen, delay=0.02), 4)
    assert sorted(c for c, _ in seen) == [0, 1, 2, 3]
    assert len({name for _, name in seen}) == 2          # the caller and a helper
    # while one thread's region holds the pool, another thread's region runs alone
    inner = []
    started = threading.Event()

    def other():
        started.wait()
        par.run_region(_python_region(3, inner), 3)

    t = threading.Thread(target=other, name="other-caller")
    t.start()

    def outer_call(st):
        started.set()
        t.join()                                          # the other region ran meanwhile
        _python_region(2, seen)(st)

    seen.clear()
    par.run_region(outer_call, 2)
    assert sorted(c for c, _ in inner) == [0, 1, 2]
    assert {name for _, name in inner} == {"other-caller"}
    assert sorted(c for c, _ in seen) == [0, 1]


def test_region_in_a_forked_child():
    import os

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    seen = []
    par.run_region(_python_region(4, seen), 4)            # the parent's pool exists
    pid = os.fork()
    if pid == 0:                                          # child: a new pool on first use
        code = 1
        try:
            got = []
            par.run_region(_python_region(4, got, delay=0.01), 4)
            code = 0 if sorted(c for c, _ in got) == [0, 1, 2, 3] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_yscv_num_threads_one_runs_chunks_on_the_caller():
    import os
    import subprocess
    import sys

    code = "import yscv.compute.regions as p; print(p.workers())"
    env = {**os.environ, "YSCV_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "0"


def test_region_pool_closes_its_helpers(monkeypatch):
    """The atexit hook stops the helpers (none may run compiled code while
    the interpreter tears Numba down)."""
    monkeypatch.setattr(runtime.threads, "_num_threads", 1 + 1)
    pool = par._Pool(1)
    seen = []
    monkeypatch.setattr(par, "_pool", pool)
    par.run_region(_python_region(3, seen), 3)
    assert sorted(c for c, _ in seen) == [0, 1, 2]
    pool.close()
    assert not any(t.is_alive() for t in pool.threads)


# ------------------------------------------- size tiers (yscv/compute/norm.py)
def _count_regions(monkeypatch):
    """Counts the region calls of yscv.compute.norm (the large tier)."""
    calls = []
    real = norm_ops.par.run_region

    def counting(call, chunks):
        calls.append(chunks)
        return real(call, chunks)

    monkeypatch.setattr(norm_ops.par, "run_region", counting)
    return calls


@pytest.mark.parametrize("name", sorted(_BIG_BUILD))
def test_small_inputs_take_the_row_kernels_and_large_ones_the_regions(name, monkeypatch):
    """Below two grains every call runs on the caller alone (the row kernels,
    and the normalisation's region kernel on one chunk: no region of the
    pool); with small grains the same input runs regions; both match the
    float64 reference."""
    case = _big_case(name, np.float64)
    calls = _count_regions(monkeypatch)
    small = _run_big(name, np.float64, *case)
    assert calls == []
    for grain in _GRAINS:
        monkeypatch.setattr(norm_ops, grain, 4096)
    large = _run_big(name, np.float64, *case)
    assert calls and max(calls) > 1
    want = _ref_big(name, *case)
    for got in (small, large):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.abs(b).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("per_sample,k", [(False, 1), (True, 1), (True, 3)])
def test_small_tier_gives_the_bits_of_a_one_chunk_region(dtype, per_sample, k):
    """The small tier's NumPy merges and coefficients are the region kernels'
    float64 operations in their order: forward and backward give the same
    bytes as the two-phase region kernels run on one chunk."""
    KR = norm_ops.KR
    rng = np.random.default_rng(30)
    shape, c = (4, 5, 6, 12), 12
    x = (2.0 + rng.standard_normal(shape)).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, c).astype(dtype)
    beta = rng.standard_normal(c).astype(dtype)
    eps = 1e-5
    y, (mean, var) = norm_ops.group_train_forward(x, gamma, beta, eps, per_sample, k)
    dx, dgam, dbet = norm_ops.group_backward(g, x, gamma, mean, var, eps, per_sample, k, True,
                                             True, True, True)
    n, r, w = norm_ops.packed_layout(shape, per_sample)
    x3 = norm_ops.as_rows3(x, (n, r, w))
    b = np.array([0, r], dtype=np.int64)
    st = par.new_state()
    mean1, var1 = np.empty((n, c // k)), np.empty((n, c // k))
    y1 = np.empty((n, r, w), dtype)
    KR.group_forward_region(x3, c, k, eps, norm_ops.readonly(gamma), norm_ops.readonly(beta),
                            np.empty((1, 2, n, c // k)), mean1, var1,
                            np.empty((n, 4, w), dtype), y1, b, b, st)
    assert y.tobytes() == y1.tobytes()
    assert mean.tobytes() == mean1.tobytes() and var.tobytes() == var1.tobytes()
    lay = norm_ops.group_layout(shape, per_sample)
    mean_w = norm_ops.readonly(norm_ops.per_lane(norm_ops.expand_groups(mean, k), w))
    sums = np.empty((2, n, c))
    dx1 = np.empty((n, r, w), dtype)
    KR.group_backward_region(norm_ops.as_rows3(g, (n, r, w)), x3, mean_w,
                             norm_ops.readonly(mean), norm_ops.readonly(var), eps,
                             norm_ops.readonly(gamma.astype(np.float64)), c, k,
                             float(lay[1] * k), np.empty((1, 2, n, c)), sums,
                             np.empty((n, 5, w), dtype), dx1, b, b, par.new_state())
    assert dx.tobytes() == dx1.tobytes()
    inv_c = norm_ops.expand_groups(1.0 / np.sqrt(var + eps), k)
    assert dgam.tobytes() == (sums[1] * inv_c).sum(axis=0).tobytes()
    assert dbet.tobytes() == sums[0].sum(axis=0).tobytes()


@pytest.mark.parametrize("name", sorted(_BIG_BUILD))
def test_gradcheck_on_the_region_tier(name, monkeypatch):
    """float64 gradcheck with grains small enough that every call runs a
    region of several chunks."""
    for grain in _GRAINS:
        monkeypatch.setattr(norm_ops, grain, 64)
    calls = _count_regions(monkeypatch)
    rng = np.random.default_rng(31)
    shape = (4, 5, 4, 8)
    x0 = 1.0 + rng.standard_normal(shape)
    gam0, bet0 = rng.uniform(0.5, 1.5, 8), rng.standard_normal(8)
    assert gradcheck(_BIG_BUILD[name], [x0, gam0, bet0])
    assert calls and max(calls) > 1
