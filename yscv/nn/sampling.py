"""Upsample, Unfold and Fold: ``torch.nn``'s modules on yscv's channel-last
layouts (``g.interpolate``, ``g.unfold``, ``g.fold``)."""
from __future__ import annotations

from .module import Module

__all__ = ["Upsample", "Unfold", "Fold"]


class Upsample(Module):
    """``torch.nn.Upsample`` on NHWC [N, H, W, C]: ``size`` or
    ``scale_factor``, ``mode`` "nearest" or "bilinear", ``align_corners``
    (``g.interpolate``, PyTorch's index rules). Arguments are checked when
    the module is called, as PyTorch does."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None):
        super().__init__()
        if (size is None) == (scale_factor is None):
            raise ValueError("Upsample: give exactly one of size and scale_factor")
        self.size, self.scale_factor = size, scale_factor
        self.mode, self.align_corners = mode, align_corners

    def forward(self, g, x):
        return g.interpolate(x, size=self.size, scale_factor=self.scale_factor,
                             mode=self.mode, align_corners=self.align_corners)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class Unfold(Module):
    """``torch.nn.Unfold`` on NHWC: [N, H, W, C] -> [N, L, ``KH*KW*C``]
    (blocks first, channels fastest within a block: ``g.unfold``)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, g, x):
        return g.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """``torch.nn.Fold`` on yscv's layout: [N, L, ``KH*KW*C``] -> [N, H, W, C]
    with ``output_size = (H, W)`` (``g.fold``, the adjoint of Unfold)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, g, x):
        return g.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
