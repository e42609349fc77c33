"""Pooling ops (NHWC): naive NumPy loop references, float64 gradcheck, bad
arguments, tie routing, saved-data size, and cross-checks against PyTorch."""
import dataclasses
import math

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.registry import FORWARD
from yscv.testing import (BadCase, OpCase, check_same_bits_on_threads, check_second_order_float32,
                          check_torch_second_order, make_op_tests, make_second_order_tests)


# ------------------------------------------------------------- references
def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def ref_max_pool2d(x, kernel, stride=None, padding=0):
    kh, kw = _pair(kernel)
    sh, sw = _pair(kernel if stride is None else stride)
    ph, pw = _pair(padding)
    n, h, w, c = x.shape
    xp = np.full((n, h + 2 * ph, w + 2 * pw, c), -np.inf)
    xp[:, ph:ph + h, pw:pw + w] = x
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    out = np.empty((n, oh, ow, c))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ch in range(c):
                    out[b, i, j, ch] = max(xp[b, i * sh + a, j * sw + d, ch]
                                           for a in range(kh) for d in range(kw))
    return out


def ref_avg_pool2d(x, kernel, stride=None, padding=0, count_include_pad=True):
    kh, kw = _pair(kernel)
    sh, sw = _pair(kernel if stride is None else stride)
    ph, pw = _pair(padding)
    n, h, w, c = x.shape
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    out = np.zeros((n, oh, ow, c))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ch in range(c):
                    total, count = 0.0, 0
                    for a in range(kh):
                        for d in range(kw):
                            r, q = i * sh - ph + a, j * sw - pw + d
                            if 0 <= r < h and 0 <= q < w:
                                total += x[b, r, q, ch]
                                count += 1
                    out[b, i, j, ch] = total / (kh * kw if count_include_pad else count)
    return out


def ref_adaptive(x, output_size, reduce):
    n, h, w, c = x.shape
    oh, ow = _pair(output_size)
    oh = h if oh is None else oh
    ow = w if ow is None else ow
    out = np.empty((n, oh, ow, c))
    for i in range(oh):
        r0, r1 = math.floor(i * h / oh), math.ceil((i + 1) * h / oh)
        for j in range(ow):
            q0, q1 = math.floor(j * w / ow), math.ceil((j + 1) * w / ow)
            for b in range(n):
                for ch in range(c):
                    out[b, i, j, ch] = reduce([x[b, r, q, ch] for r in range(r0, r1)
                                               for q in range(q0, q1)])
    return out


def ref_global_avg(x):
    n, h, w, c = x.shape
    out = np.zeros((n, c))
    for b in range(n):
        for ch in range(c):
            out[b, ch] = sum(x[b, r, q, ch] for r in range(h) for q in range(w)) / (h * w)
    return out


def _mean(vals):
    return sum(vals) / len(vals)


def distinct(shape):
    """Inputs without ties (a scaled random permutation), so max pooling is
    differentiable and finite differences stay inside one argmax."""
    def make(rng):
        n = int(np.prod(shape))
        return ((rng.permutation(n).reshape(shape) - n / 2) * 0.1,)
    return make


# ----------------------------------------------------------------- table
# torch_build: the same pool in PyTorch on the NCHW view of the NHWC arrays.
def _torch_nchw(fn):
    return lambda t, x: fn(t.nn.functional, x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


def _max(shape, name, kernel, stride=None, padding=0, alias=False):
    if alias:
        build = lambda g, x: g.max_pool2d_nhwc(x, kernel, stride, padding)  # noqa: E731
    else:
        build = lambda g, x: g.max_pool2d(x, kernel, stride=stride, padding=padding)  # noqa: E731
    return OpCase(Op.MAX_POOL2D, build, [shape],
                  lambda x: ref_max_pool2d(x, kernel, stride, padding),
                  name=name, inputs=distinct(shape),
                  torch_build=_torch_nchw(lambda F, x: F.max_pool2d(x, kernel, stride, padding)))


def _avg(shape, name, kernel, stride=None, padding=0, cip=True, alias=False):
    if alias:
        build = lambda g, x: g.avg_pool2d_nhwc(x, kernel, stride, padding, cip)  # noqa: E731
    else:
        build = lambda g, x: g.avg_pool2d(x, kernel, stride=stride, padding=padding,  # noqa: E731
                                          count_include_pad=cip)
    return OpCase(Op.AVG_POOL2D, build, [shape],
                  lambda x: ref_avg_pool2d(x, kernel, stride, padding, cip), name=name,
                  torch_build=_torch_nchw(lambda F, x: F.avg_pool2d(
                      x, kernel, stride, padding, count_include_pad=cip)))


def _aavg(shape, name, size, alias=False):
    method = "adaptive_avg_pool2d_nhwc" if alias else "adaptive_avg_pool2d"
    return OpCase(Op.ADAPTIVE_AVG_POOL2D, lambda g, x: getattr(g, method)(x, size), [shape],
                  lambda x: ref_adaptive(x, size, _mean), name=name,
                  torch_build=_torch_nchw(lambda F, x: F.adaptive_avg_pool2d(x, size)))


def _amax(shape, name, size, alias=False):
    method = "adaptive_max_pool2d_nhwc" if alias else "adaptive_max_pool2d"
    return OpCase(Op.ADAPTIVE_MAX_POOL2D, lambda g, x: getattr(g, method)(x, size), [shape],
                  lambda x: ref_adaptive(x, size, max), name=name, inputs=distinct(shape),
                  torch_build=_torch_nchw(lambda F, x: F.adaptive_max_pool2d(x, size)))


CASES = [
    _max((2, 4, 6, 3), "max_k2_default_stride_batch2", 2),
    _max((1, 5, 5, 2), "max_k3_s1_p1_overlapping", 3, 1, 1),
    _max((2, 6, 5, 2), "max_nonsquare_k32_s21_p10", (3, 2), (2, 1), (1, 0)),
    _max((1, 7, 7, 2), "max_k2_s3_gaps", 2, 3),
    _max((1, 5, 6, 3), "max_k3_s2_p1", 3, 2, 1),
    _max((1, 4, 4, 2), "max_pool2d_nhwc_alias", 2, None, 0, alias=True),
    # 2 x 2 / 2: the register kernels, with an odd last row and column that
    # no window covers (zero gradient); 3 x 2 / (3, 2): non-overlapping, generic
    _max((2, 7, 9, 3), "max_k2_odd_remainder", 2),
    _max((1, 7, 8, 2), "max_k32_s32_remainder", (3, 2), (3, 2)),
    _avg((2, 4, 6, 3), "avg_k2_default_stride_batch2", 2),
    _avg((1, 5, 5, 2), "avg_k3_s1_p1_include_pad", 3, 1, 1, True),
    _avg((1, 5, 5, 2), "avg_k3_s1_p1_exclude_pad", 3, 1, 1, False),
    _avg((2, 5, 4, 2), "avg_nonsquare_k32_s21_p11_exclude_pad", (3, 2), (2, 1), (1, 1), False),
    _avg((2, 5, 4, 2), "avg_nonsquare_k32_s21_p11_include_pad", (3, 2), (2, 1), (1, 1), True),
    _avg((1, 5, 7, 2), "avg_k23_s12_overlapping", (2, 3), (1, 2)),
    _avg((1, 7, 7, 2), "avg_k2_s3_gaps", 2, 3),
    _avg((1, 4, 4, 2), "avg_pool2d_nhwc_alias", 3, 1, 1, False, alias=True),
    _aavg((2, 6, 4, 2), "adaptive_avg_divisible_down", (3, 2)),
    _aavg((1, 7, 5, 3), "adaptive_avg_nondivisible_down", (3, 2)),
    _aavg((1, 3, 2, 2), "adaptive_avg_nondivisible_up", (5, 4)),
    _aavg((1, 2, 3, 2), "adaptive_avg_divisible_up", (4, 6)),
    _aavg((2, 5, 5, 2), "adaptive_avg_int_size", 3),
    _aavg((1, 4, 5, 2), "adaptive_avg_none_keeps_width", (2, None)),
    _aavg((1, 5, 3, 2), "adaptive_avg_pool2d_nhwc_alias", (2, 2), alias=True),
    _amax((2, 6, 4, 2), "adaptive_max_divisible_down", (3, 2)),
    _amax((1, 7, 5, 3), "adaptive_max_nondivisible_down", (3, 2)),
    _amax((1, 3, 2, 2), "adaptive_max_nondivisible_up", (5, 4)),
    _amax((1, 2, 3, 2), "adaptive_max_divisible_up", (4, 6)),
    _amax((2, 5, 5, 2), "adaptive_max_int_size", 3),
    _amax((1, 4, 5, 2), "adaptive_max_none_keeps_height", (None, 2)),
    _amax((1, 5, 3, 2), "adaptive_max_pool2d_nhwc_alias", (2, 2), alias=True),
    OpCase(Op.GLOBAL_AVG_POOL2D, lambda g, x: g.global_avg_pool2d(x), [(2, 3, 4, 3)],
           ref_global_avg, name="global_avg_batch2",
           torch_build=lambda t, x: x.mean((1, 2))),
    OpCase(Op.GLOBAL_AVG_POOL2D, lambda g, x: g.global_avg_pool2d(x), [(1, 1, 1, 4)],
           ref_global_avg, name="global_avg_1x1",
           torch_build=lambda t, x: t.nn.functional.adaptive_avg_pool2d(x.permute(0, 3, 1, 2), 1)
           .flatten(1)),
    OpCase(Op.GLOBAL_AVG_POOL2D, lambda g, x: g.global_avg_pool2d_nhwc(x), [(1, 5, 2, 3)],
           ref_global_avg, name="global_avg_pool2d_nhwc_alias",
           torch_build=lambda t, x: x.mean((1, 2))),
]


# ------------------------------------------------------------ bad arguments
def _x(*shape):
    return lambda g: (g.variable(np.ones(shape)),)


X = _x(1, 4, 4, 2)
BIG = 2 ** 63   # one more than the largest array index

BAD = [
    BadCase(Op.MAX_POOL2D, "max_rank3", _x(4, 4, 2), lambda g, x: g.max_pool2d(x, 2),
            yscv.ShapeError, "max_pool2d: x must be 4-d"),
    BadCase(Op.MAX_POOL2D, "max_kernel_larger_than_padded_input", X,
            lambda g, x: g.max_pool2d(x, 5), ValueError, "max_pool2d: kernel=5 is larger"),
    BadCase(Op.MAX_POOL2D, "max_kernel_larger_with_padding", _x(1, 2, 8, 1),
            lambda g, x: g.max_pool2d(x, (5, 2), padding=(1, 0)), ValueError, "padded input along H"),
    BadCase(Op.MAX_POOL2D, "max_kernel_zero", X, lambda g, x: g.max_pool2d(x, 0),
            ValueError, "max_pool2d: kernel=0 must be >= 1"),
    BadCase(Op.MAX_POOL2D, "max_stride_zero", X, lambda g, x: g.max_pool2d(x, 2, 0),
            ValueError, "max_pool2d: stride=0"),
    BadCase(Op.MAX_POOL2D, "max_stride_negative", X, lambda g, x: g.max_pool2d(x, 2, (1, -1)),
            ValueError, "max_pool2d: stride"),
    BadCase(Op.MAX_POOL2D, "max_padding_negative", X, lambda g, x: g.max_pool2d(x, 2, 1, -1),
            ValueError, "max_pool2d: padding=-1"),
    BadCase(Op.MAX_POOL2D, "max_padding_over_half_kernel", X,
            lambda g, x: g.max_pool2d(x, 3, 1, 2), ValueError, "max_pool2d: padding=2"),
    BadCase(Op.MAX_POOL2D, "max_padding_over_half_kernel_w", X,
            lambda g, x: g.max_pool2d(x, (4, 2), 1, (2, 2)), ValueError, "along W"),
    BadCase(Op.MAX_POOL2D, "max_kernel_float", X, lambda g, x: g.max_pool2d(x, 2.0),
            TypeError, "max_pool2d: kernel"),
    BadCase(Op.MAX_POOL2D, "max_kernel_triple", X, lambda g, x: g.max_pool2d(x, (2, 2, 2)),
            TypeError, "max_pool2d: kernel"),
    BadCase(Op.MAX_POOL2D, "max_empty_width", _x(1, 3, 0, 2), lambda g, x: g.max_pool2d(x, 1),
            yscv.ShapeError, "max_pool2d: x must have non-empty"),
    BadCase(Op.MAX_POOL2D, "max_string_input", lambda g: ("x",), lambda g, x: g.max_pool2d(x, 2),
            TypeError, "max_pool2d"),
    BadCase(Op.MAX_POOL2D, "max_pool2d_nhwc_alias_stride", X,
            lambda g, x: g.max_pool2d_nhwc(x, 2, -2), ValueError, "max_pool2d: stride"),
    BadCase(Op.AVG_POOL2D, "avg_rank5", _x(1, 2, 4, 4, 2), lambda g, x: g.avg_pool2d(x, 2),
            yscv.ShapeError, "avg_pool2d: x must be 4-d"),
    BadCase(Op.AVG_POOL2D, "avg_kernel_larger_than_padded_input", X,
            lambda g, x: g.avg_pool2d(x, (2, 7), padding=(0, 1)), ValueError, "along W"),
    BadCase(Op.AVG_POOL2D, "avg_kernel_negative", X, lambda g, x: g.avg_pool2d(x, -2),
            ValueError, "avg_pool2d: kernel"),
    BadCase(Op.AVG_POOL2D, "avg_stride_zero", X, lambda g, x: g.avg_pool2d(x, 2, (0, 1)),
            ValueError, "avg_pool2d: stride"),
    BadCase(Op.AVG_POOL2D, "avg_padding_negative", X, lambda g, x: g.avg_pool2d(x, 2, 1, (0, -1)),
            ValueError, "avg_pool2d: padding"),
    BadCase(Op.AVG_POOL2D, "avg_padding_over_half_kernel", X,
            lambda g, x: g.avg_pool2d(x, 2, 1, 2), ValueError, "avg_pool2d: padding=2"),
    BadCase(Op.AVG_POOL2D, "avg_count_include_pad_not_bool", X,
            lambda g, x: g.avg_pool2d(x, 2, count_include_pad="yes"), TypeError,
            "avg_pool2d: count_include_pad"),
    BadCase(Op.AVG_POOL2D, "avg_pool2d_nhwc_alias_kernel", X,
            lambda g, x: g.avg_pool2d_nhwc(x, 9), ValueError, "avg_pool2d: kernel=9"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_output_zero", X,
            lambda g, x: g.adaptive_avg_pool2d(x, 0), ValueError,
            "adaptive_avg_pool2d: output_size=0 must be >= 1"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_output_negative", X,
            lambda g, x: g.adaptive_avg_pool2d(x, (2, -1)), ValueError,
            "adaptive_avg_pool2d: output_size"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_output_triple", X,
            lambda g, x: g.adaptive_avg_pool2d(x, (2, 2, 2)), TypeError,
            "adaptive_avg_pool2d: output_size"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_output_float", X,
            lambda g, x: g.adaptive_avg_pool2d(x, (2, 1.5)), TypeError,
            "adaptive_avg_pool2d: output_size"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_rank2", _x(4, 4),
            lambda g, x: g.adaptive_avg_pool2d(x, 2), yscv.ShapeError, "adaptive_avg_pool2d: x"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d_nhwc_alias", X,
            lambda g, x: g.adaptive_avg_pool2d_nhwc(x, None), TypeError,
            "adaptive_avg_pool2d: output_size"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_output_zero", X,
            lambda g, x: g.adaptive_max_pool2d(x, (0, 2)), ValueError,
            "adaptive_max_pool2d: output_size"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_output_bool", X,
            lambda g, x: g.adaptive_max_pool2d(x, True), TypeError,
            "adaptive_max_pool2d: output_size"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_empty_height", _x(2, 0, 3, 1),
            lambda g, x: g.adaptive_max_pool2d(x, 2), yscv.ShapeError,
            "adaptive_max_pool2d: x must have non-empty"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_rank3", _x(4, 4, 2),
            lambda g, x: g.adaptive_max_pool2d(x, 2), yscv.ShapeError, "adaptive_max_pool2d: x"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_pool2d_nhwc_alias", X,
            lambda g, x: g.adaptive_max_pool2d_nhwc(x, -3), ValueError,
            "adaptive_max_pool2d: output_size"),
    BadCase(Op.GLOBAL_AVG_POOL2D, "global_avg_rank2", _x(3, 4),
            lambda g, x: g.global_avg_pool2d(x), yscv.ShapeError, "global_avg_pool2d: x must be 4-d"),
    BadCase(Op.GLOBAL_AVG_POOL2D, "global_avg_empty_spatial", _x(1, 0, 0, 3),
            lambda g, x: g.global_avg_pool2d(x), yscv.ShapeError, "global_avg_pool2d: x must have"),
    BadCase(Op.GLOBAL_AVG_POOL2D, "global_avg_complex", lambda g: (np.ones((1, 2, 2, 1)) * 1j,),
            lambda g, x: g.global_avg_pool2d(x), TypeError, "global_avg_pool2d"),
    # int arguments beyond an array index, outputs beyond any array (issue 12.8): a
    # ValueError naming the op and the argument, not an OverflowError or a NumPy error
    BadCase(Op.MAX_POOL2D, "max_stride_2pow63", X, lambda g, x: g.max_pool2d(x, 2, BIG),
            ValueError, f"max_pool2d: stride={BIG} is too large for an array index"),
    BadCase(Op.MAX_POOL2D, "max_kernel_2pow63", X, lambda g, x: g.max_pool2d(x, (2, BIG)),
            ValueError, rf"max_pool2d: kernel=\(2, {BIG}\) is too large"),
    BadCase(Op.MAX_POOL2D, "max_padded_input_beyond_index", X,
            lambda g, x: g.max_pool2d(x, BIG - 1, padding=BIG // 2 - 1), ValueError,
            "max_pool2d: padding=4611686018427387903 gives a padded input of "),
    BadCase(Op.AVG_POOL2D, "avg_stride_2pow63", X, lambda g, x: g.avg_pool2d(x, 2, (BIG, 1)),
            ValueError, "avg_pool2d: stride=.* too large"),
    BadCase(Op.AVG_POOL2D, "avg_kernel_and_padding_2pow64", X,
            lambda g, x: g.avg_pool2d(x, 2 * BIG, padding=BIG), ValueError,
            "avg_pool2d: kernel=.* too large"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_output_2pow63", X,
            lambda g, x: g.adaptive_avg_pool2d(x, BIG), ValueError,
            f"adaptive_avg_pool2d: output_size={BIG} is too large"),
    BadCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_output_beyond_any_array", X,
            lambda g, x: g.adaptive_avg_pool2d(x, 10 ** 10), ValueError,
            r"adaptive_avg_pool2d: output_size=10000000000 gives an output of shape "
            r"\(1, 10000000000, 10000000000, 2\)"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_output_2pow63", X,
            lambda g, x: g.adaptive_max_pool2d(x, (BIG, 1)), ValueError,
            "adaptive_max_pool2d: output_size=.* too large"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_output_beyond_any_array", X,
            lambda g, x: g.adaptive_max_pool2d(x, (10 ** 10, 10 ** 10)), ValueError,
            "adaptive_max_pool2d: output_size=.* gives an output of shape"),
    BadCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_bins_beyond_any_array", _x(1, 1, 1, 1),
            lambda g, x: g.adaptive_max_pool2d(x, (2 ** 60 + 1, 1)), ValueError,
            "adaptive_max_pool2d: output_size=.* gives an (int64 bin-bounds vector|output)"),
    BadCase(Op.GLOBAL_AVG_POOL2D, "global_avg_pool2d_nhwc_alias", _x(2, 2, 2),
            lambda g, x: g.global_avg_pool2d_nhwc(x), yscv.ShapeError, "global_avg_pool2d"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


def _small_ints(shape):
    """Small integers: many exact ties, in a window and across overlapping windows."""
    return lambda rng: (rng.integers(-2, 3, size=shape).astype(float),)


# At ties the recorded rule scatters to the saved argmax (PyTorch's first
# maximum), so the recorded first and second derivatives equal PyTorch's;
# compared with PyTorch only, as a finite difference would break the tie.
TIES = [
    dataclasses.replace(_max((2, 4, 6, 3), "", 2), name="max_k2_ties",
                        inputs=_small_ints((2, 4, 6, 3))),
    dataclasses.replace(_max((1, 5, 5, 2), "", 3, 1, 1), name="max_k3_s1_p1_overlapping_ties",
                        inputs=_small_ints((1, 5, 5, 2))),
    dataclasses.replace(_amax((1, 7, 5, 3), "", (3, 2)), name="adaptive_max_ties",
                        inputs=_small_ints((1, 7, 5, 3))),
]


@pytest.mark.parametrize("case", TIES, ids=[c.id for c in TIES])
def test_second_order_at_ties_matches_pytorch(case):
    pytest.importorskip("torch")
    check_torch_second_order(case)


# ------------------------------------------------------- targeted semantics
def test_max_pool_ties_route_gradient_to_first_maximum():
    g = yscv.Graph(np.float64)
    x = np.zeros((1, 4, 4, 2))
    x[0, :2, :2, 0] = 5.0                       # window (0,0): all four tied
    x[0, 0, 3, 0] = x[0, 1, 2, 0] = 7.0          # window (0,1): tie at (0,3) and (1,2)
    x[0, 2:, :, 1] = -1.0                        # windows in row 1 of channel 1: all tied
    v = g.variable(x)
    g.backward(g.max_pool2d(v, 2), grad=np.arange(1.0, 9.0).reshape(1, 2, 2, 2))
    expected = np.zeros_like(x)
    expected[0, 0, 0, 0] = 1.0                   # first of the tied 2x2 block
    expected[0, 0, 3, 0] = 3.0                   # (0,3) comes before (1,2) row-major
    expected[0, 0, 0, 1] = 2.0                   # zeros tie in channel 1, window (0,0)
    expected[0, 0, 2, 1] = 4.0
    expected[0, 2, 0, 0] = 5.0
    expected[0, 2, 2, 0] = 7.0
    expected[0, 2, 0, 1] = 6.0
    expected[0, 2, 2, 1] = 8.0
    np.testing.assert_array_equal(g.grad(v), expected)


def test_max_pool_ties_in_overlapping_windows_and_padding():
    # 3x3 stride 1 pad 1 on a constant image: every window's first non-padding
    # element gets the gradient (padding is -inf, never the maximum).
    g = yscv.Graph(np.float64)
    v = g.variable(np.full((1, 3, 3, 1), 2.0))
    out = g.max_pool2d(v, 3, 1, 1)
    np.testing.assert_array_equal(g.value(out), np.full((1, 3, 3, 1), 2.0))
    g.backward(out, grad=np.ones((1, 3, 3, 1)))
    expected = np.zeros((3, 3))
    expected[0, 0] = 4.0   # windows centred at (0,0), (0,1), (1,0), (1,1)
    expected[0, 1] = 2.0   # (0,2), (1,2)
    expected[1, 0] = 2.0   # (2,0), (2,1)
    expected[1, 1] = 1.0   # (2,2)
    np.testing.assert_array_equal(g.grad(v)[0, :, :, 0], expected)


def test_adaptive_max_pool_ties_route_gradient_to_first_maximum():
    g = yscv.Graph(np.float32)
    v = g.variable(np.ones((1, 3, 3, 1)))
    g.backward(g.adaptive_max_pool2d(v, 1), grad=np.array([[[[3.0]]]]))
    expected = np.zeros((1, 3, 3, 1), np.float32)
    expected[0, 0, 0, 0] = 3.0
    np.testing.assert_array_equal(g.grad(v), expected)


def test_max_pool_propagates_nan_like_pytorch():
    g = yscv.Graph(np.float64)
    x = np.arange(16.0).reshape(1, 4, 4, 1)
    x[0, 0, 1, 0] = np.nan
    out = g.value(g.max_pool2d(g.constant(x), 2))
    assert np.isnan(out[0, 0, 0, 0])
    np.testing.assert_array_equal(out[0, :, :, 0].ravel()[1:], [7.0, 13.0, 15.0])


@pytest.mark.parametrize("method,args,out_shape", [
    ("max_pool2d", (2,), (2, 3, 2, 3)),
    ("max_pool2d", (3, 1, 1), (2, 6, 4, 3)),
    ("adaptive_max_pool2d", ((5, 3),), (2, 5, 3, 3)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_saves_only_the_int32_argmax(method, args, out_shape, dtype):
    g = yscv.Graph(dtype)
    x = g.variable(np.random.default_rng(0).standard_normal((2, 6, 4, 3)))
    assert g.memory()["saved"] == 0
    out = getattr(g, method)(x, *args)
    assert g.value(out).shape == out_shape
    saved = g._saved[out.index]
    assert isinstance(saved, np.ndarray) and saved.dtype == np.int32
    assert saved.shape == out_shape
    assert g.memory()["saved"] == saved.nbytes == int(np.prod(out_shape)) * 4


@pytest.mark.parametrize("build", [
    lambda g, x: g.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
    lambda g, x: g.adaptive_avg_pool2d(x, (4, 3)),
    lambda g, x: g.global_avg_pool2d(x),
])
def test_average_pools_save_nothing(build):
    g = yscv.Graph()
    x = g.variable(np.ones((2, 5, 4, 3)))
    build(g, x)
    assert g.memory()["saved"] == 0


def test_argmax_indices_are_flat_positions_in_the_input_plane():
    x = np.zeros((1, 3, 4, 2))
    x[0, 2, 3, 0] = 1.0
    x[0, 1, 2, 1] = 1.0
    _, arg = FORWARD[Op.MAX_POOL2D]((3, 4, 1, 1, 0, 0), x)
    np.testing.assert_array_equal(arg.reshape(-1), [2 * 4 + 3, 1 * 4 + 2])


@pytest.mark.parametrize("op,attrs,reference", [
    (Op.MAX_POOL2D, (2, 2, 1, 2, 1, 0), lambda a: ref_max_pool2d(a, 2, (1, 2), (1, 0))),
    (Op.AVG_POOL2D, (3, 2, 2, 1, 1, 1, False),
     lambda a: ref_avg_pool2d(a, (3, 2), (2, 1), 1, False)),
    (Op.ADAPTIVE_AVG_POOL2D, (2, 3), lambda a: ref_adaptive(a, (2, 3), _mean)),
    (Op.ADAPTIVE_MAX_POOL2D, (3, 2), lambda a: ref_adaptive(a, (3, 2), max)),
    (Op.GLOBAL_AVG_POOL2D, None, ref_global_avg),
])
def test_forwards_accept_non_contiguous_values(op, attrs, reference):
    base = np.random.default_rng(1).standard_normal((2, 5, 10, 6))
    x = base[:, :, ::2, 1::2]          # strided view, as other ops may produce
    assert not x.flags.c_contiguous
    out, _ = FORWARD[op](attrs, x)
    np.testing.assert_allclose(out, reference(x), rtol=1e-12, atol=1e-12)


def test_pool_of_a_constant_input_builds_a_node_that_needs_no_grad():
    g = yscv.Graph()
    arr = np.arange(32.0).reshape(1, 4, 4, 2)
    out = g.max_pool2d(arr, 2)          # array operand becomes a constant leaf
    assert len(g) == 2 and not g.requires_grad(out)
    np.testing.assert_array_equal(g.value(out), ref_max_pool2d(arr, 2))


def test_float32_window_sums_match_float64_reference():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 9, 11, 5))
    g = yscv.Graph(np.float32)
    v = g.variable(x)
    out = g.avg_pool2d(v, 3, 2, 1, count_include_pad=False)
    assert g.value(out).dtype == np.float32
    np.testing.assert_allclose(g.value(out), ref_avg_pool2d(x, 3, 2, 1, False), rtol=1e-5, atol=1e-6)
    g.backward(out, grad=np.ones(g.value(out).shape))
    assert g.grad(v).dtype == np.float32


# ------------------------------------------------------- PyTorch cross-check
TORCH_CASES = [
    ("max_pool2d", dict(kernel=2), "max_pool2d", dict(kernel_size=2)),
    ("max_pool2d", dict(kernel=3, stride=1, padding=1), "max_pool2d",
     dict(kernel_size=3, stride=1, padding=1)),
    ("max_pool2d", dict(kernel=(3, 2), stride=(2, 1), padding=(1, 1)), "max_pool2d",
     dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1))),
    ("avg_pool2d", dict(kernel=3, stride=2, padding=1), "avg_pool2d",
     dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", dict(kernel=3, stride=1, padding=1, count_include_pad=False), "avg_pool2d",
     dict(kernel_size=3, stride=1, padding=1, count_include_pad=False)),
    ("avg_pool2d", dict(kernel=(2, 3), stride=(1, 2), padding=(1, 0), count_include_pad=False),
     "avg_pool2d", dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), count_include_pad=False)),
    ("adaptive_avg_pool2d", dict(output_size=(3, 4)), "adaptive_avg_pool2d", dict(output_size=(3, 4))),
    ("adaptive_avg_pool2d", dict(output_size=(11, 13)), "adaptive_avg_pool2d",
     dict(output_size=(11, 13))),
    ("adaptive_max_pool2d", dict(output_size=(3, 4)), "adaptive_max_pool2d", dict(output_size=(3, 4))),
    ("adaptive_max_pool2d", dict(output_size=(11, 5)), "adaptive_max_pool2d",
     dict(output_size=(11, 5))),
]


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ours,kw,theirs,tkw", TORCH_CASES, ids=[
    f"{c[0]}-{'-'.join(f'{k}{v}' for k, v in c[1].items())}" for c in TORCH_CASES])
def test_matches_pytorch_forward_and_gradient(ours, kw, theirs, tkw, dtype, ties):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    shape = (3, 7, 9, 4)
    # Small integers make many exact ties; tie routing must equal PyTorch's.
    x = (rng.integers(-2, 3, size=shape) if ties else rng.standard_normal(shape)).astype(dtype)
    g = yscv.Graph(dtype)
    v = g.variable(x)
    out = getattr(g, ours)(v, **kw)
    cot = rng.standard_normal(g.value(out).shape).astype(dtype)
    g.backward(out, grad=cot)

    t = torch.tensor(x).permute(0, 3, 1, 2).detach().requires_grad_(True)
    tout = getattr(F, theirs)(t, **tkw)
    tout.backward(torch.tensor(cot).permute(0, 3, 1, 2))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.value(out), tout.detach().permute(0, 2, 3, 1).numpy(), **tol)
    np.testing.assert_allclose(g.grad(v), t.grad.permute(0, 2, 3, 1).numpy(), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_global_avg_pool_matches_pytorch(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 6, 5, 4)).astype(dtype)
    g = yscv.Graph(dtype)
    v = g.variable(x)
    out = g.global_avg_pool2d(v)
    cot = rng.standard_normal((3, 4)).astype(dtype)
    g.backward(out, grad=cot)
    t = torch.tensor(x).permute(0, 3, 1, 2).detach().requires_grad_(True)
    tout = torch.nn.functional.adaptive_avg_pool2d(t, 1).flatten(1)
    tout.backward(torch.tensor(cot))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), **tol)
    np.testing.assert_allclose(g.grad(v), t.grad.permute(0, 2, 3, 1).numpy(), **tol)


def test_pools_from_two_threads_match_sequential_results():
    import threading

    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((4, 9, 8, 5)) for _ in range(2)]

    def run(a):
        g = yscv.Graph(np.float64)
        x = g.variable(a)
        outs = [g.max_pool2d(x, 3, 2, 1), g.avg_pool2d(x, 3, 1, 1, False),
                g.adaptive_max_pool2d(x, (4, 5)), g.adaptive_avg_pool2d(x, 3)]
        for o in outs:   # leaf gradients accumulate over the four backward calls
            g.backward(o, grad=np.cos(g.value(o)))
        return [g.value(o).copy() for o in outs] + [g.grad(x).copy()]

    expected = [run(a) for a in arrays]
    got = [None, None]

    def worker(k):
        for _ in range(20):
            got[k] = run(arrays[k])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        for e, r in zip(expected[k], got[k]):
            np.testing.assert_array_equal(r, e)


@pytest.mark.parametrize("shape", [(0, 4, 4, 3), (2, 4, 4, 0)], ids=["empty_batch", "no_channels"])
def test_empty_batch_or_channels_give_empty_results(shape):
    g = yscv.Graph()
    x = g.variable(np.ones(shape))
    for out, want in [(g.max_pool2d(x, 2), (2, 2)), (g.avg_pool2d(x, 3, 1, 1), (4, 4)),
                      (g.adaptive_avg_pool2d(x, 3), (3, 3)), (g.adaptive_max_pool2d(x, 5), (5, 5))]:
        assert g.value(out).shape == (shape[0],) + want + (shape[3],)
        g.backward(out, grad=np.ones(g.value(out).shape))
        assert g.grad(x).shape == shape
    assert g.value(g.global_avg_pool2d(x)).shape == (shape[0], shape[3])


# ------------------------------------------------ huge int arguments (issue 12.8)
def test_largest_representable_stride_and_huge_kernel_work():
    """Int arguments up to the largest array index pass and compute: a stride
    of 2**63 - 1 is one window; an average over a 2**62-wide padded kernel
    divides by kh*kw = 2**124 (that product overflowed int64 and gave inf)."""
    x = np.arange(32.0).reshape(1, 4, 4, 2)
    g = yscv.Graph(np.float64)
    xn = g.variable(x)
    m = g.max_pool2d(xn, 2, stride=BIG - 1)
    np.testing.assert_array_equal(g.value(m), g.value(g.max_pool2d(xn, 2, stride=4)))
    k = 2 ** 62
    a = g.avg_pool2d(xn, k, padding=k // 2)
    np.testing.assert_allclose(g.value(a), x.sum(axis=(1, 2), keepdims=True) / float(k) ** 2,
                               rtol=1e-15)
    g.backward(g.sum(a) + g.sum(m))
    want = np.full(x.shape, 1.0 / float(k) ** 2)
    want[0, 1, 1, :] += 1.0                              # max of the one 2x2 window
    np.testing.assert_allclose(g.grad(xn), want, rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_2x2_backward_taken_and_matches_scatter(monkeypatch, dtype):
    """2 x 2 / 2 without padding: the one-pass backward runs (it writes every
    element, 0 off the argmax and in an odd last row/column) and equals the
    zero-fill + scatter-add path bit for bit (signed zeros too), NaN and
    ties included; large enough for several row chunks."""
    from yscv.compute import pool as P

    calls = []
    real = P.K.max_pool_2x2
    monkeypatch.setattr(P.K, "max_pool_2x2", lambda *a: (calls.append(a[-1]), real(*a))[1])
    rng = np.random.default_rng(21)
    x = rng.integers(-3, 4, size=(6, 33, 35, 16)).astype(dtype)   # many ties
    x[0, 0, 0, 0] = x[2, 5, 7, 3] = x[2, 5, 8, 3] = np.nan
    cot = rng.standard_normal((6, 16, 17, 16)).astype(dtype)
    cot[1, 1, 1, 1] = -0.0

    def run():
        g = yscv.Graph(dtype)
        v = g.variable(x)
        out = g.max_pool2d(v, 2)
        g.backward(out, grad=cot)
        return g.value(out), g.grad(v)

    y1, gx1 = run()
    assert calls and calls[-1] is True               # the backward direction ran
    monkeypatch.setattr(P, "max_scatter",
                        lambda g_, shape, arg, two=False, f=P.max_scatter: f(g_, shape, arg))
    y2, gx2 = run()
    np.testing.assert_array_equal(y1, y2)
    assert np.array_equal(gx1, gx2)
    assert np.array_equal(np.signbit(gx1), np.signbit(gx2))
    assert gx1.shape == x.shape and np.isfinite(gx1).all()


def test_max_pool_same_bits_on_one_thread_and_two():
    """Row chunks depend on the sizes only: forward and backward give the
    same bits whatever the number of threads."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((8, 32, 32, 16)).astype(np.float32)

    def run():
        g = yscv.Graph(np.float32)
        v = g.variable(x)
        outs = [g.max_pool2d(v, 2), g.max_pool2d(v, 3, 1, 1)]
        for o in outs:
            g.backward(o, grad=np.cos(g.value(o)))
        return [g.value(o).copy() for o in outs] + [g.grad(v).copy()]

    check_same_bits_on_threads(run)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_2x2_kernel_equals_the_generic_one(monkeypatch, dtype):
    """2 x 2 / 2 without padding runs the four-taps-in-registers kernel; its
    max and argmax equal the generic bins kernel's bit for bit (ties, NaN,
    -inf, an odd remainder row and column), and the op takes it."""
    from yscv.compute import pool as P

    rng = np.random.default_rng(23)
    x = rng.integers(-2, 3, size=(5, 33, 31, 24)).astype(dtype)
    x[0, 0, 0, :4] = [np.nan, -np.inf, np.inf, -0.0]
    x[1, 2, 3, 5] = x[1, 3, 2, 5] = np.nan
    x[2, 4:6, 4:6, 6] = -np.inf
    plan = P.window_plan(33, 31, 2, 2, 2, 2, 0, 0, True, x.dtype)
    m1, a1 = P.max_pool(x, plan)
    m2, a2 = P.max_pool(x, plan, two_by_two=True)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(a1, a2)
    assert a2.dtype == np.int32 and a2[2, 2, 2, 6] == 4 * 31 + 4
    seen = []
    real = P.max_pool
    monkeypatch.setattr(P, "max_pool", lambda x, plan, two=False: (seen.append(two),
                                                                    real(x, plan, two))[1])
    g = yscv.Graph(dtype)
    g.max_pool2d(g.variable(x), 2)
    g.max_pool2d(g.variable(x), 2, 1)
    assert seen == [True, False]


# ------------------------------------------------ 1-d and 3-d pools (NLC, NDHWC)
from yscv.testing import make_second_order_tests  # noqa: E402


def _triple(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v)


def ref_pool3d(x, kernel, stride=None, padding=0, reduce="max", count_include_pad=True):
    """Naive loops over [N, D, H, W, C] windows (padding -inf for max, zeros
    for mean; the divisor kd*kh*kw or the count of non-padding elements)."""
    k = _triple(kernel)
    s = _triple(kernel if stride is None else stride)
    p = _triple(padding)
    n, *sp, c = x.shape
    out_sp = [(size + 2 * pp - kk) // ss + 1 for size, kk, ss, pp in zip(sp, k, s, p)]
    out = np.empty((n, *out_sp, c))
    for o in np.ndindex(*out_sp):
        vals, count = [], 0
        for t in np.ndindex(*k):
            pos = [oo * ss - pp + tt for oo, ss, pp, tt in zip(o, s, p, t)]
            if all(0 <= q < size for q, size in zip(pos, sp)):
                vals.append(x[(slice(None), *pos)])
                count += 1
        vals = np.stack(vals)
        if reduce == "max":
            out[(slice(None), *o)] = vals.max(axis=0)
        else:
            out[(slice(None), *o)] = vals.sum(axis=0) / (np.prod(k) if count_include_pad else count)
    return out


def _ncl(t, x):
    return x.permute(0, 2, 1)


def _ncdhw(t, x):
    return x.permute(0, 4, 1, 2, 3)


def _ndhwc(t, x):
    return x.permute(0, 2, 3, 4, 1)


def _max1(shape, name, kernel, stride=None, padding=0):
    return OpCase(Op.MAX_POOL1D, lambda g, x: g.max_pool1d(x, kernel, stride, padding), [shape],
                  lambda x: ref_max_pool2d(x[:, None], (1, kernel), (1, stride or kernel),
                                           (0, padding))[:, 0],
                  name=name, inputs=distinct(shape),
                  torch_build=lambda t, x: _ncl(t, t.nn.functional.max_pool1d(
                      _ncl(t, x), kernel, stride, padding)))


def _avg1(shape, name, kernel, stride=None, padding=0, cip=True):
    return OpCase(Op.AVG_POOL1D, lambda g, x: g.avg_pool1d(x, kernel, stride, padding, cip),
                  [shape], lambda x: ref_avg_pool2d(x[:, None], (1, kernel),
                                                    (1, stride or kernel), (0, padding), cip)[:, 0],
                  name=name, torch_build=lambda t, x: _ncl(t, t.nn.functional.avg_pool1d(
                      _ncl(t, x), kernel, stride, padding, count_include_pad=cip)))


def _aavg1(shape, name, size):
    return OpCase(Op.ADAPTIVE_AVG_POOL1D, lambda g, x: g.adaptive_avg_pool1d(x, size), [shape],
                  lambda x: ref_adaptive(x[:, None], (1, size), _mean)[:, 0], name=name,
                  torch_build=lambda t, x: _ncl(t, t.nn.functional.adaptive_avg_pool1d(
                      _ncl(t, x), size)))


def _max3(shape, name, kernel, stride=None, padding=0):
    return OpCase(Op.MAX_POOL3D, lambda g, x: g.max_pool3d(x, kernel, stride, padding), [shape],
                  lambda x: ref_pool3d(x, kernel, stride, padding), name=name,
                  inputs=distinct(shape),
                  torch_build=lambda t, x: _ndhwc(t, t.nn.functional.max_pool3d(
                      _ncdhw(t, x), kernel, stride, padding)))


def _avg3(shape, name, kernel, stride=None, padding=0, cip=True):
    return OpCase(Op.AVG_POOL3D, lambda g, x: g.avg_pool3d(x, kernel, stride, padding, cip),
                  [shape], lambda x: ref_pool3d(x, kernel, stride, padding, "mean", cip),
                  name=name, torch_build=lambda t, x: _ndhwc(t, t.nn.functional.avg_pool3d(
                      _ncdhw(t, x), kernel, stride, padding, count_include_pad=cip)))


POOL_ND_CASES = [
    _max1((2, 6, 3), "max1d_k2_default_stride", 2),
    _max1((1, 7, 2), "max1d_k3_s2_p1", 3, 2, 1),
    _max1((1, 6, 2), "max1d_k3_s1_overlapping", 3, 1),
    _avg1((2, 6, 3), "avg1d_k2_default_stride", 2),
    _avg1((1, 7, 2), "avg1d_k3_s2_p1_include_pad", 3, 2, 1, True),
    _avg1((1, 7, 2), "avg1d_k3_s2_p1_exclude_pad", 3, 2, 1, False),
    _aavg1((2, 7, 2), "adaptive_avg1d_nondivisible_down", 3),
    _aavg1((1, 3, 2), "adaptive_avg1d_up", 5),
    _aavg1((1, 6, 2), "adaptive_avg1d_divisible", 2),
    _max3((1, 4, 4, 4, 2), "max3d_k2_default_stride", 2),
    _max3((1, 5, 4, 3, 2), "max3d_k322_s212_p110", (3, 2, 2), (2, 1, 2), (1, 1, 0)),
    _avg3((1, 4, 4, 4, 2), "avg3d_k2_default_stride", 2),
    _avg3((1, 5, 4, 3, 2), "avg3d_k322_s212_p111_include_pad", (3, 2, 2), (2, 1, 2), (1, 1, 1)),
    _avg3((1, 5, 4, 3, 2), "avg3d_k322_s212_p111_exclude_pad", (3, 2, 2), (2, 1, 2), (1, 1, 1),
          False),
]

X1 = _x(1, 6, 2)
X3 = _x(1, 4, 4, 4, 2)
POOL_ND_BAD = [
    BadCase(Op.MAX_POOL1D, "max1d_rank4", X, lambda g, x: g.max_pool1d(x, 2), yscv.ShapeError,
            "max_pool1d: x must be 3-d"),
    BadCase(Op.MAX_POOL1D, "max1d_kernel_larger", X1, lambda g, x: g.max_pool1d(x, 7),
            ValueError, "max_pool1d: kernel=7 is larger than the padded input along L"),
    BadCase(Op.MAX_POOL1D, "max1d_padding_over_half_kernel", X1,
            lambda g, x: g.max_pool1d(x, 2, 1, 2), ValueError, "max_pool1d: padding=2"),
    BadCase(Op.MAX_POOL1D, "max1d_stride_zero", X1, lambda g, x: g.max_pool1d(x, 2, 0),
            ValueError, "max_pool1d: stride=0"),
    BadCase(Op.MAX_POOL1D, "max1d_kernel_pair", X1, lambda g, x: g.max_pool1d(x, (2, 2)),
            TypeError, "max_pool1d: kernel"),
    BadCase(Op.AVG_POOL1D, "avg1d_count_include_pad_not_bool", X1,
            lambda g, x: g.avg_pool1d(x, 2, count_include_pad=1), TypeError,
            "avg_pool1d: count_include_pad must be a bool"),
    BadCase(Op.AVG_POOL1D, "avg1d_empty_length", _x(1, 0, 2), lambda g, x: g.avg_pool1d(x, 1),
            yscv.ShapeError, "avg_pool1d: x must have non-empty spatial dims"),
    BadCase(Op.AVG_POOL1D, "avg1d_kernel_zero", X1, lambda g, x: g.avg_pool1d(x, 0),
            ValueError, "avg_pool1d: kernel=0"),
    BadCase(Op.ADAPTIVE_AVG_POOL1D, "adaptive_avg1d_zero", X1,
            lambda g, x: g.adaptive_avg_pool1d(x, 0), ValueError,
            "adaptive_avg_pool1d: output_size=0 must be >= 1"),
    BadCase(Op.ADAPTIVE_AVG_POOL1D, "adaptive_avg1d_float", X1,
            lambda g, x: g.adaptive_avg_pool1d(x, 2.0), TypeError,
            "adaptive_avg_pool1d: output_size must be an int"),
    BadCase(Op.ADAPTIVE_AVG_POOL1D, "adaptive_avg1d_rank4", X,
            lambda g, x: g.adaptive_avg_pool1d(x, 2), yscv.ShapeError,
            "adaptive_avg_pool1d: x must be 3-d"),
    BadCase(Op.MAX_POOL3D, "max3d_rank4", X, lambda g, x: g.max_pool3d(x, 2), yscv.ShapeError,
            "max_pool3d: x must be 5-d"),
    BadCase(Op.MAX_POOL3D, "max3d_kernel_larger_along_d", _x(1, 2, 4, 4, 1),
            lambda g, x: g.max_pool3d(x, (3, 2, 2)), ValueError,
            "max_pool3d: kernel=.* is larger than the padded input along D"),
    BadCase(Op.MAX_POOL3D, "max3d_padding_over_half_kernel", X3,
            lambda g, x: g.max_pool3d(x, 2, 1, (0, 0, 2)), ValueError,
            "max_pool3d: padding=.* along W"),
    BadCase(Op.MAX_POOL3D, "max3d_kernel_pair", X3, lambda g, x: g.max_pool3d(x, (2, 2)),
            TypeError, "max_pool3d: kernel"),
    BadCase(Op.AVG_POOL3D, "avg3d_stride_negative", X3, lambda g, x: g.avg_pool3d(x, 2, -1),
            ValueError, "avg_pool3d: stride"),
    BadCase(Op.AVG_POOL3D, "avg3d_count_include_pad_not_bool", X3,
            lambda g, x: g.avg_pool3d(x, 2, count_include_pad="no"), TypeError,
            "avg_pool3d: count_include_pad"),
]

CASES += POOL_ND_CASES
BAD += POOL_ND_BAD
test_forward_1d_3d, test_gradcheck_1d_3d, test_bad_arguments_1d_3d = make_op_tests(
    POOL_ND_CASES, POOL_ND_BAD)
test_second_order_1d_3d = make_second_order_tests(POOL_ND_CASES)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nsp", [1, 3])
def test_max_pool_1d_3d_ties_route_like_pytorch(dtype, nsp):
    """Integer inputs (many ties), overlapping padded windows: values and
    gradients equal torch's (the first maximum in (d, h, w) order)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(31 + nsp)
    shape = (2, 9, 3) if nsp == 1 else (2, 5, 4, 6, 3)
    x = rng.integers(-2, 3, size=shape).astype(dtype)
    cot = rng.standard_normal(shape).astype(dtype)
    g = yscv.Graph(dtype)
    v = g.variable(x)
    y = g.max_pool1d(v, 3, 1, 1) if nsp == 1 else g.max_pool3d(v, 3, 1, 1)
    g.backward(y, grad=cot[tuple(slice(0, s) for s in g.value(y).shape)])
    perm, back = ((0, 2, 1), (0, 2, 1)) if nsp == 1 else ((0, 4, 1, 2, 3), (0, 2, 3, 4, 1))
    t = torch.tensor(x).permute(*perm).requires_grad_(True)
    fn = torch.nn.functional.max_pool1d if nsp == 1 else torch.nn.functional.max_pool3d
    ty = fn(t, 3, 1, 1).permute(*back)
    ty.backward(torch.tensor(cot[tuple(slice(0, s) for s in ty.shape)]))
    np.testing.assert_array_equal(g.value(y), ty.detach().numpy())
    np.testing.assert_allclose(g.grad(v), t.grad.permute(*back).numpy(), rtol=1e-6, atol=1e-6)


def test_max_pool3d_saves_only_the_flat_argmax():
    g = yscv.Graph(np.float32)
    y = g.max_pool3d(g.variable(np.arange(96.0).reshape(1, 4, 4, 3, 2)), 2, 1)
    saved = g._saved[y.index]
    assert saved.dtype == np.int32 and saved.shape == g.value(y).shape
    # the maximum of each window is its last corner (d+1, h+1, w+1)
    d, h, w = np.meshgrid(np.arange(3), np.arange(3), np.arange(2), indexing="ij")
    want = ((d + 1) * 4 + (h + 1)) * 3 + (w + 1)
    np.testing.assert_array_equal(saved[0, ..., 0], want)
