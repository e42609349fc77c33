"""The conv names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
op's registered forward with the attributes the Graph method builds), without
a node and without the method's argument checks (a rule's operands are
consistent by construction)."""
from __future__ import annotations

import numpy as np  # noqa: F401

from ...compute.conv import pad3
from ...ops.conv import (ConvAttrs, ConvGradAttrs, conv_grad_bias_forward,
                        conv_grad_input_forward, conv_grad_weight_forward, conv_nd_forward)


def _tuple(v, nsp: int, fill: int) -> tuple:
    """An int or a per-axis tuple of nsp as the attributes' tuple of 3."""
    return pad3((int(v),) * nsp if isinstance(v, (int, np.integer)) else tuple(v), fill)


def _geometry(nsp, stride, padding, dilation):
    return _tuple(stride, nsp, 1), _tuple(padding, nsp, 0), _tuple(dilation, nsp, 1)


def _conv(nsp, x, w, bias, stride, padding, dilation, groups):
    attrs = ConvAttrs(*_geometry(nsp, stride, padding, dilation), int(groups), bias is not None)
    if bias is None:
        return conv_nd_forward(attrs, x, w)[0]
    return conv_nd_forward(attrs, x, w, bias)[0]


def _conv_grad(forward, shape, stride, padding, dilation, groups, a, b):
    """A conv gradient op's forward on arrays, with the attributes its Graph
    method builds (``shape`` the gradient's: the input's or the weight's)."""
    shape = tuple(int(n) for n in shape)
    geo = _geometry(len(shape) - 2, stride, padding, dilation)
    return forward(ConvGradAttrs(*geo, int(groups), shape), a, b)[0]


class ArrayConv:
    """Conv ops on arrays, for the rules of backward/."""

    __slots__ = ()

    @staticmethod
    def conv1d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """`Graph.conv1d` on arrays: x [N, L, Cin], w [K, Cin/groups, Cout]."""
        return _conv(1, x, w, bias, stride, padding, dilation, groups)

    @staticmethod
    def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """`Graph.conv2d` on arrays: x [N, H, W, Cin], w [KH, KW, Cin/groups, Cout]."""
        return _conv(2, x, w, bias, stride, padding, dilation, groups)

    @staticmethod
    def conv3d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """`Graph.conv3d` on arrays: x [N, D, H, W, Cin], w [KD, KH, KW, Cin/groups, Cout]."""
        return _conv(3, x, w, bias, stride, padding, dilation, groups)

    @staticmethod
    def conv_grad_input(grad, w, input_shape, stride=1, padding=0, dilation=1, groups=1):
        """`Graph.conv_grad_input` on arrays: dx [input_shape] of conv(x, w)
        for the output gradient ``grad``."""
        return _conv_grad(conv_grad_input_forward, input_shape, stride, padding, dilation,
                          groups, grad, w)

    @staticmethod
    def conv_grad_bias(x, grad, weight_shape, stride=1, padding=0, dilation=1, groups=1):
        """`Graph.conv_grad_bias` on arrays: db [Cout] of conv(x, w, b) for the
        output gradient ``grad``, summed as conv's backward sums it."""
        return _conv_grad(conv_grad_bias_forward, weight_shape, stride, padding, dilation,
                          groups, x, grad)

    @staticmethod
    def conv_grad_weight(x, grad, weight_shape, stride=1, padding=0, dilation=1, groups=1):
        """`Graph.conv_grad_weight` on arrays: dw [weight_shape] of conv(x, w)
        for the output gradient ``grad``."""
        return _conv_grad(conv_grad_weight_forward, weight_shape, stride, padding, dilation,
                          groups, x, grad)
