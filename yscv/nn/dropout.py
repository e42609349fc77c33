"""Dropout layer."""
from __future__ import annotations

from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zero each element with probability ``p`` while training, scaling the
    rest by 1/(1-p); the identity in eval mode.

    The mask seed is drawn from the library generator at each call
    (``g.dropout(..., seed=None)``), so ``yscv.manual_seed`` and a restored
    RNG state (checkpoints) reproduce the masks exactly.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, g, x):
        if not self.training or self.p == 0.0:
            return x
        return g.dropout(x, self.p, training=True, seed=None)

    def extra_repr(self) -> str:
        return f"p={self.p}"
