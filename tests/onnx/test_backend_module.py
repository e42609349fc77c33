"""``yscv.onnx.backend`` as a user calls it: prepare/run, run_model, run_node,
supports_device, its errors, its dtype policy at the edges, and that importing
it does not import onnx."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from yscv.onnx import backend  # noqa: E402


def _add_model(dtype=TensorProto.FLOAT):
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "add", [helper.make_tensor_value_info("a", dtype, [2, 3]),
                helper.make_tensor_value_info("b", dtype, [2, 3])],
        [helper.make_tensor_value_info("z", dtype, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_prepare_and_run_by_position_and_by_name():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    rep = backend.prepare(_add_model())
    (z,) = rep.run([a, b])
    np.testing.assert_array_equal(z, np.maximum(a + b, 0))
    assert z.dtype == np.float32
    (z2,) = rep.run({"b": b, "a": a})
    np.testing.assert_array_equal(z, z2)
    (z3,) = backend.run_model(_add_model(), [a, b])
    np.testing.assert_array_equal(z, z3)
    assert isinstance(rep, backend.YscvRep)
    assert issubclass(backend.YscvBackend, onnx.backend.base.Backend)


def test_float64_and_float16_at_the_edges():
    a = np.array([[1.0, -2.0, 3.0]] * 2)
    (z,) = backend.prepare(_add_model(TensorProto.DOUBLE)).run([a, a])
    assert z.dtype == np.float64
    np.testing.assert_array_equal(z, np.maximum(2 * a, 0))
    h = a.astype(np.float16)
    (z,) = backend.prepare(_add_model(TensorProto.FLOAT16)).run([h, h])
    assert z.dtype == np.float16            # computed in float32, returned as declared
    np.testing.assert_array_equal(z, np.maximum(2 * h.astype(np.float32), 0).astype(np.float16))


def test_run_node():
    node = helper.make_node("Sigmoid", ["x"], ["y"])
    x = np.linspace(-2, 2, 5).astype(np.float32)
    (y,) = backend.run_node(node, [x])
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-x)), rtol=1e-6)


def test_errors_name_what_is_wrong():
    rep = backend.prepare(_add_model())
    with pytest.raises(ValueError, match="1 inputs given, the model takes 2"):
        rep.run([np.zeros((2, 3), np.float32)])
    with pytest.raises(ValueError, match="missing input 'b'"):
        rep.run({"a": np.zeros((2, 3), np.float32)})
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    with pytest.raises(ValueError, match="device 'CUDA'"):
        backend.prepare(_add_model(), "CUDA")
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        backend.Nope


def test_importing_the_backend_does_not_import_onnx():
    code = "import sys, yscv.onnx.backend; print('onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
