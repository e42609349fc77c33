"""ONNX forms of the further activations: elu, selu, celu,
hardtanh, relu6, hardsigmoid, hardswish, softsign, logsigmoid, glu (one
mapping function per Op member; see `yscv.onnx._optable`).

float32 models use ONNX's own operators (Elu, Selu, Celu, HardSigmoid,
HardSwish, Softsign); their float attributes are float32 and ONNX Runtime
has float32 kernels only, so float64 models spell the same functions with
elementwise operators and float64 constants."""
from __future__ import annotations

from ..node import Op
from ._registry import onnx_form

_ELU_PARTS = "Min, Exp, Sub, Mul, Greater, Where"


def _elu_composite(b, x, attrs):
    """``scale x`` where x > 0, else ``alpha scale (exp(input_scale min(x, 0)) - 1)``."""
    z = b.emit("Min", [x, b.scalar(0.0)])
    if attrs.input_scale != 1.0:
        z = b.emit("Mul", [z, b.scalar(attrs.input_scale)])
    neg = b.emit("Sub", [b.emit("Exp", [z]), b.scalar(1.0)])
    neg = b.emit("Mul", [neg, b.scalar(attrs.alpha * attrs.scale)])
    pos = x if attrs.scale == 1.0 else b.emit("Mul", [x, b.scalar(attrs.scale)])
    return b.emit("Where", [b.emit("Greater", [x, b.scalar(0.0)]), pos, neg])


@onnx_form(Op.ELU, f"Elu (float64: {_ELU_PARTS})")
def _elu(b, n):
    if b.exact_float_attributes:
        return b.emit("Elu", [n.x()], alpha=float(n.attrs.alpha))
    return _elu_composite(b, n.x(), n.attrs)


@onnx_form(Op.SELU, f"Selu (float64: {_ELU_PARTS})")
def _selu(b, n):
    if b.exact_float_attributes:
        return b.emit("Selu", [n.x()], alpha=float(n.attrs.alpha), gamma=float(n.attrs.scale))
    return _elu_composite(b, n.x(), n.attrs)


@onnx_form(Op.CELU, f"Celu (float64: {_ELU_PARTS})")
def _celu(b, n):
    if b.exact_float_attributes:
        return b.emit("Celu", [n.x()], alpha=float(n.attrs.alpha))
    return _elu_composite(b, n.x(), n.attrs)


@onnx_form(Op.HARDTANH, "Clip")
def _hardtanh(b, n):
    return b.emit("Clip", [n.x(), b.scalar(n.attrs.min_val), b.scalar(n.attrs.max_val)])


@onnx_form(Op.RELU6, "Clip")
def _relu6(b, n):
    return b.emit("Clip", [n.x(), b.scalar(0.0), b.scalar(6.0)])


def _relu6_of_x_plus_3(b, x):
    return b.emit("Clip", [b.emit("Add", [x, b.scalar(3.0)]), b.scalar(0.0), b.scalar(6.0)])


@onnx_form(Op.HARDSIGMOID, "HardSigmoid (float64: Add, Clip, Div)")
def _hardsigmoid(b, n):
    if b.exact_float_attributes:
        return b.emit("HardSigmoid", [n.x()], alpha=1.0 / 6.0, beta=0.5)
    return b.emit("Div", [_relu6_of_x_plus_3(b, n.x()), b.scalar(6.0)])


@onnx_form(Op.HARDSWISH, "HardSwish (float64: Add, Clip, Mul, Div)")
def _hardswish(b, n):
    x = n.x()
    if b.exact_float_attributes:
        return b.emit("HardSwish", [x])
    return b.emit("Div", [b.emit("Mul", [x, _relu6_of_x_plus_3(b, x)]), b.scalar(6.0)])


@onnx_form(Op.SOFTSIGN, "Softsign (float64: Abs, Add, Div)")
def _softsign(b, n):
    x = n.x()
    if b.exact_float_attributes:
        return b.emit("Softsign", [x])
    return b.emit("Div", [x, b.emit("Add", [b.emit("Abs", [x]), b.scalar(1.0)])])


@onnx_form(Op.LOGSIGMOID, "Min, Abs, Neg, Exp, Add, Log, Sub")
def _logsigmoid(b, n):
    """min(x, 0) - log(1 + exp(-|x|)): exp of a non-positive number only."""
    x = n.x()
    e = b.emit("Exp", [b.emit("Neg", [b.emit("Abs", [x])])])
    log1p = b.emit("Log", [b.emit("Add", [e, b.scalar(1.0)])])
    return b.emit("Sub", [b.emit("Min", [x, b.scalar(0.0)]), log1p])


@onnx_form(Op.GLU, "Split, Sigmoid, Mul")
def _glu(b, n):
    a, gate = b.emit("Split", [n.x()], outputs=2, axis=int(n.attrs))
    return b.emit("Mul", [a, b.emit("Sigmoid", [gate])])
