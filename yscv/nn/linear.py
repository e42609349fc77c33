"""Linear (fully connected) layer and Identity."""
from __future__ import annotations

import numpy as np

from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Linear", "Identity"]


def _positive_int(v, layer: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    return int(v)


class Linear(Module):
    """``y = x @ weight + bias``.

    Args:
        in_features: size of the last axis of the input.
        out_features: size of the last axis of the output.
        bias: add a learnable bias [out_features].
        dtype: parameter dtype (float32 default).

    Parameters: ``weight`` [in_features, out_features] (input-major, the
    transpose of PyTorch's), ``bias`` [out_features]. Initialised as PyTorch:
    kaiming_uniform(a=sqrt(5)) i.e. U(-1/sqrt(in), 1/sqrt(in)) for both.
    Input [..., in_features] -> output [..., out_features].
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32):
        super().__init__()
        self.in_features = _positive_int(in_features, "Linear", "in_features")
        self.out_features = _positive_int(out_features, "Linear", "out_features")
        self.weight = Parameter(np.zeros((self.in_features, self.out_features)), dtype)
        self.bias = Parameter(np.zeros(self.out_features), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_weight_and_bias(self.weight, self.bias, self.in_features)

    def forward(self, g, x):
        y = g.matmul(x, self.param(g, "weight"))
        if self.bias is not None:
            y = g.add(y, self.param(g, "bias"))
        return y

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input unchanged (no node appended)."""

    def forward(self, g, x):
        return x
