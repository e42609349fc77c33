"""Losses: NumPy forward references, float64 gradcheck, bad arguments,
kinks, stability, and PyTorch cross-checks."""
import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.compute import loss as closs
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_build,
                          check_torch_second_order, make_op_tests, make_second_order_tests)


@pytest.fixture(autouse=True, params=["numpy", "kernel"])
def ce_tier(request, monkeypatch):
    """Every test here runs with both cross-entropy tiers
    (yscv.compute.loss.numpy_tier): "kernel" forces the fused kernels on the
    small test inputs by a size limit no input is under."""
    if request.param == "kernel":
        monkeypatch.setattr(closs, "NUMPY_MAX_ELEMENTS", -1)
    return request.param


# ------------------------------------------------------------ references
def np_log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def np_cross_entropy(labels, eps=0.0):
    def f(x):
        n, c = x.shape
        lp = np_log_softmax(x)
        q = np.full((n, c), eps / c)
        q[np.arange(n), labels] += 1.0 - eps
        return np.asarray(-(q * lp).sum() / n)
    return f


def np_nll(labels):
    return lambda lp: np.asarray(-np.mean(lp[np.arange(lp.shape[0]), labels]))


def np_huber(delta):
    def f(p, t):
        d = np.abs(p - t)
        return np.asarray(np.mean(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))))
    return f


def np_bce_logits(x, t):
    # the textbook form, fine for the moderate logits used in the table
    s = 1.0 / (1.0 + np.exp(-x))
    return np.asarray(np.mean(-(t * np.log(s) + (1 - t) * np.log(1 - s))))


# ------------------------------------------------------------ domains
def _pair_away(shape, gap=0.1, high=2.0):
    """pred, target whose difference stays away from 0 (l1's kink)."""
    def make(rng):
        t = rng.uniform(-1, 1, size=shape)
        d = rng.uniform(gap, high, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        return t + d, t
    return make


def _huber_pair(shape, delta):
    """differences in both regions, away from |d| = delta."""
    def make(rng):
        t = rng.uniform(-1, 1, size=shape)
        small = rng.uniform(0.05, 0.8, size=shape) * delta
        large = rng.uniform(1.2, 3.0, size=shape) * delta
        mag = np.where(rng.random(shape) < 0.5, small, large)
        return t + mag * rng.choice([-1.0, 1.0], size=shape), t
    return make


def _bce_pair(shape):
    return lambda rng: (rng.uniform(-4, 4, size=shape), rng.uniform(0, 1, size=shape))


# ------------------------------------------------------------ PyTorch twins
# torch_build: torch.nn.functional's loss with the same options; class
# losses move the class axis from last (ours) to second (PyTorch's).
def _tt(t, a):
    """An array option (target, weight, pos_weight) as a float64 tensor."""
    return a if isinstance(a, type(t.zeros(0))) else t.tensor(np.asarray(a, dtype=np.float64))


def t_pair(name, target=None, **kw):
    """mse_loss / l1_loss / huber_loss / binary_cross_entropy_with_logits;
    ``target`` an array when the row's target is not an input."""
    def build(t, pred, *rest):
        tgt = _tt(t, rest[0] if target is None else target)
        opts = {k: (_tt(t, v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        return getattr(t.nn.functional, name)(pred, tgt, **opts)
    return build


def t_class(name, labels, log_softmax_first=False, **kw):
    """cross_entropy / nll_loss over the last axis (PyTorch's [N, C, d1, ...])."""
    def build(t, x):
        if log_softmax_first:
            x = t.log_softmax(x, -1)
        opts = {k: (_tt(t, v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        return getattr(t.nn.functional, name)(x.movedim(-1, 1) if x.dim() > 1 else x,
                                              t.tensor(np.asarray(labels)), **opts)
    return build


LAB5 = np.array([0, 3, 4, 1])          # N=4, C=5
LAB64 = np.array([63, 5])              # N=2, C=LONG: 8-lane row loops + remainder
LONG = 67
LAB3 = np.array([2, 0, 1, 1, 2, 0])    # N=6, C=3
T34 = np.random.default_rng(7).uniform(-1, 1, size=(3, 4))

CASES = [
    OpCase(Op.MSE_LOSS, lambda g, p, t: g.mse_loss(p, t), [(3, 4), (3, 4)],
           lambda p, t: np.asarray(np.mean((p - t) ** 2)), name="mse_both_nodes",
           torch_build=t_pair("mse_loss")),
    OpCase(Op.MSE_LOSS, lambda g, p: g.mse_loss(p, T34), [(3, 4)],
           lambda p: np.asarray(np.mean((p - T34) ** 2)), name="mse_array_target",
           torch_build=t_pair("mse_loss", T34)),
    OpCase(Op.MSE_LOSS, lambda g, p, t: g.mse_loss(p, t), [(), ()],
           lambda p, t: np.asarray((p - t) ** 2), name="mse_0d",
           torch_build=t_pair("mse_loss")),
    OpCase(Op.L1_LOSS, lambda g, p, t: g.l1_loss(p, t), (), lambda p, t: np.asarray(np.mean(np.abs(p - t))),
           name="l1_both_nodes", inputs=_pair_away((4, 5)),
           torch_build=t_pair("l1_loss")),
    OpCase(Op.L1_LOSS, lambda g, p: g.l1_loss(p, T34), [(3, 4)],
           lambda p: np.asarray(np.mean(np.abs(p - T34))), name="l1_array_target", low=2.0, high=3.0,
           torch_build=t_pair("l1_loss", T34)),
    OpCase(Op.HUBER_LOSS, lambda g, p, t: g.huber_loss(p, t), (), np_huber(1.0),
           name="huber_delta1_both_regions", inputs=_huber_pair((4, 5), 1.0),
           torch_build=t_pair("huber_loss")),
    OpCase(Op.HUBER_LOSS, lambda g, p, t: g.huber_loss(p, t, delta=0.3), (), np_huber(0.3),
           name="huber_delta0.3_both_regions", inputs=_huber_pair((3, 6), 0.3),
           torch_build=t_pair("huber_loss", delta=0.3)),
    OpCase(Op.HUBER_LOSS, lambda g, p, t: g.huber_loss(p, t, delta=5.0), (), np_huber(5.0),
           name="huber_quadratic_region_only", inputs=_huber_pair((3, 4), 0.5),
           torch_build=t_pair("huber_loss", delta=5.0)),
    OpCase(Op.HUBER_LOSS, lambda g, p, t: g.huber_loss(p, t, delta=0.5), (), np_huber(0.5),
           name="huber_0d_linear_region", inputs=lambda rng: (np.array(2.0), np.array(0.3)),
           torch_build=t_pair("huber_loss", delta=0.5)),
    OpCase(Op.BCE_WITH_LOGITS, lambda g, x, t: g.binary_cross_entropy_with_logits(x, t), (),
           np_bce_logits, name="bce_with_logits", inputs=_bce_pair((4, 5)),
           torch_build=t_pair("binary_cross_entropy_with_logits")),
    OpCase(Op.BCE_WITH_LOGITS, lambda g, x, t: g.binary_cross_entropy_with_logits(x, t), (),
           np_bce_logits, name="bce_with_logits_0d", inputs=_bce_pair(()),
           torch_build=t_pair("binary_cross_entropy_with_logits")),
    OpCase(Op.BCE_WITH_LOGITS, lambda g, x: g.binary_cross_entropy_with_logits(x, T34 > 0), [(3, 4)],
           lambda x: np_bce_logits(x, (T34 > 0).astype(float)), name="bce_with_logits_bool_target",
           low=-4, high=4,
           torch_build=t_pair("binary_cross_entropy_with_logits", T34 > 0)),
    OpCase(Op.CROSS_ENTROPY, lambda g, x: g.cross_entropy(x, LAB5), [(4, 5)], np_cross_entropy(LAB5),
           name="cross_entropy", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5)),
    OpCase(Op.CROSS_ENTROPY, lambda g, x: g.cross_entropy(x, LAB5, label_smoothing=0.1), [(4, 5)],
           np_cross_entropy(LAB5, 0.1), name="cross_entropy_smoothing0.1", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5, label_smoothing=0.1)),
    OpCase(Op.CROSS_ENTROPY, lambda g, x: g.cross_entropy(x, LAB3, label_smoothing=1.0), [(6, 3)],
           np_cross_entropy(LAB3, 1.0), name="cross_entropy_smoothing1", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB3, label_smoothing=1.0)),
    OpCase(Op.CROSS_ENTROPY, lambda g, x: g.cross_entropy(x, LAB64), [(2, LONG)],
           np_cross_entropy(LAB64), name="cross_entropy_many_classes", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB64)),
    OpCase(Op.CROSS_ENTROPY, lambda g, x: g.cross_entropy(x, LAB64, label_smoothing=0.1),
           [(2, LONG)], np_cross_entropy(LAB64, 0.1),
           name="cross_entropy_many_classes_smoothing0.1", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB64, label_smoothing=0.1)),
    OpCase(Op.CROSS_ENTROPY, lambda g, x: g.cross_entropy(x, [0, 0]), [(2, 1)],
           lambda x: np.zeros(()), name="cross_entropy_one_class",
           torch_build=t_class("cross_entropy", [0, 0])),
    OpCase(Op.NLL_LOSS, lambda g, x: g.nll_loss(x, LAB5), [(4, 5)], np_nll(LAB5), name="nll_loss",
           low=-4, high=0,
           torch_build=t_class("nll_loss", LAB5)),
    OpCase(Op.NLL_LOSS, lambda g, x: g.nll_loss(g.log_softmax(x), LAB3), [(6, 3)],
           np_cross_entropy(LAB3), name="nll_of_log_softmax_is_cross_entropy",
           torch_build=t_class("nll_loss", LAB3, log_softmax_first=True)),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.MSE_LOSS, "mse_shape_mismatch", _leaves((3, 4), (4,)), lambda g, p, t: g.mse_loss(p, t),
            yscv.ShapeError, r"mse_loss: pred has shape \(3, 4\) but target has shape \(4,\)"),
    BadCase(Op.MSE_LOSS, "mse_complex_target", _leaves((2,)), lambda g, p: g.mse_loss(p, np.ones(2) * 1j),
            TypeError, "mse_loss"),
    BadCase(Op.L1_LOSS, "l1_shape_mismatch", _leaves((3, 1), (3,)), lambda g, p, t: g.l1_loss(p, t),
            yscv.ShapeError, "l1_loss"),
    BadCase(Op.HUBER_LOSS, "huber_shape_mismatch", _leaves((2, 2), (2, 3)),
            lambda g, p, t: g.huber_loss(p, t), yscv.ShapeError, "huber_loss"),
    BadCase(Op.HUBER_LOSS, "huber_delta_zero", _leaves((2,), (2,)),
            lambda g, p, t: g.huber_loss(p, t, delta=0.0), ValueError, "huber_loss: delta"),
    BadCase(Op.HUBER_LOSS, "huber_delta_str", _leaves((2,), (2,)),
            lambda g, p, t: g.huber_loss(p, t, delta="1"), TypeError, "huber_loss: delta"),
    BadCase(Op.BCE_WITH_LOGITS, "bce_shape_mismatch", _leaves((4,), (4, 1)),
            lambda g, x, t: g.binary_cross_entropy_with_logits(x, t), yscv.ShapeError, "bce_with_logits"),
    BadCase(Op.CROSS_ENTROPY, "ce_label_out_of_range", _leaves((3, 4)),
            lambda g, x: g.cross_entropy(x, [0, 4, 1]), IndexError,
            r"cross_entropy: labels\[1\]=4 is out of range for 4 classes"),
    BadCase(Op.CROSS_ENTROPY, "ce_label_negative", _leaves((3, 4)),
            lambda g, x: g.cross_entropy(x, [0, 1, -1]), IndexError, r"labels\[2\]=-1"),
    BadCase(Op.CROSS_ENTROPY, "ce_float_labels", _leaves((3, 4)),
            lambda g, x: g.cross_entropy(x, np.array([0.0, 1.0, 2.0])), TypeError,
            "cross_entropy: labels must be an integer array"),
    BadCase(Op.CROSS_ENTROPY, "ce_bool_labels", _leaves((2, 4)),
            lambda g, x: g.cross_entropy(x, np.array([True, False])), TypeError, "cross_entropy: labels"),
    BadCase(Op.CROSS_ENTROPY, "ce_node_labels", _leaves((2, 4), (2,)),
            lambda g, x, y: g.cross_entropy(x, y), TypeError, "cross_entropy: labels"),
    BadCase(Op.CROSS_ENTROPY, "ce_smoothing_above_1", _leaves((2, 4)),
            lambda g, x: g.cross_entropy(x, [0, 1], label_smoothing=1.5), ValueError,
            r"cross_entropy: label_smoothing must be in \[0, 1\]"),
    BadCase(Op.CROSS_ENTROPY, "ce_smoothing_negative", _leaves((2, 4)),
            lambda g, x: g.cross_entropy(x, [0, 1], label_smoothing=-0.1), ValueError,
            "label_smoothing"),
    BadCase(Op.CROSS_ENTROPY, "ce_logits_1d", _leaves((4,)),
            lambda g, x: g.cross_entropy(x, [0]), yscv.ShapeError,
            r"cross_entropy: logits must be \[N, C\] or \[N, d1, ..., C\]"),
    BadCase(Op.CROSS_ENTROPY, "ce_labels_wrong_length", _leaves((3, 4)),
            lambda g, x: g.cross_entropy(x, [0, 1]), yscv.ShapeError, r"cross_entropy: labels must have shape \(3,\)"),
    BadCase(Op.CROSS_ENTROPY, "ce_zero_classes", _leaves((3, 0)),
            lambda g, x: g.cross_entropy(x, [0, 0, 0]), yscv.ShapeError, "C >= 1"),
    BadCase(Op.NLL_LOSS, "nll_label_out_of_range", _leaves((2, 3)),
            lambda g, x: g.nll_loss(x, [3, 0]), IndexError, r"nll_loss: labels\[0\]=3"),
    BadCase(Op.NLL_LOSS, "nll_labels_2d", _leaves((2, 3)),
            lambda g, x: g.nll_loss(x, [[0], [1]]), yscv.ShapeError, "nll_loss: labels"),
    BadCase(Op.NLL_LOSS, "nll_float_labels", _leaves((2, 3)),
            lambda g, x: g.nll_loss(x, [0.5, 1.0]), TypeError, "nll_loss: labels"),
]


# ------------------------------------------------------------ options (SPEC §8)
def np_class_loss(labels, weight=None, ignore_index=-100, eps=0.0, reduction="mean",
                  log_probs=False):
    """PyTorch's cross_entropy (or nll_loss with log_probs=True) over the LAST axis."""
    def f(x):
        c = x.shape[-1]
        x2 = x.reshape(-1, c)
        lab = np.asarray(labels).reshape(-1)
        lp = x2 if log_probs else np_log_softmax(x2)
        w = np.ones(c) if weight is None else np.asarray(weight, dtype=float)
        keep = lab != ignore_index
        safe = np.where(keep, lab, 0)
        per = -w[safe] * lp[np.arange(lab.size), safe]
        if eps:
            per = (1 - eps) * per + eps / c * -(lp * w).sum(axis=1)
        per = np.where(keep, per, 0.0)
        if reduction == "none":
            return per.reshape(np.shape(labels))
        if reduction == "sum":
            return np.asarray(per.sum())
        return np.asarray(per.sum() / w[safe][keep].sum())
    return f


def np_reduce(reduction):
    return {"mean": lambda a: np.asarray(np.mean(a)), "sum": lambda a: np.asarray(np.sum(a)),
            "none": lambda a: a}[reduction]


def np_bce_full(weight=None, pos_weight=None, reduction="mean"):
    def f(x, t):
        pw = 1.0 if pos_weight is None else pos_weight
        lw = 1 + (pw - 1) * t
        terms = (1 - t) * x + lw * np.log1p(np.exp(-x))
        if weight is not None:
            terms = terms * weight
        return np_reduce(reduction)(terms)
    return f


W5 = np.array([0.5, 2.0, 1.0, 0.25, 3.0])
LAB5_IGN = np.array([0, -100, 4, 1])               # one ignored target
LAB5_IGN2 = np.array([0, 2, 4, 2])                 # ignore_index=2: a class index
LAB235 = np.array([[0, 4, 2], [1, -100, 3]])       # N-d labels [2, 3] for logits [2, 3, 5]
W4 = np.array([1.5, 0.5, 2.0, 1.0])                # BCE weight over the last axis
PW4 = np.array([3.0, 0.5, 1.0, 2.0])               # BCE pos_weight [C]
W34 = np.random.default_rng(9).uniform(0.2, 2.0, size=(3, 1))


def _ce(labels, **kw):
    return lambda g, x: g.cross_entropy(x, labels, **kw)


def _nll(labels, **kw):
    return lambda g, x: g.nll_loss(x, labels, **kw)


CASES += [
    OpCase(Op.MSE_LOSS, lambda g, p, t, r=r: g.mse_loss(p, t, reduction=r), [(3, 4), (3, 4)],
           lambda p, t, r=r: np_reduce(r)((p - t) ** 2), name=f"mse_{r}",
           torch_build=t_pair("mse_loss", reduction=r)) for r in ("sum", "none")
] + [
    OpCase(Op.L1_LOSS, lambda g, p, t, r=r: g.l1_loss(p, t, reduction=r), (),
           lambda p, t, r=r: np_reduce(r)(np.abs(p - t)), name=f"l1_{r}",
           inputs=_pair_away((4, 5)), torch_build=t_pair("l1_loss", reduction=r)) for r in ("sum", "none")
] + [
    OpCase(Op.HUBER_LOSS, lambda g, p, t, r=r: g.huber_loss(p, t, delta=0.5, reduction=r), (),
           lambda p, t, r=r: np_reduce(r)(np.where(np.abs(p - t) < 0.5, 0.5 * (p - t) ** 2,
                                                   0.5 * (np.abs(p - t) - 0.25))),
           name=f"huber_{r}", inputs=_huber_pair((3, 6), 0.5),
           torch_build=t_pair("huber_loss", delta=0.5, reduction=r)) for r in ("sum", "none")
] + [
    OpCase(Op.BCE_WITH_LOGITS,
           lambda g, x, t, r=r: g.binary_cross_entropy_with_logits(x, t, reduction=r), (),
           np_bce_full(reduction=r), name=f"bce_with_logits_{r}", inputs=_bce_pair((3, 4)),
           torch_build=t_pair("binary_cross_entropy_with_logits", reduction=r))
    for r in ("sum", "none")
] + [
    OpCase(Op.BCE_WITH_LOGITS,
           lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, weight=W4), (),
           np_bce_full(weight=W4), name="bce_with_logits_weight_last_axis",
           inputs=_bce_pair((3, 4)),
           torch_build=t_pair("binary_cross_entropy_with_logits", weight=W4)),
    OpCase(Op.BCE_WITH_LOGITS,
           lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, weight=W34, reduction="sum"),
           (), np_bce_full(weight=W34, reduction="sum"), name="bce_with_logits_weight_per_row_sum",
           inputs=_bce_pair((3, 4)),
           torch_build=t_pair("binary_cross_entropy_with_logits", weight=W34, reduction="sum")),
    OpCase(Op.BCE_WITH_LOGITS,
           lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, pos_weight=PW4), (),
           np_bce_full(pos_weight=PW4), name="bce_with_logits_pos_weight",
           inputs=_bce_pair((2, 3, 4)),
           torch_build=t_pair("binary_cross_entropy_with_logits", pos_weight=PW4)),
    OpCase(Op.BCE_WITH_LOGITS,
           lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, weight=W34, pos_weight=PW4,
                                                              reduction="none"),
           (), np_bce_full(weight=W34, pos_weight=PW4, reduction="none"),
           name="bce_with_logits_weight_pos_weight_none", inputs=_bce_pair((3, 4)),
           torch_build=t_pair("binary_cross_entropy_with_logits", weight=W34, pos_weight=PW4,
                          reduction="none")),
    OpCase(Op.BCE_WITH_LOGITS,
           lambda g, x: g.binary_cross_entropy_with_logits(x, T34, pos_weight=PW4), [(3, 4)],
           lambda x: np_bce_full(pos_weight=PW4)(x, T34), name="bce_with_logits_pos_weight_array_target",
           low=-4, high=4,
           torch_build=t_pair("binary_cross_entropy_with_logits", T34, pos_weight=PW4)),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB5, weight=W5), [(4, 5)], np_class_loss(LAB5, W5),
           name="cross_entropy_weight", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5, weight=W5)),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB5_IGN), [(4, 5)], np_class_loss(LAB5_IGN),
           name="cross_entropy_ignore_index", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5_IGN)),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB5_IGN2, ignore_index=2), [(4, 5)],
           np_class_loss(LAB5_IGN2, ignore_index=2), name="cross_entropy_ignore_index_is_a_class",
           low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5_IGN2, ignore_index=2)),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB5_IGN, weight=W5, label_smoothing=0.2), [(4, 5)],
           np_class_loss(LAB5_IGN, W5, eps=0.2), name="cross_entropy_weight_ignore_smoothing",
           low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5_IGN, weight=W5, label_smoothing=0.2)),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB5, weight=W5, label_smoothing=0.3, reduction="sum"), [(4, 5)],
           np_class_loss(LAB5, W5, eps=0.3, reduction="sum"),
           name="cross_entropy_weight_smoothing_sum", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5, weight=W5, label_smoothing=0.3,
                               reduction="sum")),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB5_IGN, label_smoothing=0.1, reduction="none"), [(4, 5)],
           np_class_loss(LAB5_IGN, eps=0.1, reduction="none"),
           name="cross_entropy_smoothing_ignore_none", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB5_IGN, label_smoothing=0.1, reduction="none")),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB235), [(2, 3, 5)], np_class_loss(LAB235),
           name="cross_entropy_nd", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB235)),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB235, weight=W5, label_smoothing=0.1, reduction="none"),
           [(2, 3, 5)], np_class_loss(LAB235, W5, eps=0.1, reduction="none"),
           name="cross_entropy_nd_weight_smoothing_none", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB235, weight=W5, label_smoothing=0.1,
                               reduction="none")),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB235[..., None] % 5, weight=W5, reduction="sum"),
           [(2, 3, 1, 5)], np_class_loss(LAB235[..., None] % 5, W5, reduction="sum"),
           name="cross_entropy_4d_weight_sum", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB235[..., None] % 5, weight=W5, reduction="sum")),
    OpCase(Op.CROSS_ENTROPY, _ce(LAB64, weight=np.linspace(0.1, 2.0, LONG), label_smoothing=0.1),
           [(2, LONG)], np_class_loss(LAB64, np.linspace(0.1, 2.0, LONG), eps=0.1),
           name="cross_entropy_many_classes_weight_smoothing", low=-3, high=3,
           torch_build=t_class("cross_entropy", LAB64, weight=np.linspace(0.1, 2.0, LONG),
                               label_smoothing=0.1)),
    OpCase(Op.NLL_LOSS, _nll(LAB5, weight=W5), [(4, 5)], np_class_loss(LAB5, W5, log_probs=True),
           name="nll_loss_weight", low=-4, high=0,
           torch_build=t_class("nll_loss", LAB5, weight=W5)),
    OpCase(Op.NLL_LOSS, _nll(LAB5_IGN2, weight=W5, ignore_index=2), [(4, 5)],
           np_class_loss(LAB5_IGN2, W5, ignore_index=2, log_probs=True),
           name="nll_loss_weight_ignore_index", low=-4, high=0,
           torch_build=t_class("nll_loss", LAB5_IGN2, weight=W5, ignore_index=2)),
    OpCase(Op.NLL_LOSS, _nll(LAB235, reduction="none"), [(2, 3, 5)],
           np_class_loss(LAB235, reduction="none", log_probs=True), name="nll_loss_nd_none",
           low=-4, high=0,
           torch_build=t_class("nll_loss", LAB235, reduction="none")),
    OpCase(Op.NLL_LOSS, _nll(LAB235, weight=W5, reduction="sum"), [(2, 3, 5)],
           np_class_loss(LAB235, W5, reduction="sum", log_probs=True),
           name="nll_loss_nd_weight_sum", low=-4, high=0,
           torch_build=t_class("nll_loss", LAB235, weight=W5, reduction="sum")),
]


def _reduction_rows(op, name, setup, call):
    return [BadCase(op, f"{name}_reduction_bad_string", setup, lambda g, *a: call(g, *a, "avg"),
                    ValueError, rf"{name}: reduction must be 'mean', 'sum' or 'none', got 'avg'"),
            BadCase(op, f"{name}_reduction_not_str", setup, lambda g, *a: call(g, *a, None),
                    TypeError, rf"{name}: reduction must be a str")]


BAD += (
    _reduction_rows(Op.MSE_LOSS, "mse_loss", _leaves((2,), (2,)),
                    lambda g, p, t, r: g.mse_loss(p, t, reduction=r))
    + _reduction_rows(Op.L1_LOSS, "l1_loss", _leaves((2,), (2,)),
                      lambda g, p, t, r: g.l1_loss(p, t, reduction=r))
    + _reduction_rows(Op.HUBER_LOSS, "huber_loss", _leaves((2,), (2,)),
                      lambda g, p, t, r: g.huber_loss(p, t, reduction=r))
    + _reduction_rows(Op.BCE_WITH_LOGITS, "binary_cross_entropy_with_logits", _leaves((2,), (2,)),
                      lambda g, p, t, r: g.binary_cross_entropy_with_logits(p, t, reduction=r))
    + _reduction_rows(Op.CROSS_ENTROPY, "cross_entropy", _leaves((2, 3)),
                      lambda g, x, r: g.cross_entropy(x, [0, 1], reduction=r))
    + _reduction_rows(Op.NLL_LOSS, "nll_loss", _leaves((2, 3)),
                      lambda g, x, r: g.nll_loss(x, [0, 1], reduction=r))
) + [
    BadCase(Op.CROSS_ENTROPY, "ce_weight_wrong_length", _leaves((2, 3)),
            lambda g, x: g.cross_entropy(x, [0, 1], weight=np.ones(4)), ValueError,
            r"cross_entropy: weight must have shape \(3,\), one weight per class"),
    BadCase(Op.CROSS_ENTROPY, "ce_weight_2d", _leaves((2, 3)),
            lambda g, x: g.cross_entropy(x, [0, 1], weight=np.ones((1, 3))), yscv.ShapeError,
            r"cross_entropy: weight must have shape \(3,\)"),
    BadCase(Op.CROSS_ENTROPY, "ce_weight_node", _leaves((2, 3), (3,)),
            lambda g, x, w: g.cross_entropy(x, [0, 1], weight=w), TypeError,
            "cross_entropy: weight must be an array, not a NodeId"),
    BadCase(Op.CROSS_ENTROPY, "ce_weight_complex", _leaves((2, 3)),
            lambda g, x: g.cross_entropy(x, [0, 1], weight=np.ones(3) * 1j), TypeError,
            "cross_entropy: weight has dtype complex128"),
    BadCase(Op.CROSS_ENTROPY, "ce_ignore_index_float", _leaves((2, 3)),
            lambda g, x: g.cross_entropy(x, [0, 1], ignore_index=-1.0), TypeError,
            "cross_entropy: ignore_index must be an int"),
    BadCase(Op.CROSS_ENTROPY, "ce_label_out_of_range_not_ignored", _leaves((3, 4)),
            lambda g, x: g.cross_entropy(x, [0, -100, -1]), IndexError,
            r"cross_entropy: labels\[2\]=-1 is out of range for 4 classes \(valid labels are "
            r"0..3, or ignore_index=-100\)"),
    BadCase(Op.CROSS_ENTROPY, "ce_nd_label_out_of_range", _leaves((2, 3, 4)),
            lambda g, x: g.cross_entropy(x, [[0, 1, 2], [3, 4, 0]]), IndexError,
            r"cross_entropy: labels\[1, 1\]=4 is out of range"),
    BadCase(Op.CROSS_ENTROPY, "ce_ignore_index_is_not_minus_100", _leaves((2, 3)),
            lambda g, x: g.cross_entropy(x, [0, -100], ignore_index=-1), IndexError,
            r"labels\[1\]=-100 is out of range .* ignore_index=-1\)"),
    BadCase(Op.CROSS_ENTROPY, "ce_nd_labels_shape", _leaves((2, 3, 4)),
            lambda g, x: g.cross_entropy(x, np.zeros((2, 4), dtype=int)), yscv.ShapeError,
            r"cross_entropy: labels must have shape \(2, 3\) to match input of shape \(2, 3, 4\)"),
    BadCase(Op.CROSS_ENTROPY, "ce_torch_layout_labels_hint", _leaves((2, 4, 3)),
            lambda g, x: g.cross_entropy(x, np.zeros((2, 3), dtype=int)), yscv.ShapeError,
            r"labels must have shape \(2, 4\).*class axis is the LAST axis"),
    BadCase(Op.CROSS_ENTROPY, "ce_nd_float_labels", _leaves((2, 3, 4)),
            lambda g, x: g.cross_entropy(x, np.zeros((2, 3))), TypeError,
            "cross_entropy: labels must be an integer array"),
    BadCase(Op.CROSS_ENTROPY, "ce_positional_smoothing_is_weight", _leaves((2, 3)),
            lambda g, x: g.cross_entropy(x, [0, 1], 0.1), TypeError,
            r"cross_entropy: weight must be an array of 3 class weights, got 0.1 \(the third "
            r"positional argument is weight"),
    BadCase(Op.NLL_LOSS, "nll_ignore_index_beyond_int64", _leaves((2, 3)),
            lambda g, x: g.nll_loss(x, [0, 1], ignore_index=2**64), ValueError,
            "nll_loss: ignore_index=18446744073709551616 does not fit in int64"),
    BadCase(Op.NLL_LOSS, "nll_weight_wrong_length", _leaves((2, 3)),
            lambda g, x: g.nll_loss(x, [0, 1], weight=[1.0, 2.0]), ValueError,
            r"nll_loss: weight must have shape \(3,\)"),
    BadCase(Op.NLL_LOSS, "nll_ignore_index_bool", _leaves((2, 3)),
            lambda g, x: g.nll_loss(x, [0, 1], ignore_index=True), TypeError,
            "nll_loss: ignore_index must be an int"),
    BadCase(Op.NLL_LOSS, "nll_nd_label_out_of_range", _leaves((1, 2, 3)),
            lambda g, x: g.nll_loss(x, [[0, 7]]), IndexError, r"nll_loss: labels\[0, 1\]=7"),
    BadCase(Op.NLL_LOSS, "nll_nd_labels_shape", _leaves((1, 2, 3)),
            lambda g, x: g.nll_loss(x, [0, 1]), yscv.ShapeError,
            r"nll_loss: labels must have shape \(1, 2\)"),
    BadCase(Op.BCE_WITH_LOGITS, "bce_weight_not_broadcastable", _leaves((3, 4), (3, 4)),
            lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, weight=np.ones(3)),
            yscv.ShapeError, r"binary_cross_entropy_with_logits: weight of shape \(3,\) does "
            r"not broadcast to the input's shape \(3, 4\)"),
    BadCase(Op.BCE_WITH_LOGITS, "bce_weight_broadcasts_larger", _leaves((3, 4), (3, 4)),
            lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, weight=np.ones((2, 3, 4))),
            ValueError, "weight of shape"),
    BadCase(Op.BCE_WITH_LOGITS, "bce_pos_weight_wrong_length", _leaves((3, 4), (3, 4)),
            lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, pos_weight=np.ones(5)),
            ValueError, r"binary_cross_entropy_with_logits: pos_weight of shape \(5,\)"),
    BadCase(Op.BCE_WITH_LOGITS, "bce_pos_weight_node", _leaves((3, 4), (3, 4), (4,)),
            lambda g, x, t, w: g.binary_cross_entropy_with_logits(x, t, pos_weight=w), TypeError,
            "binary_cross_entropy_with_logits: pos_weight must be an array, not a NodeId"),
    BadCase(Op.BCE_WITH_LOGITS, "bce_weight_str", _leaves((3, 4), (3, 4)),
            lambda g, x, t: g.binary_cross_entropy_with_logits(x, t, weight="1"), TypeError,
            "binary_cross_entropy_with_logits: weight"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


def _at_kinks(delta):
    """pred - target exactly 0, +-delta (huber's branch point) and elsewhere."""
    def make(rng):
        t = rng.uniform(-1, 1, size=(2, 5))
        d = np.array([[0.0, delta, -delta, 0.3 * delta, -2.0 * delta],
                      [delta, 0.0, 1.5 * delta, -delta, -0.5 * delta]])
        return t + d, t
    return make


# At the kinks PyTorch's choices hold: l1's derivative sign(0) = 0 and huber's
# second derivative 0 at |d| == delta (the linear branch); compared with
# PyTorch only, as a finite difference would straddle the kink.
KINKS = [
    OpCase(Op.L1_LOSS, lambda g, p, t: g.l1_loss(p, t), name="l1_at_zero",
           inputs=_at_kinks(0.5), torch_build=t_pair("l1_loss")),
    OpCase(Op.HUBER_LOSS, lambda g, p, t: g.huber_loss(p, t, delta=0.5), name="huber_at_delta",
           inputs=_at_kinks(0.5), torch_build=t_pair("huber_loss", delta=0.5)),
    OpCase(Op.HUBER_LOSS, lambda g, p, t: g.huber_loss(p, t, delta=1.0, reduction="none"),
           name="huber_at_delta_none", inputs=_at_kinks(1.0),
           torch_build=t_pair("huber_loss", delta=1.0, reduction="none")),
]


@pytest.mark.parametrize("case", KINKS, ids=[c.id for c in KINKS])
def test_second_order_at_kinks_matches_pytorch(case):
    pytest.importorskip("torch")
    check_torch_second_order(case)


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_torch_build_is_the_rows_function(case):
    pytest.importorskip("torch")
    check_torch_build(case)


# ------------------------------------------------------------ semantics
def _grads(build, *arrays, dtype=np.float64):
    g = yscv.Graph(dtype)
    nodes = [g.variable(a) for a in arrays]
    out = build(g, *nodes)
    g.backward(out)
    return g.value(out), [g.grad(n) for n in nodes]


def test_l1_gradient_is_zero_where_pred_equals_target():
    _, (gp, gt) = _grads(lambda g, p, t: g.l1_loss(p, t), np.array([1.0, 2.0, 3.0]),
                         np.array([0.0, 2.0, 5.0]))
    np.testing.assert_allclose(gp, [1 / 3, 0.0, -1 / 3])
    np.testing.assert_allclose(gt, [-1 / 3, 0.0, 1 / 3])


def test_huber_gradient_is_clipped_difference():
    p = np.array([0.0, 0.0, 0.0, 0.0])
    t = np.array([-3.0, -0.5, 0.25, 2.0])
    v, (gp, gt) = _grads(lambda g, a, b: g.huber_loss(a, b, delta=1.0), p, t)
    np.testing.assert_allclose(v, np.mean([2.5, 0.125, 0.03125, 1.5]))
    np.testing.assert_allclose(gp, np.array([3.0, 0.5, -0.25, -1.0]).clip(-1, 1) / 4)
    np.testing.assert_allclose(gt, -gp)


def test_target_gradient_flows_as_pytorch():
    """mse: d/dt = -2(p-t)/n; bce: d/dt = -x/n."""
    p = np.array([1.0, -2.0])
    t = np.array([0.5, 0.5])
    _, (gp, gt) = _grads(lambda g, a, b: g.mse_loss(a, b), p, t)
    np.testing.assert_allclose(gt, -(p - t))
    _, (gx, gt) = _grads(lambda g, a, b: g.binary_cross_entropy_with_logits(a, b), p, t)
    np.testing.assert_allclose(gt, -p / 2)
    np.testing.assert_allclose(gx, (1 / (1 + np.exp(-p)) - t) / 2)


def test_array_target_is_a_constant_without_gradient():
    g = yscv.Graph()
    p = g.variable(np.ones(3))
    loss = g.mse_loss(p, np.zeros(3))
    (t,) = [n for n in g.inputs(loss) if n != p]
    assert not g.requires_grad(t)
    g.backward(loss)
    np.testing.assert_allclose(g.grad(p), np.full(3, 2 / 3), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pad", [0, LONG])
def test_cross_entropy_is_stable_for_huge_logits(dtype, pad):
    # pad: extra classes make long rows (the 8-lane loops)
    x = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4 + 1.0]])
    if pad:
        x = np.concatenate([x, np.full((2, pad), -50.0)], axis=1)
    lab = [1, 2]
    lse1 = np.log1p(2.0 * np.exp(-1.0))  # row 1 unpadded: logp = [-1 - lse1, -1 - lse1, -lse1]
    for eps in (0.0, 0.1):
        v, (gx,) = _grads(lambda g, n: g.cross_entropy(n, lab, label_smoothing=eps), x, dtype=dtype)
        assert v.dtype == dtype and gx.dtype == dtype
        assert np.isfinite(v) and np.all(np.isfinite(gx))
        np.testing.assert_allclose(v, np_cross_entropy(np.array(lab), eps)(x), rtol=1e-6)
        if not pad:
            nll = [1e4, lse1]
            smooth = [1e4, (2.0 + 3.0 * lse1) / 3.0]
            expect = np.mean([(1 - eps) * a + eps * b for a, b in zip(nll, smooth)])
            np.testing.assert_allclose(v, expect, rtol=1e-6)


def test_cross_entropy_saves_only_the_row_logsumexp():
    g = yscv.Graph()
    x = g.variable(np.random.default_rng(0).standard_normal((32, 10)))
    before = g.memory()["saved"]
    g.cross_entropy(x, np.arange(32) % 10)
    assert g.memory()["saved"] - before == 32 * 4


@pytest.mark.parametrize("classes", [7, 100])
def test_cross_entropy_gradient_is_softmax_minus_smoothed_onehot(classes):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, classes))
    lab = rng.integers(0, classes, 50)
    for eps in (0.0, 0.2):
        _, (gx,) = _grads(lambda g, n: g.cross_entropy(n, lab, label_smoothing=eps), x)
        p = np.exp(np_log_softmax(x))
        q = np.full((50, classes), eps / classes)
        q[np.arange(50), lab] += 1 - eps
        np.testing.assert_allclose(gx, (p - q) / 50, rtol=1e-12, atol=1e-15)


def test_labels_are_copied_and_kept_as_integers():
    lab = np.array([0, 1])
    g = yscv.Graph()
    loss = g.cross_entropy(g.variable(np.zeros((2, 3))), lab)
    lab[0] = 2
    stored = g._attrs[loss.index].labels
    assert stored.dtype.kind == "i" and not stored.flags.writeable
    np.testing.assert_array_equal(stored, [0, 1])


def test_empty_batch_gives_nan_like_pytorch():
    g = yscv.Graph()
    x = g.variable(np.zeros((0, 3)))
    for loss in (g.cross_entropy(x, np.zeros(0, dtype=int)), g.nll_loss(x, np.zeros(0, dtype=int)),
                 g.mse_loss(x, np.zeros((0, 3)))):
        assert np.isnan(g.value(loss))
        g.backward(loss)
    assert g.grad(x).shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bce_with_logits_is_stable_for_huge_logits(dtype):
    x = np.array([1e4, -1e4, 800.0, -800.0])
    t = np.array([0.0, 1.0, 1.0, 0.0])
    v, (gx, gt) = _grads(lambda g, a, b: g.binary_cross_entropy_with_logits(a, b), x, t, dtype=dtype)
    np.testing.assert_allclose(v, (1e4 + 1e4 + 0 + 0) / 4, rtol=1e-6)
    np.testing.assert_allclose(gx, np.array([1.0, -1.0, 0.0, 0.0]) / 4)
    np.testing.assert_allclose(gt, -x / 4)


def test_losses_keep_float32():
    g = yscv.Graph()
    p = g.variable(np.ones((2, 3)))
    for loss in (g.mse_loss(p, np.zeros((2, 3))), g.l1_loss(p, np.zeros((2, 3))),
                 g.huber_loss(p, np.zeros((2, 3)), 0.5),
                 g.binary_cross_entropy_with_logits(p, np.zeros((2, 3))),
                 g.cross_entropy(p, [0, 2], label_smoothing=0.1), g.nll_loss(p, [1, 1])):
        assert g.value(loss).dtype == np.float32 and g.value(loss).shape == ()
        g.zero_grads()
        g.backward(loss)
        assert g.grad(p).dtype == np.float32


# ------------------------------------------------------------ PyTorch cross-checks
@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_matches_pytorch(eps, dtype, classes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, classes)) * 4
    lab = rng.integers(0, classes, 64)
    v, (gx,) = _grads(lambda g, n: g.cross_entropy(n, lab, label_smoothing=eps), x, dtype=dtype)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    xt = torch.tensor(x, dtype=tdt, requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(lab), label_smoothing=eps)
    lt.backward()
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(v, lt.item(), rtol=rtol)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=rtol * 10, atol=rtol * 1e-2)


TORCH_PAIR = {
    "mse": (lambda g, a, b, **r: g.mse_loss(a, b, **r), "mse_loss", {}),
    "l1": (lambda g, a, b, **r: g.l1_loss(a, b, **r), "l1_loss", {}),
    "huber": (lambda g, a, b, **r: g.huber_loss(a, b, **r), "huber_loss", {}),
    "huber_delta0.4": (lambda g, a, b, **r: g.huber_loss(a, b, delta=0.4, **r), "huber_loss", {"delta": 0.4}),
    "bce_with_logits": (lambda g, a, b, **r: g.binary_cross_entropy_with_logits(a, b, **r),
                        "binary_cross_entropy_with_logits", {}),
}


@pytest.mark.parametrize("name", sorted(TORCH_PAIR))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pair_losses_match_pytorch(name, dtype):
    torch = pytest.importorskip("torch")
    build, fname, kw = TORCH_PAIR[name]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 9)) * 2
    b = rng.uniform(0, 1, size=(16, 9)) if name.startswith("bce") else rng.standard_normal((16, 9))
    v, (ga, gb) = _grads(build, a, b, dtype=dtype)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    at = torch.tensor(a, dtype=tdt, requires_grad=True)
    bt = torch.tensor(b, dtype=tdt, requires_grad=True)
    lt = getattr(torch.nn.functional, fname)(at, bt, **kw)
    lt.backward()
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(v, lt.item(), rtol=rtol)
    np.testing.assert_allclose(ga, at.grad.numpy(), rtol=rtol * 10, atol=1e-9)
    np.testing.assert_allclose(gb, bt.grad.numpy(), rtol=rtol * 10, atol=1e-9)


def test_nll_loss_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    lp = np_log_softmax(rng.standard_normal((12, 6)))
    lab = rng.integers(0, 6, 12)
    v, (gx,) = _grads(lambda g, n: g.nll_loss(n, lab), lp)
    xt = torch.tensor(lp, requires_grad=True)
    lt = torch.nn.functional.nll_loss(xt, torch.tensor(lab))
    lt.backward()
    np.testing.assert_allclose(v, lt.item(), rtol=1e-14)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-14)


# ------------------------------------------------------------ options against PyTorch
def _tdt(torch, dtype):
    return torch.float32 if dtype == np.float32 else torch.float64


def _tols(dtype):
    """(rtol, grad rtol, atol) for float32 / float64 against PyTorch. The float32
    atol covers one rounding of O(1) terms that cancel (softplus(x) - x t near
    t = 1, sigmoid(x) - t): the two libraries round them in different orders."""
    return (3e-6, 2e-5, 1e-6) if dtype == np.float32 else (1e-12, 1e-11, 1e-14)


def _run_yscv(build, arrays, cot, dtype):
    """Value and gradients of build(g, *variables) with upstream ``cot`` (None: 1)."""
    g = yscv.Graph(dtype)
    nodes = [g.variable(a) for a in arrays]
    out = build(g, *nodes)
    g.backward(out, grad=None if cot is None else cot.astype(dtype))
    return g.value(out), [g.grad(n) for n in nodes]


def _run_torch(torch, fn, arrays, cot, dtype):
    ts = [torch.tensor(a, dtype=_tdt(torch, dtype), requires_grad=True) for a in arrays]
    out = fn(*ts)
    out.backward(None if cot is None else torch.tensor(cot, dtype=_tdt(torch, dtype)))
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


def _cotangent(reduction, shape, seed=11):
    return np.random.default_rng(seed).standard_normal(shape) if reduction == "none" else None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nd", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.3])
@pytest.mark.parametrize("ignore", [None, -100, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_options_match_pytorch(reduction, weighted, ignore, eps, nd, dtype):
    """Values and gradients for reduction x weight x ignore_index x label_smoothing x
    N-d (classes last here, on axis 1 in PyTorch)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    shape = (4, 3, 2, 7) if nd else (24, 7)
    x = rng.standard_normal(shape) * 3
    lab = rng.integers(0, 7, shape[:-1])
    kw = {}
    if ignore is not None:
        lab.flat[::4] = ignore
        kw["ignore_index"] = ignore
    w = rng.uniform(0.1, 3.0, 7) if weighted else None
    cot = _cotangent(reduction, lab.shape)
    v, (gx,) = _run_yscv(lambda g, n: g.cross_entropy(n, lab, weight=w, label_smoothing=eps,
                                                      reduction=reduction, **kw), [x], cot, dtype)
    tw = None if w is None else torch.tensor(w, dtype=_tdt(torch, dtype))
    tv, (tgx,) = _run_torch(
        torch, lambda t: torch.nn.functional.cross_entropy(
            t.movedim(-1, 1), torch.tensor(lab), weight=tw, label_smoothing=eps,
            reduction=reduction, **kw), [x], cot, dtype)
    rv, rg, ag = _tols(dtype)
    assert v.shape == tv.shape and v.dtype == dtype and gx.dtype == dtype
    np.testing.assert_allclose(v, tv, rtol=rv, atol=ag)
    np.testing.assert_allclose(gx, tgx, rtol=rg, atol=ag)
    if ignore is not None:
        assert not gx.reshape(-1, 7)[lab.reshape(-1) == ignore].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nd", [False, True])
@pytest.mark.parametrize("ignore", [None, -100, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_options_match_pytorch(reduction, weighted, ignore, nd, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    shape = (3, 4, 5) if nd else (12, 5)
    lp = np_log_softmax(rng.standard_normal(shape).reshape(-1, 5)).reshape(shape)
    lab = rng.integers(0, 5, shape[:-1])
    kw = {}
    if ignore is not None:
        lab.flat[1::3] = ignore
        kw["ignore_index"] = ignore
    w = rng.uniform(0.1, 3.0, 5) if weighted else None
    cot = _cotangent(reduction, lab.shape)
    v, (gx,) = _run_yscv(lambda g, n: g.nll_loss(n, lab, weight=w, reduction=reduction, **kw),
                         [lp], cot, dtype)
    tw = None if w is None else torch.tensor(w, dtype=_tdt(torch, dtype))
    tv, (tgx,) = _run_torch(
        torch, lambda t: torch.nn.functional.nll_loss(
            t.movedim(-1, 1), torch.tensor(lab), weight=tw, reduction=reduction, **kw),
        [lp], cot, dtype)
    rv, rg, ag = _tols(dtype)
    assert v.shape == tv.shape and v.dtype == dtype
    np.testing.assert_allclose(v, tv, rtol=rv, atol=ag)
    np.testing.assert_allclose(gx, tgx, rtol=rg, atol=ag)


BCE_WEIGHTS = {
    None: None,
    "last_axis": lambda rng: rng.uniform(0.2, 2.0, 6),
    "per_row": lambda rng: rng.uniform(0.2, 2.0, (4, 1, 1)),
    "full": lambda rng: rng.uniform(0.2, 2.0, (4, 3, 6)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pos_weight", [None, "last_axis", "per_row"])
@pytest.mark.parametrize("weight", [None, "last_axis", "full"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_options_match_pytorch(reduction, weight, pos_weight, dtype):
    """weight and pos_weight broadcast to the input as PyTorch; gradients to the
    logits AND the target."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 3, 6)) * 3
    t = rng.uniform(0, 1, (4, 3, 6))
    w = None if weight is None else BCE_WEIGHTS[weight](rng)
    pw = None if pos_weight is None else BCE_WEIGHTS[pos_weight](rng) * 2
    cot = _cotangent(reduction, x.shape)
    v, (gx, gt) = _run_yscv(lambda g, a, b: g.binary_cross_entropy_with_logits(
        a, b, weight=w, pos_weight=pw, reduction=reduction), [x, t], cot, dtype)
    conv = (lambda a: None if a is None else torch.tensor(a, dtype=_tdt(torch, dtype)))
    tv, (tgx, tgt) = _run_torch(torch, lambda a, b: torch.nn.functional.binary_cross_entropy_with_logits(
        a, b, weight=conv(w), pos_weight=conv(pw), reduction=reduction), [x, t], cot, dtype)
    rv, rg, ag = _tols(dtype)
    assert v.shape == tv.shape and v.dtype == dtype
    np.testing.assert_allclose(v, tv, rtol=rv, atol=ag)
    np.testing.assert_allclose(gx, tgx, rtol=rg, atol=ag)
    np.testing.assert_allclose(gt, tgt, rtol=rg, atol=ag)


@pytest.mark.parametrize("name", sorted(TORCH_PAIR))
@pytest.mark.parametrize("reduction", ["sum", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pair_loss_reductions_match_pytorch(name, reduction, dtype):
    torch = pytest.importorskip("torch")
    build, fname, kw = TORCH_PAIR[name]
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 2, 3)) * 2
    b = rng.uniform(0, 1, size=a.shape) if name.startswith("bce") else rng.standard_normal(a.shape)
    cot = _cotangent(reduction, a.shape)
    v, (ga, gb) = _run_yscv(lambda g, p, q: build(g, p, q, reduction=reduction), [a, b], cot, dtype)
    tv, (tga, tgb) = _run_torch(torch, lambda p, q: getattr(torch.nn.functional, fname)(
        p, q, reduction=reduction, **kw), [a, b], cot, dtype)
    rv, rg, ag = _tols(dtype)
    assert v.shape == tv.shape and v.dtype == dtype
    np.testing.assert_allclose(v, tv, rtol=rv, atol=ag)
    np.testing.assert_allclose(ga, tga, rtol=rg, atol=1e-9)
    np.testing.assert_allclose(gb, tgb, rtol=rg, atol=1e-9)


INF = float("inf")
X_INF = np.array([[0.0, -INF, 1.0, 2.0],
                  [-INF, 2.0, 0.0, -INF],
                  [1.0, 2.0, 3.0, 4.0],
                  [-INF, 0.5, 0.0, -1.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("labels", [[0, 1, 2, 3], [0, 1, 2, 0]], ids=["finite_targets",
                                                                      "a_minus_inf_target"])
def test_cross_entropy_with_minus_inf_logits_matches_pytorch(labels, reduction, weighted, eps,
                                                             dtype):
    """Issue 12.3: a -inf logit gave NaN (0 * -inf in the smoothing term even
    without smoothing). PyTorch: finite where the target's logit is finite and
    there is no smoothing, inf otherwise; gradients finite (compared where
    PyTorch's are finite, which is everywhere here)."""
    torch = pytest.importorskip("torch")
    lab = np.array(labels)
    w = np.array([0.5, 2.0, 1.0, 1.5]) if weighted else None
    cot = _cotangent(reduction, lab.shape)
    v, (gx,) = _run_yscv(lambda g, n: g.cross_entropy(n, lab, weight=w, label_smoothing=eps,
                                                      reduction=reduction), [X_INF], cot, dtype)
    tw = None if w is None else torch.tensor(w, dtype=_tdt(torch, dtype))
    tv, (tgx,) = _run_torch(torch, lambda t: torch.nn.functional.cross_entropy(
        t, torch.tensor(lab), weight=tw, label_smoothing=eps, reduction=reduction),
        [X_INF], cot, dtype)
    rv, rg, ag = _tols(dtype)
    assert not np.isnan(tv).any() and not np.isnan(v).any()
    np.testing.assert_allclose(v, tv, rtol=rv)          # inf where PyTorch has inf
    if eps == 0.0 and labels[3] == 3:
        assert np.all(np.isfinite(v))
    finite = np.isfinite(tgx)
    assert finite.all()
    np.testing.assert_allclose(gx[finite], tgx[finite], rtol=rg, atol=ag)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps", [0.0, 1.0])
def test_cross_entropy_nan_cases_follow_pytorch(eps, dtype):
    """Where PyTorch itself gives NaN we do too: label_smoothing=1 with a -inf
    target logit ((1 - eps) * inf) and a zero class weight on a -inf target
    logit (0 * inf)."""
    torch = pytest.importorskip("torch")
    x = np.array([[-INF, 0.0, 1.0], [0.0, 1.0, 2.0]])
    lab = np.array([0, 1])
    w = np.array([0.0, 1.0, 1.0]) if eps == 0.0 else None
    v, _ = _run_yscv(lambda g, n: g.cross_entropy(n, lab, weight=w, label_smoothing=eps,
                                                  reduction="none"), [x], np.ones(2), dtype)
    tw = None if w is None else torch.tensor(w, dtype=_tdt(torch, dtype))
    tv = torch.nn.functional.cross_entropy(torch.tensor(x, dtype=_tdt(torch, dtype)),
                                           torch.tensor(lab), weight=tw, label_smoothing=eps,
                                           reduction="none").numpy()
    assert np.isnan(tv[0]) and np.isnan(v[0])
    np.testing.assert_allclose(v[1], tv[1], rtol=_tols(dtype)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("weighted", [False, True])
def test_all_targets_ignored_match_pytorch(weighted, op, dtype):
    """mean: 0/0 = NaN as PyTorch; sum: 0; none: zeros; gradients zero."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(12).standard_normal((3, 2, 4))
    lab = np.full((3, 2), -100)
    w = np.array([1.0, 2.0, 3.0, 4.0]) if weighted else None
    tw = None if w is None else torch.tensor(w, dtype=_tdt(torch, dtype))
    for reduction in ("mean", "sum", "none"):
        cot = _cotangent(reduction, lab.shape)
        v, (gx,) = _run_yscv(lambda g, n: getattr(g, op)(n, lab, weight=w, reduction=reduction),
                             [x], cot, dtype)
        tv, (tgx,) = _run_torch(torch, lambda t: getattr(torch.nn.functional, op)(
            t.movedim(-1, 1), torch.tensor(lab), weight=tw, reduction=reduction), [x], cot, dtype)
        np.testing.assert_array_equal(v, tv)              # NaN == NaN here
        np.testing.assert_array_equal(gx, tgx)
        assert not gx.any()
        assert np.isnan(v) if reduction == "mean" else not v.any()


def test_two_positional_arguments_keep_the_defaults():
    """The Trainer calls every loss by name with two arguments: mean reduction,
    no weight, nothing ignored but -100."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((6, 4))
    lab = np.array([0, 1, 2, 3, 0, 1])
    g = yscv.Graph(np.float64)
    n = g.variable(x)
    np.testing.assert_allclose(g.value(g.cross_entropy(n, lab)), np_cross_entropy(lab)(x),
                               rtol=1e-13)
    np.testing.assert_allclose(g.value(g.nll_loss(n, lab)), np_nll(lab)(x), rtol=1e-13)
    t = rng.uniform(0, 1, (6, 4))
    for name, ref in (("mse_loss", lambda: np.mean((x - t) ** 2)),
                      ("l1_loss", lambda: np.mean(np.abs(x - t))),
                      ("binary_cross_entropy_with_logits", lambda: np_bce_logits(x, t))):
        out = getattr(g, name)(n, t)
        assert g.value(out).shape == ()
        np.testing.assert_allclose(g.value(out), ref(), rtol=1e-12)


def test_cross_entropy_saves_only_the_row_logsumexp_for_nd_and_options():
    g = yscv.Graph()
    x = g.variable(np.random.default_rng(0).standard_normal((4, 8, 10)))
    before = g.memory()["saved"]
    g.cross_entropy(x, np.arange(32).reshape(4, 8) % 10, weight=np.ones(10), label_smoothing=0.1,
                    reduction="none")
    assert g.memory()["saved"] - before == 32 * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("classes", [4, LONG])
def test_cross_entropy_minus_inf_logit_regression(classes, dtype):
    """Issue 12.3 with the default arguments: a -inf logit (masked class) made
    the mean loss NaN; PyTorch gives the finite loss, and a gradient of exactly
    0 on the masked logits."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(14).standard_normal((3, classes))
    x[0, 1] = x[1, 0] = x[2, classes - 1] = -INF
    lab = np.array([0, 1, 2])
    v, (gx,) = _grads(lambda g, n: g.cross_entropy(n, lab), x, dtype=dtype)
    xt = torch.tensor(x, dtype=_tdt(torch, dtype), requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(lab))
    lt.backward()
    assert np.isfinite(v)
    np.testing.assert_allclose(v, lt.item(), rtol=_tols(dtype)[0])
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=_tols(dtype)[1], atol=_tols(dtype)[2])
    assert gx[0, 1] == 0 and gx[1, 0] == 0 and gx[2, classes - 1] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bce_with_logits_pos_weight_is_stable_for_huge_logits(dtype):
    torch = pytest.importorskip("torch")
    x = np.array([[1e4, -1e4, 800.0, -800.0], [-1e4, 1e4, -30.0, 30.0]])
    t = np.array([[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.25, 0.75]])
    pw = np.array([2.0, 0.5, 3.0, 1.5])
    w = np.array([[1.0], [2.0]])
    v, (gx, gt) = _run_yscv(lambda g, a, b: g.binary_cross_entropy_with_logits(
        a, b, weight=w, pos_weight=pw, reduction="none"), [x, t], np.ones(x.shape), dtype)
    conv = (lambda a: torch.tensor(a, dtype=_tdt(torch, dtype)))
    tv, (tgx, tgt) = _run_torch(torch, lambda a, b: torch.nn.functional.binary_cross_entropy_with_logits(
        a, b, weight=conv(w), pos_weight=conv(pw), reduction="none"), [x, t], np.ones(x.shape), dtype)
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(gx)) and np.all(np.isfinite(gt))
    rv, rg, ag = _tols(dtype)
    np.testing.assert_allclose(v, tv, rtol=rv, atol=ag)
    np.testing.assert_allclose(gx, tgx, rtol=rg, atol=ag)
    np.testing.assert_allclose(gt, tgt, rtol=rg, atol=ag)


# ------------------------------------------------------------ the NumPy tier
def test_cross_entropy_tier_is_taken_by_size(monkeypatch):
    """[64, 10] logits (the README's job) run as NumPy operations, [64, 100]
    on the kernels: the kernels are called exactly when the tier says so."""
    import types

    from yscv.kernels import loss as kloss
    calls = []
    spy = types.SimpleNamespace(**{
        n: (lambda *a, _r=getattr(kloss, n), _n=n: calls.append(_n) or _r(*a))
        for n in ("cross_entropy_forward", "cross_entropy_backward")})
    monkeypatch.setattr(closs, "K", spy)
    monkeypatch.setattr(closs, "NUMPY_MAX_ELEMENTS", 4096)
    rng = np.random.default_rng(3)
    for shape, kernel in (((64, 10), False), ((64, 100), True)):
        calls.clear()
        g = yscv.Graph(np.float32)
        x = g.variable(rng.standard_normal(shape).astype(np.float32))
        g.backward(g.cross_entropy(x, rng.integers(0, shape[1], shape[0])))
        assert closs.numpy_tier(*shape) is not kernel
        assert calls == (["cross_entropy_forward", "cross_entropy_backward"] if kernel else [])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_cross_entropy_tiers_agree(dtype, weighted, eps):
    """The NumPy tier and the kernels: the same loss, log-sum-exp and
    gradient up to rounding, with weights, smoothing, an ignored row, huge
    and -inf logits, per-row and shared upstream gradients."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((40, 7)) * 3).astype(dtype)
    x[3] += dtype(1e4)
    x[5, 2] = -np.inf
    lab = rng.integers(0, 7, 40)
    lab[7] = -100
    lab[5] = 1
    w = rng.uniform(0.2, 2.0, 7).astype(dtype) if weighted else None
    w_k = w if weighted else np.empty(0, dtype)
    from yscv.kernels import loss as kloss
    loss_k, lse_k = kloss.cross_entropy_forward(x, lab, w_k, -100, eps)
    loss_n, lse_n = closs._forward_numpy(x, lab, w, -100, eps)
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-13)
    assert loss_n.dtype == lse_n.dtype == dtype
    np.testing.assert_allclose(loss_n, loss_k, **tol)
    np.testing.assert_allclose(lse_n, lse_k, rtol=tol["rtol"])
    assert loss_n[7] == 0 and lse_n[7] == 0
    for up in (rng.uniform(0.5, 2, 40).astype(dtype), np.array([0.25], dtype)):
        g_k = kloss.cross_entropy_backward(x, lab, lse_k, w_k, -100, eps, up)
        g_n = closs._backward_numpy(x, lab, lse_n, w, -100, eps, up)
        assert g_n.dtype == dtype and g_n.shape == x.shape
        np.testing.assert_allclose(g_n, g_k, **tol)
        assert not g_n[7].any()


# ================================================= losses of SPEC section 11 and CTC
# One block of its own: rows, bad arguments, their tests and the second-order
# column (gradgradcheck, and PyTorch's double backward through torch_build).
def _F(torch):
    return torch.nn.functional


def np_smooth_l1(beta, reduction="mean"):
    def f(p, t):
        d = np.abs(p - t)
        terms = d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
        return np_reduce(reduction)(terms)
    return f


def np_kl(reduction="mean", log_target=False):
    def f(x, t):
        terms = np.exp(t) * (t - x) if log_target else t * np.log(t) - t * x
        if reduction == "batchmean":
            return np.asarray(terms.sum() / x.shape[0])
        return np_reduce(reduction)(terms)
    return f


def np_bce_probs(weight=None, reduction="mean"):
    def f(p, t):
        terms = -(t * np.log(p) + (1 - t) * np.log(1 - p))
        return np_reduce(reduction)(terms if weight is None else terms * weight)
    return f


def np_cosine(axis=-1, eps=1e-8):
    def f(a, b):
        a, b = np.broadcast_arrays(a, b)
        na = np.maximum(np.sqrt((a * a).sum(axis=axis, keepdims=True)), eps)
        nb = np.maximum(np.sqrt((b * b).sum(axis=axis, keepdims=True)), eps)
        return ((a / na) * (b / nb)).sum(axis=axis)
    return f


def np_pdist(p=2.0, eps=1e-6, keepdim=False):
    def f(a, b):
        d = a - b + eps
        r = np.linalg.norm(d, ord=p, axis=-1, keepdims=keepdim) if p != 0 else \
            np.count_nonzero(d, axis=-1).astype(float)
        return np.asarray(r)
    return f


def np_triplet(margin=1.0, p=2.0, swap=False, reduction="mean"):
    def f(a, pos, neg):
        d = lambda x, y: np.linalg.norm(x - y + 1e-6, ord=p, axis=-1)  # noqa: E731
        dn = np.minimum(d(a, neg), d(pos, neg)) if swap else d(a, neg)
        return np_reduce(reduction)(np.maximum(margin + d(a, pos) - dn, 0))
    return f


def np_gaussian(full=False, reduction="mean", var_shape=None):
    def f(x, t, v):
        v = np.maximum(v.reshape(var_shape or v.shape), 1e-6)
        terms = 0.5 * (np.log(v) + (x - t) ** 2 / v) + (0.5 * np.log(2 * np.pi) if full else 0)
        return np_reduce(reduction)(terms)
    return f


def np_poisson(log_input=True, full=False, reduction="mean"):
    def f(x, t):
        terms = np.exp(x) - t * x if log_input else x - t * np.log(x + 1e-8)
        if full:
            ts = np.where(t > 1, t, 2.0)
            terms = terms + np.where(t > 1, ts * np.log(ts) - ts + 0.5 * np.log(2 * np.pi * ts), 0)
        return np_reduce(reduction)(terms)
    return f


def np_ctc_nll(lp, labels, tn, blank=0):
    """-log of the summed probability of every alignment, by the alpha
    recursion in probability space (float64, small T)."""
    ext = [blank]
    for lab in labels:
        ext += [int(lab), blank]
    y = np.exp(lp[:tn])
    a = np.zeros(len(ext))
    if tn == 0:
        return 0.0 if not labels else np.inf
    a[0] = y[0, ext[0]]
    if len(ext) > 1:
        a[1] = y[0, ext[1]]
    for t in range(1, tn):
        b = a.copy()
        for s in range(len(ext)):
            v = a[s] + (a[s - 1] if s > 0 else 0.0)
            if s > 1 and ext[s] != blank and ext[s] != ext[s - 2]:
                v += a[s - 2]
            b[s] = v * y[t, ext[s]]
        a = b
    total = a[-1] + (a[-2] if len(ext) > 1 else 0.0)
    return -np.log(total) if total > 0 else np.inf


def np_ctc(targets, il, tl, blank=0, reduction="mean", zero_infinity=False):
    """Reference of ctc_loss for padded [N, S] or concatenated targets."""
    def f(lp):
        batched = lp.ndim == 3
        lp3 = lp if batched else lp[:, None, :]
        tg = np.asarray(targets)
        ils, tls = np.atleast_1d(il), np.atleast_1d(tl)
        offs = np.concatenate(([0], np.cumsum(tls)[:-1])) if (batched and tg.ndim == 1) else None
        out = []
        for n in range(lp3.shape[1]):
            lab = (tg[offs[n]:offs[n] + tls[n]] if offs is not None else
                   np.atleast_2d(tg)[n, :tls[n]])
            v = np_ctc_nll(lp3[:, n], list(lab), ils[n], blank)
            out.append(0.0 if (zero_infinity and v == np.inf) else v)
        out = np.array(out)
        if reduction == "none":
            return out if batched else out.reshape(())
        if reduction == "sum":
            return np.asarray(out.sum())
        return np.asarray((out / np.maximum(tls, 1)).mean())
    return f


def torch_ctc_recursion(torch, lp, targets, il, tl, blank=0, reduction="mean",
                        zero_infinity=False):
    """ctc_loss written with torch ops (logsumexp over the alpha recursion):
    PyTorch's own ctc_loss has no double backward ("derivative for
    aten::_ctc_loss_backward is not implemented"), so the second-order
    column differentiates this, which test_ctc_torch_recursion_is_pytorchs_ctc_loss
    ties to torch.nn.functional.ctc_loss (value and gradient)."""
    batched = lp.dim() == 3
    lp3 = lp if batched else lp[:, None, :]
    tg = np.asarray(targets)
    ils, tls = np.atleast_1d(il), np.atleast_1d(tl)
    offs = np.concatenate(([0], np.cumsum(tls)[:-1])) if (batched and tg.ndim == 1) else None
    # log 0 as a large finite number: with -inf, torch's logsumexp backward
    # gives NaN (0 * inf) on the states no alignment reaches
    ninf = torch.tensor(-1e30, dtype=lp.dtype)
    losses = []
    for n in range(lp3.shape[1]):
        lab = tg[offs[n]:offs[n] + tls[n]] if offs is not None else np.atleast_2d(tg)[n, :tls[n]]
        ext = [blank]
        for v in lab:
            ext += [int(v), blank]
        y = lp3[:ils[n], n][:, ext]
        s = len(ext)
        alpha = torch.cat([y[0, :min(2, s)], ninf.expand(max(s - 2, 0))])
        for t in range(1, int(ils[n])):
            terms = [alpha, torch.cat([ninf.reshape(1), alpha[:-1]])]
            skip = [alpha[k - 2] if k > 1 and ext[k] != blank and ext[k] != ext[k - 2] else ninf
                    for k in range(s)]
            terms.append(torch.stack(skip))
            alpha = torch.logsumexp(torch.stack(terms), 0) + y[t]
        nll = -torch.logsumexp(alpha[-2:] if s > 1 else alpha, 0)
        if zero_infinity and nll > 1e29:
            nll = lp.sum() * 0
        losses.append(nll)
    per = torch.stack(losses)
    if reduction == "none":
        return per if batched else per.reshape(())
    if reduction == "sum":
        return per.sum()
    return (per / torch.tensor(np.maximum(tls, 1), dtype=lp.dtype)).mean()


def _torch_kl_mean(torch, x, t):
    import warnings
    with warnings.catch_warnings():   # PyTorch's note that "mean" is not "batchmean"
        warnings.simplefilter("ignore", UserWarning)
        return _F(torch).kl_div(x, t, reduction="mean")


def _two(shape_a, shape_b, low=-2, high=2, blow=None, bhigh=None):
    return lambda rng: (rng.uniform(low, high, size=shape_a),
                        rng.uniform(low if blow is None else blow,
                                    high if bhigh is None else bhigh, size=shape_b))


BCE_W34 = np.random.default_rng(3).uniform(0.5, 2.0, size=(3, 4))
Y6 = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
CTC_TG = np.array([[1, 2, 2], [3, 1, 0]])   # padded; sample 1 uses 2 labels (the 0 is padding)
CTC_IL, CTC_TL = np.array([6, 5]), np.array([3, 2])
CTC_CAT = np.array([1, 1, 2, 3])            # concatenated: [1, 1] and [2, 3]
CTC_CAT_TL = np.array([2, 2])
CTC_IMPOSSIBLE_TG = np.array([[1, 1, 1], [2, 3, 0]])   # sample 0 needs T >= 5, gets 3


def _ctc_lp(shape):
    """log_softmax rows of random logits (what ctc_loss is fed)."""
    def make(rng):
        x = rng.uniform(-2, 2, size=shape)
        return (x - np.log(np.exp(x).sum(axis=-1, keepdims=True)),)
    return make


def _tb_ctc(**kw):
    def build(torch, lp):
        return torch_ctc_recursion(torch, lp, **kw)
    return build


S11_CASES = [
    # smooth_l1_loss
    OpCase(Op.SMOOTH_L1_LOSS, lambda g, p, t: g.smooth_l1_loss(p, t), (), np_smooth_l1(1.0),
           name="smooth_l1_beta1", inputs=_huber_pair((3, 4), 1.0),
           torch_build=lambda torch, p, t: _F(torch).smooth_l1_loss(p, t)),
    OpCase(Op.SMOOTH_L1_LOSS, lambda g, p, t: g.smooth_l1_loss(p, t, beta=0.5, reduction="sum"),
           (), np_smooth_l1(0.5, "sum"), name="smooth_l1_beta0.5_sum",
           inputs=_huber_pair((2, 5), 0.5),
           torch_build=lambda torch, p, t: _F(torch).smooth_l1_loss(p, t, beta=0.5, reduction="sum")),
    OpCase(Op.SMOOTH_L1_LOSS, lambda g, p, t: g.smooth_l1_loss(p, t, beta=0.0, reduction="none"),
           (), np_smooth_l1(0.0, "none"), name="smooth_l1_beta0_is_l1_none",
           inputs=_pair_away((2, 3)),
           torch_build=lambda torch, p, t: _F(torch).smooth_l1_loss(p, t, beta=0.0,
                                                                     reduction="none")),
    # kl_div
    OpCase(Op.KL_DIV, lambda g, x, t: g.kl_div(x, t), (), np_kl(), name="kl_div_mean",
           inputs=_two((3, 4), (3, 4), blow=0.1, bhigh=1.0),
           torch_build=lambda torch, x, t: _torch_kl_mean(torch, x, t)),
    OpCase(Op.KL_DIV, lambda g, x, t: g.kl_div(x, t, reduction="batchmean"), (),
           np_kl("batchmean"), name="kl_div_batchmean",
           inputs=_two((3, 4), (3, 4), blow=0.1, bhigh=1.0),
           torch_build=lambda torch, x, t: _F(torch).kl_div(x, t, reduction="batchmean")),
    OpCase(Op.KL_DIV, lambda g, x, t: g.kl_div(x, t, reduction="none", log_target=True), (),
           np_kl("none", True), name="kl_div_log_target_none", inputs=_two((2, 3), (2, 3)),
           torch_build=lambda torch, x, t: _F(torch).kl_div(x, t, reduction="none",
                                                            log_target=True)),
    OpCase(Op.KL_DIV, lambda g, x, t: g.kl_div(x, t, reduction="sum", log_target=True), (),
           np_kl("sum", True), name="kl_div_log_target_sum", inputs=_two((4,), (4,)),
           torch_build=lambda torch, x, t: _F(torch).kl_div(x, t, reduction="sum",
                                                            log_target=True)),
    # binary_cross_entropy
    OpCase(Op.BINARY_CROSS_ENTROPY, lambda g, p, t: g.binary_cross_entropy(p, t), (),
           np_bce_probs(), name="bce_probs", inputs=_two((3, 4), (3, 4), 0.1, 0.9, 0.0, 1.0),
           torch_build=lambda torch, p, t: _F(torch).binary_cross_entropy(p, t)),
    OpCase(Op.BINARY_CROSS_ENTROPY,
           lambda g, p, t: g.binary_cross_entropy(p, t, weight=BCE_W34, reduction="sum"), (),
           np_bce_probs(BCE_W34, "sum"), name="bce_probs_weight_sum",
           inputs=_two((3, 4), (3, 4), 0.1, 0.9, 0.0, 1.0),
           torch_build=lambda torch, p, t: _F(torch).binary_cross_entropy(
               p, t, weight=torch.tensor(BCE_W34), reduction="sum")),
    OpCase(Op.BINARY_CROSS_ENTROPY,
           lambda g, p, t: g.binary_cross_entropy(p, t, weight=BCE_W34[0], reduction="none"), (),
           np_bce_probs(BCE_W34[0], "none"), name="bce_probs_row_weight_none",
           inputs=_two((2, 4), (2, 4), 0.1, 0.9, 0.0, 1.0),
           torch_build=lambda torch, p, t: _F(torch).binary_cross_entropy(
               p, t, weight=torch.tensor(BCE_W34[0]), reduction="none")),
    # cosine_similarity
    OpCase(Op.COSINE_SIMILARITY, lambda g, a, b: g.cosine_similarity(a, b), [(3, 4), (3, 4)],
           np_cosine(), name="cosine_similarity",
           torch_build=lambda torch, a, b: _F(torch).cosine_similarity(a, b, dim=-1)),
    OpCase(Op.COSINE_SIMILARITY, lambda g, a, b: g.cosine_similarity(a, b, axis=0),
           [(3, 2, 4), (2, 4)], np_cosine(0), name="cosine_similarity_axis0_broadcast",
           torch_build=lambda torch, a, b: _F(torch).cosine_similarity(a, b, dim=0)),
    # pairwise_distance
    OpCase(Op.PAIRWISE_DISTANCE, lambda g, a, b: g.pairwise_distance(a, b), [(3, 4), (3, 4)],
           np_pdist(), name="pairwise_distance_p2",
           torch_build=lambda torch, a, b: _F(torch).pairwise_distance(a, b)),
    OpCase(Op.PAIRWISE_DISTANCE, lambda g, a, b: g.pairwise_distance(a, b, p=1.0),
           [(3, 4), (4,)], np_pdist(1.0), name="pairwise_distance_p1_broadcast",
           torch_build=lambda torch, a, b: _F(torch).pairwise_distance(a, b, p=1.0)),
    OpCase(Op.PAIRWISE_DISTANCE, lambda g, a, b: g.pairwise_distance(a, b, p=3.0, keepdim=True),
           [(2, 3), (2, 3)], np_pdist(3.0, keepdim=True), name="pairwise_distance_p3_keepdim",
           torch_build=lambda torch, a, b: _F(torch).pairwise_distance(a, b, p=3.0,
                                                                      keepdim=True)),
    OpCase(Op.PAIRWISE_DISTANCE, lambda g, a, b: g.pairwise_distance(a, b, p=1.5, eps=0.0),
           [(2, 3), (2, 3)], np_pdist(1.5, 0.0), name="pairwise_distance_p1.5_eps0",
           torch_build=lambda torch, a, b: _F(torch).pairwise_distance(a, b, p=1.5, eps=0.0)),
    OpCase(Op.PAIRWISE_DISTANCE, lambda g, a, b: g.pairwise_distance(a, b, p=float("inf")),
           [(3, 4), (3, 4)], np_pdist(np.inf), name="pairwise_distance_inf",
           torch_build=lambda torch, a, b: _F(torch).pairwise_distance(a, b, p=float("inf"))),
    OpCase(Op.PAIRWISE_DISTANCE, lambda g, a, b: g.pairwise_distance(a, b, p=0.0),
           [(2, 3), (2, 3)], np_pdist(0.0), name="pairwise_distance_p0_zero_gradient",
           torch_build=lambda torch, a, b: _F(torch).pairwise_distance(a, b, p=0.0)),
    # triplet_margin_loss
    OpCase(Op.TRIPLET_MARGIN_LOSS, lambda g, a, p, n: g.triplet_margin_loss(a, p, n),
           [(4, 3), (4, 3), (4, 3)], np_triplet(), name="triplet_margin_loss",
           torch_build=lambda torch, a, p, n: _F(torch).triplet_margin_loss(a, p, n)),
    OpCase(Op.TRIPLET_MARGIN_LOSS,
           lambda g, a, p, n: g.triplet_margin_loss(a, p, n, margin=2.0, p=1.0, swap=True,
                                                    reduction="none"),
           [(4, 3), (4, 3), (4, 3)], np_triplet(2.0, 1.0, True, "none"), name="triplet_swap_p1_none",
           seed=1, torch_build=lambda torch, a, p, n: _F(torch).triplet_margin_loss(
               a, p, n, margin=2.0, p=1.0, swap=True, reduction="none")),
    OpCase(Op.TRIPLET_MARGIN_LOSS,
           lambda g, a, p, n: g.triplet_margin_loss(a, p, n, margin=3.0, reduction="sum"),
           [(3,), (3,), (3,)], np_triplet(3.0, reduction="sum"), name="triplet_1d_sum",
           torch_build=lambda torch, a, p, n: _F(torch).triplet_margin_loss(
               a, p, n, margin=3.0, reduction="sum")),
    # margin_ranking_loss
    OpCase(Op.MARGIN_RANKING_LOSS, lambda g, a, b: g.margin_ranking_loss(a, b, Y6, margin=0.3),
           [(6,), (6,)], lambda a, b: np.asarray(np.mean(np.maximum(0, -Y6 * (a - b) + 0.3))),
           name="margin_ranking_array_y",
           torch_build=lambda torch, a, b: _F(torch).margin_ranking_loss(
               a, b, torch.tensor(Y6), margin=0.3)),
    OpCase(Op.MARGIN_RANKING_LOSS,
           lambda g, a, b, y: g.margin_ranking_loss(a, b, y, margin=0.5, reduction="none"),
           [(2, 3), (2, 3), (2, 3)], lambda a, b, y: np.maximum(0, -y * (a - b) + 0.5),
           name="margin_ranking_node_y_none",
           torch_build=lambda torch, a, b, y: _F(torch).margin_ranking_loss(
               a, b, y, margin=0.5, reduction="none")),
    # gaussian_nll_loss
    OpCase(Op.GAUSSIAN_NLL_LOSS, lambda g, x, t, v: g.gaussian_nll_loss(x, t, v), (),
           np_gaussian(), name="gaussian_nll",
           inputs=lambda rng: (rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4)),
                               rng.uniform(0.5, 2, (3, 4))),
           torch_build=lambda torch, x, t, v: _F(torch).gaussian_nll_loss(x, t, v)),
    OpCase(Op.GAUSSIAN_NLL_LOSS,
           lambda g, x, t, v: g.gaussian_nll_loss(x, t, v, full=True, reduction="sum"), (),
           np_gaussian(True, "sum", (3, 1)), name="gaussian_nll_var_one_axis_short_full_sum",
           inputs=lambda rng: (rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4)),
                               rng.uniform(0.5, 2, (3,))),
           torch_build=lambda torch, x, t, v: _F(torch).gaussian_nll_loss(
               x, t, v, full=True, reduction="sum")),
    OpCase(Op.GAUSSIAN_NLL_LOSS,
           lambda g, x, t, v: g.gaussian_nll_loss(x, t, v, reduction="none"), (),
           np_gaussian(reduction="none"), name="gaussian_nll_var_size1_axis_none",
           inputs=lambda rng: (rng.uniform(-2, 2, (2, 3)), rng.uniform(-2, 2, (2, 3)),
                               rng.uniform(0.5, 2, (2, 1))),
           torch_build=lambda torch, x, t, v: _F(torch).gaussian_nll_loss(x, t, v,
                                                                         reduction="none")),
    OpCase(Op.GAUSSIAN_NLL_LOSS, lambda g, x, t: g.gaussian_nll_loss(x, t, 0.7), [(2, 3), (2, 3)],
           lambda x, t: np_gaussian()(x, t, np.full((2, 3), 0.7)), name="gaussian_nll_float_var",
           torch_build=lambda torch, x, t: _F(torch).gaussian_nll_loss(x, t, 0.7)),
    # poisson_nll_loss
    OpCase(Op.POISSON_NLL_LOSS, lambda g, x, t: g.poisson_nll_loss(x, t), (), np_poisson(),
           name="poisson_nll_log_input", inputs=_two((3, 4), (3, 4), -1, 1, 0, 3),
           torch_build=lambda torch, x, t: _F(torch).poisson_nll_loss(x, t)),
    OpCase(Op.POISSON_NLL_LOSS,
           lambda g, x, t: g.poisson_nll_loss(x, t, log_input=False, reduction="sum"), (),
           np_poisson(False, reduction="sum"), name="poisson_nll_rates_sum",
           inputs=_two((3, 4), (3, 4), 0.5, 3, 0, 3),
           torch_build=lambda torch, x, t: _F(torch).poisson_nll_loss(
               x, t, log_input=False, reduction="sum")),
    OpCase(Op.POISSON_NLL_LOSS,
           lambda g, x, t: g.poisson_nll_loss(x, t, full=True, reduction="none"), (),
           np_poisson(full=True, reduction="none"), name="poisson_nll_full_none",
           inputs=_two((3, 4), (3, 4), -1, 1, 0.2, 4),
           torch_build=lambda torch, x, t: _F(torch).poisson_nll_loss(x, t, full=True,
                                                                      reduction="none")),
    # ctc_loss
    OpCase(Op.CTC_LOSS, lambda g, lp: g.ctc_loss(lp, CTC_TG, CTC_IL, CTC_TL), (),
           np_ctc(CTC_TG, CTC_IL, CTC_TL), name="ctc_padded_mean", inputs=_ctc_lp((6, 2, 4)),
           torch_build=_tb_ctc(targets=CTC_TG, il=CTC_IL, tl=CTC_TL)),
    OpCase(Op.CTC_LOSS, lambda g, lp: g.ctc_loss(lp, CTC_CAT, [5, 4], CTC_CAT_TL, reduction="sum"),
           (), np_ctc(CTC_CAT, [5, 4], CTC_CAT_TL, reduction="sum"),
           name="ctc_concatenated_repeat_sum", inputs=_ctc_lp((5, 2, 4)),
           torch_build=_tb_ctc(targets=CTC_CAT, il=[5, 4], tl=CTC_CAT_TL, reduction="sum")),
    OpCase(Op.CTC_LOSS, lambda g, lp: g.ctc_loss(lp, CTC_TG, [4, 3], [2, 0], blank=3,
                                                 reduction="none"),
           (), np_ctc(CTC_TG, [4, 3], [2, 0], blank=3, reduction="none"),
           name="ctc_blank3_empty_target_none", inputs=_ctc_lp((4, 2, 4)),
           torch_build=_tb_ctc(targets=CTC_TG, il=[4, 3], tl=[2, 0], blank=3, reduction="none")),
    OpCase(Op.CTC_LOSS, lambda g, lp: g.ctc_loss(lp, CTC_IMPOSSIBLE_TG, [3, 3], [3, 2],
                                                 zero_infinity=True, reduction="none"),
           (), np_ctc(CTC_IMPOSSIBLE_TG, [3, 3], [3, 2], zero_infinity=True, reduction="none"),
           name="ctc_zero_infinity", inputs=_ctc_lp((3, 2, 4)),
           torch_build=_tb_ctc(targets=CTC_IMPOSSIBLE_TG, il=[3, 3], tl=[3, 2],
                               zero_infinity=True, reduction="none")),
    OpCase(Op.CTC_LOSS, lambda g, lp: g.ctc_loss(lp, np.array([2, 1]), 4, 2), (),
           np_ctc(np.array([2, 1]), 4, 2), name="ctc_unbatched", inputs=_ctc_lp((4, 3)),
           torch_build=_tb_ctc(targets=np.array([2, 1]), il=4, tl=2)),
]

S11_BAD = [
    BadCase(Op.SMOOTH_L1_LOSS, "smooth_l1_negative_beta", _leaves((3,), (3,)),
            lambda g, p, t: g.smooth_l1_loss(p, t, beta=-1.0), ValueError,
            "smooth_l1_loss: beta must be >= 0"),
    BadCase(Op.SMOOTH_L1_LOSS, "smooth_l1_shape_mismatch", _leaves((3,), (4,)),
            lambda g, p, t: g.smooth_l1_loss(p, t), yscv.ShapeError, "smooth_l1_loss: pred"),
    BadCase(Op.SMOOTH_L1_LOSS, "smooth_l1_bad_reduction", _leaves((3,), (3,)),
            lambda g, p, t: g.smooth_l1_loss(p, t, reduction="avg"), ValueError,
            "smooth_l1_loss: reduction"),
    BadCase(Op.KL_DIV, "kl_div_batchmean_only_for_kl", _leaves((3,), (3,)),
            lambda g, p, t: g.kl_div(p, t, reduction="batch"), ValueError, "kl_div: reduction"),
    BadCase(Op.KL_DIV, "kl_div_log_target_not_bool", _leaves((3,), (3,)),
            lambda g, p, t: g.kl_div(p, t, log_target="yes"), TypeError,
            "kl_div: log_target must be a bool"),
    BadCase(Op.KL_DIV, "kl_div_shape_mismatch", _leaves((3, 2), (3,)),
            lambda g, p, t: g.kl_div(p, t), yscv.ShapeError, "kl_div"),
    BadCase(Op.BINARY_CROSS_ENTROPY, "bce_probs_out_of_range",
            lambda g: (g.variable(np.array([0.5, 1.5])), g.variable(np.ones(2))),
            lambda g, p, t: g.binary_cross_entropy(p, t), ValueError,
            r"binary_cross_entropy: every element of probs must be in \[0, 1\], got probs\[1\]=1.5"),
    BadCase(Op.BINARY_CROSS_ENTROPY, "bce_probs_nan",
            lambda g: (g.variable(np.array([np.nan, 0.5])), g.variable(np.ones(2))),
            lambda g, p, t: g.binary_cross_entropy(p, t), ValueError, r"probs\[0\]=nan"),
    BadCase(Op.BINARY_CROSS_ENTROPY, "bce_weight_shape",
            lambda g: (g.variable(np.full((2, 3), 0.5)), g.variable(np.ones((2, 3)))),
            lambda g, p, t: g.binary_cross_entropy(p, t, weight=np.ones(2)), yscv.ShapeError,
            r"binary_cross_entropy: weight of shape \(2,\)"),
    BadCase(Op.COSINE_SIMILARITY, "cosine_axis_out_of_range", _leaves((3, 4), (3, 4)),
            lambda g, a, b: g.cosine_similarity(a, b, axis=2), ValueError,
            "cosine_similarity: axis=2 is out of range"),
    BadCase(Op.COSINE_SIMILARITY, "cosine_no_broadcast", _leaves((3, 4), (3, 5)),
            lambda g, a, b: g.cosine_similarity(a, b), yscv.ShapeError,
            "cosine_similarity: the shapes do not broadcast"),
    BadCase(Op.COSINE_SIMILARITY, "cosine_negative_eps", _leaves((3,), (3,)),
            lambda g, a, b: g.cosine_similarity(a, b, eps=-1.0), ValueError,
            "cosine_similarity: eps must be >= 0"),
    BadCase(Op.PAIRWISE_DISTANCE, "pairwise_negative_p", _leaves((3,), (3,)),
            lambda g, a, b: g.pairwise_distance(a, b, p=-1), ValueError,
            "pairwise_distance: p must be >= 0"),
    BadCase(Op.PAIRWISE_DISTANCE, "pairwise_0d", _leaves((), ()),
            lambda g, a, b: g.pairwise_distance(a, b), yscv.ShapeError,
            "pairwise_distance: the inputs need a last axis"),
    BadCase(Op.TRIPLET_MARGIN_LOSS, "triplet_margin_not_positive", _leaves((2, 3), (2, 3), (2, 3)),
            lambda g, a, p, n: g.triplet_margin_loss(a, p, n, margin=0.0), ValueError,
            "triplet_margin_loss: margin must be > 0"),
    BadCase(Op.TRIPLET_MARGIN_LOSS, "triplet_ndim_differs", _leaves((2, 3), (3,), (2, 3)),
            lambda g, a, p, n: g.triplet_margin_loss(a, p, n), yscv.ShapeError,
            "triplet_margin_loss: the inputs must have the same number of dimensions"),
    BadCase(Op.MARGIN_RANKING_LOSS, "margin_ranking_ndim_differs", _leaves((3,), (3,)),
            lambda g, a, b: g.margin_ranking_loss(a, b, np.ones((1, 3))), yscv.ShapeError,
            "margin_ranking_loss: the inputs must have the same number of dimensions"),
    BadCase(Op.MARGIN_RANKING_LOSS, "margin_ranking_margin_str", _leaves((3,), (3,)),
            lambda g, a, b: g.margin_ranking_loss(a, b, np.ones(3), margin="1"), TypeError,
            "margin_ranking_loss: margin must be a real number"),
    BadCase(Op.GAUSSIAN_NLL_LOSS, "gaussian_negative_var", _leaves((2, 3), (2, 3)),
            lambda g, x, t: g.gaussian_nll_loss(x, t, -np.ones((2, 3))), ValueError,
            r"gaussian_nll_loss: var must be >= 0, got var.flat\[0\]=-1.0"),
    BadCase(Op.GAUSSIAN_NLL_LOSS, "gaussian_var_shape", _leaves((2, 3), (2, 3)),
            lambda g, x, t: g.gaussian_nll_loss(x, t, np.ones((3, 2))), yscv.ShapeError,
            r"gaussian_nll_loss: var of shape \(3, 2\) does not fit"),
    BadCase(Op.GAUSSIAN_NLL_LOSS, "gaussian_target_shape", _leaves((2, 3), (3,)),
            lambda g, x, t: g.gaussian_nll_loss(x, t, np.ones((2, 3))), yscv.ShapeError,
            "gaussian_nll_loss: input has shape"),
    BadCase(Op.POISSON_NLL_LOSS, "poisson_full_not_bool", _leaves((2,), (2,)),
            lambda g, x, t: g.poisson_nll_loss(x, t, full=1), TypeError,
            "poisson_nll_loss: full must be a bool"),
    BadCase(Op.POISSON_NLL_LOSS, "poisson_shape_mismatch", _leaves((2,), (3,)),
            lambda g, x, t: g.poisson_nll_loss(x, t), yscv.ShapeError, "poisson_nll_loss"),
    BadCase(Op.CTC_LOSS, "ctc_input_length_over_T", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 2], [1, 1]], [4, 5], [2, 2]), ValueError,
            r"ctc_loss: input_lengths\[1\]=5 is out of range: at most T=4"),
    BadCase(Op.CTC_LOSS, "ctc_negative_input_length", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 2], [1, 1]], [4, -1], [2, 2]), ValueError,
            r"ctc_loss: input_lengths\[1\]=-1 is negative"),
    BadCase(Op.CTC_LOSS, "ctc_target_length_over_S", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 2], [1, 1]], [4, 4], [3, 2]), ValueError,
            r"ctc_loss: target_lengths\[0\]=3 is out of range: at most S=2"),
    BadCase(Op.CTC_LOSS, "ctc_concatenated_length_sum", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [1, 2, 1], [4, 4], [2, 2]), ValueError,
            r"ctc_loss: concatenated targets must hold sum\(target_lengths\)=4 labels, got 3"),
    BadCase(Op.CTC_LOSS, "ctc_lengths_count", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 2], [1, 1]], [4, 4, 4], [2, 2]), yscv.ShapeError,
            "ctc_loss: input_lengths must hold one length per sample"),
    BadCase(Op.CTC_LOSS, "ctc_blank_in_targets", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 0], [1, 1]], [4, 4], [2, 2]), ValueError,
            "ctc_loss: targets hold the blank label 0"),
    BadCase(Op.CTC_LOSS, "ctc_label_out_of_range", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 3], [1, 1]], [4, 4], [2, 2]), IndexError,
            "ctc_loss: targets hold label 3 .* out of range for 3 classes"),
    BadCase(Op.CTC_LOSS, "ctc_blank_out_of_range", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 2], [1, 1]], [4, 4], [2, 2], blank=3), ValueError,
            "ctc_loss: blank=3 is out of range"),
    BadCase(Op.CTC_LOSS, "ctc_float_targets", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1.0, 2.0], [1.0, 1.0]], [4, 4], [2, 2]), TypeError,
            "ctc_loss: targets must be an integer array"),
    BadCase(Op.CTC_LOSS, "ctc_log_probs_1d", _leaves((4,)),
            lambda g, lp: g.ctc_loss(lp, [1], [4], [1]), yscv.ShapeError,
            r"ctc_loss: log_probs must be \[T, N, C\]"),
    BadCase(Op.CTC_LOSS, "ctc_targets_rows", _leaves((4, 2, 3)),
            lambda g, lp: g.ctc_loss(lp, [[1, 2]], [4, 4], [2, 2]), yscv.ShapeError,
            r"ctc_loss: targets must be \[2, S\]"),
]

CASES += S11_CASES
BAD += S11_BAD
test_forward_s11, test_gradcheck_s11, test_bad_arguments_s11 = make_op_tests(S11_CASES, S11_BAD)
test_second_order_s11 = make_second_order_tests(S11_CASES)


# ------------------------------------------------ section 11 against PyTorch
def _torch_ctc_args(torch, targets, il, tl):
    return (torch.as_tensor(np.asarray(targets)), torch.as_tensor(np.asarray(il)),
            torch.as_tensor(np.asarray(tl)))


CTC_SETUPS = {   # (T, N, C), targets, input_lengths, target_lengths, options
    "padded": ((7, 3, 5), np.array([[1, 2, 2], [3, 4, 0], [4, 4, 4]]), [7, 6, 7], [3, 2, 3], {}),
    "concatenated": ((6, 2, 4), np.array([1, 1, 2, 3]), [6, 5], [2, 2], {}),
    "blank_last": ((5, 2, 4), np.array([[0, 1], [2, 2]]), [5, 5], [2, 1], {"blank": 3}),
    "empty_and_zero_length": ((4, 3, 3), np.array([[1, 2], [1, 1], [2, 0]]), [4, 0, 4],
                              [2, 0, 0], {}),
    "impossible": ((3, 2, 4), np.array([[1, 1, 1], [2, 3, 0]]), [3, 3], [3, 2], {}),
    "impossible_zero_infinity": ((3, 2, 4), np.array([[1, 1, 1], [2, 3, 0]]), [3, 3], [3, 2],
                                 {"zero_infinity": True}),
}


@pytest.mark.parametrize("setup", list(CTC_SETUPS))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ctc_loss_matches_pytorch(setup, reduction, dtype):
    """Value and logits gradient (through log_softmax, how ctc_loss is fed)
    equal torch.nn.functional.ctc_loss's, NaN and inf included."""
    torch = pytest.importorskip("torch")
    shape, targets, il, tl, kw = CTC_SETUPS[setup]
    x = np.random.default_rng(4).uniform(-3, 3, size=shape).astype(dtype)
    g = yscv.Graph(dtype)
    xv = g.variable(x)
    loss = g.ctc_loss(g.log_softmax(xv), targets, il, tl, reduction=reduction, **kw)
    cot = np.random.default_rng(5).uniform(0.5, 1.5, size=g.value(loss).shape).astype(dtype)
    g.backward(loss, grad=cot)
    xt = torch.tensor(x, requires_grad=True)
    lt = _F(torch).ctc_loss(xt.log_softmax(-1), *_torch_ctc_args(torch, targets, il, tl),
                            reduction=reduction, **kw)
    lt.backward(torch.tensor(cot))
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    assert g.value(loss).dtype == dtype and g.grad(xv).dtype == dtype
    np.testing.assert_allclose(g.value(loss), lt.detach().numpy(), **tol)
    np.testing.assert_allclose(g.grad(xv), xt.grad.numpy(), equal_nan=True, **tol)


def test_ctc_loss_gradient_is_the_derivative_torchs_adds_exp_log_probs():
    """d loss / d log_probs is the true derivative (gradcheck holds for any
    log_probs); PyTorch's kernel returns it plus exp(log_probs) at t < T_n,
    which cancels through a log_softmax (docs/ops/loss.md)."""
    torch = pytest.importorskip("torch")
    shape, targets, il, tl, _ = CTC_SETUPS["padded"]
    lp = np.random.default_rng(6).uniform(-3, 0, size=shape)   # not normalised
    g = yscv.Graph(np.float64)
    v = g.variable(lp)
    g.backward(g.ctc_loss(v, targets, il, tl, reduction="sum"))
    lt = torch.tensor(lp, requires_grad=True)
    _F(torch).ctc_loss(lt, *_torch_ctc_args(torch, targets, il, tl), reduction="sum").backward()
    valid = np.arange(shape[0])[:, None, None] < np.asarray(il)[None, :, None]
    np.testing.assert_allclose(g.grad(v) + np.exp(lp) * valid, lt.grad.numpy(), rtol=1e-10,
                               atol=1e-12)
    yscv.gradcheck(lambda g, x: g.ctc_loss(x, targets, il, tl, reduction="sum"), [lp])


@pytest.mark.parametrize("name", ["padded", "concatenated", "blank_last", "impossible_zero_infinity"])
def test_ctc_torch_recursion_is_pytorchs_ctc_loss(name):
    """The torch-ops recursion the second-order column differentiates gives
    torch.nn.functional.ctc_loss's value and logits gradient."""
    torch = pytest.importorskip("torch")
    shape, targets, il, tl, kw = CTC_SETUPS[name]
    x = torch.tensor(np.random.default_rng(8).uniform(-3, 3, size=shape), requires_grad=True)
    for reduction in ("mean", "sum", "none"):
        ref = _F(torch).ctc_loss(x.log_softmax(-1), *_torch_ctc_args(torch, targets, il, tl),
                                 reduction=reduction, **kw)
        mine = torch_ctc_recursion(torch, x.log_softmax(-1), targets, np.asarray(il),
                                   np.asarray(tl), reduction=reduction, **kw)
        torch.testing.assert_close(mine, ref, rtol=1e-10, atol=1e-12)
        (ga,) = torch.autograd.grad(ref.sum(), x)
        (gb,) = torch.autograd.grad(mine.sum(), x)
        torch.testing.assert_close(gb, ga, rtol=1e-10, atol=1e-12)


def test_ctc_loss_second_derivative_through_log_softmax():
    """create_graph=True through ctc_loss (PyTorch raises "derivative for
    aten::_ctc_loss_backward is not implemented"): a Hessian-vector product
    equals finite differences of the first derivative."""
    shape, targets, il, tl, _ = CTC_SETUPS["padded"]
    x = np.random.default_rng(9).uniform(-2, 2, size=(5, 3, 5))
    il = [5, 4, 5]
    yscv.gradgradcheck(lambda g, v: g.ctc_loss(g.log_softmax(v), targets, il, tl), [x])


def test_ctc_loss_saves_nll_and_log_alpha_and_copies_targets():
    shape, targets, il, tl, _ = CTC_SETUPS["padded"]
    t = targets.copy()
    g = yscv.Graph(np.float64)
    lp = g.variable(np.log(np.full(shape, 1.0 / shape[2])))
    out = g.ctc_loss(lp, t, il, tl, reduction="none")
    t[:] = 0
    nll, alpha = g._saved[out.index]
    assert nll.shape == (3,) and alpha.shape == (3, 7, 7)
    np.testing.assert_allclose(g.value(out), np_ctc(targets, il, tl, reduction="none")(
        g.value(lp)), rtol=1e-12)


# ops whose PyTorch gradient is not the derivative of the value at one edge:
# norms floored without differentiating the floor (cosine's eps, gaussian's
# var). Rows outside the table (gradcheck would disagree by design), checked
# against PyTorch's first and second derivatives.
EDGE_ROWS = [
    OpCase(Op.COSINE_SIMILARITY, lambda g, a, b: g.cosine_similarity(a, b, eps=0.5),
           (), np_cosine(-1, 0.5), name="cosine_norm_under_eps",
           inputs=_two((2, 3), (2, 3), -0.2, 0.2),
           torch_build=lambda torch, a, b: _F(torch).cosine_similarity(a, b, eps=0.5)),
    OpCase(Op.GAUSSIAN_NLL_LOSS, lambda g, x, t, v: g.gaussian_nll_loss(x, t, v, eps=0.3), (),
           None, name="gaussian_var_under_eps",
           inputs=lambda rng: (rng.uniform(-2, 2, (2, 3)), rng.uniform(-2, 2, (2, 3)),
                               rng.uniform(0.0, 0.6, (2, 3))),
           torch_build=lambda torch, x, t, v: _F(torch).gaussian_nll_loss(x, t, v, eps=0.3)),
]


@pytest.mark.parametrize("case", EDGE_ROWS, ids=[c.id for c in EDGE_ROWS])
def test_undifferentiated_floors_follow_pytorch(case):
    pytest.importorskip("torch")
    from yscv.testing import check_torch_second_order
    check_torch_second_order(case)


def test_section11_losses_at_pytorchs_edges():
    """Values and gradients where PyTorch makes a choice: bce at p = 0 and 1
    (logs clamped at -100), kl_div with zero targets (0 log 0 = 0), a zero
    vector in cosine_similarity and pairwise_distance with eps = 0,
    smooth_l1 and margin_ranking at their kinks."""
    torch = pytest.importorskip("torch")
    F = _F(torch)
    p = np.array([0.0, 1.0, 0.3, 1.0])
    t = np.array([1.0, 0.0, 0.5, 1.0])
    x = np.array([[-1.0, -2.0, -0.5], [0.3, -1.0, -3.0]])
    kt = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    z = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    w = np.array([[1.0, 2.0, 3.0], [1.0, -2.0, 0.5]])
    s_p, s_t = np.array([0.0, 1.0, -1.0, 2.5]), np.array([0.0, 0.0, 0.0, 0.0])
    r1, r2, ry = np.array([1.0, 2.0, 0.5]), np.array([1.0, 1.0, 1.0]), np.array([1.0, -1.0, 1.0])
    checks = [
        (lambda g, a: g.binary_cross_entropy(a, t, reduction="none"),
         lambda a: F.binary_cross_entropy(a, torch.tensor(t), reduction="none"), [p]),
        (lambda g, a: g.kl_div(a, kt, reduction="sum"),
         lambda a: F.kl_div(a, torch.tensor(kt), reduction="sum"), [x]),
        (lambda g, a, b: g.cosine_similarity(a, b),
         lambda a, b: F.cosine_similarity(a, b), [z, w]),
        (lambda g, a, b: g.pairwise_distance(a, b, eps=0.0),
         lambda a, b: F.pairwise_distance(a, b, eps=0.0), [z, z * 0]),
        (lambda g, a: g.smooth_l1_loss(a, s_t, reduction="none"),
         lambda a: F.smooth_l1_loss(a, torch.tensor(s_t), reduction="none"), [s_p]),
        (lambda g, a, b: g.margin_ranking_loss(a, b, ry, margin=0.0, reduction="none"),
         lambda a, b: F.margin_ranking_loss(a, b, torch.tensor(ry), reduction="none"), [r1, r2]),
    ]
    for build, tbuild, arrays in checks:
        g = yscv.Graph(np.float64)
        vs = [g.variable(a) for a in arrays]
        out = build(g, *vs)
        cot = np.ones(g.value(out).shape)
        grads = g.gradients(out, vs, grad=cot)
        ts = [torch.tensor(a, requires_grad=True) for a in arrays]
        tout = tbuild(*ts)
        tg = torch.autograd.grad(tout, ts, grad_outputs=torch.tensor(cot))
        np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
        for mine, theirs in zip(grads, tg):
            np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-12)


#: every method the loss category's Graph mixins had before the module was split
LOSS_METHODS = ("_loss_pair", "_class_input", "_class_attrs", "mse_loss", "l1_loss",
                "huber_loss", "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss",
                "_broadcast_operands", "smooth_l1_loss", "kl_div", "binary_cross_entropy",
                "cosine_similarity", "pairwise_distance", "triplet_margin_loss",
                "margin_ranking_loss", "gaussian_nll_loss", "poisson_nll_loss", "ctc_loss")


def test_loss_methods_resolve_to_the_loss_mixins():
    """Graph's method resolution finds each loss method in exactly one of the
    loss mixins, no other mixin defines the same name, and the core loss
    module imports neither of the two modules that import from it."""
    import ast
    import inspect
    from yscv.ops import OP_MIXINS, loss
    from yscv.ops.loss import LossOps
    from yscv.ops.loss_ctc import CtcLossOps
    from yscv.ops.loss_functional import FunctionalLossOps
    mixins = (LossOps, FunctionalLossOps, CtcLossOps)
    for name in LOSS_METHODS:
        owners = [m for m in OP_MIXINS if name in vars(m)]
        assert len(owners) == 1 and owners[0] in mixins, (name, owners)
        assert getattr(yscv.Graph, name) is vars(owners[0])[name], name
    defined = {k for m in mixins for k, v in vars(m).items() if callable(v)}
    assert defined == set(LOSS_METHODS)
    assert vars(CtcLossOps).keys() & set(LOSS_METHODS) == {"ctc_loss"}
    imported = {n.module for n in ast.walk(ast.parse(inspect.getsource(loss)))
                if isinstance(n, ast.ImportFrom)}
    assert not imported & {"loss_functional", "loss_ctc"}, imported


#: every loss op and the Graph method that records it
LOSS_OP_METHODS = {
    Op.MSE_LOSS: "mse_loss", Op.L1_LOSS: "l1_loss", Op.HUBER_LOSS: "huber_loss",
    Op.CROSS_ENTROPY: "cross_entropy", Op.NLL_LOSS: "nll_loss",
    Op.BCE_WITH_LOGITS: "binary_cross_entropy_with_logits",
    Op.SMOOTH_L1_LOSS: "smooth_l1_loss", Op.KL_DIV: "kl_div",
    Op.BINARY_CROSS_ENTROPY: "binary_cross_entropy",
    Op.COSINE_SIMILARITY: "cosine_similarity", Op.PAIRWISE_DISTANCE: "pairwise_distance",
    Op.TRIPLET_MARGIN_LOSS: "triplet_margin_loss",
    Op.MARGIN_RANKING_LOSS: "margin_ranking_loss",
    Op.GAUSSIAN_NLL_LOSS: "gaussian_nll_loss", Op.POISSON_NLL_LOSS: "poisson_nll_loss",
    Op.CTC_LOSS: "ctc_loss",
}


def test_loss_backward_rules_live_in_the_module_named_like_the_forward():
    """Each loss op's one backward rule (what the array walks call, no
    written-out copy) and its composite are module-level functions of the
    backward loss module named like the ops/ module that defines its Graph
    method (and its forward); the backward loss modules import one way only
    (loss_functional -> loss, loss_ctc from neither)."""
    import ast
    import importlib
    import inspect
    from yscv.registry import BACKWARD, COMPOSITES, FORWARD, RULES
    ops = list(Op)
    assert set(LOSS_OP_METHODS) == set(ops[ops.index(Op.MSE_LOSS):ops.index(Op.CTC_LOSS) + 1])
    for op, name in LOSS_OP_METHODS.items():
        forward_module = getattr(yscv.Graph, name).__module__
        assert forward_module.startswith("yscv.ops.loss"), (op, forward_module)
        assert FORWARD[int(op)].__module__ == forward_module, op
        module = importlib.import_module(forward_module.replace(".ops.", ".backward."))
        rule = RULES[int(op)]
        assert BACKWARD[int(op)] is rule, op
        assert rule.__name__ == f"{op.name.lower()}_rule", op
        assert vars(module).get(rule.__name__) is rule, (op, rule.__module__)
        build = COMPOSITES[int(op)]
        assert build is not None, op
        assert vars(module).get(build.__name__) is build, (op, build.__module__)
    from yscv.backward import loss, loss_ctc, loss_functional

    def imported(m):
        return {n.module for n in ast.walk(ast.parse(inspect.getsource(m)))
                if isinstance(n, ast.ImportFrom)}
    assert not imported(loss) & {"loss_functional", "loss_ctc"}, imported(loss)
    assert not imported(loss_ctc) & {"loss", "loss_functional"}, imported(loss_ctc)
    assert not imported(loss_functional) & {"loss_ctc"}, imported(loss_functional)
