"""yscv.onnx.export, op by op: one row per Op member and option. Each row is
exported once per dtype with a dynamic batch, checked with
``onnx.checker.check_model(full_check=True)``, run in ONNX Runtime at two
batch sizes and compared with yscv's own output (float32 to float32
rounding; float64 to 1e-10 where ONNX Runtime has float64 kernels).
Ops with no ONNX form raise an error naming the op and the node."""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Optional, Sequence

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import yscv  # noqa: E402
from yscv import Op  # noqa: E402
from yscv.onnx import ExportError, export  # noqa: E402
from yscv.onnx._optable import EXPORTS, NO_ONNX  # noqa: E402

#: ONNX operators ONNX Runtime (1.31, CPU) implements for float32 only: a
#: float64 file using one is checked with the checker, and ONNX Runtime must
#: refuse it naming one of these (any other refusal fails the test)
ORT_FLOAT32_ONLY = {"Conv", "ConvTranspose", "AveragePool", "RNN", "LSTM", "GRU", "Erf"}


class _Refused:
    """A session stand-in whose run re-raises ONNX Runtime's refusal to load."""

    def __init__(self, exc):
        self.exc = exc

    def run(self, *args):
        raise self.exc


def session(path, dtype):
    """An ONNX Runtime session; for float64 files without the extended
    fusions, which fold constants into float32 attributes (MatMul * scale
    becomes FusedMatMul with a float32 alpha)."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 4   # the refusals below are expected
    if dtype == np.float64:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:   # a kernel missing at load time
        return _Refused(exc)


def refused_op(exc):
    """The operator ONNX Runtime names when it has no kernel for a dtype."""
    m = (re.search(r"implementation for (\w+)\(", str(exc))
         or re.search(r"(\w+) operator does not support double", str(exc)))
    return m.group(1) if m else None


@dataclasses.dataclass
class ExportCase:
    """One op with one set of options.

    ``build(g, *nodes)`` records the op on the example inputs, which
    ``inputs(rng, batch)`` draws (float arrays become graph inputs; integer
    arrays are index inputs); ``batch_axes[k]`` is input k's batch axis (None:
    fixed). Weights captured by ``build`` become initializers."""

    op: Op
    name: str
    build: Callable
    inputs: Callable
    batch_axes: Sequence = (0,)
    opset: int = 17
    rtol32: float = 2e-5
    atol32: float = 2e-6


def _u(*shape, lo=-2.0, hi=2.0):
    return lambda rng, n: (rng.uniform(lo, hi, size=(n, *shape)),)


def _fixed(seed, *shape, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape)


W34 = _fixed(1, 3, 4)
C4 = _fixed(2, 4)

CASES = [
    # elementwise
    ExportCase(Op.ADD, "add", lambda g, a, b: g.add(a, b), lambda r, n: (r.normal(size=(n, 4)),
                                                                          r.normal(size=(n, 4))), (0, 0)),
    ExportCase(Op.ADD, "add_bias_constant", lambda g, a: a + C4, _u(4)),
    ExportCase(Op.SUB, "sub_scalar_left", lambda g, a: 1.5 - a, _u(3, 4)),
    ExportCase(Op.MUL, "mul", lambda g, a: a * g.constant(C4), _u(2, 4)),
    ExportCase(Op.DIV, "div", lambda g, a: a / (g.abs(g.constant(C4)) + 0.5), _u(4)),
    ExportCase(Op.POW, "pow", lambda g, a: g.pow(a, 2.5), _u(4, lo=0.5, hi=2.0)),
    ExportCase(Op.NEG, "neg", lambda g, a: -a, _u(4)),
    ExportCase(Op.ABS, "abs", lambda g, a: g.abs(a), _u(4)),
    ExportCase(Op.EXP, "exp", lambda g, a: g.exp(a), _u(4)),
    ExportCase(Op.LOG, "log", lambda g, a: g.log(a), _u(4, lo=0.1, hi=3.0)),
    ExportCase(Op.SQRT, "sqrt", lambda g, a: g.sqrt(a), _u(4, lo=0.1, hi=3.0)),
    ExportCase(Op.CLAMP, "clamp_both", lambda g, a: g.clamp(a, -0.5, 0.7), _u(4)),
    ExportCase(Op.CLAMP, "clamp_min", lambda g, a: g.clamp(a, min=-0.5), _u(4)),
    ExportCase(Op.CLAMP, "clamp_max", lambda g, a: g.clamp(a, max=0.3), _u(4)),
    ExportCase(Op.MAXIMUM, "maximum", lambda g, a: g.maximum(a, g.constant(C4)), _u(4)),
    ExportCase(Op.MINIMUM, "minimum", lambda g, a: g.minimum(a, g.constant(C4)), _u(4)),
    ExportCase(Op.WHERE, "where", lambda g, a: g.where(np.array([True, False, True, False]), a,
                                                      g.constant(C4)), _u(4)),
    # activations
    ExportCase(Op.RELU, "relu", lambda g, a: g.relu(a), _u(4)),
    ExportCase(Op.LEAKY_RELU, "leaky_relu", lambda g, a: g.leaky_relu(a, 0.2), _u(4)),
    ExportCase(Op.SIGMOID, "sigmoid", lambda g, a: g.sigmoid(a), _u(4)),
    ExportCase(Op.TANH, "tanh", lambda g, a: g.tanh(a), _u(4)),
    ExportCase(Op.GELU, "gelu_erf", lambda g, a: g.gelu(a), _u(4)),
    ExportCase(Op.GELU, "gelu_tanh", lambda g, a: g.gelu(a, "tanh"), _u(4)),
    ExportCase(Op.GELU, "gelu_sigmoid", lambda g, a: g.gelu(a, "sigmoid"), _u(4)),
    ExportCase(Op.SILU, "silu", lambda g, a: g.silu(a), _u(4)),
    ExportCase(Op.MISH, "mish", lambda g, a: g.mish(a), _u(4, lo=-30.0, hi=30.0)),
    ExportCase(Op.SOFTPLUS, "softplus", lambda g, a: g.softplus(a), _u(4, lo=-30.0, hi=30.0)),
    ExportCase(Op.SOFTPLUS, "softplus_beta_threshold", lambda g, a: g.softplus(a, 2.0, 1.0),
               _u(6)),
    ExportCase(Op.PRELU, "prelu_per_channel", lambda g, a: g.prelu(a, C4), _u(3, 4)),
    ExportCase(Op.PRELU, "prelu_shared", lambda g, a: g.prelu(a, np.array([0.3])), _u(3, 4)),
    ExportCase(Op.SOFTMAX, "softmax_last", lambda g, a: g.softmax(a), _u(3, 4)),
    ExportCase(Op.SOFTMAX, "softmax_axis1", lambda g, a: g.softmax(a, 1), _u(3, 4)),
    ExportCase(Op.LOG_SOFTMAX, "log_softmax", lambda g, a: g.log_softmax(a, 1), _u(3, 4)),
    ExportCase(Op.DROPOUT, "dropout_eval", lambda g, a: g.dropout(a, 0.5, training=False),
               _u(4)),
    ExportCase(Op.DROPOUT, "dropout_p0", lambda g, a: g.dropout(a, 0.0), _u(4)),
    # reductions
    ExportCase(Op.SUM, "sum_all", lambda g, a: g.sum(a), _u(3, 4)),
    ExportCase(Op.SUM, "sum_axes_keepdims", lambda g, a: g.sum(a, (1, 2), keepdims=True),
               _u(3, 4)),
    ExportCase(Op.SUM, "sum_no_axes", lambda g, a: g.sum(a, ()), _u(3)),
    ExportCase(Op.SUM_TO, "sum_to_leading_and_size1", lambda g, a: g.sum_to(a, (3, 1)), _u(3, 4)),
    ExportCase(Op.SUM_TO, "sum_to_size1_dynamic_batch",
               lambda g, a: g.sum_to(a, (a.shape[0], 1, 4)), _u(3, 4)),
    ExportCase(Op.SUM_TO, "sum_to_same_shape", lambda g, a: g.sum_to(a, a.shape), _u(3)),
    ExportCase(Op.MEAN, "mean_axis", lambda g, a: g.mean(a, -1), _u(3, 4)),
    ExportCase(Op.MEAN, "mean_all_keepdims", lambda g, a: g.mean(a, keepdims=True), _u(3, 4)),
    ExportCase(Op.MAX, "max_axis", lambda g, a: g.max(a, 1), _u(3, 4)),
    ExportCase(Op.MAX, "max_all", lambda g, a: g.max(a), _u(3, 4)),
    ExportCase(Op.MIN, "min_axes", lambda g, a: g.min(a, (0, 2), keepdims=True), _u(3, 4)),
    ExportCase(Op.VAR, "var", lambda g, a: g.var(a, -1), _u(3, 5)),
    ExportCase(Op.VAR, "var_ddof1_keepdims", lambda g, a: g.var(a, (1, 2), True, ddof=1),
               _u(3, 5)),
    ExportCase(Op.LOGSUMEXP, "logsumexp", lambda g, a: g.logsumexp(a, -1), _u(3, 5)),
    ExportCase(Op.LOGSUMEXP, "logsumexp_keepdims", lambda g, a: g.logsumexp(a, 1, True),
               _u(3, 5, lo=-50, hi=50)),
    # linear algebra
    ExportCase(Op.MATMUL, "matmul_weight", lambda g, a: g.matmul(a, g.constant(W34)), _u(3)),
    ExportCase(Op.MATMUL, "matmul_batched", lambda g, a, b: a @ b,
               lambda r, n: (r.normal(size=(n, 2, 3)), r.normal(size=(n, 3, 4))), (0, 0)),
    ExportCase(Op.MATMUL, "matmul_vector", lambda g, a: g.matmul(a, C4), _u(3, 4)),
    ExportCase(Op.TRANSPOSE, "transpose", lambda g, a: g.transpose(a, (0, 2, 1)), _u(3, 4)),
    ExportCase(Op.EINSUM, "einsum_explicit", lambda g, a: g.einsum("bij,jk->bki", a, W34),
               _u(2, 3)),
    ExportCase(Op.EINSUM, "einsum_ellipsis", lambda g, a, b: g.einsum("...ij,...jk", a, b),
               lambda r, n: (r.normal(size=(n, 2, 3)), r.normal(size=(n, 3, 2))), (0, 0)),
    ExportCase(Op.EINSUM, "einsum_diagonal_implicit", lambda g, a: g.einsum("bii", a), _u(3, 3)),
    # shape
    ExportCase(Op.RESHAPE, "reshape_infer", lambda g, a: g.reshape(a, (-1, 2, 6)), _u(3, 4)),
    ExportCase(Op.RESHAPE, "reshape_batch", lambda g, a: g.reshape(a, (a.shape[0], 2, 6)),
               _u(3, 4)),
    ExportCase(Op.FLATTEN, "flatten", lambda g, a: g.flatten(a), _u(3, 4, 2)),
    ExportCase(Op.FLATTEN, "flatten_middle", lambda g, a: g.flatten(a, 1, 2), _u(3, 4, 2)),
    ExportCase(Op.UNSQUEEZE, "unsqueeze", lambda g, a: g.unsqueeze(a, 1), _u(3)),
    ExportCase(Op.SQUEEZE, "squeeze", lambda g, a: g.squeeze(a, 1), _u(1, 3)),
    ExportCase(Op.EXPAND, "expand", lambda g, a: g.expand(a, (a.shape[0], 4, 3)), _u(1, 3)),
    ExportCase(Op.EXPAND, "expand_lead", lambda g, a: g.expand(a, (2, -1, 3)), _u(3)),
    ExportCase(Op.CAT, "cat", lambda g, a, b: g.cat([a, b, a], 1),
               lambda r, n: (r.normal(size=(n, 2)), r.normal(size=(n, 3))), (0, 0)),
    ExportCase(Op.STACK, "stack", lambda g, a, b: g.stack([a, b], -1),
               lambda r, n: (r.normal(size=(n, 2)), r.normal(size=(n, 2))), (0, 0)),
    ExportCase(Op.SELECT, "select", lambda g, a: g.select(a, 1, -1), _u(3, 4)),
    ExportCase(Op.NARROW, "narrow", lambda g, a: g.narrow(a, 2, 1, 2), _u(3, 4)),
    ExportCase(Op.GETITEM, "getitem_mixed", lambda g, a: a[:, ::-1, None, 1:3], _u(3, 4)),
    ExportCase(Op.GETITEM, "getitem_ellipsis_int", lambda g, a: a[..., 0, ::2], _u(3, 5)),
    ExportCase(Op.GETITEM, "getitem_negative_step", lambda g, a: a[:, 3:0:-2], _u(5)),
    ExportCase(Op.FLIP, "flip", lambda g, a: g.flip(a, (1, 2)), _u(3, 4)),
    ExportCase(Op.PAD, "pad", lambda g, a: g.pad(a, ((0, 0), (1, 2), (2, 0)), 0.5), _u(3, 4)),
    ExportCase(Op.REPEAT, "repeat", lambda g, a: g.repeat(a, (1, 2, 3)), _u(3, 2)),
    ExportCase(Op.REPEAT, "repeat_new_axes", lambda g, a: g.repeat(a, (2, 1, 1, 2)), _u(3, 2),
               (None,)),
    ExportCase(Op.PIXEL_SHUFFLE, "pixel_shuffle", lambda g, a: g.pixel_shuffle(a, 2),
               _u(3, 2, 8)),
    ExportCase(Op.UPSAMPLE_NEAREST, "upsample_nearest_2d", lambda g, a: g.upsample_nearest(
        a, (2, 3)), _u(3, 2, 2)),
    ExportCase(Op.UPSAMPLE_NEAREST, "upsample_nearest_1d", lambda g, a: g.upsample_nearest(
        a, 2), _u(3, 2)),
    # indexing (index arrays are fixed: the batch is too, except for embedding)
    ExportCase(Op.GATHER, "gather_index_smaller", lambda g, a: g.gather(
        a, 1, np.array([[0, 2], [1, 1]])), lambda r, n: (r.normal(size=(n + 1, 3)),), (None,)),
    ExportCase(Op.GATHER, "gather_axis0", lambda g, a: g.gather(
        a, 0, np.array([[1, 0, 1], [0, 0, 1]])), lambda r, n: (r.normal(size=(2, 3)),), (None,)),
    ExportCase(Op.SCATTER_ADD, "scatter_add", lambda g, a, s: g.scatter_add(
        a, 0, np.array([[0, 1, 0], [0, 0, 1]]), s),
        lambda r, n: (r.normal(size=(3, 4)), r.normal(size=(2, 4))), (None, None)),
    ExportCase(Op.GATHER, "gather_index_input", lambda g, a, i: g.gather(a, 1, i),
               lambda r, n: (r.normal(size=(n, 4)), r.integers(0, 4, size=(n, 3))), (0, 0)),
    ExportCase(Op.SCATTER_ADD, "scatter_add_index_input", lambda g, a, i, s: g.scatter_add(
        a, 1, i, s), lambda r, n: (r.normal(size=(n, 4)), r.integers(0, 4, size=(n, 3)),
                                    r.normal(size=(n, 3))), (0, 0, 0)),
    ExportCase(Op.SCATTER, "scatter_rows_of_a_free_batch", lambda g, a, s: g.scatter(
        a, np.array([1, 0]), s),
        lambda r, n: (r.normal(size=(n + 2, 3)), r.normal(size=(2, 3))), (0, None)),
    ExportCase(Op.SCATTER, "scatter_duplicates", lambda g, a, s: g.scatter(
        a, np.array([2, 0, 2]), s),
        lambda r, n: (r.normal(size=(4, 3)), r.normal(size=(3, 3))), (None, None)),
    ExportCase(Op.EMBEDDING, "embedding_index_input", lambda g, i, x: g.embedding(W34, i) + x,
               lambda r, n: (r.integers(0, 3, size=(n, 5)), r.normal(size=(n, 5, 4))), (0, 0)),
    ExportCase(Op.EMBEDDING, "embedding_fixed", lambda g, a: a + g.embedding(
        W34, np.array([2, 0])), _u(2, 4)),
]


def _conv_w(seed, *shape):
    return _fixed(seed, *shape, lo=-0.5, hi=0.5)


CW1, CW2, CW2G, CW3 = _conv_w(3, 3, 2, 4), _conv_w(4, 3, 3, 3, 4), _conv_w(5, 3, 3, 2, 4), \
    _conv_w(6, 2, 2, 2, 3, 2)
CB4 = _fixed(7, 4)
DW = _conv_w(8, 3, 3, 3, 2)
TW = _conv_w(9, 3, 3, 2, 4)

CASES += [
    ExportCase(Op.CONV1D, "conv1d_options", lambda g, x: g.conv1d(
        x, g.constant(CW1[:, :1]), CB4, stride=2, padding=1, dilation=2, groups=2), _u(9, 2)),
    ExportCase(Op.CONV2D, "conv2d", lambda g, x: g.conv2d(x, g.constant(CW2)), _u(5, 5, 3)),
    ExportCase(Op.CONV2D, "conv2d_options", lambda g, x: g.conv2d(
        x, g.constant(CW2G), g.constant(CB4), stride=(2, 1), padding=(1, 2), dilation=(1, 2),
        groups=2), _u(6, 5, 4)),
    ExportCase(Op.CONV2D, "conv2d_weight_input", lambda g, x, w: g.conv2d(x, w),
               lambda r, n: (r.normal(size=(n, 5, 5, 3)), r.normal(size=(3, 3, 3, 4))),
               (0, None)),
    ExportCase(Op.CONV3D, "conv3d", lambda g, x: g.conv3d(x, g.constant(CW3), stride=1,
                                                           padding=1), _u(3, 4, 3, 3)),
    ExportCase(Op.DEPTHWISE_CONV2D, "depthwise_conv2d", lambda g, x: g.depthwise_conv2d(
        x, g.constant(DW), _fixed(10, 6), stride=2, padding=1, dilation=1), _u(5, 6, 3)),
    ExportCase(Op.DEPTHWISE_CONV2D, "depthwise_conv2d_dilation", lambda g, x: g.depthwise_conv2d(
        x, g.constant(DW[:, :, :, :1]), dilation=2), _u(6, 6, 3)),
    ExportCase(Op.CONV3D, "conv3d_groups_stride_dilation", lambda g, x: g.conv3d(
        x, g.constant(CW3[:, :, :, :1]), stride=(1, 2, 1), dilation=(2, 1, 1), groups=2),
        _u(4, 4, 3, 2)),
    ExportCase(Op.CONV_TRANSPOSE2D, "conv_transpose2d_options", lambda g, x: g.conv_transpose2d(
        x, g.constant(TW), g.constant(CB4), stride=2, padding=1, output_padding=1, groups=2,
        dilation=1), _u(3, 4, 4)),
    ExportCase(Op.CONV_TRANSPOSE2D, "conv_transpose2d_dilation", lambda g, x: g.conv_transpose2d(
        x, g.constant(TW[:, :, :, :2]), dilation=2), _u(3, 3, 2)),
    ExportCase(Op.DEFORMABLE_CONV2D, "deformable_conv2d_opset19",
               lambda g, x, o: g.deformable_conv2d(x, g.constant(CW2), o, CB4, stride=1,
                                                   padding=1),
               lambda r, n: (r.normal(size=(n, 4, 5, 3)), r.uniform(-1.5, 1.5, (n, 4, 5, 18))),
               (0, 0), opset=19),
    # pooling
    ExportCase(Op.MAX_POOL2D, "max_pool2d", lambda g, x: g.max_pool2d(x, 2), _u(4, 6, 3)),
    ExportCase(Op.MAX_POOL2D, "max_pool2d_options", lambda g, x: g.max_pool2d(
        x, (3, 2), (2, 1), (1, 1)), _u(5, 6, 2)),
    ExportCase(Op.AVG_POOL2D, "avg_pool2d_count_pad", lambda g, x: g.avg_pool2d(
        x, 3, 2, 1), _u(5, 6, 2)),
    ExportCase(Op.AVG_POOL2D, "avg_pool2d_exclude_pad", lambda g, x: g.avg_pool2d(
        x, 3, 2, 1, count_include_pad=False), _u(5, 6, 2)),
    ExportCase(Op.ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", lambda g, x: g.adaptive_avg_pool2d(
        x, (3, 2)), _u(7, 5, 2)),
    ExportCase(Op.ADAPTIVE_MAX_POOL2D, "adaptive_max_pool2d", lambda g, x: g.adaptive_max_pool2d(
        x, (3, 4)), _u(7, 5, 2)),
    ExportCase(Op.GLOBAL_AVG_POOL2D, "global_avg_pool2d", lambda g, x: g.global_avg_pool2d(x),
               _u(3, 4, 2)),
]

RM, RV = _fixed(11, 4), _fixed(12, 4, lo=0.5, hi=2.0)

CASES += [
    ExportCase(Op.BATCH_NORM, "batch_norm_eval_nhwc", lambda g, x: g.batch_norm(
        x, C4, _fixed(13, 4), g.constant(RM), g.constant(RV), eps=1e-3), _u(3, 2, 4)),
    ExportCase(Op.BATCH_NORM, "batch_norm_eval_2d_no_affine", lambda g, x: g.batch_norm(
        x, None, None, g.constant(RM), g.constant(RV)), _u(4)),
    ExportCase(Op.BATCH_NORM, "batch_norm_training_stats", lambda g, x: g.batch_norm(
        x, C4, None, None, None, training=True), _u(3, 4)),
    ExportCase(Op.LAYER_NORM, "layer_norm", lambda g, x: g.layer_norm(x, C4, _fixed(14, 4)),
               _u(3, 4)),
    ExportCase(Op.LAYER_NORM, "layer_norm_no_affine", lambda g, x: g.layer_norm(x, eps=1e-2),
               _u(4)),
    ExportCase(Op.GROUP_NORM, "group_norm", lambda g, x: g.group_norm(x, _fixed(15, 6),
                                                                      _fixed(16, 6), 3),
               _u(2, 3, 6)),
    ExportCase(Op.GROUP_NORM, "group_norm_no_affine", lambda g, x: g.group_norm(x, None, None, 2),
               _u(5, 4)),
    ExportCase(Op.INSTANCE_NORM, "instance_norm", lambda g, x: g.instance_norm(
        x, C4, _fixed(17, 4)), _u(3, 2, 4)),
    ExportCase(Op.INSTANCE_NORM, "instance_norm_no_affine", lambda g, x: g.instance_norm(x),
               _u(5, 4)),
]

I, H = 3, 4
WIH = {k: _fixed(20 + k, I, k * H) for k in (1, 3, 4)}
WHH = {k: _fixed(30 + k, H, k * H) for k in (1, 3, 4)}
BIAS = {k: _fixed(40 + k, k * H) for k in (1, 3, 4)}
BHH3 = _fixed(50, 3 * H)


def _seq(t):
    """x [T, B, I] (time-major: the batch is axis 1)."""
    return lambda r, n: (r.normal(size=(t, n, I)),)


CASES += [
    ExportCase(Op.RNN, "rnn_tanh", lambda g, x: g.rnn(x, WIH[1], WHH[1], BIAS[1]), _seq(5), (1,)),
    ExportCase(Op.RNN, "rnn_relu_h0", lambda g, x, h: g.rnn(
        x, g.constant(WIH[1]), WHH[1], BIAS[1], h, nonlinearity="relu"),
        lambda r, n: (r.normal(size=(5, n, I)), r.normal(size=(n, H))), (1, 0)),
    ExportCase(Op.RNN, "rnn_unbatched", lambda g, x: g.rnn(x, WIH[1], WHH[1], BIAS[1]),
               lambda r, n: (r.normal(size=(n + 3, I)),), (None,)),
    ExportCase(Op.LSTM, "lstm", lambda g, x: g.lstm(x, WIH[4], WHH[4], BIAS[4]), _seq(5), (1,)),
    ExportCase(Op.LSTM, "lstm_h0_c0_cell", lambda g, x, h, c: g.lstm(
        x, WIH[4], WHH[4], BIAS[4], h, c, return_cell=True),
        lambda r, n: (r.normal(size=(4, n, I)), r.normal(size=(n, H)), r.normal(size=(n, H))),
        (1, 0, 0)),
    ExportCase(Op.LSTM, "lstm_h0_only", lambda g, x, h: g.lstm(x, WIH[4], WHH[4], BIAS[4], h),
               lambda r, n: (r.normal(size=(4, n, I)), r.normal(size=(n, H))), (1, 0)),
    ExportCase(Op.LSTM, "lstm_c0_only_unbatched", lambda g, x, c: g.lstm(
        x, WIH[4], WHH[4], BIAS[4], c0=c),
        lambda r, n: (r.normal(size=(n + 2, I)), r.normal(size=(H,))), (None, None)),
    ExportCase(Op.LSTM, "lstm_weights_as_inputs", lambda g, x, w: g.lstm(x, w, WHH[4], BIAS[4]),
               lambda r, n: (r.normal(size=(3, n, I)), r.normal(size=(I, 4 * H))), (1, None)),
    ExportCase(Op.GRU, "gru", lambda g, x: g.gru(x, WIH[3], WHH[3], BIAS[3], BHH3), _seq(5), (1,)),
    ExportCase(Op.GRU, "gru_h0", lambda g, x, h: g.gru(x, WIH[3], WHH[3], BIAS[3], BHH3, h),
               lambda r, n: (r.normal(size=(4, n, I)), r.normal(size=(n, H))), (1, 0)),
    ExportCase(Op.GRU, "gru_unbatched", lambda g, x: g.gru(x, WIH[3], WHH[3], BIAS[3], BHH3),
               lambda r, n: (r.normal(size=(n + 2, I)),), (None,)),
]

BOOL_MASK = np.array([[True, False, True, True, False],
                      [False, False, False, False, False],
                      [True, True, True, True, True]])
FLOAT_MASK = np.where(BOOL_MASK, 0.0, -np.inf) + _fixed(60, 3, 5)


def _qkv(heads=None):
    lead = () if heads is None else (heads,)
    return lambda r, n: (r.normal(size=(n, *lead, 3, 4)), r.normal(size=(n, *lead, 5, 4)),
                         r.normal(size=(n, *lead, 5, 2)))


SDPA = Op.SCALED_DOT_PRODUCT_ATTENTION
CASES += [
    ExportCase(SDPA, "sdpa", lambda g, q, k, v: g.scaled_dot_product_attention(q, k, v),
               _qkv(), (0, 0, 0)),
    ExportCase(SDPA, "sdpa_bool_mask_heads", lambda g, q, k, v: g.scaled_dot_product_attention(
        q, k, v, mask=BOOL_MASK), _qkv(2), (0, 0, 0)),
    ExportCase(SDPA, "sdpa_float_mask_scale", lambda g, q, k, v: g.scaled_dot_product_attention(
        q, k, v, mask=FLOAT_MASK, scale=0.3), _qkv(), (0, 0, 0)),
    ExportCase(SDPA, "sdpa_causal", lambda g, q, k, v: g.scaled_dot_product_attention(
        q, k, v, causal=True), _qkv(2), (0, 0, 0)),
    ExportCase(SDPA, "sdpa_mask_per_batch_element", lambda g, q, k, v:
               g.scaled_dot_product_attention(q, k, v, mask=np.stack([BOOL_MASK, ~BOOL_MASK])),
               _qkv(), (None, None, None)),
    ExportCase(SDPA, "sdpa_causal_and_mask", lambda g, q, k, v: g.scaled_dot_product_attention(
        q, k, v, mask=BOOL_MASK, causal=True), _qkv(), (0, 0, 0)),
]

def _pair(*shape):
    return lambda r, n: (r.normal(size=(n, *shape)), r.normal(size=(n, *shape)))


LABELS = np.array([[0, 2, 1], [2, -100, 0]])
CLASS_W = np.array([0.5, 2.0, 1.5])

CASES += [
    ExportCase(Op.MSE_LOSS, "mse_loss_mean", lambda g, p, t: g.mse_loss(p, t), _pair(3), (0, 0)),
    ExportCase(Op.MSE_LOSS, "mse_loss_none", lambda g, p, t: g.mse_loss(p, t, "none"), _pair(3),
               (0, 0)),
    ExportCase(Op.L1_LOSS, "l1_loss_sum", lambda g, p, t: g.l1_loss(p, t, "sum"), _pair(3),
               (0, 0)),
    ExportCase(Op.HUBER_LOSS, "huber_loss_delta", lambda g, p, t: g.huber_loss(p, t, 0.7),
               _pair(3), (0, 0)),
    ExportCase(Op.HUBER_LOSS, "huber_loss_none", lambda g, p, t: g.huber_loss(p, t, 1.0, "none"),
               _pair(3), (0, 0)),
    ExportCase(Op.BCE_WITH_LOGITS, "bce_with_logits", lambda g, x, t: g.binary_cross_entropy_with_logits(
        x, t), lambda r, n: (r.normal(size=(n, 3)) * 5, r.uniform(size=(n, 3))), (0, 0)),
    ExportCase(Op.BCE_WITH_LOGITS, "bce_with_logits_weights_none",
               lambda g, x, t: g.binary_cross_entropy_with_logits(
                   x, t, weight=np.array([1.0, 0.5, 2.0]), pos_weight=np.array([3.0, 1.0, 0.2]),
                   reduction="none"),
               lambda r, n: (r.normal(size=(n, 3)) * 5, r.uniform(size=(n, 3))), (0, 0)),
    ExportCase(Op.CROSS_ENTROPY, "cross_entropy_labels_input", lambda g, x, y: g.cross_entropy(
        x, y), lambda r, n: (r.normal(size=(n, 3)), r.integers(0, 3, size=(n,))), (0, 0)),
    ExportCase(Op.CROSS_ENTROPY, "cross_entropy_options", lambda g, x: g.cross_entropy(
        x, LABELS, weight=CLASS_W, ignore_index=-100, label_smoothing=0.2), _u(3, 3), (None,)),
    ExportCase(Op.CROSS_ENTROPY, "cross_entropy_nd_none", lambda g, x: g.cross_entropy(
        x, LABELS, ignore_index=-100, reduction="none"), _u(3, 3), (None,)),
    ExportCase(Op.CROSS_ENTROPY, "cross_entropy_sum_smoothing", lambda g, x: g.cross_entropy(
        x, LABELS, ignore_index=-100, label_smoothing=0.1, reduction="sum"), _u(3, 3), (None,)),
    ExportCase(Op.NLL_LOSS, "nll_loss_weight_ignore", lambda g, x: g.nll_loss(
        g.log_softmax(x), LABELS, weight=CLASS_W, ignore_index=-100), _u(3, 3), (None,)),
    ExportCase(Op.NLL_LOSS, "nll_loss_sum", lambda g, x, y: g.nll_loss(
        g.log_softmax(x), y, reduction="sum"),
        lambda r, n: (r.normal(size=(n, 4)), r.integers(0, 4, size=(n,))), (0, 0)),
]


MASK23 = np.array([[True, False, True], [False, False, True]])

CASES += [  # shape and indexing
    ExportCase(Op.TRIL, "tril", lambda g, a: g.tril(a), _u(3, 4)),
    ExportCase(Op.TRIL, "tril_k", lambda g, a: g.tril(a, -1), _u(4, 3)),
    ExportCase(Op.TRIU, "triu_k", lambda g, a: g.triu(a, 1), _u(3, 4)),
    ExportCase(Op.ROLL, "roll_axes", lambda g, a: g.roll(a, (2, -1), (1, 2)), _u(3, 4)),
    ExportCase(Op.ROLL, "roll_flattened", lambda g, a: g.roll(a, 5), _u(3, 4), (None,)),
    ExportCase(Op.DIAGONAL, "diagonal_last_axes", lambda g, a: g.diagonal(a, 1, 1, 2), _u(3, 4)),
    ExportCase(Op.DIAGONAL, "diagonal_axes_around_batch", lambda g, a: g.diagonal(a, -1, 2, 1),
               _u(4, 3, 2)),
    ExportCase(Op.OUTER, "outer", lambda g, a: g.outer(a, C4), _u()),
    ExportCase(Op.UNFOLD, "unfold", lambda g, a: g.unfold(a, 2), _u(3, 4, 2)),
    ExportCase(Op.UNFOLD, "unfold_options", lambda g, a: g.unfold(a, (2, 3), (2, 1), (1, 0),
                                                                   (1, 2)), _u(4, 5, 3)),
    ExportCase(Op.FOLD, "fold", lambda g, a: g.fold(a, (3, 4), 2), _u(6, 8)),
    ExportCase(Op.FOLD, "fold_options", lambda g, a: g.fold(a, (5, 4), 2, (2, 1), (0, 1),
                                                            (1, 2)), _u(9, 8)),
    ExportCase(Op.FOLD, "fold_stride_padding", lambda g, a: g.fold(a, (4, 4), 2, 1, 1, 2),
               _u(9, 8)),
    ExportCase(Op.INTERPOLATE, "interpolate_nearest", lambda g, a: g.interpolate(
        a, scale_factor=(1.5, 2)), _u(2, 3, 2)),
    ExportCase(Op.INTERPOLATE, "interpolate_nearest_size", lambda g, a: g.interpolate(
        a, (5, 3)), _u(3, 4, 2)),
    ExportCase(Op.INTERPOLATE, "interpolate_bilinear", lambda g, a: g.interpolate(
        a, (5, 7), mode="bilinear"), _u(3, 4, 2)),
    ExportCase(Op.INTERPOLATE, "interpolate_bilinear_align_corners", lambda g, a: g.interpolate(
        a, scale_factor=2, mode="bilinear", align_corners=True), _u(3, 3, 1)),
    ExportCase(Op.MASKED_FILL, "masked_fill", lambda g, a: g.masked_fill(a, MASK23, -1.5),
               _u(2, 3)),
    ExportCase(Op.MASKED_FILL, "masked_fill_broadcast_mask", lambda g, a: g.masked_fill(
        a, MASK23[0], 3.0), _u(2, 3)),
    ExportCase(Op.INDEX_SELECT, "index_select", lambda g, a: g.index_select(
        a, 2, np.array([3, 0, 3])), _u(2, 4)),
    ExportCase(Op.INDEX_SELECT, "index_select_index_input", lambda g, a, i: g.index_select(
        a, 1, i), lambda r, n: (r.normal(size=(2, 4)), r.integers(0, 4, size=(n,))), (None, 0)),
    ExportCase(Op.NARROW, "split_chunk", lambda g, a: g.cat(
        [*g.split(a, [1, 2], 1), *g.chunk(a, 2, 1)], 1), _u(3, 4)),
    ExportCase(Op.GATHER, "take_along_axis", lambda g, a: g.take_along_axis(
        a, np.array([[[1, -1]]]), 2), lambda r, n: (r.normal(size=(2, 3, 4)),), (None,)),
]

CASES += [  # activations
    ExportCase(Op.ELU, "elu", lambda g, a: g.elu(a), _u(6, lo=-4.0, hi=3.0)),
    ExportCase(Op.ELU, "elu_alpha", lambda g, a: g.elu(a, 0.3), _u(6, lo=-4.0, hi=3.0)),
    ExportCase(Op.SELU, "selu", lambda g, a: g.selu(a), _u(6, lo=-4.0, hi=3.0)),
    ExportCase(Op.CELU, "celu_alpha", lambda g, a: g.celu(a, 1.5), _u(6, lo=-4.0, hi=3.0)),
    ExportCase(Op.CELU, "celu_negative_alpha", lambda g, a: g.celu(a, -2.0), _u(6, lo=-3.0, hi=3.0)),
    ExportCase(Op.HARDTANH, "hardtanh", lambda g, a: g.hardtanh(a), _u(6)),
    ExportCase(Op.HARDTANH, "hardtanh_bounds", lambda g, a: g.hardtanh(a, -0.5, 1.5), _u(6)),
    ExportCase(Op.RELU6, "relu6", lambda g, a: g.relu6(a), _u(6, lo=-3.0, hi=9.0)),
    ExportCase(Op.HARDSIGMOID, "hardsigmoid", lambda g, a: g.hardsigmoid(a), _u(6, lo=-5.0, hi=5.0)),
    ExportCase(Op.HARDSWISH, "hardswish", lambda g, a: g.hardswish(a), _u(6, lo=-5.0, hi=5.0)),
    ExportCase(Op.SOFTSIGN, "softsign", lambda g, a: g.softsign(a), _u(6, lo=-5.0, hi=5.0)),
    ExportCase(Op.LOGSIGMOID, "logsigmoid", lambda g, a: g.logsigmoid(a), _u(6, lo=-30.0, hi=30.0)),
    ExportCase(Op.GLU, "glu_last", lambda g, a: g.glu(a), _u(3, 4)),
    ExportCase(Op.GLU, "glu_axis1", lambda g, a: g.glu(a, axis=1), _u(4, 3)),
]

CASES += [  # elementwise math
    ExportCase(Op.SIN, "sin", lambda g, a: g.sin(a), _u(4, lo=-4.0, hi=4.0)),
    ExportCase(Op.COS, "cos", lambda g, a: g.cos(a), _u(4, lo=-4.0, hi=4.0)),
    ExportCase(Op.TAN, "tan", lambda g, a: g.tan(a), _u(4, lo=-1.3, hi=1.3)),
    ExportCase(Op.ASIN, "asin", lambda g, a: g.asin(a), _u(4, lo=-0.99, hi=0.99)),
    ExportCase(Op.ACOS, "acos", lambda g, a: g.acos(a), _u(4, lo=-0.99, hi=0.99)),
    ExportCase(Op.ATAN, "atan", lambda g, a: g.atan(a), _u(4, lo=-5.0, hi=5.0)),
    ExportCase(Op.ATAN2, "atan2", lambda g, y, x: g.atan2(y, x), _pair(4), (0, 0)),
    ExportCase(Op.ATAN2, "atan2_zeros_and_broadcast", lambda g, y: g.atan2(
        y, np.array([0.0, -0.0, 1.0, -1.0, -0.0, 0.0])),
        lambda r, n: (np.tile(np.array([0.0, -0.0, -0.0, 0.0, 2.0, -3.0]), (n, 1)),)),
    ExportCase(Op.SINH, "sinh", lambda g, a: g.sinh(a), _u(4, lo=-5.0, hi=5.0)),
    ExportCase(Op.COSH, "cosh", lambda g, a: g.cosh(a), _u(4, lo=-5.0, hi=5.0)),
    ExportCase(Op.ERF, "erf", lambda g, a: g.erf(a), _u(4, lo=-3.0, hi=3.0)),
    ExportCase(Op.ERFC, "erfc", lambda g, a: g.erfc(a), _u(4, lo=-3.0, hi=3.0)),
    ExportCase(Op.SIGN, "sign", lambda g, a: g.sign(a), lambda r, n: (
        np.tile(np.array([-2.0, -0.0, 0.0, 3.0, np.nan]), (n, 1)),)),
    ExportCase(Op.FLOOR, "floor", lambda g, a: g.floor(a), _u(4, lo=-5.0, hi=5.0)),
    ExportCase(Op.CEIL, "ceil", lambda g, a: g.ceil(a), _u(4, lo=-5.0, hi=5.0)),
    ExportCase(Op.ROUND, "round_half_even", lambda g, a: g.round(a), lambda r, n: (
        np.tile(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.7, -1.2]), (n, 1)),)),
    ExportCase(Op.TRUNC, "trunc", lambda g, a: g.trunc(a), lambda r, n: (
        np.tile(np.array([-2.7, -0.5, -0.0, 0.0, 0.5, 2.7]), (n, 1)),)),
    ExportCase(Op.RECIPROCAL, "reciprocal", lambda g, a: g.reciprocal(a), _u(4, lo=0.2, hi=3.0)),
    ExportCase(Op.RSQRT, "rsqrt", lambda g, a: g.rsqrt(a), _u(4, lo=0.1, hi=3.0)),
    ExportCase(Op.SQUARE, "square", lambda g, a: g.square(a), _u(4)),
    ExportCase(Op.LOG1P, "log1p", lambda g, a: g.log1p(a), lambda r, n: (np.concatenate(
        [r.uniform(-0.9, 3.0, size=(n, 4)), np.tile([1e-9, -2e-7, 1e-20, 0.0], (n, 1))], 1),)),
    ExportCase(Op.EXPM1, "expm1", lambda g, a: g.expm1(a), lambda r, n: (np.concatenate(
        [r.uniform(-3.0, 3.0, size=(n, 4)), np.tile([1e-9, -2e-7, 1e-20, 0.0], (n, 1))], 1),)),
    ExportCase(Op.LOG2, "log2", lambda g, a: g.log2(a), _u(4, lo=0.1, hi=5.0)),
    ExportCase(Op.LOG10, "log10", lambda g, a: g.log10(a), _u(4, lo=0.1, hi=5.0)),
    ExportCase(Op.REMAINDER, "remainder", lambda g, a, d: g.remainder(a, d), lambda r, n: (
        r.uniform(-6.0, 6.0, size=(n, 4)),
        r.uniform(0.5, 2.0, size=(n, 4)) * r.choice([-1.0, 1.0], size=(n, 4))), (0, 0)),
    ExportCase(Op.REMAINDER, "remainder_scalar_divisor", lambda g, a: g.remainder(a, -1.5),
               lambda r, n: (np.concatenate([r.uniform(-6.0, 6.0, size=(n, 4)),
                                             np.tile([-0.0, 0.0, 3.0, -3.0], (n, 1))], 1),)),
]
# ONNX Runtime 1.31 has these only in float32 too
ORT_FLOAT32_ONLY |= {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh"}


CASES += [  # reductions and scans
    ExportCase(Op.PROD, "prod_all", lambda g, a: g.prod(a), _u(3, 2, lo=0.5, hi=1.5)),
    ExportCase(Op.PROD, "prod_axes_keepdims", lambda g, a: g.prod(a, (1, 2), keepdims=True),
               _u(3, 4)),
    ExportCase(Op.STD, "std", lambda g, a: g.std(a, -1), _u(3, 5)),
    ExportCase(Op.STD, "std_all", lambda g, a: g.std(a), _u(3, 5)),
    ExportCase(Op.VAR, "var_correction_batch_axis", lambda g, a: g.var(a, 0, correction=1),
               _u(3)),
    ExportCase(Op.VAR, "var_all_ddof1", lambda g, a: g.var(a, ddof=1), _u(3)),
    ExportCase(Op.STD, "std_batch_axis_keepdims", lambda g, a: g.std(a, (0, 2), 2, True),
               _u(3, 5)),
    ExportCase(Op.STD, "std_correction0_keepdims", lambda g, a: g.std(a, (1, 2), 0, True),
               _u(3, 5)),
    ExportCase(Op.NORM, "norm_2", lambda g, a: g.norm(a, axis=-1), _u(3, 4)),
    ExportCase(Op.NORM, "norm_fro_keepdims", lambda g, a: g.norm(a, "fro", (1, 2), True), _u(3, 4)),
    ExportCase(Op.NORM, "norm_1", lambda g, a: g.norm(a, 1, 1), _u(3, 4)),
    ExportCase(Op.NORM, "norm_3_all", lambda g, a: g.norm(a, 3), _u(3, 4)),
    ExportCase(Op.NORM, "norm_1p5_axis", lambda g, a: g.norm(a, 1.5, 1), _u(3, 4)),
    ExportCase(Op.NORM, "norm_inf", lambda g, a: g.norm(a, np.inf, -1), _u(3, 4)),
    ExportCase(Op.NORM, "norm_neg_inf", lambda g, a: g.norm(a, -np.inf, -1), _u(3, 4)),
    ExportCase(Op.NORM, "norm_0", lambda g, a: g.norm(g.relu(a), 0, -1), _u(5)),
    ExportCase(Op.CUMSUM, "cumsum", lambda g, a: g.cumsum(a, 1), _u(4, 3)),
    ExportCase(Op.CUMSUM, "cumsum_batch_axis", lambda g, a: g.cumsum(a, 0), _u(3)),
    ExportCase(Op.CUMPROD, "cumprod_opset26", lambda g, a: g.cumprod(a, 1), _u(4, 3), opset=26),
    ExportCase(Op.CUMPROD, "cumprod_batch_axis_opset26", lambda g, a: g.cumprod(a, 0), _u(3),
               opset=26),
    ExportCase(Op.TOPK, "topk", lambda g, a: g.topk(a, 2)[0], _u(3, 5)),
    ExportCase(Op.TOPK, "topk_smallest_axis1", lambda g, a: g.topk(a, 3, 1, largest=False)[0],
               _u(4, 2)),
    ExportCase(Op.SORT, "sort", lambda g, a: g.sort(a)[0], _u(3, 5)),
    ExportCase(Op.SORT, "sort_descending_axis1", lambda g, a: g.sort(a, 1, True)[0], _u(4, 2)),
    ExportCase(Op.SORT, "sort_batch_axis", lambda g, a: g.sort(a, 0, True)[0], _u(3)),
]


CASES += [  # losses and CTC
    ExportCase(Op.SMOOTH_L1_LOSS, "smooth_l1_loss_beta", lambda g, p, t: g.smooth_l1_loss(
        p, t, beta=0.5), _pair(3), (0, 0)),
    ExportCase(Op.SMOOTH_L1_LOSS, "smooth_l1_loss_l1_none", lambda g, p, t: g.smooth_l1_loss(
        p, t, beta=0.0, reduction="none"), _pair(3), (0, 0)),
    ExportCase(Op.KL_DIV, "kl_div_batchmean", lambda g, x, t: g.kl_div(
        x, t, reduction="batchmean"), lambda r, n: (r.normal(size=(n, 4)), np.where(
            r.random((n, 4)) < 0.3, 0.0, r.uniform(0, 1, (n, 4)))), (0, 0)),
    ExportCase(Op.KL_DIV, "kl_div_log_target_none", lambda g, x, t: g.kl_div(
        x, t, reduction="none", log_target=True), _pair(3), (0, 0)),
    ExportCase(Op.BINARY_CROSS_ENTROPY, "binary_cross_entropy_weight",
               lambda g, p, t: g.binary_cross_entropy(p, t, weight=W34),
               lambda r, n: (r.uniform(0.05, 0.95, (n, 3, 4)), r.uniform(0, 1, (n, 3, 4))),
               (0, 0)),
    ExportCase(Op.BINARY_CROSS_ENTROPY, "binary_cross_entropy_none",
               lambda g, p, t: g.binary_cross_entropy(p, t, reduction="none"),
               lambda r, n: (r.uniform(0.05, 0.95, (n, 3)), r.uniform(0, 1, (n, 3))), (0, 0)),
    ExportCase(Op.COSINE_SIMILARITY, "cosine_similarity", lambda g, a, b: g.cosine_similarity(
        a, b), _pair(4), (0, 0)),
    ExportCase(Op.COSINE_SIMILARITY, "cosine_similarity_broadcast_axis1",
               lambda g, a, b: g.cosine_similarity(a, b, axis=1),
               lambda r, n: (r.normal(size=(n, 3, 4)), r.normal(size=(3, 1))), (0, None)),
    ExportCase(Op.PAIRWISE_DISTANCE, "pairwise_distance", lambda g, a, b: g.pairwise_distance(
        a, b), _pair(4), (0, 0)),
    ExportCase(Op.PAIRWISE_DISTANCE, "pairwise_distance_p1_keepdim",
               lambda g, a, b: g.pairwise_distance(a, b, p=1.0, keepdim=True), _pair(4), (0, 0)),
    ExportCase(Op.PAIRWISE_DISTANCE, "pairwise_distance_p3", lambda g, a, b: g.pairwise_distance(
        a, b, p=3.0), _pair(4), (0, 0)),
    ExportCase(Op.PAIRWISE_DISTANCE, "pairwise_distance_inf", lambda g, a, b: g.pairwise_distance(
        a, b, p=float("inf")), _pair(4), (0, 0)),
    ExportCase(Op.COSINE_SIMILARITY, "cosine_similarity_mean", lambda g, a, b: g.cosine_similarity(
        a, b, reduction="mean"), _pair(4), (0, 0)),
    ExportCase(Op.PAIRWISE_DISTANCE, "pairwise_distance_sum", lambda g, a, b: g.pairwise_distance(
        a, b, reduction="sum"), _pair(4), (0, 0)),
    ExportCase(Op.PAIRWISE_DISTANCE, "pairwise_distance_p0", lambda g, a, b: g.pairwise_distance(
        a, b, p=0.0, eps=0.0), lambda r, n: (r.integers(0, 2, (n, 4)).astype(float),
                                             r.integers(0, 2, (n, 4)).astype(float)), (0, 0)),
    ExportCase(Op.TRIPLET_MARGIN_LOSS, "triplet_margin_loss", lambda g, a, p, q:
               g.triplet_margin_loss(a, p, q), lambda r, n: tuple(
                   r.normal(size=(n, 4)) for _ in range(3)), (0, 0, 0)),
    ExportCase(Op.TRIPLET_MARGIN_LOSS, "triplet_margin_loss_swap_p1_none", lambda g, a, p, q:
               g.triplet_margin_loss(a, p, q, margin=2.0, p=1.0, swap=True, reduction="none"),
               lambda r, n: tuple(r.normal(size=(n, 4)) for _ in range(3)), (0, 0, 0)),
    ExportCase(Op.MARGIN_RANKING_LOSS, "margin_ranking_loss", lambda g, a, b, y:
               g.margin_ranking_loss(a, b, y, margin=0.2), lambda r, n: (
                   r.normal(size=(n,)), r.normal(size=(n,)), r.choice([-1.0, 1.0], size=(n,))),
               (0, 0, 0)),
    ExportCase(Op.GAUSSIAN_NLL_LOSS, "gaussian_nll_loss", lambda g, x, t, v:
               g.gaussian_nll_loss(x, t, v), lambda r, n: (
                   r.normal(size=(n, 3)), r.normal(size=(n, 3)), r.uniform(0, 2, (n, 3))),
               (0, 0, 0)),
    ExportCase(Op.GAUSSIAN_NLL_LOSS, "gaussian_nll_loss_shared_var_full_sum", lambda g, x, t, v:
               g.gaussian_nll_loss(x, t, v, full=True, reduction="sum"), lambda r, n: (
                   r.normal(size=(n, 3)), r.normal(size=(n, 3)), r.uniform(0.5, 2, (n,))),
               (0, 0, 0)),
    ExportCase(Op.POISSON_NLL_LOSS, "poisson_nll_loss", lambda g, x, t: g.poisson_nll_loss(x, t),
               lambda r, n: (r.normal(size=(n, 3)), r.uniform(0, 3, (n, 3))), (0, 0)),
    ExportCase(Op.POISSON_NLL_LOSS, "poisson_nll_loss_rates_full_none",
               lambda g, x, t: g.poisson_nll_loss(x, t, log_input=False, full=True,
                                                  reduction="none"),
               lambda r, n: (r.uniform(0.1, 3, (n, 3)), r.uniform(0, 4, (n, 3))), (0, 0)),
]


# ------------------------------------------------------------------ helpers
CT1W, CT3W = _conv_w(60, 3, 2, 4), _conv_w(61, 2, 2, 2, 2, 2)
ORT_FLOAT32_ONLY |= {"Det"}   # ONNX Runtime's Det kernel is float32 only

CASES += [  # linear algebra, 1-d and 3-d pooling, transposed convolutions
    ExportCase(Op.DET, "det_batched", lambda g, a: g.det(a),
               lambda r, n: (r.uniform(-1, 1, (n, 3, 3)) + 3 * np.eye(3),), rtol32=1e-4),
    ExportCase(Op.SLOGDET, "slogdet_logabsdet", lambda g, a: g.slogdet(a)[1],
               lambda r, n: (r.uniform(-1, 1, (n, 2, 3, 3)) + 3 * np.eye(3),), rtol32=1e-4,
               atol32=1e-5),
    ExportCase(Op.MAX_POOL1D, "max_pool1d_options", lambda g, x: g.max_pool1d(x, 3, 2, 1),
               _u(7, 3)),
    ExportCase(Op.AVG_POOL1D, "avg_pool1d_count_pad", lambda g, x: g.avg_pool1d(x, 3, 2, 1),
               _u(7, 3)),
    ExportCase(Op.AVG_POOL1D, "avg_pool1d_exclude_pad", lambda g, x: g.avg_pool1d(
        x, 3, 2, 1, count_include_pad=False), _u(7, 3)),
    ExportCase(Op.ADAPTIVE_AVG_POOL1D, "adaptive_avg_pool1d", lambda g, x: g.adaptive_avg_pool1d(
        x, 3), _u(7, 2)),
    ExportCase(Op.MAX_POOL3D, "max_pool3d_options", lambda g, x: g.max_pool3d(
        x, (3, 2, 2), (2, 1, 2), (1, 1, 0)), _u(5, 4, 4, 2)),
    ExportCase(Op.AVG_POOL3D, "avg_pool3d_count_pad", lambda g, x: g.avg_pool3d(
        x, 2, 1, 1), _u(3, 4, 3, 2)),
    ExportCase(Op.AVG_POOL3D, "avg_pool3d_exclude_pad", lambda g, x: g.avg_pool3d(
        x, (3, 2, 2), (2, 1, 2), (1, 1, 1), count_include_pad=False), _u(5, 4, 3, 2)),
    ExportCase(Op.CONV_TRANSPOSE1D, "conv_transpose1d_options", lambda g, x: g.conv_transpose1d(
        x, g.constant(CT1W), g.constant(CB4), stride=2, padding=1, output_padding=1, groups=2,
        dilation=2), _u(5, 4)),
    ExportCase(Op.CONV_TRANSPOSE3D, "conv_transpose3d_options", lambda g, x: g.conv_transpose3d(
        x, g.constant(CT3W), stride=(2, 1, 1), padding=(1, 0, 1), output_padding=(1, 0, 0),
        dilation=(1, 2, 1)), _u(3, 2, 3, 2)),
]


def yscv_outputs(fn, arrays, dtype):
    g = yscv.Graph(dtype)
    args = [g.constant(a) if a.dtype.kind == "f" else a for a in arrays]
    with g.no_grad():
        out = fn(g, *args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [np.array(g.value(o)) for o in outs]


def make_inputs(case, batch, dtype):
    rng = np.random.default_rng(batch)
    arrays = case.inputs(rng, batch)
    return [a.astype(dtype) if a.dtype.kind == "f" else a.astype(np.int64) for a in arrays]


def check_case(case, dtype, tmp_path):
    arrays = make_inputs(case, 2, dtype)
    names = [f"in{k}" for k in range(len(arrays))]
    dyn = {names[k]: {ax: "batch"} for k, ax in enumerate(case.batch_axes) if ax is not None}
    path = tmp_path / f"{case.name}_{np.dtype(dtype).name}.onnx"
    model = export(case.build, arrays, path, input_names=names, dynamic_axes=dyn or None,
                   opset=case.opset)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    assert_listed_operators(case, model, dtype)
    assert model.graph.input[0].type.tensor_type.elem_type in (
        onnx.TensorProto.INT64, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    sess = session(path, dtype)
    for batch in ((2, 3) if dyn else (2,)):
        arrays = make_inputs(case, batch, dtype)
        want = yscv_outputs(case.build, arrays, dtype)
        try:
            got = sess.run(None, dict(zip(names, arrays)))
        except Exception as exc:   # ONNX Runtime without a float64 kernel for an operator
            assert dtype == np.float64 and refused_op(exc) in ORT_FLOAT32_ONLY, exc
            return
        assert len(got) == len(want)
        for w, o in zip(want, got):
            assert o.dtype == w.dtype and o.shape == w.shape, (o.dtype, o.shape, w.shape)
            if dtype == np.float32:
                np.testing.assert_allclose(o, w, rtol=case.rtol32, atol=case.atol32)
            else:
                np.testing.assert_allclose(o, w, rtol=1e-10, atol=1e-12)



#: operators any file may hold: graph outputs, and batch-dependent shapes
#: computed from the inputs' runtime shapes
GLUE = {"Identity", "Shape", "Gather", "Mul", "Concat", "Constant"}


def assert_listed_operators(case, model, dtype):
    """Every ONNX operator in the file is one the op table lists for an op
    the case records (so docs/onnx.md's table says what files hold)."""
    g = yscv.Graph(dtype)
    args = [g.constant(a) if a.dtype.kind == "f" else a
            for a in make_inputs(case, 2, dtype)]
    with g.no_grad():
        case.build(g, *args)
    recorded = {g.op(g._node_id(i)) for i in range(len(g))} - {Op.LEAF}
    listed = set(GLUE)
    for op in recorded:
        listed |= set(re.findall(r"[A-Z][A-Za-z]+", EXPORTS[op].onnx_ops))
    used = {nd.op_type for nd in model.graph.node}
    assert used <= listed, sorted(used - listed)


# -------------------------------------------------------------------- tests
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_export_float32(case, tmp_path):
    check_case(case, np.float32, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_export_float64(case, tmp_path):
    check_case(case, np.float64, tmp_path)


def test_every_op_exports_or_is_listed_without_onnx():
    rows = {c.op for c in CASES}
    ops = [op for op in Op if op is not Op.LEAF]
    assert [op.name for op in ops if op not in rows and op not in NO_ONNX] == []
    assert [op.name for op in ops if (op in EXPORTS) == (op in NO_ONNX)] == []


def test_gelu_backward_has_no_onnx_form_and_says_so(tmp_path):
    def f(g, x):
        return g.gelu_backward(g.tanh(x), x)

    with pytest.raises(ExportError, match=r"gelu_backward \(node 2\) has no ONNX form"):
        export(f, np.ones((2, 3), np.float32), tmp_path / "gb.onnx")
    assert not (tmp_path / "gb.onnx").exists()


def test_op_without_onnx_form_raises_naming_op_and_node(monkeypatch, tmp_path):
    """The error of an op with no ONNX form (every op has one today: the
    table is patched to lose RELU)."""
    monkeypatch.delitem(EXPORTS, Op.RELU)
    monkeypatch.setitem(NO_ONNX, Op.RELU, "patched out")

    def f(g, x):
        return g.relu(g.tanh(x))

    path = tmp_path / "bad.onnx"
    with pytest.raises(ExportError, match=r"relu \(node 2\) has no ONNX form \(patched out\)") \
            as info:
        export(f, np.ones((2, 3), np.float32), path)
    assert info.value.op == "relu" and info.value.node == 2
    assert not path.exists()


def test_cumprod_below_opset_26_raises(tmp_path):
    with pytest.raises(ExportError, match=r"cumprod \(node \d+\) needs opset >= 26"):
        export(lambda g, a: g.cumprod(a, 1), np.ones((2, 3), np.float32), tmp_path / "c.onnx")


def test_deformable_conv_below_opset_19_raises(tmp_path):
    case = next(c for c in CASES if c.op is Op.DEFORMABLE_CONV2D)
    arrays = make_inputs(case, 2, np.float32)
    with pytest.raises(ExportError, match=r"deformable_conv2d \(node \d+\) needs opset >= 19"):
        export(case.build, arrays, tmp_path / "d.onnx", opset=17)


_SPD = np.array([[2.0, 0.5, 0.1], [0.5, 1.5, 0.2], [0.1, 0.2, 1.0]])


def _ctc(g, x):
    lp = g.log_softmax(g.reshape(g.repeat(g.getitem(x, 0), (4, 1)), (4, 1, 3)))
    return g.ctc_loss(lp, np.array([[1, 2]]), np.array([4]), np.array([2]))


#: one small function per op without an ONNX form, recording that op on an
#: input x [3, 3] (a test below checks the list covers NO_ONNX)
NO_ONNX_BUILDS = {
    Op.GELU_BACKWARD: lambda g, x: g.gelu_backward(g.tanh(x), x),
    Op.TANH_BACKWARD: lambda g, x: g.tanh_backward(x, g.tanh(x)),
    Op.SIGMOID_BACKWARD: lambda g, x: g.sigmoid_backward(x, g.sigmoid(x)),
    Op.CONV_GRAD_INPUT: lambda g, x: g.conv_grad_input(g.reshape(x, (1, 3, 3, 1)),
                                                       np.ones((1, 1, 2, 1)), (1, 3, 3, 2)),
    Op.CONV_GRAD_WEIGHT: lambda g, x: g.conv_grad_weight(g.reshape(x, (1, 3, 3, 1)),
                                                         np.ones((1, 3, 3, 1)), (1, 1, 1, 1)),
    Op.CONV_GRAD_BIAS: lambda g, x: g.conv_grad_bias(g.reshape(x, (1, 3, 3, 1)),
                                                     np.ones((1, 3, 3, 1)), (1, 1, 1, 1)),
    Op.INV: lambda g, x: g.inv(x + _SPD),
    Op.SOLVE: lambda g, x: g.solve(x + _SPD, x),
    Op.CHOLESKY: lambda g, x: g.cholesky(g.matmul(x, g.transpose(x)) + _SPD),
    Op.EIGH: lambda g, x: g.eigh(x + g.transpose(x))[0],
    Op.CTC_LOSS: _ctc,
}


def test_no_onnx_list_is_covered_by_error_tests():
    # VJP nodes come only from create_graph=True, which an export's trace
    # (under no_grad) never runs; CUSTOM has its own test below
    assert sorted(op.name for op in NO_ONNX if op not in (Op.CUSTOM, Op.VJP)) == \
        sorted(op.name for op in NO_ONNX_BUILDS)


def test_a_custom_op_is_refused_naming_it(tmp_path):
    import yscv

    double = yscv.custom_op("double_it", lambda x: x + x,
                            lambda ns, g, xs, y, attrs, saved, needs: (ns.add(g, g),))
    path = tmp_path / "custom.onnx"
    with pytest.raises(ExportError, match=r"custom op 'double_it' \(node \d+\) has no ONNX form "
                                          r"\(an op defined with yscv.custom_op"):
        export(lambda g, x: double(g, x), np.ones((2, 3), np.float32), path)
    assert not path.exists()


@pytest.mark.parametrize("op", list(NO_ONNX_BUILDS), ids=[op.name.lower() for op in NO_ONNX_BUILDS])
def test_an_op_without_onnx_form_raises_naming_it_and_writes_nothing(op, tmp_path):
    x = np.random.default_rng(0).uniform(0.1, 0.9, (3, 3)).astype(np.float32)
    path = tmp_path / "none.onnx"
    with pytest.raises(ExportError, match=rf"{op.name.lower()} \(node \d+\) has no ONNX form") as info:
        export(NO_ONNX_BUILDS[op], x, path)
    assert info.value.op == op.name.lower()
    assert not path.exists()
