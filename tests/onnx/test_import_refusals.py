"""Bad arguments to the operators added with the control-flow, signal,
integer and decoder handlers: each raises an OnnxImportError naming the
operator and the bad value, at load (attributes) or at call (values), and
a failed call leaves the graph as it was."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import one_node  # noqa: E402

F32, I64 = np.float32, np.int64


def new(model):
    model.ir_version = onnx.IR_VERSION
    return model


#: id(model) -> the call's inputs (the arrays each model below is built from)
VALUES = {}


def node(op, inputs, **kw):
    model = one_node(op, inputs, **kw)
    VALUES[id(model)] = [a for _, a in inputs]
    return model


CALL = [  # (model, message)
    (node("Unique", [("x", np.zeros((2, 3), F32))], n_out=4, axis=2,
              out=[F32, I64, I64, I64]), "axis=2 is out of range for an input of rank 2"),
    (new(node("SwiGLU", [("a", np.zeros(3, F32)), ("b", np.zeros(4, F32))], opset=28)),
     r"A \(3,\) and B \(4,\) must have one shape"),
    (node("STFT", [("x", np.zeros((1, 8, 1), F32)), ("s", np.array(0, I64))], opset=17),
     "frame_step=0 and frame_length=8 do not fit"),
    (node("SplitToSequence", [("x", np.zeros((5, 2), F32)), ("s", np.array([2, 2], I64))],
              opset=17, out=[F32]), r"split \[2, 2\] does not add up to axis 0 of size 5"),
    (node("Bernoulli", [("p", np.array([0.5, 1.5], F32))], opset=22),
     r"the probabilities must lie in \[0, 1\]"),
    (new(node("CausalConvWithState", [("x", np.zeros((1, 2, 3), F32)),
                                          ("w", np.zeros((3, 1, 2), F32))], n_out=2, opset=27)),
     r"input \(1, 2, 3\) and weight \(3, 1, 2\) must be"),
    (node("QLinearMatMul", [("a", np.zeros((2, 2), np.uint8)), ("sa", np.array(0.1, F32)),
                                ("za", np.array(0, np.uint8)), ("b", np.zeros((2, 2), np.uint8)),
                                ("sb", np.array(1, I64)), ("zb", np.array(0, np.uint8)),
                                ("sy", np.array(0.1, F32)), ("zy", np.array(0, np.uint8))],
              out=[np.uint8], opset=21), r"input 4 \(a scale\) must be a float, got int64"),
    (node("ConvInteger", [("x", np.zeros((1, 4, 3, 3), np.uint8)),
                              ("w", np.zeros((2, 3, 1, 1), np.uint8))], out=[np.int32], group=2),
     "4 input and 2 output channels do not split into group=2"),
]


@pytest.mark.parametrize("model,match", CALL, ids=[m.graph.node[0].op_type for m, _ in CALL])
def test_bad_values_are_refused_at_call_naming_the_operator(model, match):
    ins = VALUES[id(model)]
    m = yscv.onnx.load(model)
    op = model.graph.node[0].op_type
    g = yscv.Graph()
    g.constant(np.zeros(1, F32))
    n = len(g)
    with pytest.raises(OnnxImportError, match=match) as err:
        m(g, *ins)
    assert err.value.op == op and op in str(err.value)
    assert len(g) == n


LOAD = [
    (one_node("NonMaxSuppression", [("b", np.zeros((1, 1, 4), F32)),
                                    ("s", np.zeros((1, 1, 1), F32))], out=[I64],
              center_point_box=3), "center_point_box=3 is not supported"),
    (new(one_node("TensorScatter", [("p", np.zeros((1, 2, 2), F32)),
                                    ("u", np.zeros((1, 1, 2), F32))], opset=24, mode="ring")),
     "mode='ring' is not supported"),
    (one_node("ImageDecoder", [("b", np.zeros(4, np.uint8))], opset=20, pixel_format="CMYK"),
     "pixel_format='CMYK' is not supported"),
    (new(one_node("CausalConvWithState", [("x", np.zeros((1, 2, 3), F32)),
                                          ("w", np.zeros((2, 1, 2), F32))], n_out=2, opset=27,
                  activation="relu")), "activation='relu' is not supported"),
    (one_node("RandomNormalLike", [("x", np.zeros(2, F32))], opset=22,
              dtype=TensorProto.STRING), "dtype=8 .* is not supported"),
]


@pytest.mark.parametrize("model,match", LOAD, ids=[m.graph.node[0].op_type for m, _ in LOAD])
def test_unsupported_attributes_are_refused_at_load(model, match):
    with pytest.raises(OnnxImportError, match=match) as err:
        yscv.onnx.load(model)
    assert err.value.op == model.graph.node[0].op_type


def test_gradient_with_zs_and_tree_ensemble_with_a_post_transform_are_refused_at_load():
    f = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    grad = helper.make_node("Gradient", ["a"], ["da"], domain="ai.onnx.preview.training",
                            xs=["a"], zs=["b"], y="c")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["c"]), grad], "g", [vi("a", f, [2]), vi("b", f, [2])],
        [vi("c", f, None), vi("da", f, None)]),
        opset_imports=[helper.make_opsetid("", 17),
                       helper.make_opsetid("ai.onnx.preview.training", 1)])
    model.ir_version = 8
    with pytest.raises(OnnxImportError, match="the zs attribute is not supported"):
        yscv.onnx.load(model)
    tree = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", post_transform=1, n_targets=1,
        tree_roots=[0], nodes_featureids=[0], nodes_modes=helper.make_tensor(
            "m", TensorProto.UINT8, [1], [0]), nodes_splits=helper.make_tensor("s", f, [1], [0.0]),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
        leaf_targetids=[0, 0], leaf_weights=helper.make_tensor("w", f, [2], [1.0, 2.0]))
    model = helper.make_model(helper.make_graph([tree], "g", [vi("x", f, [2, 1])],
                                                [vi("y", f, None)]),
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = onnx.IR_VERSION
    with pytest.raises(OnnxImportError, match="post_transform=1 is not supported"):
        yscv.onnx.load(model)
