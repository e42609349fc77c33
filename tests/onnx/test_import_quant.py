"""yscv.onnx.load on the linear quantisation operators of _import_quant:
QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked) and
DynamicQuantizeLinear.

Oracles: ONNX Runtime for the values and integer dtypes; PyTorch's
fake-quantisation gradient for the scale of DequantizeLinear; yscv.gradcheck
(float64) for the gradient through a data scale.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_forward, check_grad, one_node, ort_run, yscv_run  # noqa: E402


def _x(*shape, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("zp_dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_quantize_linear_per_tensor_matches_ort(zp_dtype):
    """Ties (x / scale = k + 0.5) round half to even; out-of-range values saturate."""
    x = np.concatenate([_x(20), np.array([0.25, 0.75, -0.25, -0.75, 1e6, -1e6], np.float32)])
    ins = [("x", x), ("s", np.array(0.5, np.float32)), ("z", np.array(3, zp_dtype))]
    (y,) = check_forward(one_node("QuantizeLinear", ins, out=[zp_dtype], opset=21), ins)
    assert y.dtype == zp_dtype


def test_quantize_linear_per_axis_and_default_uint8_match_ort():
    x = _x(2, 3, 4)
    ins = [("x", x), ("s", np.array([0.1, 0.2, 0.05], np.float32)),
           ("z", np.array([-4, 0, 7], np.int8))]
    check_forward(one_node("QuantizeLinear", ins, out=[np.int8], opset=13, axis=1), ins)
    ins = [("x", np.abs(x)), ("s", np.array(0.02, np.float32))]
    (y,) = check_forward(one_node("QuantizeLinear", ins, out=[np.uint8], opset=10), ins)
    assert y.dtype == np.uint8


def test_quantize_linear_blocked_matches_ort():
    x = _x(3, 8)
    s = np.abs(_x(3, 2, seed=1, scale=0.1)) + 0.01
    ins = [("x", x), ("s", s), ("z", np.array([[1, -2], [0, 3], [5, -5]], np.int8))]
    check_forward(one_node("QuantizeLinear", ins, out=[np.int8], opset=21, axis=1,
                           block_size=4), ins)


@pytest.mark.parametrize("zp_dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32])
def test_dequantize_linear_matches_ort(zp_dtype):
    info = np.iinfo(zp_dtype)
    q = np.random.default_rng(0).integers(max(info.min, -30000), min(info.max, 30000),
                                          (2, 3, 4)).astype(zp_dtype)
    ins = [("q", q), ("s", np.array([0.1, 0.2, 0.05], np.float32)),
           ("z", np.array([1, 0, 7], zp_dtype))]
    check_forward(one_node("DequantizeLinear", ins, out=[np.float32], opset=21, axis=1), ins)


def test_dequantize_linear_blocked_matches_ort_and_has_scale_gradients():
    q = np.random.default_rng(0).integers(-128, 128, (2, 6)).astype(np.int8)
    s = np.array([[0.1, 0.2], [0.3, 0.05]], np.float32)
    ins = [("q", q), ("s", s), ("z", np.array([[1, 2], [-3, 0]], np.int8))]
    model = one_node("DequantizeLinear", ins, out=[np.float32], opset=21, axis=1, block_size=3)
    check_forward(model, ins)
    check_grad(model, ins, wrt=(1,))


def test_dequantize_linear_scale_parameter_gets_torch_gradient():
    """A scale initializer is a Parameter: d/ds of (q - z) * s is torch's."""
    torch = pytest.importorskip("torch")
    q = np.random.default_rng(0).integers(0, 256, (4, 3)).astype(np.uint8)
    model = one_node("DequantizeLinear", [("q", q)], out=[np.float32], opset=13, axis=1)
    model.graph.node[0].input.extend(["s", "z"])
    s0 = np.array([0.1, 0.2, 0.3], np.float32)
    model.graph.initializer.extend([numpy_helper.from_array(s0, "s"),
                                    numpy_helper.from_array(np.array([128, 0, 3], np.uint8), "z")])
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    y = m(g, q)
    ct = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    g.backward(y, ct)
    ts = torch.tensor(s0, requires_grad=True)
    ty = (torch.tensor(q.astype(np.float32)) - torch.tensor([128.0, 0.0, 3.0])) * ts
    ty.backward(torch.tensor(ct))
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(m.parameter("s").grad, ts.grad.numpy(), rtol=1e-5)


def test_quantize_dequantize_pair_matches_torch_fake_quantize():
    torch = pytest.importorskip("torch")
    x = _x(5, 4)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])
    d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(-3, np.int8), "z")]
    graph = helper.make_graph([q, d], "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (y,), *_ = yscv_run(model, [("x", x)])
    want = torch.fake_quantize_per_tensor_affine(torch.tensor(x), 0.05, -3, -128, 127)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("x", [_x(3, 4), np.abs(_x(3, 4)), -np.abs(_x(3, 4))],
                         ids=["mixed", "pos", "neg"])
def test_dynamic_quantize_linear_matches_ort(x):
    ins = [("x", x)]
    got = check_forward(one_node("DynamicQuantizeLinear", ins, n_out=3,
                                 out=[np.uint8, np.float32, np.uint8], opset=11), ins)
    assert [a.dtype for a in got] == [np.uint8, np.float32, np.uint8]


def test_dynamic_quantize_linear_of_zeros_follows_the_onnx_reference():
    """All zeros: scale 1/255 and zero point 0, as ONNX's reference computes
    (ONNX Runtime gives scale 1 there; the values y are 0 either way)."""
    x = np.zeros((2, 2), np.float32)
    (y, s, z), *_ = yscv_run(one_node("DynamicQuantizeLinear", [("x", x)], n_out=3,
                                      out=[np.uint8, np.float32, np.uint8], opset=11), [("x", x)])
    np.testing.assert_array_equal(y, np.zeros((2, 2), np.uint8))
    assert s == np.float32(1) / np.float32(255) and z == 0 and z.dtype == np.uint8


def test_quantize_output_dtype_int4_is_a_static_narrow_array():
    x = np.array([-9.0, -1.4, 0.5, 1.5, 2.5, 30.0], np.float32)
    ins = [("x", x), ("s", np.array(1.0, np.float32))]
    model = one_node("QuantizeLinear", ins, out=[np.float32], opset=21,
                     output_dtype=onnx.TensorProto.INT4)
    (y,), *_ = yscv_run(model, ins)
    np.testing.assert_array_equal(y.astype(np.int8), [-8, -1, 0, 2, 2, 7])


def test_bad_variants_are_refused_naming_the_node():
    ins = [("x", _x(4)), ("s", np.array(1.0, np.float32))]
    with pytest.raises(OnnxImportError, match=r"'QuantizeLinear' \(node 'n0'.*output_dtype=1"):
        yscv.onnx.load(one_node("QuantizeLinear", ins, opset=21, output_dtype=1))
    bad = [("x", _x(2, 3)), ("s", np.array([1.0, 2.0], np.float32))]
    with pytest.raises(OnnxImportError, match=r"'QuantizeLinear'.*shape \(2,\).*axis 1"):
        yscv_run(one_node("QuantizeLinear", bad, out=[np.uint8], opset=13), bad)
    ins = [("q", np.zeros(3, np.int8)), ("s", np.array(1.0, np.float32)),
           ("z", np.zeros((), np.uint8))]
    with pytest.raises(OnnxImportError, match=r"'DequantizeLinear'.*uint8.*int8"):
        yscv_run(one_node("DequantizeLinear", ins, out=[np.float32], opset=13), ins)


@pytest.mark.parametrize("to", [onnx.TensorProto.INT4, onnx.TensorProto.UINT4,
                                onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT8E5M2])
def test_narrow_quantize_dequantize_chain_matches_ort(to):
    """QuantizeLinear to a 4-bit / float8 type (a static ml_dtypes array, the
    4-bit ones with their zero point) read back by DequantizeLinear."""
    x = _x(2, 6)
    zp = {onnx.TensorProto.INT4: 1, onnx.TensorProto.UINT4: 7}.get(to, 0)
    # the zero point is cast from a float constant: narrow-typed initializers
    # and constants are refused at load, a Cast to them gives a static array
    nodes = [helper.make_node("Constant", [], ["z0"], value_float=float(zp)),
             helper.make_node("Cast", ["z0"], ["z"], to=to),
             helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.array(0.4, np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    (want,) = ort_run(model, [("x", x)])
    (y,), *_ = yscv_run(model, [("x", x)])
    np.testing.assert_array_equal(y, want)
