"""Convolution ops (forward): conv1d/2d/3d, depthwise, transpose 1d/2d/3d, deformable.

Channel-last layouts (x NLC / NHWC / NDHWC), input-major weights, and
cross-correlation as PyTorch. conv1d and conv2d run the conv3d machinery
on views with singleton depth (and height) axes. Nothing is saved for
backward: it recomputes the column blocks from the input values it receives
anyway (see docs/ops/conv.md for the measurements behind that choice).

Attributes: one named record per op (`ConvAttrs`,
`DepthwiseConvAttrs`, `ConvTransposeAttrs`,
`DeformConvAttrs`). How the values are computed (layouts, chunked
im2col + GEMM, scratch) is yscv/compute/conv.py.

Inputs are ``(x, w)`` or ``(x, w, bias)`` (deformable: ``(x, w, offsets[, bias])``).
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ..compute import conv as C
from ..node import Op
from ..registry import register_forward
from ._common import MAX_INTP, check_array_size, check_ndim, int_tuple, shape_error

_AXES = {1: "L", 2: "HW", 3: "DHW"}
_LAYOUT = {1: "NLC", 2: "NHWC", 3: "NDHWC"}


# ---------------------------------------------------------------- attributes
class ConvAttrs(NamedTuple):
    """conv1d/2d/3d: per-axis tuples of 3 (leading axes padded: stride and
    dilation 1, padding 0)."""
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    has_bias: bool


class ConvGradAttrs(NamedTuple):
    """conv_grad_input / conv_grad_weight: the convolution's per-axis tuples
    of 3 (as `ConvAttrs`) and the shape of the gradient computed (the
    convolution's input x, or its weight w)."""
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    shape: tuple


class DepthwiseConvAttrs(NamedTuple):
    """depthwise_conv2d: (h, w) pairs."""
    stride: tuple
    padding: tuple
    dilation: tuple
    has_bias: bool


class ConvTransposeAttrs(NamedTuple):
    """conv_transpose1d/2d/3d: per-axis tuples of 3, as `ConvAttrs`."""
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    output_padding: tuple
    has_bias: bool


class DeformConvAttrs(NamedTuple):
    """deformable_conv2d: (h, w) pairs."""
    stride: tuple
    padding: tuple
    dilation: tuple
    has_bias: bool


# ---------------------------------------------------------------- validation
def _groups(groups, op: str) -> int:
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral):
        raise TypeError(f"{op}: groups must be an int, got {groups!r}")
    if groups < 1:
        raise ValueError(f"{op}: groups={groups} must be >= 1")
    return int(groups)


def _check_windows(op, sp_in, kernel, stride, padding, dilation, axes):
    """Each axis: the padded input is a representable index range (the
    kernels index it in int64) and the dilated kernel fits in it (so
    output >= 1). Returns the output extents."""
    out = []
    for n, k, s, p, d, a in zip(sp_in, kernel, stride, padding, dilation, axes):
        if k < 1:
            raise ValueError(f"{op}: kernel size along {a} is {k}; it must be >= 1")
        if n + 2 * p > MAX_INTP:
            raise ValueError(
                f"{op}: padding={p} along {a} gives a padded input of {n + 2 * p} "
                f"({a}={n} + 2*padding), larger than any array index (at most {MAX_INTP})")
        ext = d * (k - 1) + 1
        if n + 2 * p < ext:
            raise ValueError(
                f"{op}: kernel extent {ext} along {a} (size {k}, dilation {d}) is larger than "
                f"the padded input {n + 2 * p} ({a}={n} + 2*padding {p}); output size would be "
                f"{C.out_size(n, k, s, p, d)} <= 0")
        out.append(C.out_size(n, k, s, p, d))
    return tuple(out)


# ---------------------------------------------------------------- forwards
@register_forward(Op.CONV1D)
@register_forward(Op.CONV2D)
@register_forward(Op.CONV3D)
def conv_nd_forward(attrs, x, w, b=None):
    """y [N, ``*out``, Cout]: grouped cross-correlation of x with w, plus bias.
    Saved: the zero-padded input the direct / Winograd tiles read (or
    None), for the weight gradient's pass (it would pad x again)."""
    nsp = x.ndim - 2
    y, xp = C.conv_forward(C.lift_x(x), C.lift_w(w), attrs.stride, attrs.padding,
                           attrs.dilation, attrs.groups, bias=b, return_padded=True)
    return y.reshape(y.shape[0], *y.shape[4 - nsp:4], y.shape[4]), xp


@register_forward(Op.CONV_GRAD_INPUT)
def conv_grad_input_forward(attrs, grad, w):
    """dx [x shape]: the gradient of conv(x, w) with respect to x for the
    output gradient ``grad`` (the transposed convolution of grad with w)."""
    dx, _, _ = C.conv_backward(C.lift_x(grad), C.lift_w(w), attrs.stride, attrs.padding,
                               attrs.dilation, attrs.groups,
                               x_shape=_lifted(attrs.shape), need_x=True, need_w=False)
    return dx.reshape(attrs.shape), None


@register_forward(Op.CONV_GRAD_WEIGHT)
def conv_grad_weight_forward(attrs, x, grad):
    """dw [w shape]: the gradient of conv(x, w) with respect to w for the
    output gradient ``grad``."""
    w5 = np.empty(_lifted_w(attrs.shape), dtype=grad.dtype)   # only its shape is read
    _, dw, _ = C.conv_backward(C.lift_x(grad), w5, attrs.stride, attrs.padding, attrs.dilation,
                               attrs.groups, x=C.lift_x(x), need_x=False, need_w=True)
    return dw.reshape(attrs.shape), None


@register_forward(Op.CONV_GRAD_BIAS)
def conv_grad_bias_forward(attrs, x, grad):
    """db [Cout]: the bias gradient of conv(x, w) (w of shape ``attrs.shape``)
    for the output gradient ``grad``, summed as conv's backward sums it with
    the weight gradient: in the direct weight pass where that pass runs (the
    weight gradient it also computes is dropped), else as ``C.bias_grad``."""
    w5 = np.empty(_lifted_w(attrs.shape), dtype=grad.dtype)   # only its shape is read
    _, _, db = C.conv_backward(C.lift_x(grad), w5, attrs.stride, attrs.padding, attrs.dilation,
                               attrs.groups, x=C.lift_x(x), need_x=False, need_w=True,
                               need_b=True)
    return db, None


def _lifted(x_shape: tuple) -> tuple:
    """An input shape [N, ``*sp``, C] lifted to [N, D, H, W, C]."""
    return (x_shape[0],) + (1,) * (5 - len(x_shape)) + tuple(x_shape[1:])


def _lifted_w(w_shape: tuple) -> tuple:
    """A weight shape [``*k``, Cin/g, Cout] lifted to [KD, KH, KW, Cin/g, Cout]."""
    return (1,) * (5 - len(w_shape)) + tuple(w_shape)


@register_forward(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d_forward(attrs, x, w, b=None):
    """y [N, OH, OW, ``C*M``], channel ``c*M`` + m = x[..., c] correlated with w[:, :, c, m]."""
    y = C.depthwise_forward(x, w, attrs.stride, attrs.padding, attrs.dilation)
    return C.add_bias(y, b), None


@register_forward(Op.CONV_TRANSPOSE1D)
@register_forward(Op.CONV_TRANSPOSE2D)
@register_forward(Op.CONV_TRANSPOSE3D)
def conv_transpose_nd_forward(attrs, x, w, b=None):
    """y [N, ``*out``, Cout], the adjoint of conv1d/2d/3d(., w) applied to x, plus bias."""
    nsp = x.ndim - 2
    x5 = C.lift_x(x)
    w5 = C.lift_w(w)
    sp = tuple(C.transpose_out_size(*a) for a in zip(x5.shape[1:4], w5.shape[:3], attrs.stride,
                                                      attrs.padding, attrs.dilation,
                                                      attrs.output_padding))
    cout = w5.shape[3] * attrs.groups
    y, _, _ = C.conv_backward(x5, w5, attrs.stride, attrs.padding, attrs.dilation, attrs.groups,
                              x_shape=(x5.shape[0], *sp, cout), need_x=True, need_w=False)
    return C.add_bias(y.reshape(x.shape[0], *sp[3 - nsp:], cout), b), None


@register_forward(Op.DEFORMABLE_CONV2D)
def deformable_conv2d_forward(attrs, x, w, offsets, b=None):
    """y [N, OH, OW, Cout]: bilinear samples at the offset taps, times w, plus bias."""
    y = C.deform_forward(np.ascontiguousarray(x), np.ascontiguousarray(w),
                         np.ascontiguousarray(offsets), attrs.stride, attrs.padding,
                         attrs.dilation)
    return C.add_bias(y, b), None


# ---------------------------------------------------------------- Graph methods
class ConvOps:
    """Graph methods of the conv category (channel-last layouts)."""

    def _conv_operands(self, op, x, w, bias, xdim, wdim, layout):
        _, xv, _ = self._operand(x, op, "x")
        _, wv, _ = self._operand(w, op, "w")
        check_ndim(xv.shape, xdim, op, "x", layout)
        check_ndim(wv.shape, wdim, op, "w")
        bv = None
        if bias is not None:
            _, bv, _ = self._operand(bias, op, "bias")
        return xv, wv, bv

    def _check_conv_output(self, op, shape, **args):
        """ValueError naming ``args`` (the arguments that set the output
        extents) unless the output [N, ``*spatial``, C] can exist as an array."""
        check_array_size(op, shape, self.dtype.itemsize, **args)

    @staticmethod
    def _check_bias(op, bv, cout, what="Cout"):
        if bv is not None and bv.shape != (cout,):
            raise shape_error(op, f"bias must have shape ({what},) = ({cout},), got {bv.shape}",
                              expected=(cout,), got=bv.shape)

    def _conv_nd(self, opm, nsp, x, w, bias, stride, padding, dilation, groups):
        op = opm.name.lower()
        xv, wv, bv = self._conv_operands(op, x, w, bias, nsp + 2, nsp + 2, _LAYOUT[nsp])
        stride = int_tuple(stride, nsp, op, "stride", minimum=1)
        padding = int_tuple(padding, nsp, op, "padding", minimum=0)
        dilation = int_tuple(dilation, nsp, op, "dilation", minimum=1)
        groups = _groups(groups, op)
        cin = xv.shape[-1]
        cg, cout = wv.shape[-2:]
        if cin % groups:
            raise ValueError(f"{op}: groups={groups} does not divide the input channels {cin}")
        if cout % groups:
            raise ValueError(f"{op}: groups={groups} does not divide the output channels {cout} "
                             f"(w.shape[-1])")
        if cg * groups != cin:
            raise shape_error(
                op, f"w has {cg} input channels per group (w.shape[-2]) but x has {cin} channels "
                f"and groups={groups}; expected w.shape[-2] == {cin // groups}",
                expected=cin // groups, got=cg)
        out_sp = _check_windows(op, xv.shape[1:-1], wv.shape[:nsp], stride, padding, dilation,
                                _AXES[nsp])
        self._check_conv_output(op, (xv.shape[0], *out_sp, cout), stride=stride, padding=padding,
                           dilation=dilation)
        self._check_bias(op, bv, cout)
        attrs = ConvAttrs(C.pad3(stride, 1), C.pad3(padding, 0), C.pad3(dilation, 1), groups,
                          bias is not None)
        ins = (x, w) if bias is None else (x, w, bias)
        return self._apply(opm, ins, attrs)

    def conv1d(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """1-D cross-correlation. x [N, L, Cin], w [K, Cin/groups, Cout], bias [Cout] or None
        -> [N, Lout, Cout], Lout = (L + ``2*padding`` - ``dilation*(K-1)`` - 1) // stride + 1."""
        return self._conv_nd(Op.CONV1D, 1, x, w, bias, stride, padding, dilation, groups)

    def conv2d(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """2-D cross-correlation. x [N, H, W, Cin], w [KH, KW, Cin/groups, Cout],
        bias [Cout] or None -> [N, OH, OW, Cout]. stride/padding/dilation: int or (h, w)."""
        return self._conv_nd(Op.CONV2D, 2, x, w, bias, stride, padding, dilation, groups)

    def conv3d(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """3-D cross-correlation. x [N, D, H, W, Cin], w [KD, KH, KW, Cin/groups, Cout],
        bias [Cout] or None -> [N, OD, OH, OW, Cout]."""
        return self._conv_nd(Op.CONV3D, 3, x, w, bias, stride, padding, dilation, groups)

    def _conv_grad_geometry(self, op, x_shape, w_shape, grad_shape, stride, padding, dilation,
                            groups):
        """Check that a convolution of an input ``x_shape`` with a weight
        ``w_shape`` has outputs of ``grad_shape``; returns its ConvGradAttrs
        fields (3-tuples)."""
        nsp = len(x_shape) - 2
        if nsp not in (1, 2, 3):
            raise ValueError(f"{op}: the convolution's input must be 3-, 4- or 5-d "
                             f"(NLC, NHWC, NDHWC), got shape {tuple(x_shape)}")
        for name, shp in (("w", w_shape), ("grad", grad_shape)):
            check_ndim(tuple(shp), nsp + 2, op, name)
        stride = int_tuple(stride, nsp, op, "stride", minimum=1)
        padding = int_tuple(padding, nsp, op, "padding", minimum=0)
        dilation = int_tuple(dilation, nsp, op, "dilation", minimum=1)
        groups = _groups(groups, op)
        cin, (cg, cout) = x_shape[-1], w_shape[-2:]
        if cout % groups or cg * groups != cin:
            raise shape_error(op, f"w {tuple(w_shape)} does not fit an input of {cin} channels "
                                  f"with groups={groups} (w is [*k, Cin/groups, Cout])",
                              expected=cin // groups, got=cg)
        out_sp = _check_windows(op, tuple(x_shape[1:-1]), tuple(w_shape[:nsp]), stride,
                                padding, dilation, _AXES[nsp])
        want = (x_shape[0], *out_sp, cout)
        if tuple(grad_shape) != want:
            raise shape_error(op, f"grad has shape {tuple(grad_shape)}; the convolution's output "
                                  f"has {want}", expected=want, got=tuple(grad_shape))
        return C.pad3(stride, 1), C.pad3(padding, 0), C.pad3(dilation, 1), groups

    def conv_grad_input(self, grad, w, input_shape, stride=1, padding=0, dilation=1, groups=1):
        """The gradient of ``conv{1,2,3}d(x, w, ...)`` with respect to ``x``
        for the output gradient ``grad``, as an op of its own
        (``torch.nn.grad.conv2d_input``): ``input_shape`` is x's shape
        [N, ``*sp``, Cin], w is [``*k``, Cin/groups, Cout], grad [N, ``*out``, Cout].
        The recorded backward of a convolution (``create_graph=True``)
        appends it; its own backward is a convolution and
        `conv_grad_weight`, so derivatives of any order stay on the
        fused kernels."""
        op = "conv_grad_input"
        _, gv, _ = self._operand(grad, op, "grad")
        _, wv, _ = self._operand(w, op, "w")
        shape = tuple(int(n) for n in input_shape)
        geo = self._conv_grad_geometry(op, shape, wv.shape, gv.shape, stride, padding,
                                       dilation, groups)
        return self._apply(Op.CONV_GRAD_INPUT, (grad, w), ConvGradAttrs(*geo, shape))

    def conv_grad_weight(self, x, grad, weight_shape, stride=1, padding=0, dilation=1,
                         groups=1):
        """The gradient of ``conv{1,2,3}d(x, w, ...)`` with respect to ``w``
        (of shape ``weight_shape``) for the output gradient ``grad``, as an op
        of its own (``torch.nn.grad.conv2d_weight``); see
        `conv_grad_input`."""
        op = "conv_grad_weight"
        _, xv, _ = self._operand(x, op, "x")
        _, gv, _ = self._operand(grad, op, "grad")
        shape = tuple(int(n) for n in weight_shape)
        geo = self._conv_grad_geometry(op, xv.shape, shape, gv.shape, stride, padding,
                                       dilation, groups)
        return self._apply(Op.CONV_GRAD_WEIGHT, (x, grad), ConvGradAttrs(*geo, shape))

    def conv_grad_bias(self, x, grad, weight_shape, stride=1, padding=0, dilation=1,
                       groups=1):
        """The gradient of ``conv{1,2,3}d(x, w, b, ...)`` with respect to ``b``
        [Cout] for the output gradient ``grad``: ``grad`` summed over every axis
        but the last, in the order conv's backward sums it when it also
        computes the weight gradient (so that ``create_graph=True`` gives its
        bits); arguments as `conv_grad_weight`. Backward: the cotangent
        broadcast over ``grad``'s positions."""
        op = "conv_grad_bias"
        _, xv, _ = self._operand(x, op, "x")
        _, gv, _ = self._operand(grad, op, "grad")
        shape = tuple(int(n) for n in weight_shape)
        geo = self._conv_grad_geometry(op, xv.shape, shape, gv.shape, stride, padding,
                                       dilation, groups)
        return self._apply(Op.CONV_GRAD_BIAS, (x, grad), ConvGradAttrs(*geo, shape))

    def depthwise_conv2d(self, x, w, bias=None, stride=1, padding=0, dilation=1):
        """Depthwise 2-D cross-correlation with channel multiplier M.
        x [N, H, W, C], w [KH, KW, C, M], bias ``[C*M]`` or None -> [N, OH, OW, ``C*M``];
        output channel ``c*M`` + m sees only input channel c (PyTorch groups=C)."""
        op = "depthwise_conv2d"
        xv, wv, bv = self._conv_operands(op, x, w, bias, 4, 4, "NHWC")
        stride = int_tuple(stride, 2, op, "stride", minimum=1)
        padding = int_tuple(padding, 2, op, "padding", minimum=0)
        dilation = int_tuple(dilation, 2, op, "dilation", minimum=1)
        c = xv.shape[3]
        if wv.shape[2] != c:
            raise shape_error(op, f"w.shape[2]={wv.shape[2]} must equal the input channels {c} "
                              f"(w is [KH, KW, C, M])", expected=c, got=wv.shape[2])
        out_sp = _check_windows(op, xv.shape[1:3], wv.shape[:2], stride, padding, dilation, "HW")
        self._check_conv_output(op, (xv.shape[0], *out_sp, c * wv.shape[3]), stride=stride,
                           padding=padding, dilation=dilation)
        self._check_bias(op, bv, c * wv.shape[3], "C*M")
        attrs = DepthwiseConvAttrs(stride, padding, dilation, bias is not None)
        ins = (x, w) if bias is None else (x, w, bias)
        return self._apply(Op.DEPTHWISE_CONV2D, ins, attrs)

    def _conv_transpose_nd(self, opm, nsp, x, w, bias, stride, padding, output_padding,
                           groups, dilation):
        op = opm.name.lower()
        axes, layout = _AXES[nsp], _LAYOUT[nsp]
        xv, wv, bv = self._conv_operands(op, x, w, bias, nsp + 2, nsp + 2, layout)
        stride = int_tuple(stride, nsp, op, "stride", minimum=1)
        padding = int_tuple(padding, nsp, op, "padding", minimum=0)
        out_pad = int_tuple(output_padding, nsp, op, "output_padding", minimum=0)
        dilation = int_tuple(dilation, nsp, op, "dilation", minimum=1)
        groups = _groups(groups, op)
        for a, s, d, o in zip(axes, stride, dilation, out_pad):
            if o >= s and o >= d:
                raise ValueError(
                    f"{op}: output_padding={output_padding!r} along {a} is {o}; it must be "
                    f"smaller than the stride ({s}) or the dilation ({d})")
        cin = xv.shape[-1]
        ks, cog, wcin = wv.shape[:nsp], wv.shape[nsp], wv.shape[nsp + 1]
        if cin % groups:
            raise ValueError(f"{op}: groups={groups} does not divide the input channels {cin}")
        if wcin != cin:
            raise shape_error(op, f"w.shape[{nsp + 1}]={wcin} must equal the input channels "
                              f"{cin} (w is [{', '.join(['K'] if nsp == 1 else ['K' + a for a in axes])}, "
                              f"Cout/groups, Cin])", expected=cin, got=wcin)
        for a, k in zip(axes, ks):
            if k < 1:
                raise ValueError(f"{op}: kernel size along {a} is {k}; it must be >= 1")
        sp = tuple(C.transpose_out_size(n, k, s, p, d, o) for n, k, s, p, d, o in
                   zip(xv.shape[1:-1], ks, stride, padding, dilation, out_pad))
        if min(sp) <= 0:
            raise ValueError(f"{op}: output size {sp} <= 0 for input {xv.shape[1:-1]}, kernel "
                             f"{ks}, stride {stride}, padding {padding}, dilation "
                             f"{dilation}, output_padding {out_pad}")
        for a, o, p in zip(axes, sp, padding):
            if o + 2 * p > MAX_INTP:  # the padded output the kernels index in int64
                raise ValueError(
                    f"{op}: stride={stride}, padding={padding}, dilation={dilation} give a "
                    f"padded output extent of {o + 2 * p} along {a}, larger than any array "
                    f"index (at most {MAX_INTP})")
        self._check_conv_output(op, (xv.shape[0], *sp, cog * groups), stride=stride,
                                padding=padding, dilation=dilation, output_padding=out_pad)
        self._check_bias(op, bv, cog * groups)
        attrs = ConvTransposeAttrs(C.pad3(stride, 1), C.pad3(padding, 0), C.pad3(dilation, 1),
                                   groups, C.pad3(out_pad, 0), bias is not None)
        ins = (x, w) if bias is None else (x, w, bias)
        return self._apply(opm, ins, attrs)

    def conv_transpose1d(self, x, w, bias=None, stride=1, padding=0, output_padding=0,
                         groups=1, dilation=1):
        """Transposed 1-D convolution (the adjoint of conv1d), as PyTorch's.
        x [N, L, Cin], w [K, Cout/groups, Cin], bias [Cout] or None
        -> [N, Lout, Cout], Lout = ``(L-1)*stride`` - ``2*padding`` + ``dilation*(K-1)``
        + output_padding + 1. output_padding must be smaller than stride or dilation."""
        return self._conv_transpose_nd(Op.CONV_TRANSPOSE1D, 1, x, w, bias, stride, padding,
                                       output_padding, groups, dilation)

    def conv_transpose2d(self, x, w, bias=None, stride=1, padding=0, output_padding=0,
                         groups=1, dilation=1):
        """Transposed 2-D convolution (the adjoint of conv2d), as PyTorch's.
        x [N, H, W, Cin], w [KH, KW, Cout/groups, Cin], bias [Cout] or None
        -> [N, OH, OW, Cout], OH = ``(H-1)*stride`` - ``2*padding`` + ``dilation*(KH-1)``
        + output_padding + 1. output_padding must be smaller than stride or dilation."""
        return self._conv_transpose_nd(Op.CONV_TRANSPOSE2D, 2, x, w, bias, stride, padding,
                                       output_padding, groups, dilation)

    def conv_transpose3d(self, x, w, bias=None, stride=1, padding=0, output_padding=0,
                         groups=1, dilation=1):
        """Transposed 3-D convolution (the adjoint of conv3d), as PyTorch's.
        x [N, D, H, W, Cin], w [KD, KH, KW, Cout/groups, Cin], bias [Cout] or
        None -> [N, OD, OH, OW, Cout], each axis as conv_transpose1d's Lout."""
        return self._conv_transpose_nd(Op.CONV_TRANSPOSE3D, 3, x, w, bias, stride, padding,
                                       output_padding, groups, dilation)

    def deformable_conv2d(self, x, w, offsets, bias=None, stride=1, padding=0, dilation=1):
        """Deformable 2-D convolution (torchvision.ops.deform_conv2d, no mask, one
        offset group). x [N, H, W, Cin], w [KH, KW, Cin, Cout], offsets
        [N, OH, OW, ``2*KH*KW``] with (dy, dx) of tap k = ``i*KW`` + j at 2k, 2k+1;
        bilinear sampling, zero outside the image. Gradients for x, w, offsets, bias."""
        op = "deformable_conv2d"
        xv, wv, bv = self._conv_operands(op, x, w, bias, 4, 4, "NHWC")
        _, ov, _ = self._operand(offsets, op, "offsets")
        stride = int_tuple(stride, 2, op, "stride", minimum=1)
        padding = int_tuple(padding, 2, op, "padding", minimum=0)
        dilation = int_tuple(dilation, 2, op, "dilation", minimum=1)
        n, _, _, cin = xv.shape
        kh, kw, wcin, cout = wv.shape
        if wcin != cin:
            raise shape_error(op, f"w.shape[2]={wcin} must equal the input channels {cin} "
                              f"(w is [KH, KW, Cin, Cout])", expected=cin, got=wcin)
        oh, ow = _check_windows(op, xv.shape[1:3], (kh, kw), stride, padding, dilation, "HW")
        self._check_conv_output(op, (n, oh, ow, cout), stride=stride, padding=padding,
                           dilation=dilation)
        want = (n, oh, ow, 2 * kh * kw)
        if ov.shape != want:
            raise shape_error(op, f"offsets must have shape [N, OH, OW, 2*KH*KW] = {want}, got "
                              f"{ov.shape}", expected=want, got=ov.shape)
        self._check_bias(op, bv, cout)
        attrs = DeformConvAttrs(stride, padding, dilation, bias is not None)
        ins = (x, w, offsets) if bias is None else (x, w, offsets, bias)
        return self._apply(Op.DEFORMABLE_CONV2D, ins, attrs)

    # ---- aliases named with their layout (same arguments, same Op as the op they name)
    def conv1d_nlc(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """Alias of `conv1d`, named with its layout (same op, same arguments)."""
        return self.conv1d(x, w, bias, stride, padding, dilation, groups)

    def conv2d_nhwc(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """Alias of `conv2d`, named with its layout (same op, same arguments)."""
        return self.conv2d(x, w, bias, stride, padding, dilation, groups)

    def conv3d_ndhwc(self, x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """Alias of `conv3d`, named with its layout (same op, same arguments)."""
        return self.conv3d(x, w, bias, stride, padding, dilation, groups)

    def depthwise_conv2d_nhwc(self, x, w, bias=None, stride=1, padding=0, dilation=1):
        """Alias of `depthwise_conv2d`, named with its layout (same op, same arguments)."""
        return self.depthwise_conv2d(x, w, bias, stride, padding, dilation)

    def conv_transpose2d_nhwc(self, x, w, bias=None, stride=1, padding=0, output_padding=0,
                              groups=1, dilation=1):
        """Alias of `conv_transpose2d`, named with its layout (same op, same arguments)."""
        return self.conv_transpose2d(x, w, bias, stride, padding, output_padding, groups,
                                     dilation)

    def deformable_conv2d_nhwc(self, x, w, offsets, bias=None, stride=1, padding=0,
                               dilation=1):
        """Alias of `deformable_conv2d`, named with its layout (same op, same arguments)."""
        return self.deformable_conv2d(x, w, offsets, bias, stride, padding, dilation)
