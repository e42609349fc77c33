"""Convolution ops (backward). The column blocks are recomputed from the
input values (chunk by chunk, in yscv/compute/conv.py), which the walk
passes in anyway; the only thing a forward saves is conv1d/2d/3d's
zero-padded input on the direct and Winograd paths (one copy of x plus its
border, kept while the node lives, released and replayed like any saved
data under checkpointing), so the weight pass does not pad x again. ``needs`` skips whole
GEMMs: a constant input (the first layer's image) costs no data-gradient GEMM
or col2im. Attributes are the named records built by yscv/ops/conv.py."""
from __future__ import annotations

import numpy as np

from ..compute import conv as C
from ..node import Op
from ..registry import register_backward


def _bias_grad(g, needs, k):
    """Sum of g over every axis but the last (or None when input k needs none)."""
    if len(needs) <= k or not needs[k]:
        return None
    return C.bias_grad(g)


@register_backward(Op.CONV1D)
@register_backward(Op.CONV2D)
@register_backward(Op.CONV3D)
def conv_nd_backward(g, inputs, out, attrs, saved, needs):
    """dx, dW and the bias gradient; on the direct tiles the bias gradient
    is summed in the dW pass (yscv/compute/conv.py)."""
    x, w = inputs[0], inputs[1]
    need_b = len(needs) > 2 and bool(needs[2])
    dx, dw, db = C.conv_backward(C.lift_x(g), C.lift_w(w), attrs.stride, attrs.padding,
                                 attrs.dilation, attrs.groups, x=C.lift_x(x),
                                 need_x=needs[0], need_w=needs[1], need_b=need_b,
                                 padded=saved)
    dx = None if dx is None else dx.reshape(x.shape)
    dw = None if dw is None else dw.reshape(w.shape)
    return (dx, dw, db)[:len(inputs)]


@register_backward(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d_backward(g, inputs, out, attrs, saved, needs):
    x, w = inputs[0], inputs[1]
    dx = dw = None
    if needs[0] or needs[1]:
        dx, dw = C.depthwise_backward(g, x, w, attrs.stride, attrs.padding, attrs.dilation,
                                      needs[0], needs[1])
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.CONV_TRANSPOSE2D)
def conv_transpose2d_backward(g, inputs, out, attrs, saved, needs):
    """dx = conv2d(g, w) on x's grid; dw = conv2d's weight pass with the roles
    of input and output gradient exchanged."""
    x, w = inputs[0], inputs[1]
    g5 = C.lift_x(g)
    w5 = C.lift_w(w)
    dx = dw = None
    if needs[0]:
        x5 = C.lift_x(x)
        dx = C.conv_forward(g5, w5, attrs.stride, attrs.padding, attrs.dilation, attrs.groups,
                            out_sp=x5.shape[1:4]).reshape(x.shape)
    if needs[1]:
        _, dw, _ = C.conv_backward(C.lift_x(x), w5, attrs.stride, attrs.padding, attrs.dilation,
                                   attrs.groups, x=g5, need_x=False, need_w=True)
        dw = dw.reshape(w.shape)
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.DEFORMABLE_CONV2D)
def deformable_conv2d_backward(g, inputs, out, attrs, saved, needs):
    x, w, off = inputs[0], inputs[1], inputs[2]
    dx = dw = doff = None
    if needs[0] or needs[1] or needs[2]:
        dx, dw, doff = C.deform_backward(
            np.ascontiguousarray(g), np.ascontiguousarray(x), np.ascontiguousarray(w),
            np.ascontiguousarray(off), attrs.stride, attrs.padding, attrs.dilation,
            bool(needs[0]), bool(needs[1]), bool(needs[2]))
    return (dx, dw, doff, _bias_grad(g, needs, 3))[:len(inputs)]
