"""Activation layers: thin modules over the graph's activation ops.

Each ``forward(g, x)`` appends exactly one op (PReLU binds its ``weight``).
Constructors take PyTorch's arguments. ``inplace`` is accepted so that
ported code runs unchanged, and changes nothing: a yscv op never writes
over its input's value, and the output is the same either way.
"""
from __future__ import annotations

import numbers

import numpy as np

from .module import Module
from .parameter import Parameter

__all__ = ["ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Mish", "Softplus",
           "PReLU", "Softmax", "LogSoftmax", "Flatten",
           "ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish", "Softsign",
           "LogSigmoid", "GLU"]


def _inplace(module: str, inplace) -> bool:
    if not isinstance(inplace, (bool, np.bool_)):
        raise TypeError(f"{module}: inplace must be a bool, got {inplace!r}")
    return bool(inplace)


def _real(module: str, arg: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{module}: {arg} must be a real number, got {value!r}")
    return float(value)


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = _inplace("ReLU", inplace)

    def forward(self, g, x):
        return g.relu(x)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.inplace = _inplace("LeakyReLU", inplace)

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
    """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = _real("Softplus", "beta", beta)
        self.threshold = _real("Softplus", "threshold", threshold)
        if not self.beta > 0.0:
            raise ValueError(f"Softplus: beta must be > 0, got {beta!r}")

    def forward(self, g, x):
        return g.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


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


def _axis_or_dim(module: str, axis, dim) -> int:
    """``dim`` (PyTorch's name) when given, else ``axis``."""
    v = axis if dim is None else dim
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{module}: {'axis' if dim is None else 'dim'} must be an int, got {v!r}")
    return int(v)


class Softmax(Module):
    """Softmax along ``axis`` (``dim=`` is PyTorch's name for it and wins)."""

    def __init__(self, axis: int = -1, dim=None):
        super().__init__()
        self.axis = _axis_or_dim("Softmax", axis, dim)

    def forward(self, g, x):
        return g.softmax(x, axis=self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Module):
    """log_softmax along ``axis`` (``dim=`` is PyTorch's name for it and wins)."""

    def __init__(self, axis: int = -1, dim=None):
        super().__init__()
        self.axis = _axis_or_dim("LogSoftmax", axis, dim)

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


# ------------------------------------------------------ more activations
class ELU(Module):
    """``x`` where x > 0, else ``alpha (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = _real("ELU", "alpha", alpha)
        self.inplace = _inplace("ELU", inplace)

    def forward(self, g, x):
        return g.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class SELU(Module):
    """``scale elu(x, alpha)`` with PyTorch's constants."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = _inplace("SELU", inplace)

    def forward(self, g, x):
        return g.selu(x)


class CELU(Module):
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``; alpha must not be 0."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = _real("CELU", "alpha", alpha)
        if self.alpha == 0.0:
            raise ValueError(f"CELU: alpha must not be 0, got {alpha!r}")
        self.inplace = _inplace("CELU", inplace)

    def forward(self, g, x):
        return g.celu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Hardtanh(Module):
    """``x`` clipped to ``[min_val, max_val]`` (``min_val <= max_val``)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        self.min_val = _real("Hardtanh", "min_val", min_val)
        self.max_val = _real("Hardtanh", "max_val", max_val)
        if self.min_val > self.max_val:
            raise ValueError(f"Hardtanh: min_val={min_val!r} is greater than max_val={max_val!r}")
        self.inplace = _inplace("Hardtanh", inplace)

    def forward(self, g, x):
        return g.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Module):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = _inplace("ReLU6", inplace)

    def forward(self, g, x):
        return g.relu6(x)


class Hardsigmoid(Module):
    """``relu6(x + 3) / 6``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = _inplace("Hardsigmoid", inplace)

    def forward(self, g, x):
        return g.hardsigmoid(x)


class Hardswish(Module):
    """``x relu6(x + 3) / 6``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = _inplace("Hardswish", inplace)

    def forward(self, g, x):
        return g.hardswish(x)


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, g, x):
        return g.softsign(x)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, stable for any x."""

    def forward(self, g, x):
        return g.logsigmoid(x)


class GLU(Module):
    """``a * sigmoid(b)``, ``a`` and ``b`` the halves of ``x`` along ``dim``
    (PyTorch's name; the op calls it ``axis``)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"GLU: dim must be an int, got {dim!r}")
        self.dim = int(dim)

    def forward(self, g, x):
        return g.glu(x, axis=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
