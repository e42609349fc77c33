"""Convolution ops (backward). Nothing is saved by the forwards: the column
blocks are recomputed here from the input values (chunk by chunk), which the
walk passes in anyway. ``needs`` skips whole GEMMs: a constant input (the
first layer's image) costs no data-gradient GEMM or col2im."""
from __future__ import annotations

import numpy as np

from ..kernels import lazy
from ..node import Op
from ..ops.conv import depthwise_operands, lift_w, lift_x, wide_rows
from ..registry import register_backward

_G = lazy("conv_gemm")
_K = lazy("conv")
_D = lazy("conv_deform")


def _bias_grad(g, needs, k):
    """Sum of g over every axis but the last (or None when input k needs none)."""
    if len(needs) <= k or not needs[k]:
        return None
    g2, k = wide_rows(g)
    return g2.sum(axis=0).reshape(k, g.shape[-1]).sum(axis=0)


@register_backward(Op.CONV1D)
@register_backward(Op.CONV2D)
@register_backward(Op.CONV3D)
def conv_nd_backward(g, inputs, out, attrs, saved, needs):
    stride, padding, dilation, groups, _ = attrs
    x, w = inputs[0], inputs[1]
    dx = dw = None
    if needs[0] or needs[1]:
        dx, dw = _G.conv_backward(lift_x(g), lift_w(w), stride, padding, dilation, groups,
                                  x=lift_x(x), need_x=needs[0], need_w=needs[1])
        dx = None if dx is None else dx.reshape(x.shape)
        dw = None if dw is None else dw.reshape(w.shape)
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d_backward(g, inputs, out, attrs, saved, needs):
    stride, padding, dilation, _ = attrs
    x, w = inputs[0], inputs[1]
    dx = dw = None
    if needs[0] or needs[1]:
        xr, wr = depthwise_operands(x, w)
        # an input that needs no gradient gets a 1-element stand-in (the kernel skips it)
        dxr = np.zeros(xr.shape if needs[0] else (1, 1, 1, 1), dtype=x.dtype)
        dwr = np.zeros(wr.shape if needs[1] else (1, 1, 1), dtype=x.dtype)
        _K.depthwise_backward(xr.reshape(-1), wr.reshape(-1), np.ascontiguousarray(g).reshape(-1),
                              dxr.reshape(-1), dwr.reshape(-1), bool(needs[0]), bool(needs[1]),
                              *xr.shape, *wr.shape[:2], *g.shape[1:3], *stride, *padding,
                              *dilation)
        m = w.shape[3]
        if needs[0]:
            dx = dxr if m == 1 else dxr.reshape(*x.shape, m).sum(axis=4)
        if needs[1]:
            dw = dwr.reshape(w.shape)
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.CONV_TRANSPOSE2D)
def conv_transpose2d_backward(g, inputs, out, attrs, saved, needs):
    stride, padding, dilation, groups, _, _ = attrs
    x, w = inputs[0], inputs[1]
    g5 = lift_x(g)
    w5 = lift_w(w)
    dx = dw = None
    if needs[0]:
        x5 = lift_x(x)
        dx = _G.conv_forward(g5, w5, stride, padding, dilation, groups,
                             out_sp=x5.shape[1:4]).reshape(x.shape)
    if needs[1]:
        _, dw = _G.conv_backward(lift_x(x), w5, stride, padding, dilation, groups, x=g5,
                                 need_x=False, need_w=True)
        dw = dw.reshape(w.shape)
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.DEFORMABLE_CONV2D)
def deformable_conv2d_backward(g, inputs, out, attrs, saved, needs):
    stride, padding, dilation, _ = attrs
    x, w, off = inputs[0], inputs[1], inputs[2]
    dx = dw = doff = None
    if needs[0] or needs[1] or needs[2]:
        dx, dw, doff = _D.deform_backward(
            np.ascontiguousarray(g), np.ascontiguousarray(x), np.ascontiguousarray(w),
            np.ascontiguousarray(off), stride, padding, dilation,
            bool(needs[0]), bool(needs[1]), bool(needs[2]))
    return (dx, dw, doff, _bias_grad(g, needs, 3))[:len(inputs)]
