"""Normalisation layers (channel-last: statistics over every axis but the last).

``BatchNorm`` keeps running statistics as buffers. They enter the graph as
constant leaves that SHARE memory with the buffers (`bind_buffer`), so
the in-place update ``g.batch_norm(training=True)`` performs lands in the
layer. ``BatchNorm1d`` / ``BatchNorm2d`` / ``BatchNorm3d`` are the same class
(the rank does not matter channel-last).
"""
from __future__ import annotations

import numpy as np

from .module import Module
from .parameter import Parameter

__all__ = ["BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm",
           "GroupNorm", "InstanceNorm"]


def _count(v, layer: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    return int(v)


def _eps(v, layer: str) -> float:
    v = float(v)
    if not v > 0:
        raise ValueError(f"{layer}: eps must be > 0, got {v}")
    return v


def _init_affine(self, layer: str, channels: int, eps, affine, dtype) -> None:
    """Sets the checked ``eps``, ``affine`` and ``weight`` (ones), ``bias``
    (zeros) of size ``channels`` when affine, else both None (PyTorch's
    norm-layer defaults)."""
    self.eps = _eps(eps, layer)
    self.affine = bool(affine)
    if self.affine:
        self.weight = Parameter(np.ones(channels), dtype)
        self.bias = Parameter(np.zeros(channels), dtype)
    else:
        self.weight = None
        self.bias = None


def _affine(self, g):
    """(gamma, beta) nodes, or (None, None) without affine parameters."""
    if self.weight is None:
        return None, None
    return self.param(g, "weight"), self.param(g, "bias")


class BatchNorm(Module):
    """Batch normalisation over every axis but the last (C), any rank.

    Args:
        num_features: C.
        eps: added to the variance.
        momentum: running = (1 - momentum) * running + momentum * batch
            (unbiased batch variance in the running var, as PyTorch).
        affine: learnable ``weight`` (gamma, ones) and ``bias`` (beta, zeros).
        track_running_stats: keep ``running_mean`` (zeros), ``running_var``
            (ones) and ``num_batches_tracked`` buffers; when False, batch
            statistics are used in eval mode too.

    Training mode normalises with batch statistics and updates the running
    buffers in place; eval mode uses the running statistics.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True, dtype=np.float32):
        super().__init__()
        name = type(self).__name__
        self.num_features = _count(num_features, name, "num_features")
        c = self.num_features
        dt = np.dtype(dtype)
        _init_affine(self, name, c, eps, affine, dt)
        if momentum is None or not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"{name}: momentum must be a float in [0, 1], got {momentum!r}")
        self.momentum = float(momentum)
        self.track_running_stats = bool(track_running_stats)
        if self.track_running_stats:
            self.register_buffer("running_mean", np.zeros(c, dt))
            self.register_buffer("running_var", np.ones(c, dt))
            self.register_buffer("num_batches_tracked", np.zeros((), np.int64))

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean[...] = 0
            self.running_var[...] = 1
            self.num_batches_tracked[...] = 0

    _affine = _affine

    def forward(self, g, x):
        gamma, beta = self._affine(g)
        if self.track_running_stats:
            mean, var = self.buffer(g, "running_mean"), self.buffer(g, "running_var")
            training = self.training
        else:  # scratch stats: the op's update goes nowhere that matters
            c, dt = self.num_features, g.dtype
            mean, var = g.constant(np.zeros(c, dt)), g.constant(np.ones(c, dt))
            training = True
        y = g.batch_norm(x, gamma, beta, mean, var, training=training,
                         momentum=self.momentum, eps=self.eps)
        if training and self.track_running_stats:
            self.num_batches_tracked += 1
        return y

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(BatchNorm):
    """Alias of `BatchNorm` ([N, C] or [N, L, C])."""


class BatchNorm2d(BatchNorm):
    """Alias of `BatchNorm` (NHWC)."""


class BatchNorm3d(BatchNorm):
    """Alias of `BatchNorm` (NDHWC)."""


class LayerNorm(Module):
    """Normalise over the last axis, then ``* weight + bias``.

    Args:
        normalized_shape: the size of the last axis (an int or a 1-tuple;
            the op normalises over one axis).
        eps: added to the variance.
        elementwise_affine: learnable ``weight`` (ones) and ``bias`` (zeros).
        bias: with ``elementwise_affine``, also learn the bias.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype=np.float32):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list)):
            if len(normalized_shape) != 1:
                raise ValueError(
                    f"LayerNorm: normalized_shape={tuple(normalized_shape)}: only the last axis "
                    "can be normalised; reshape to merge axes first")
            normalized_shape = normalized_shape[0]
        self.normalized_shape = (_count(normalized_shape, "LayerNorm", "normalized_shape"),)
        self.eps = _eps(eps, "LayerNorm")
        self.elementwise_affine = bool(elementwise_affine)
        d = self.normalized_shape[0]
        self.weight = Parameter(np.ones(d), dtype) if self.elementwise_affine else None
        self.bias = Parameter(np.zeros(d), dtype) if self.elementwise_affine and bias else None

    def forward(self, g, x):
        w = self.param(g, "weight") if self.weight is not None else None
        b = self.param(g, "bias") if self.bias is not None else None
        return g.layer_norm(x, w, b, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Group normalisation on [N, ..., C]: C split into ``num_groups`` groups.

    ``weight`` (ones) and ``bias`` (zeros) of shape [C] when ``affine``.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, dtype=np.float32):
        super().__init__()
        self.num_groups = _count(num_groups, "GroupNorm", "num_groups")
        self.num_channels = _count(num_channels, "GroupNorm", "num_channels")
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_groups={self.num_groups} must divide "
                             f"num_channels={self.num_channels}")
        _init_affine(self, "GroupNorm", self.num_channels, eps, affine, np.dtype(dtype))

    _affine = _affine

    def forward(self, g, x):
        gamma, beta = self._affine(g)
        return g.group_norm(x, gamma, beta, self.num_groups, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class InstanceNorm(Module):
    """Instance normalisation on [N, ..., C] (per sample and channel).

    ``affine`` defaults to False as in PyTorch's InstanceNorm2d.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = False,
                 dtype=np.float32):
        super().__init__()
        self.num_features = _count(num_features, "InstanceNorm", "num_features")
        _init_affine(self, "InstanceNorm", self.num_features, eps, affine, np.dtype(dtype))

    _affine = _affine

    def forward(self, g, x):
        gamma, beta = self._affine(g)
        return g.instance_norm(x, gamma, beta, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.affine}"
