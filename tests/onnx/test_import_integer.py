"""yscv.onnx.load on the integer operators of _import_integer:
MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv and BitCast.

Oracle: ONNX Runtime (values and dtypes); BitCast against NumPy's ``view``.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto  # noqa: E402

import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_forward, one_node, yscv_run  # noqa: E402

U8, I8, I32 = np.uint8, np.int8, np.int32


def ints(dtype, *shape, seed=0):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("a_dt,b_dt,zp", [(U8, U8, True), (U8, I8, False), (I8, I8, True)])
def test_matmul_integer(a_dt, b_dt, zp):
    ins = [("a", ints(a_dt, 2, 3, 4)), ("b", ints(b_dt, 4, 5, seed=1))]
    if zp:
        ins += [("za", np.array(7, a_dt)), ("zb", ints(b_dt, 5, seed=2))]
    check_forward(one_node("MatMulInteger", ins, out=[I32]), ins)


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 0, 2, 1], "strides": [2, 1]},
                                   {"dilations": [1, 2], "group": 2},
                                   {"auto_pad": "SAME_UPPER", "strides": [2, 2]}])
def test_conv_integer(attrs):
    ins = [("x", ints(U8, 2, 4, 6, 7)), ("w", ints(U8, 6, 4 // attrs.get("group", 1), 3, 2,
                                                   seed=1)),
           ("zx", np.array(128, U8)), ("zw", np.array(3, U8))]
    check_forward(one_node("ConvInteger", ins, out=[I32], **attrs), ins)


@pytest.mark.parametrize("dt", [U8, I8])
def test_qlinear_matmul(dt):
    a, b = ints(dt, 2, 3, 4), ints(dt, 4, 5, seed=1)
    f = np.float32
    ins = [("a", a), ("sa", np.array(0.02, f)), ("za", np.array(3, dt)), ("b", b),
           ("sb", np.array(0.05, f)), ("zb", np.array(-2 if dt == I8 else 9, dt)),
           ("sy", np.array(0.9, f)), ("zy", np.array(5, dt))]
    check_forward(one_node("QLinearMatMul", ins, out=[dt], opset=21), ins)


@pytest.mark.parametrize("per_channel,bias,group", [(False, False, 1), (True, True, 1),
                                                    (True, True, 2)])
def test_qlinear_conv(per_channel, bias, group):
    f = np.float32
    x, w = ints(U8, 1, 4, 5, 5), ints(I8, 6, 4 // group, 3, 3, seed=1)
    ins = [("x", x), ("sx", np.array(0.03, f)), ("zx", np.array(120, U8)), ("w", w),
           ("sw", (np.linspace(0.01, 0.03, 6) if per_channel else np.array(0.02)).astype(f)),
           ("zw", np.zeros(6 if per_channel else (), I8)), ("sy", np.array(0.7, f)),
           ("zy", np.array(100, U8))]
    if bias:
        ins.append(("bias", ints(I32, 6, seed=2) // 1000))
    check_forward(one_node("QLinearConv", ins, out=[U8], pads=[1, 1, 1, 1], group=group), ins)


@pytest.mark.parametrize("src,to", [(np.float32, TensorProto.INT32), (np.int32, TensorProto.FLOAT),
                                    (np.uint16, TensorProto.INT16), (np.bool_, TensorProto.UINT8),
                                    (np.int64, TensorProto.DOUBLE)])
def test_bitcast(src, to):
    x = np.array([[1.5, -2.0, 0.0], [3.25, 1e-3, -7.0]], np.float32).astype(src) \
        if src != np.int32 else np.array([1065353216, -1, 0], np.int32)
    want = x.view(onnx.helper.tensor_dtype_to_np_dtype(to))
    model = one_node("BitCast", [("x", x)], out=[want.dtype], opset=26, to=to)
    model.ir_version = onnx.IR_VERSION
    (got,), *_ = yscv_run(model, [("x", x)], dtype=np.float64 if src == np.int64 else np.float32)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_bitcast_refuses_a_string_target_and_a_width_change():
    x = np.zeros(3, np.float32)
    model = one_node("BitCast", [("x", x)], out=[np.float32], opset=26, to=TensorProto.STRING)
    model.ir_version = onnx.IR_VERSION
    with pytest.raises(OnnxImportError, match="to=8 .* is not supported"):
        yscv.onnx.load(model)
    model = one_node("BitCast", [("x", x.astype(np.int16))], out=[np.float32], opset=26,
                     to=TensorProto.FLOAT)
    model.ir_version = onnx.IR_VERSION
    with pytest.raises((OnnxImportError, onnx.checker.ValidationError,
                        onnx.shape_inference.InferenceError)):
        yscv.onnx.load(model)(yscv.Graph(), x.astype(np.int16))


def test_integer_kernels_refuse_float_data():
    ins = [("a", np.ones((2, 2), np.float32)), ("b", np.ones((2, 2), U8))]
    m = yscv.onnx.load(one_node("MatMulInteger", ins, out=[I32]))
    with pytest.raises(OnnxImportError, match="input 0 must hold integers, got float32"):
        m(yscv.Graph(), *[a for _, a in ins])
