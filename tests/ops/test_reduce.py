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


# ----------------------------------------- prod, std, norm, scans, topk, sort
def _away_from_zero(*shape):
    """Inputs with |x| in [0.5, 1.5] and random signs (norms with p < 1)."""
    def make(rng):
        return (rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape),)
    return make


def _with_zeros(rows):
    return lambda rng: (np.array(rows, dtype=np.float64),)


def _np_norm(p, axis=None, keepdims=False):
    def ref(x):
        a = np.abs(x)
        if p == np.inf:
            return np.max(a, axis=axis, keepdims=keepdims)
        if p == -np.inf:
            return np.min(a, axis=axis, keepdims=keepdims)
        if p == 0:
            return np.sum(x != 0, axis=axis, keepdims=keepdims).astype(np.float64)
        return np.sum(a ** p, axis=axis, keepdims=keepdims) ** (1.0 / p)
    return ref


def _np_take_sorted(axis, descending=False, k=None):
    def ref(x):
        idx = np.argsort(-x if descending else x, axis=axis, kind="stable")
        if k is not None:
            idx = np.take(idx, np.arange(k), axis=axis)
        return np.take_along_axis(x, idx, axis)
    return ref


ZEROS1 = [[0.5, 0.0, 2.0, 1.5], [1.2, -0.7, 0.9, 2.0], [0.0, 1.1, 0.0, -1.3]]

CASES += [
    # prod
    OpCase(Op.PROD, lambda g, x: g.prod(x), [S], np.prod, name="prod_all", low=0.5, high=1.5,
           torch_build=lambda t, x: x.prod()),
    OpCase(Op.PROD, lambda g, x: g.prod(x, axis=1), [S], lambda x: np.prod(x, axis=1),
           name="prod_axis1", torch_build=lambda t, x: x.prod(1)),
    OpCase(Op.PROD, lambda g, x: g.prod(x, axis=-1, keepdims=True), [S],
           lambda x: np.prod(x, axis=-1, keepdims=True), name="prod_neg_axis_keepdims",
           torch_build=lambda t, x: x.prod(-1, keepdim=True)),
    OpCase(Op.PROD, lambda g, x: g.prod(x, axis=(0, 2)), [S], lambda x: np.prod(x, axis=(0, 2)),
           name="prod_tuple", low=0.5, high=1.5,
           torch_build=lambda t, x: x.prod(2).prod(0)),
    OpCase(Op.PROD, lambda g, x: g.prod(x, axis=1), (), lambda x: np.prod(x, axis=1),
           name="prod_zeros_one_and_two_per_row", inputs=_with_zeros(ZEROS1),
           torch_build=lambda t, x: x.prod(1)),
    OpCase(Op.PROD, lambda g, x: g.prod(x), (), np.prod, name="prod_all_one_zero",
           inputs=_with_zeros([[0.5, 1.5], [0.0, -1.2]]), torch_build=lambda t, x: x.prod()),
    OpCase(Op.PROD, lambda g, x: g.prod(x, axis=(0, 1)), (), lambda x: np.prod(x, axis=(0, 1)),
           name="prod_tuple_with_zeros",
           inputs=lambda rng: (np.array([[[0.5, 0.0], [1.5, 2.0]], [[0.0, 0.3], [1.2, 0.0]]]),),
           torch_build=lambda t, x: x.prod(1).prod(0)),
    # std
    OpCase(Op.STD, lambda g, x: g.std(x), [S], lambda x: np.std(x, ddof=1), name="std_all",
           torch_build=lambda t, x: x.std()),
    OpCase(Op.STD, lambda g, x: g.std(x, axis=1, correction=0), [S],
           lambda x: np.std(x, axis=1), name="std_axis1_correction0",
           torch_build=lambda t, x: x.std(1, correction=0)),
    OpCase(Op.STD, lambda g, x: g.std(x, (0, 2), keepdims=True), [S],
           lambda x: np.std(x, axis=(0, 2), ddof=1, keepdims=True), name="std_tuple_keepdims",
           torch_build=lambda t, x: x.std((0, 2), keepdim=True)),
    OpCase(Op.STD, lambda g, x: g.std(x, -1, correction=2), [(3, 5)],
           lambda x: np.std(x, axis=-1, ddof=2), name="std_neg_axis_correction2",
           torch_build=lambda t, x: x.std(-1, correction=2)),
    OpCase(Op.VAR, lambda g, x: g.var(x, 1, correction=1), [S], lambda x: np.var(x, axis=1, ddof=1),
           name="var_correction1", torch_build=lambda t, x: x.var(1, correction=1)),
    OpCase(Op.VAR, lambda g, x: g.var(x, correction=0.5), [(3, 4)],
           lambda x: np.var(x, ddof=0.5), name="var_correction_half",
           torch_build=lambda t, x: x.var(correction=0.5)),
    # norm
    OpCase(Op.NORM, lambda g, x: g.norm(x), [S], lambda x: np.linalg.norm(x.ravel()),
           name="norm_2_all", torch_build=lambda t, x: t.linalg.vector_norm(x)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, 1, axis=1), [S], _np_norm(1, 1), name="norm_1_axis",
           inputs=_away_from_zero(*S), torch_build=lambda t, x: t.linalg.vector_norm(x, 1, 1)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, 3, axis=-1, keepdims=True), [S],
           _np_norm(3, -1, True), name="norm_3_keepdims",
           torch_build=lambda t, x: t.linalg.vector_norm(x, 3, -1, keepdim=True)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, 1.5, axis=(0, 2)), [S], _np_norm(1.5, (0, 2)),
           name="norm_1p5_tuple", inputs=_away_from_zero(*S),
           torch_build=lambda t, x: t.linalg.vector_norm(x, 1.5, (0, 2))),
    OpCase(Op.NORM, lambda g, x: g.norm(x, 0.5, axis=1), [S], _np_norm(0.5, 1),
           name="norm_0p5_axis", inputs=_away_from_zero(*S),
           torch_build=lambda t, x: t.linalg.vector_norm(x, 0.5, 1)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, -1, axis=0), [(3, 4)], _np_norm(-1, 0),
           name="norm_minus1_axis0", inputs=_away_from_zero(3, 4),
           torch_build=lambda t, x: t.linalg.vector_norm(x, -1, 0)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, np.inf, axis=1), [S], _np_norm(np.inf, 1),
           name="norm_inf_axis", torch_build=lambda t, x: t.linalg.vector_norm(x, float("inf"), 1)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, -np.inf), [S], _np_norm(-np.inf), name="norm_neg_inf_all",
           torch_build=lambda t, x: t.linalg.vector_norm(x, float("-inf"))),
    OpCase(Op.NORM, lambda g, x: g.norm(x, 0, axis=-1), [(3, 4)], _np_norm(0, -1),
           name="norm_0_count_zero_gradient", inputs=_with_zeros(ZEROS1),
           torch_build=lambda t, x: t.linalg.vector_norm(x, 0, -1)),
    OpCase(Op.NORM, lambda g, x: g.norm(x, "fro", axis=(1, 2)), [S],
           lambda x: np.sqrt(np.sum(x * x, axis=(1, 2))), name="norm_fro_two_axes",
           torch_build=lambda t, x: t.norm(x, "fro", dim=(1, 2))),
    OpCase(Op.NORM, lambda g, x: g.norm(x, "fro"), [(3, 4)], lambda x: np.linalg.norm(x, "fro"),
           name="norm_fro_all", torch_build=lambda t, x: t.norm(x, "fro")),
    # cumsum / cumprod
    OpCase(Op.CUMSUM, lambda g, x: g.cumsum(x, 1), [S], lambda x: np.cumsum(x, 1), name="cumsum_axis1",
           torch_build=lambda t, x: t.cumsum(x, 1)),
    OpCase(Op.CUMSUM, lambda g, x: g.cumsum(x, -1), [(3, 4)], lambda x: np.cumsum(x, -1),
           name="cumsum_neg_axis", torch_build=lambda t, x: t.cumsum(x, -1)),
    OpCase(Op.CUMSUM, lambda g, x: g.cumsum(x, 0), [()], lambda x: x, name="cumsum_0d",
           torch_build=lambda t, x: t.cumsum(x, 0)),
    OpCase(Op.CUMPROD, lambda g, x: g.cumprod(x, 1), [(3, 4)], lambda x: np.cumprod(x, 1),
           name="cumprod_axis1", torch_build=lambda t, x: t.cumprod(x, 1)),
    OpCase(Op.CUMPROD, lambda g, x: g.cumprod(x, 0), [(4, 2, 3)], lambda x: np.cumprod(x, 0),
           name="cumprod_axis0", low=0.5, high=1.5, torch_build=lambda t, x: t.cumprod(x, 0)),
    OpCase(Op.CUMPROD, lambda g, x: g.cumprod(x, -1), (), lambda x: np.cumprod(x, -1),
           name="cumprod_zeros_last_axis", inputs=_with_zeros(ZEROS1),
           torch_build=lambda t, x: t.cumprod(x, -1)),
    OpCase(Op.CUMPROD, lambda g, x: g.cumprod(x, 0), (), lambda x: np.cumprod(x, 0),
           name="cumprod_zeros_axis0", inputs=_with_zeros(ZEROS1),
           torch_build=lambda t, x: t.cumprod(x, 0)),
    # topk / sort (values; the indices are tested against torch below)
    OpCase(Op.TOPK, lambda g, x: g.topk(x, 2)[0], [S], _np_take_sorted(-1, True, 2), name="topk_last",
           torch_build=lambda t, x: t.topk(x, 2)[0]),
    OpCase(Op.TOPK, lambda g, x: g.topk(x, 2, axis=1, largest=False)[0], [S],
           _np_take_sorted(1, False, 2), name="topk_smallest_axis1",
           torch_build=lambda t, x: t.topk(x, 2, 1, largest=False)[0]),
    OpCase(Op.TOPK, lambda g, x: g.topk(x, 3, axis=0, sorted=False)[0], [(4, 3)],
           _np_take_sorted(0, True, 3), name="topk_unsorted_axis0",
           torch_build=lambda t, x: t.topk(x, 3, 0, sorted=True)[0]),
    OpCase(Op.SORT, lambda g, x: g.sort(x)[0], [S], _np_take_sorted(-1), name="sort_last",
           torch_build=lambda t, x: t.sort(x)[0]),
    OpCase(Op.SORT, lambda g, x: g.sort(x, axis=0, descending=True)[0], [(4, 3)],
           _np_take_sorted(0, True), name="sort_descending_axis0",
           torch_build=lambda t, x: t.sort(x, 0, descending=True)[0]),
    OpCase(Op.SORT, lambda g, x: g.sort(x, 1, stable=True)[0], [S], _np_take_sorted(1),
           name="sort_stable_axis1", torch_build=lambda t, x: t.sort(x, dim=1, stable=True)[0]),
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
    # prod, std, norm, scans, topk, sort, var correction
    BadCase(Op.PROD, "prod_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.prod(x, axis=2),
            ValueError, "prod: axis=2"),
    BadCase(Op.PROD, "prod_keepdims_not_bool", _leaves((2, 3)), lambda g, x: g.prod(x, 0, 1),
            TypeError, "prod: keepdims"),
    BadCase(Op.STD, "std_negative_correction", _leaves((2, 3)), lambda g, x: g.std(x, correction=-1),
            ValueError, "std: correction"),
    BadCase(Op.STD, "std_correction_string", _leaves((2, 3)), lambda g, x: g.std(x, 0, "1"),
            TypeError, "std: correction"),
    BadCase(Op.STD, "std_axis_float", _leaves((2, 3)), lambda g, x: g.std(x, 0.5),
            TypeError, "std: axis"),
    BadCase(Op.VAR, "var_ddof_and_correction_disagree", _leaves((2, 3)),
            lambda g, x: g.var(x, ddof=1, correction=0), ValueError, "var: ddof=1.0 and correction=0"),
    BadCase(Op.VAR, "var_correction_negative", _leaves((2, 3)),
            lambda g, x: g.var(x, correction=-2), ValueError, "var: correction"),
    BadCase(Op.NORM, "norm_ord_nuc", _leaves((2, 3)), lambda g, x: g.norm(x, "nuc"),
            ValueError, "norm: ord='nuc'"),
    BadCase(Op.NORM, "norm_ord_bool", _leaves((2, 3)), lambda g, x: g.norm(x, True),
            TypeError, "norm: ord"),
    BadCase(Op.NORM, "norm_ord_nan", _leaves((2, 3)), lambda g, x: g.norm(x, float("nan")),
            ValueError, "norm: ord=nan"),
    BadCase(Op.NORM, "norm_fro_three_axes", _leaves((2, 3, 4)),
            lambda g, x: g.norm(x, "fro", axis=(0, 1, 2)), ValueError, "norm: ord='fro' takes"),
    BadCase(Op.NORM, "norm_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.norm(x, 2, 3),
            ValueError, "norm: axis=3"),
    BadCase(Op.NORM, "norm_inf_empty", _leaves((0, 3)), lambda g, x: g.norm(x, np.inf, 0),
            ValueError, "norm: cannot reduce over an empty axis"),
    BadCase(Op.NORM, "norm_negative_ord_empty", _leaves((0, 3)), lambda g, x: g.norm(x, -1, 0),
            ValueError, "norm: cannot reduce over an empty axis"),
    BadCase(Op.CUMSUM, "cumsum_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.cumsum(x, 2),
            ValueError, "cumsum: axis=2"),
    BadCase(Op.CUMSUM, "cumsum_axis_none", _leaves((2, 3)), lambda g, x: g.cumsum(x, None),
            TypeError, "cumsum: axis"),
    BadCase(Op.CUMPROD, "cumprod_axis_tuple", _leaves((2, 3)), lambda g, x: g.cumprod(x, (0,)),
            TypeError, "cumprod: axis"),
    BadCase(Op.CUMPROD, "cumprod_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.cumprod(x, -3),
            ValueError, "cumprod: axis=-3"),
    BadCase(Op.TOPK, "topk_k_too_large", _leaves((2, 3)), lambda g, x: g.topk(x, 4),
            ValueError, "topk: k=4 is out of range"),
    BadCase(Op.TOPK, "topk_k_negative", _leaves((2, 3)), lambda g, x: g.topk(x, -1),
            ValueError, "topk: k=-1"),
    BadCase(Op.TOPK, "topk_k_float", _leaves((2, 3)), lambda g, x: g.topk(x, 1.0),
            TypeError, "topk: k"),
    BadCase(Op.TOPK, "topk_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.topk(x, 1, 2),
            ValueError, "topk: axis=2"),
    BadCase(Op.TOPK, "topk_largest_not_bool", _leaves((2, 3)), lambda g, x: g.topk(x, 1, largest=1),
            TypeError, "topk: largest"),
    BadCase(Op.SORT, "sort_axis_out_of_range", _leaves((2, 3)), lambda g, x: g.sort(x, -3),
            ValueError, "sort: axis=-3"),
    BadCase(Op.SORT, "sort_descending_not_bool", _leaves((2, 3)),
            lambda g, x: g.sort(x, descending="yes"), TypeError, "sort: descending"),
    BadCase(Op.SORT, "sort_complex", lambda g: (np.ones(3) * 1j,), lambda g, x: g.sort(x),
            TypeError, "sort"),
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


# ------------------------------------------------ integer results vs PyTorch
_TIED = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 3.0],
                  [0.5, 0.5, -1.0, 0.5, 2.0, 2.0],
                  [4.0, -4.0, 4.0, 4.0, -4.0, 0.0]])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), (0, False), (1, True),
                                           (-1, False)])
def test_argmax_argmin_match_torch_first_occurrence_and_append_nothing(name, axis, keepdims):
    torch = pytest.importorskip("torch")
    g = yscv.Graph(np.float32)
    x = g.variable(_TIED)
    n = len(g)
    got = getattr(g, name)(x, axis=axis, keepdims=keepdims)
    assert len(g) == n  # an array, not a node
    want = getattr(torch, name)(torch.tensor(_TIED), dim=axis, keepdim=keepdims).numpy()
    assert isinstance(got, np.ndarray) and got.dtype == np.int64
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_nan_and_0d_and_array_operand_match_torch(name):
    torch = pytest.importorskip("torch")
    g = yscv.Graph(np.float64)
    x = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 2.0, -1.0, 7.0]])
    for axis in (None, 1, 0):
        want = getattr(torch, name)(torch.tensor(x), dim=axis).numpy()
        np.testing.assert_array_equal(getattr(g, name)(x, axis), want)
    assert len(g) == 0
    np.testing.assert_array_equal(getattr(g, name)(g.variable(np.array(3.0)), 0), 0)
    with pytest.raises(ValueError, match=f"{name}: cannot take the {name} of an empty axis=0"):
        getattr(g, name)(np.ones((0, 2)), 0)
    with pytest.raises(TypeError, match=f"{name}: axis"):
        getattr(g, name)(x, (0, 1))
    with pytest.raises(ValueError, match=f"{name}: axis=2"):
        getattr(g, name)(x, 2)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_indices_match_torch_stable_with_ties_and_nan(descending, axis):
    torch = pytest.importorskip("torch")
    x = _TIED.copy()
    x[1, 2] = np.nan
    g = yscv.Graph(np.float64)
    v = g.variable(x)
    values, idx = g.sort(v, axis, descending=descending)
    tv, ti = torch.sort(torch.tensor(x), dim=axis, descending=descending, stable=True)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ti.numpy())
    np.testing.assert_array_equal(g.value(values), tv.numpy())
    np.testing.assert_array_equal(g.value(values), np.take_along_axis(x, idx, axis))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 3])
def test_topk_matches_torch_values_and_indices(largest, k):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((4, 6))   # no ties: indices are unique
    g = yscv.Graph(np.float64)
    values, idx = g.topk(g.variable(x), k, largest=largest)
    tv, ti = torch.topk(torch.tensor(x), k, largest=largest)
    np.testing.assert_array_equal(idx, ti.numpy())
    np.testing.assert_array_equal(g.value(values), tv.numpy())


def test_topk_ties_take_the_lower_index_first_values_as_torch():
    """PyTorch's CPU topk leaves the order among equal values to its partial
    sort ([1, 5, 4] below); yscv takes them lower index first, as sort
    (stable) and ONNX's TopK. The values are PyTorch's, NaN counting largest."""
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0, np.nan, 3.0])
    g = yscv.Graph(np.float64)
    values, idx = g.topk(g.variable(x), 3)
    tv, ti = torch.topk(torch.tensor(x), 3)
    np.testing.assert_array_equal(g.value(values), tv.numpy())
    np.testing.assert_array_equal(idx, [5, 1, 2])
    np.testing.assert_array_equal(x[ti.numpy()], x[idx])
    values, idx = g.topk(g.variable(x), 2, largest=False)
    np.testing.assert_array_equal(idx, [0, 3])


def test_sorted_indices_are_a_copy_and_gradient_scatters_back():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([[0.3, -1.0, 2.0], [5.0, 4.0, -2.0]]))
    values, idx = g.topk(x, 2)
    idx[...] = 0   # the node keeps its own indices
    np.testing.assert_array_equal(g.value(values), [[2.0, 0.3], [5.0, 4.0]])
    g.backward(values, grad=np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(g.grad(x), [[2.0, 0.0, 1.0], [3.0, 4.0, 0.0]])


def test_sort_0d_and_topk_0d():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array(2.5))
    v, i = g.sort(x)
    assert g.value(v).shape == () and g.value(v) == 2.5 and i.shape == () and i == 0
    v, i = g.topk(x, 1)
    g.backward(v)
    assert g.grad(x) == 1.0


# ----------------------------------------- edge gradients vs PyTorch
def _torch_grad(torch, fn, x):
    t = torch.tensor(x, requires_grad=True)
    fn(t).sum().backward()
    return t.grad.numpy()


@pytest.mark.parametrize("p", [2, 1, 3, 1.5, 0.5, np.inf, -np.inf, 0])
def test_norm_gradient_at_a_zero_vector_matches_torch(p):
    torch = pytest.importorskip("torch")
    x = np.zeros((2, 3))
    x[1] = [0.5, -2.0, 1.0]
    g = yscv.Graph(np.float64)
    v = g.variable(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = g.norm(v, p, axis=1)
        g.backward(out, grad=np.ones(2))
    want = _torch_grad(torch, lambda t: torch.linalg.vector_norm(t, float(p), 1), x) if p != 0 \
        else np.zeros_like(x)
    np.testing.assert_allclose(g.value(out), torch.linalg.vector_norm(
        torch.tensor(x), float(p), 1).numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.grad(v), want, rtol=1e-12, atol=0)
    assert np.all(g.grad(v)[0] == 0)


def test_norm_inf_ties_split_the_gradient_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[2.0, -2.0, 1.0], [0.5, 3.0, -3.0]])
    for p in (np.inf, -np.inf):
        g = yscv.Graph(np.float64)
        v = g.variable(x)
        g.backward(g.norm(v, p, axis=1), grad=np.ones(2))
        np.testing.assert_allclose(g.grad(v), _torch_grad(
            torch, lambda t: torch.linalg.vector_norm(t, p, 1), x), rtol=1e-12)


def test_std_of_constant_slice_has_zero_gradient_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[2.0, 2.0, 2.0], [1.0, 3.0, 0.5]])
    g = yscv.Graph(np.float64)
    v = g.variable(x)
    out = g.std(v, axis=1)
    g.backward(out, grad=np.ones(2))
    np.testing.assert_allclose(g.value(out), torch.tensor(x).std(1).numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.grad(v), _torch_grad(torch, lambda t: t.std(1), x), rtol=1e-12)
    assert np.all(g.grad(v)[0] == 0)
    (d,) = g.gradients(g.sum(out), [v], create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(d, d)), [v])
    assert np.all(np.isfinite(d2)) and np.all(d2[0] == 0)


def test_std_correction_at_least_count_warns():
    g = yscv.Graph(np.float64)
    x = g.variable(np.array([1.0, 2.0]))
    with pytest.warns(RuntimeWarning, match="std: degrees of freedom"):
        assert np.isinf(g.value(g.std(x, correction=2)))


def test_var_correction_and_ddof_agree():
    x = np.arange(12.0).reshape(3, 4) ** 1.5
    g = yscv.Graph(np.float64)
    v = g.variable(x)
    a = g.value(g.var(v, 0, ddof=1))
    np.testing.assert_array_equal(g.value(g.var(v, 0, correction=1)), a)
    np.testing.assert_array_equal(g.value(g.var(v, 0, ddof=1, correction=1)), a)
    np.testing.assert_allclose(a, np.var(x, axis=0, ddof=1))


def test_prod_and_cumprod_gradients_at_zeros_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[0.0, 2.0, 0.0, 3.0, -1.5], [1.5, 0.0, 2.0, -0.5, 1.0]])
    for name, fn, tfn in (("prod", lambda g, v: g.prod(v, 1), lambda t: t.prod(1)),
                          ("prod_all", lambda g, v: g.prod(v), lambda t: t.prod()),
                          ("cumprod", lambda g, v: g.cumprod(v, 1), lambda t: t.cumprod(1)),
                          ("cumprod0", lambda g, v: g.cumprod(v, 0), lambda t: t.cumprod(0))):
        g = yscv.Graph(np.float64)
        v = g.variable(x)
        out = fn(g, v)
        g.backward(out, grad=np.ones(g.value(out).shape))
        np.testing.assert_allclose(g.grad(v), _torch_grad(torch, tfn, x), rtol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize("name,build", [
    ("prod", lambda g, v: g.prod(v, 1)), ("std", lambda g, v: g.std(v, 1)),
    ("norm", lambda g, v: g.norm(v, 3, 1)), ("cumsum", lambda g, v: g.cumsum(v, 1)),
    ("cumprod", lambda g, v: g.cumprod(v, 1)), ("topk", lambda g, v: g.topk(v, 2)[0]),
    ("sort", lambda g, v: g.sort(v, 0)[0])])
def test_new_reductions_keep_float32(name, build):
    x = np.random.default_rng(1).uniform(-1, 1, size=(3, 4))
    x[0, 1] = 0.0
    g = yscv.Graph(np.float32)
    v = g.variable(x)
    out = build(g, v)
    assert g.value(out).dtype == np.float32
    g.backward(out, grad=np.ones(g.value(out).shape))
    assert g.grad(v).dtype == np.float32 and g.grad(v).shape == x.shape
