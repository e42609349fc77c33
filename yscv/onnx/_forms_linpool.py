"""ONNX forms of the matrix functions, the 1-d and 3-d pools and the 1-d and
3-d transposed convolutions (one mapping function per Op member; see
`yscv.onnx._optable`)."""
from __future__ import annotations

from ..node import Op
from ._forms_layers import _adaptive, _conv_pads
from ._registry import NO_ONNX, onnx_form


# ------------------------------------------------------- matrix functions
@onnx_form(Op.DET, "Det")
def _det(b, n):
    return b.emit("Det", [n.x()])


@onnx_form(Op.SLOGDET, "Det, Abs, Log")
def _slogdet(b, n):
    return b.emit("Log", [b.emit("Abs", [b.emit("Det", [n.x()])])])


_NO_LINALG = "ONNX has no {} operator (the standard opsets stop at Det)"
NO_ONNX[Op.INV] = _NO_LINALG.format("matrix inverse")
NO_ONNX[Op.SOLVE] = _NO_LINALG.format("linear-system solve")
NO_ONNX[Op.CHOLESKY] = _NO_LINALG.format("Cholesky factorization")
NO_ONNX[Op.EIGH] = _NO_LINALG.format("symmetric eigendecomposition")


# ---------------------------------------------------------------- pooling
# The 1-d pools record the 2-d attributes with a height-1 window.
@onnx_form(Op.MAX_POOL1D, "Transpose, MaxPool")
def _max_pool1d(b, n):
    a = n.attrs
    y = b.emit("MaxPool", [b.to_channels_first(n.x(), 3)], kernel_shape=[a.kw],
               strides=[a.sw], pads=[a.pw, a.pw])
    return b.to_channels_last(y, 3)


@onnx_form(Op.AVG_POOL1D, "Transpose, AveragePool")
def _avg_pool1d(b, n):
    a = n.attrs
    y = b.emit("AveragePool", [b.to_channels_first(n.x(), 3)], kernel_shape=[a.kw],
               strides=[a.sw], pads=[a.pw, a.pw], count_include_pad=int(a.count_include_pad))
    return b.to_channels_last(y, 3)


@onnx_form(Op.ADAPTIVE_AVG_POOL1D, "Slice, ReduceMean, Concat")
def _adaptive_avg_pool1d(b, n):
    b.fixed_axes(n.inputs[0], (1,), n.name, n.index)
    y = _adaptive(b, n.x(), n.in_shape()[1:2], (n.attrs.ow,), "ReduceMean")
    return y if y != n.x() else b.emit("Identity", [y])


@onnx_form(Op.MAX_POOL3D, "Transpose, MaxPool")
def _max_pool3d(b, n):
    a = n.attrs
    y = b.emit("MaxPool", [b.to_channels_first(n.x(), 5)], kernel_shape=list(a.kernel),
               strides=list(a.stride), pads=list(a.padding) * 2)
    return b.to_channels_last(y, 5)


@onnx_form(Op.AVG_POOL3D, "Transpose, AveragePool")
def _avg_pool3d(b, n):
    a = n.attrs
    y = b.emit("AveragePool", [b.to_channels_first(n.x(), 5)], kernel_shape=list(a.kernel),
               strides=list(a.stride), pads=list(a.padding) * 2,
               count_include_pad=int(a.count_include_pad))
    return b.to_channels_last(y, 5)


# ------------------------------------------------ transposed convolutions
def _conv_transpose_nd(b, n, nsp):
    """x [N, ``*S``, Cin], w [``*K``, Cout/g, Cin] -> ConvTranspose on [N, Cin, ``*S``],
    w [Cin, Cout/g, ``*K``]."""
    a = n.attrs
    perm = [nsp + 1, nsp, *range(nsp)]
    w = b.weight(n.inputs[1], lambda v: v.transpose(perm),
                 lambda t: b.emit("Transpose", [t], perm=perm), "iohw")
    ins = [b.to_channels_first(n.x(0), nsp + 2), w]
    if a.has_bias:
        ins.append(n.x(2))
    y = b.emit("ConvTranspose", ins, strides=list(a.stride[-nsp:]),
               pads=_conv_pads(a.padding, nsp), dilations=list(a.dilation[-nsp:]),
               output_padding=list(a.output_padding[-nsp:]), group=a.groups)
    return b.to_channels_last(y, nsp + 2)


@onnx_form(Op.CONV_TRANSPOSE1D, "Transpose, ConvTranspose")
def _conv_transpose1d(b, n):
    return _conv_transpose_nd(b, n, 1)


@onnx_form(Op.CONV_TRANSPOSE3D, "Transpose, ConvTranspose")
def _conv_transpose3d(b, n):
    return _conv_transpose_nd(b, n, 3)
