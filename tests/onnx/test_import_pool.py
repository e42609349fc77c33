"""Pooling variants on import: 3-D and dilated MaxPool / AveragePool
(ceil_mode, count_include_pad, auto_pad), LpPool and GlobalLpPool, against
ONNX Runtime and PyTorch (outputs and input gradients)."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from _onenode import (matches_onnxruntime_with_gradients,  # noqa: E402  (on sys.path)
                      matches_torch_under_a_cotangent)
from yscv.gradcheck import gradcheck  # noqa: E402

TOL = dict(rtol=2e-4, atol=2e-5)


def _pool_model(op, shape, **attrs):
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="pl", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 8
    return model


CASES = [
    ("MaxPool", (1, 2, 5, 6, 7), dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2],
                                      pads=[1, 0, 1, 0, 1, 0], ceil_mode=1)),
    ("AveragePool", (1, 2, 5, 6, 7), dict(kernel_shape=[3, 2, 3], strides=[2, 2, 1],
                                          pads=[1, 1, 0, 1, 0, 2], count_include_pad=1)),
    ("AveragePool", (1, 2, 6, 5, 7), dict(kernel_shape=[2, 2, 3], dilations=[2, 1, 2],
                                          pads=[1, 0, 1, 1, 1, 0], ceil_mode=1)),
    ("MaxPool", (1, 2, 7, 8), dict(kernel_shape=[3, 2], dilations=[2, 3], strides=[1, 2],
                                   pads=[2, 1, 1, 1])),
    ("AveragePool", (1, 2, 7, 8), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_LOWER",
                                       dilations=[1, 1])),
    ("MaxPool", (1, 3, 11), dict(kernel_shape=[3], dilations=[3], pads=[2, 1])),
    ("LpPool", (1, 2, 6, 7), dict(kernel_shape=[3, 2], p=3, strides=[2, 1], pads=[1, 0, 0, 1])),
    ("LpPool", (1, 2, 6, 7), dict(kernel_shape=[2, 2], p=2, dilations=[2, 2])),
    ("LpPool", (1, 2, 4, 5, 3), dict(kernel_shape=[2, 2, 2], p=1)),
    ("GlobalLpPool", (2, 3, 4, 5), dict(p=3)),
    ("GlobalLpPool", (2, 3, 6), dict()),
]


@pytest.mark.parametrize("op, shape, attrs", CASES,
                         ids=[f"{c[0]}_{len(c[1]) - 2}d_{i}" for i, c in enumerate(CASES)])
def test_pool_matches_onnxruntime_with_gradients(op, shape, attrs):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    model = _pool_model(op, list(shape), **attrs)
    m = matches_onnxruntime_with_gradients(model, x, TOL)


@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.MaxPool3d(2, stride=(1, 2, 2), padding=1), (1, 2, 4, 5, 6)),
    (lambda: torch.nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True,
                                count_include_pad=False), (1, 2, 5, 6, 6)),
    (lambda: torch.nn.MaxPool2d(3, stride=2, padding=1, dilation=2), (1, 2, 9, 8)),
    (lambda: torch.nn.LPPool2d(3, (2, 3), stride=2), (1, 2, 6, 7)),
], ids=["maxpool3d", "avgpool3d_ceil", "maxpool2d_dilated", "lppool2d"])
def test_exported_pool_matches_torch(make, shape):
    tm = make().eval()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if isinstance(tm, torch.nn.LPPool2d):
        x = np.abs(x) + 0.1  # torch's LPPool has no |x|: positive inputs agree with ONNX
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(tm, (torch.tensor(x),), f, dynamo=False)
    m = yscv.onnx.load(f.getvalue())
    tx = torch.tensor(x, requires_grad=True)
    ty = tm(tx)
    matches_torch_under_a_cotangent(m, x, tx, ty, 2, TOL)


@pytest.mark.parametrize("i", [1, 2, 5])
def test_pool_gradcheck_float64(i):
    op, shape, attrs = CASES[i]
    x = np.random.default_rng(3).standard_normal(shape)
    m = yscv.onnx.load(_pool_model(op, list(shape), **attrs))
    assert gradcheck(lambda g, a: m(g, a), [x])


@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 5, 6), dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 1, 0])),
    ((2, 3, 5, 6), dict(kernel_shape=[3, 2], storage_order=1, ceil_mode=1, strides=[2, 2])),
    ((1, 2, 5, 6, 4), dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 1], pads=[1, 0, 1, 0, 1, 0])),
], ids=["2d_pads", "2d_column_major_ceil", "3d_dilated"])
def test_maxpool_indices_output_matches_onnxruntime(shape, attrs):
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y", "i"], name="pl", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 8
    want_y, want_i = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    xv = g.variable(x)
    y, i = m(g, xv)
    np.testing.assert_allclose(g.value(y), want_y, **TOL)
    np.testing.assert_array_equal(np.asarray(i), want_i)
    assert np.asarray(i).dtype == np.int64
    g.backward(g.sum(y))
    assert np.abs(g.grad(xv)).sum() > 0


def test_maxpool_then_maxunpool_matches_torch_with_gradients():
    x = np.random.default_rng(5).standard_normal((2, 3, 6, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("MaxUnpool", ["p", "i"], ["y"], name="un", kernel_shape=[2, 2],
                          strides=[2, 2])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 8
    tx = torch.tensor(x, requires_grad=True)
    tp, ti = torch.nn.functional.max_pool2d(tx, 2, 2, return_indices=True)
    ty = torch.nn.functional.max_unpool2d(tp, ti, 2, 2)
    m = yscv.onnx.load(model)
    matches_torch_under_a_cotangent(m, x, tx, ty, 6, TOL)
