"""``yscv.onnx.load`` values and element types against ONNX Runtime:
negative Flatten axes, Clip bounds, per-channel PRelu, ConvTranspose
padding, reductions over empty axes, scalar Gather results, and integer
dtypes kept through static ops. Gradients are checked to flow through the
data ops."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402

F = TensorProto.FLOAT


def build(nodes, inputs, outputs, inits=(), opset=17):
    """A ModelProto: ``inputs`` / ``outputs`` are (name, shape, elem) triples,
    ``inits`` (name, array) pairs."""
    ins = [helper.make_tensor_value_info(n, e, s) for n, s, e in inputs]
    outs = [helper.make_tensor_value_info(n, e, s) for n, s, e in outputs]
    graph = helper.make_graph(nodes, "g", ins, outs,
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_run(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_yscv(model, *xs):
    """The model's outputs on float variables, and the graph and inputs."""
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    ins = [g.variable(x) if x.dtype.kind == "f" else x for x in xs]
    y = m(g, *ins)
    return g, ins, y


def value(g, y):
    return np.asarray(g.value(y)) if isinstance(y, yscv.NodeId) else np.asarray(y)


def assert_grad_flows(g, y, x):
    """A finite nonzero gradient of input ``x`` through ``y``."""
    g.backward(g.sum(y * y))
    gx = np.asarray(g.grad(x))
    assert np.all(np.isfinite(gx)) and np.any(gx != 0)


# ------------------------------------------------------------- Flatten
@pytest.mark.parametrize("axis", [-1, -2, -3, 0, 2])
def test_flatten_negative_axis_counts_from_the_end(axis):
    x = rand(0, 2, 3, 4)
    model = build([helper.make_node("Flatten", ["x"], ["y"], axis=axis)],
                  [("x", [2, 3, 4], F)], [("y", None, F)])
    g, (xv,), y = run_yscv(model, x)
    (want,) = ort_run(model, {"x": x})
    assert value(g, y).shape == want.shape
    np.testing.assert_allclose(value(g, y), want, rtol=1e-6)
    assert_grad_flows(g, y, xv)
