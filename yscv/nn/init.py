"""Weight initialisation, PyTorch's defaults, drawing from ``yscv.random.generator()``.

Fan-in / fan-out follow ``torch.nn.init._calculate_fan_in_and_fan_out`` for
the equivalent PyTorch tensor, but our weights are input-major (channel-last):

=====================  ============================  ======================
layer                  yscv weight                   fan_in
=====================  ============================  ======================
Linear                 [in, out]                     in
Conv (1/2/3-d)         [*kernel, in/groups, out]     in/groups * prod(kernel)
ConvTranspose2d        [KH, KW, out, in]             out * KH * KW (as torch)
DepthwiseConv2d        [KH, KW, C, M]                KH * KW
=====================  ============================  ======================

Every function fills an array (or a Parameter's ``.data``) IN PLACE and
returns it. Draws are float64 from the library generator, then cast, so a
given ``yscv.manual_seed`` gives the same weights in float32 and float64
(up to rounding). The generator draws in the array's own (C) order.
"""
from __future__ import annotations

import math

import numpy as np

from .. import random as _random
from .parameter import Parameter

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
    "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_",
    "fan_in_linear", "fan_in_conv",
]


def _array(t) -> np.ndarray:
    arr = t.data if isinstance(t, Parameter) else t
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"init: expected an ndarray or Parameter, got {type(t).__name__}")
    return arr


def _fill(t, values):
    arr = _array(t)
    arr[...] = values
    return t


def calculate_gain(nonlinearity: str, param=None) -> float:
    """``torch.nn.init.calculate_gain``."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
              "conv_transpose2d", "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def uniform_(t, a: float = 0.0, b: float = 1.0):
    """Fill with U(a, b)."""
    arr = _array(t)
    return _fill(t, _random.generator().uniform(a, b, size=arr.shape))


def normal_(t, mean: float = 0.0, std: float = 1.0):
    """Fill with N(mean, std^2)."""
    arr = _array(t)
    return _fill(t, _random.generator().normal(mean, std, size=arr.shape))


def constant_(t, value: float):
    return _fill(t, value)


def zeros_(t):
    return _fill(t, 0.0)


def ones_(t):
    return _fill(t, 1.0)


def kaiming_uniform_(t, fan_in: int, a: float = 0.0, nonlinearity: str = "leaky_relu"):
    """U(-b, b) with b = gain * sqrt(3 / fan_in). With ``a=sqrt(5)`` (PyTorch's
    Linear/Conv default) b = 1/sqrt(fan_in)."""
    if fan_in <= 0:
        return t  # zero-element tensor, as torch warns and skips
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan_in)
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, fan_in: int, a: float = 0.0, nonlinearity: str = "leaky_relu"):
    """N(0, std^2) with std = gain / sqrt(fan_in)."""
    if fan_in <= 0:
        return t
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan_in))


def xavier_uniform_(t, fan_in: int, fan_out: int, gain: float = 1.0):
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, fan_in: int, fan_out: int, gain: float = 1.0):
    return normal_(t, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def fan_in_linear(in_features: int) -> int:
    return int(in_features)


def fan_in_conv(kernel: tuple, in_per_group: int) -> int:
    return int(in_per_group) * int(np.prod(kernel))


def default_weight_and_bias(weight, bias, fan_in: int) -> None:
    """PyTorch's Linear/Conv reset_parameters: kaiming_uniform(a=sqrt(5)) on
    the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias."""
    kaiming_uniform_(weight, fan_in, a=math.sqrt(5))
    if bias is not None and fan_in > 0:
        bound = 1.0 / math.sqrt(fan_in)
        uniform_(bias, -bound, bound)
