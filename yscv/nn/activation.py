"""Activation layers: thin modules over the graph's activation ops.

Each ``forward(g, x)`` appends exactly one op (PReLU binds its ``weight``).
"""
from __future__ import annotations

import numpy as np

from .module import Module
from .parameter import Parameter

__all__ = ["ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Mish", "Softplus",
           "PReLU", "Softmax", "LogSoftmax", "Flatten"]


class ReLU(Module):
    def forward(self, g, x):
        return g.relu(x)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, g, x):
        return g.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class Sigmoid(Module):
    def forward(self, g, x):
        return g.sigmoid(x)


class Tanh(Module):
    def forward(self, g, x):
        return g.tanh(x)


class GELU(Module):
    """``approximate``: "none" (erf, default), "tanh" (PyTorch's tanh form) or "sigmoid"."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh", "sigmoid"):
            raise ValueError(f"GELU: approximate must be 'none', 'tanh' or 'sigmoid', got {approximate!r}")
        self.approximate = approximate

    def forward(self, g, x):
        return g.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def forward(self, g, x):
        return g.silu(x)


class Mish(Module):
    def forward(self, g, x):
        return g.mish(x)


class Softplus(Module):
    def forward(self, g, x):
        return g.softplus(x)


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)`` with a learnable slope per channel.

    Args:
        num_parameters: 1 (one shared slope) or C (the last axis).
        init: initial slope (PyTorch: 0.25).
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype=np.float32):
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, (int, np.integer)) \
                or num_parameters <= 0:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters = int(num_parameters)
        self.weight = Parameter(np.full(self.num_parameters, float(init)), dtype)

    def forward(self, g, x):
        return g.prelu(x, self.param(g, "weight"))

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softmax(Module):
    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = int(axis)

    def forward(self, g, x):
        return g.softmax(x, axis=self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Module):
    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = int(axis)

    def forward(self, g, x):
        return g.log_softmax(x, axis=self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class Flatten(Module):
    """Merge axes ``start_axis`` .. last into one (PyTorch's ``nn.Flatten``
    with ``end_dim=-1``). On NHWC input the flattened order is (H, W, C)."""

    def __init__(self, start_axis: int = 1):
        super().__init__()
        self.start_axis = int(start_axis)

    def forward(self, g, x):
        return g.flatten(x, self.start_axis)

    def extra_repr(self) -> str:
        return f"start_axis={self.start_axis}"
