"""Pad import in modes edge, reflect and wrap (and negative constant pads)
against ONNX Runtime and PyTorch, with gradients; load-time refusals."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from _onenode import (matches_onnxruntime_with_gradients,  # noqa: E402  (on sys.path)
                      matches_torch_under_a_cotangent)
from yscv.gradcheck import gradcheck  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

TOL = dict(rtol=2e-4, atol=2e-5)


def _pad_model(shape, mode, pads, axes=None, conv_first=False):
    inits = [numpy_helper.from_array(np.asarray(pads, np.int64), "pads")]
    names = ["h" if conv_first else "x", "pads"]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.asarray(axes, np.int64), "axes"))
        names += ["", "axes"]
    nodes = [helper.make_node("Pad", names, ["y"], name="pd", mode=mode)]
    if conv_first:  # the Pad then reads a channel-last value
        w = np.random.default_rng(5).standard_normal((shape[1], shape[1], 1, 1))
        inits.append(numpy_helper.from_array(w.astype(np.float32), "w"))
        nodes.insert(0, helper.make_node("Conv", ["x", "w"], ["h"], name="cv"))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("mode, pads, axes, conv_first", [
    ("edge", [0, 0, 2, 1, 0, 0, 1, 3], None, False),
    ("reflect", [0, 1, 2, 1, 0, 1, 1, 3], None, True),
    ("wrap", [0, 0, 3, 4, 0, 0, 2, 5], None, False),
    ("reflect", [2, 1, 1, 3], [-1, 2], True),
    ("edge", [0, 0, -1, 2, 0, 0, 1, -2], None, False),
    ("constant", [0, 0, -1, 2, 0, 0, 1, -2], None, True),
])
def test_pad_modes_match_onnxruntime_with_gradients(mode, pads, axes, conv_first):
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5)).astype(np.float32)
    model = _pad_model(list(x.shape), mode, pads, axes, conv_first)
    m = matches_onnxruntime_with_gradients(model, x, TOL)


@pytest.mark.parametrize("mode, tmode", [("edge", "replicate"), ("reflect", "reflect"),
                                         ("wrap", "circular")])
def test_pad_gradients_match_torch(mode, tmode):
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 5)).astype(np.float32)
    m = yscv.onnx.load(_pad_model(list(x.shape), mode, [0, 0, 2, 3, 0, 0, 1, 2]))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.pad(tx, (3, 2, 2, 1), mode=tmode)
    matches_torch_under_a_cotangent(m, x, tx, ty, 2, TOL)


def test_reflect_pad_gradcheck_float64():
    x = np.random.default_rng(3).standard_normal((1, 1, 3, 4))
    m = yscv.onnx.load(_pad_model(list(x.shape), "reflect", [0, 0, 2, 1, 0, 0, 1, 3]))
    assert gradcheck(lambda g, a: m(g, a), [x])


def test_pad_refusals():
    with pytest.raises(OnnxImportError, match=r"'Pad' \(node 'pd'.*mode 'symmetric'"):
        yscv.onnx.load(_pad_model([1, 1, 4, 4], "symmetric", [0, 0, 1, 1, 0, 0, 1, 1]))
    m = yscv.onnx.load(_pad_model([1, 1, 3, 3], "reflect", [0, 0, 3, 0, 0, 0, 0, 0]))
    g = yscv.Graph()
    with pytest.raises(OnnxImportError, match=r"reflect pads \(3, 0\) must be smaller"):
        m(g, g.variable(np.zeros((1, 1, 3, 3), np.float32)))


@pytest.mark.parametrize("target, axes", [([3, 7], [2, 3]), ([1, 6, 2], None),
                                          ([8, 1], [-1, -2])])
def test_center_crop_pad_matches_onnxruntime_with_gradients(target, axes):
    x = np.random.default_rng(6).standard_normal((1, 2, 4, 5)).astype(np.float32)
    shape = [1] + target if axes is None else target
    attrs = {} if axes is None else {"axes": axes}
    graph = helper.make_graph(
        [helper.make_node("CenterCropPad", ["x", "s"], ["y"], name="cc", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(shape, np.int64), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    m = matches_onnxruntime_with_gradients(model, x, TOL)
