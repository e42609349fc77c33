"""Pooling layers on NHWC input (thin modules over the pooling ops)."""
from __future__ import annotations

from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "GlobalAvgPool2d"]


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
