"""PixelShuffle: sub-pixel upsampling as ``torch.nn.PixelShuffle``, on NHWC."""
from __future__ import annotations

import numpy as np

from .module import Module

__all__ = ["PixelShuffle"]


class PixelShuffle(Module):
    """[N, H, W, ``C*r*r``] -> [N, ``H*r``, ``W*r``, C] (``g.pixel_shuffle``), with
    PyTorch's channel order: the NHWC form of ``torch.nn.PixelShuffle(r)``
    on [N, ``C*r*r``, H, W] -> [N, C, ``H*r``, ``W*r``]."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        if isinstance(upscale_factor, bool) or not isinstance(upscale_factor, (int, np.integer)) \
                or upscale_factor <= 0:
            raise ValueError(f"PixelShuffle: upscale_factor must be a positive int, "
                             f"got {upscale_factor!r}")
        self.upscale_factor = int(upscale_factor)

    def forward(self, g, x):
        return g.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"
