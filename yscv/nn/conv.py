"""Convolution layers (channel-last: NLC, NHWC, NDHWC).

Weights are laid out as the ops take them (docs/ops/conv.md):
Conv1d [K, Cin/groups, Cout], Conv2d [KH, KW, Cin/groups, Cout],
Conv3d [KD, KH, KW, Cin/groups, Cout], ConvTranspose2d [KH, KW, Cout, Cin],
ConvTranspose1d/3d [``*K``, Cout/groups, Cin],
DepthwiseConv2d [KH, KW, C, M]. Bias [Cout]. Initialisation is PyTorch's
(kaiming_uniform with a=sqrt(5) on the weight, U(-1/sqrt(fan_in), +) on
the bias, fan_in as in `yscv.nn.init`).
"""
from __future__ import annotations

import numpy as np

from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "DepthwiseConv2d", "ConvTranspose1d",
           "ConvTranspose3d"]


def _ints(v, n: int, layer: str, arg: str, minimum: int) -> tuple:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        out = (int(v),) * n
    elif isinstance(v, (tuple, list)) and len(v) == n and all(
            isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in v):
        out = tuple(int(e) for e in v)
    else:
        raise TypeError(f"{layer}: {arg} must be an int or a tuple of {n} ints, got {v!r}")
    if any(e < minimum for e in out):
        raise ValueError(f"{layer}: {arg}={v!r} must be >= {minimum}")
    return out


def _count(v, layer: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    return int(v)


def _compact(t: tuple):
    return t[0] if len(set(t)) == 1 else t


def _init_channels(m, name: str, in_channels, out_channels, groups) -> None:
    """``m.in_channels``, ``out_channels`` and ``groups``, checked (groups
    divide both counts)."""
    m.in_channels = _count(in_channels, name, "in_channels")
    m.out_channels = _count(out_channels, name, "out_channels")
    m.groups = _count(groups, name, "groups")
    if m.in_channels % m.groups or m.out_channels % m.groups:
        raise ValueError(f"{name}: groups={m.groups} must divide in_channels="
                         f"{m.in_channels} and out_channels={m.out_channels}")


def _init_window(self, layer: str, nd: int, kernel_size, stride, padding,
                 last: str, last_value, last_min: int) -> None:
    """Sets ``kernel_size``, ``stride``, ``padding`` and ``last`` (``dilation`` or
    ``output_padding``) as checked ``nd``-tuples, in that order."""
    self.kernel_size = _ints(kernel_size, nd, layer, "kernel_size", 1)
    self.stride = _ints(stride, nd, layer, "stride", 1)
    self.padding = _ints(padding, nd, layer, "padding", 0)
    setattr(self, last, _ints(last_value, nd, layer, last, last_min))


def _bias_and_weight(self, g):
    """The (bias or None, weight) leaves, bound in that order."""
    b = self.param(g, "bias") if self.bias is not None else None
    return b, self.param(g, "weight")


class _ConvNd(Module):
    _nd = 0
    _op = ""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, dtype=np.float32):
        super().__init__()
        name = type(self).__name__
        nd = self._nd
        _init_channels(self, name, in_channels, out_channels, groups)
        _init_window(self, name, nd, kernel_size, stride, padding, "dilation", dilation, 1)
        cin_g = self.in_channels // self.groups
        self.weight = Parameter(np.zeros(self.kernel_size + (cin_g, self.out_channels)), dtype)
        self.bias = Parameter(np.zeros(self.out_channels), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = init.fan_in_conv(self.kernel_size, self.in_channels // self.groups)
        init.default_weight_and_bias(self.weight, self.bias, fan_in)

    def forward(self, g, x):
        b, w = _bias_and_weight(self, g)
        return getattr(g, self._op)(x, w, b, _compact(self.stride), _compact(self.padding),
                                    _compact(self.dilation), self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv1d(_ConvNd):
    """1-d convolution on [N, L, Cin] -> [N, L_out, Cout]; weight [K, Cin/groups, Cout]."""
    _nd = 1
    _op = "conv1d"


class Conv2d(_ConvNd):
    """2-d convolution on NHWC [N, H, W, Cin] -> [N, OH, OW, Cout];
    weight [KH, KW, Cin/groups, Cout]."""
    _nd = 2
    _op = "conv2d"


class Conv3d(_ConvNd):
    """3-d convolution on NDHWC -> [N, OD, OH, OW, Cout]; weight [KD, KH, KW, Cin/groups, Cout]."""
    _nd = 3
    _op = "conv3d"


class ConvTranspose2d(Module):
    """Transposed 2-d convolution on NHWC: OH = ``(H-1)*stride`` - ``2*padding`` + KH + output_padding.

    Weight [KH, KW, Cout, Cin] (the op's layout), bias [Cout]; PyTorch's
    initialisation with fan_in = Cout * KH * KW (torch computes the fan from
    its weight's second axis, which for a transposed conv is out_channels).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, bias=True, dtype=np.float32):
        super().__init__()
        name = "ConvTranspose2d"
        self.in_channels = _count(in_channels, name, "in_channels")
        self.out_channels = _count(out_channels, name, "out_channels")
        _init_window(self, name, 2, kernel_size, stride, padding,
                     "output_padding", output_padding, 0)
        self.weight = Parameter(np.zeros(self.kernel_size + (self.out_channels, self.in_channels)), dtype)
        self.bias = Parameter(np.zeros(self.out_channels), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = init.fan_in_conv(self.kernel_size, self.out_channels)
        init.default_weight_and_bias(self.weight, self.bias, fan_in)

    def forward(self, g, x):
        b, w = _bias_and_weight(self, g)
        return g.conv_transpose2d(x, w, b, _compact(self.stride), _compact(self.padding),
                                  _compact(self.output_padding))

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, output_padding={self.output_padding}")


class DepthwiseConv2d(Module):
    """Depthwise 2-d convolution on NHWC [N, H, W, C] -> [N, OH, OW, ``C*M``].

    Weight [KH, KW, C, M] (M = ``multiplier``), bias ``[C*M]``; output channel
    ``c*M`` + m. Equivalent to PyTorch's ``Conv2d(C, C*M, k, groups=C)`` and
    initialised like it (fan_in = ``KH*KW``).
    """

    def __init__(self, channels, kernel_size, multiplier=1, stride=1, padding=0, dilation=1,
                 bias=True, dtype=np.float32):
        super().__init__()
        name = "DepthwiseConv2d"
        self.channels = _count(channels, name, "channels")
        self.multiplier = _count(multiplier, name, "multiplier")
        _init_window(self, name, 2, kernel_size, stride, padding, "dilation", dilation, 1)
        self.weight = Parameter(np.zeros(self.kernel_size + (self.channels, self.multiplier)), dtype)
        self.bias = Parameter(np.zeros(self.channels * self.multiplier), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_weight_and_bias(self.weight, self.bias, init.fan_in_conv(self.kernel_size, 1))

    def forward(self, g, x):
        b, w = _bias_and_weight(self, g)
        return g.depthwise_conv2d(x, w, b, _compact(self.stride), _compact(self.padding),
                                  _compact(self.dilation))

    def extra_repr(self) -> str:
        return (f"{self.channels}, kernel_size={self.kernel_size}, multiplier={self.multiplier}, "
                f"stride={self.stride}, padding={self.padding}")


class _ConvTransposeNd(Module):
    """Transposed convolution with PyTorch's constructor arguments (only
    ``padding_mode="zeros"``). Weight [``*K``, Cout/groups, Cin] (the op's
    layout; PyTorch's is [Cin, Cout/groups, ``*K``]), bias [Cout]; PyTorch's
    initialisation with fan_in = Cout/groups * prod(K) (torch's fan of its
    weight's second axis)."""
    _nd = 0
    _op = ""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 dtype=np.float32):
        super().__init__()
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f"{name}: padding_mode={padding_mode!r} is not supported "
                             "(only 'zeros', as PyTorch's transposed convolutions)")
        _init_channels(self, name, in_channels, out_channels, groups)
        _init_window(self, name, self._nd, kernel_size, stride, padding,
                     "output_padding", output_padding, 0)
        self.dilation = _ints(dilation, self._nd, name, "dilation", 1)
        cout_g = self.out_channels // self.groups
        self.weight = Parameter(np.zeros(self.kernel_size + (cout_g, self.in_channels)), dtype)
        self.bias = Parameter(np.zeros(self.out_channels), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = init.fan_in_conv(self.kernel_size, self.out_channels // self.groups)
        init.default_weight_and_bias(self.weight, self.bias, fan_in)

    def forward(self, g, x):
        b, w = _bias_and_weight(self, g)
        return getattr(g, self._op)(x, w, b, _compact(self.stride), _compact(self.padding),
                                    _compact(self.output_padding), self.groups,
                                    _compact(self.dilation))

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}, padding={self.padding}, "
             f"output_padding={self.output_padding}")
        if self.groups != 1:
            s += f", groups={self.groups}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-d convolution on [N, L, Cin] -> [N, Lout, Cout];
    weight [K, Cout/groups, Cin]."""
    _nd = 1
    _op = "conv_transpose1d"


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-d convolution on NDHWC -> [N, OD, OH, OW, Cout];
    weight [KD, KH, KW, Cout/groups, Cin]."""
    _nd = 3
    _op = "conv_transpose3d"
