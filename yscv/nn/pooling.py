"""Pooling layers on NHWC input, and NLC / NDHWC for the 1-d / 3-d ones
(thin modules over the pooling ops)."""
from __future__ import annotations

from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "GlobalAvgPool2d",
           "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d"]


class MaxPool2d(Module):
    """Max over KHxKW windows; ``stride`` defaults to the kernel size."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, g, x):
        return g.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """Mean over KHxKW windows; ``stride`` defaults to the kernel size."""

    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad: bool = True):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = bool(count_include_pad)

    def forward(self, g, x):
        return g.avg_pool2d(x, self.kernel_size, self.stride, self.padding,
                            count_include_pad=self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average into ``output_size`` bins (PyTorch bin boundaries)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, g, x):
        return g.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Max into ``output_size`` bins (PyTorch bin boundaries)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, g, x):
        return g.adaptive_max_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class GlobalAvgPool2d(Module):
    """[N, H, W, C] -> [N, C] mean over H and W."""

    def forward(self, g, x):
        return g.global_avg_pool2d(x)


# ------------------------------------------------ 1-d and 3-d (NLC, NDHWC)
def _pytorch_only(layer: str, **given) -> None:
    """ValueError for PyTorch options the pooling ops do not have (each
    must keep its default, named in ``given`` as (value, default))."""
    for name, (value, default) in given.items():
        if value != default:
            raise ValueError(f"{layer}: {name}={value!r} is not supported (only {default!r})")


class _MaxPoolNd(Module):
    _op = ""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        _pytorch_only(type(self).__name__, dilation=(dilation, 1),
                      return_indices=(return_indices, False), ceil_mode=(ceil_mode, False))
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, g, x):
        return getattr(g, self._op)(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool1d(_MaxPoolNd):
    """Max over K windows of [N, L, C] (PyTorch's arguments; ``dilation``,
    ``return_indices`` and ``ceil_mode`` only at their defaults)."""
    _op = "max_pool1d"


class MaxPool3d(_MaxPoolNd):
    """Max over KDxKHxKW windows of [N, D, H, W, C] (PyTorch's arguments;
    ``dilation``, ``return_indices`` and ``ceil_mode`` only at their defaults)."""
    _op = "max_pool3d"


class _AvgPoolNd(Module):
    _op = ""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        _pytorch_only(type(self).__name__, ceil_mode=(ceil_mode, False),
                      divisor_override=(divisor_override, None))
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = bool(count_include_pad)

    def forward(self, g, x):
        return getattr(g, self._op)(x, self.kernel_size, self.stride, self.padding,
                                    count_include_pad=self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over K windows of [N, L, C] (PyTorch's arguments; ``ceil_mode``
    only False)."""
    _op = "avg_pool1d"

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool3d(_AvgPoolNd):
    """Mean over KDxKHxKW windows of [N, D, H, W, C] (PyTorch's arguments;
    ``ceil_mode`` only False, ``divisor_override`` only None)."""
    _op = "avg_pool3d"


class AdaptiveAvgPool1d(Module):
    """[N, L, C] averaged into ``output_size`` bins (PyTorch bin boundaries)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, g, x):
        return g.adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
