"""Normalization ops (forward): batch, layer, group and instance norm.

Layouts are channel-last: ``x[..., C]``. Statistics are taken over every axis
but the last (batch norm), over the last axis (layer norm), or per sample
over the spatial axes and a group of channels (group / instance norm).

Inputs of each node, in order: ``x``, then ``gamma`` and ``beta`` when given
(each is optional; ``attrs`` records which are present), then, for batch norm,
``running_mean`` and ``running_var``. Saved for backward: the float64
statistics the forward normalised with, ``(mean, var)`` (biased variance), one
pair per statistics group — never the normalised activations (the backward
kernels recompute ``x - mean`` on the fly, see docs/ops/norm.md).

How the statistics and the normalisation are computed (layouts, lane
packing, row chunks on two cores) is yscv/compute/norm.py. Attributes are
named records: `BatchNormAttrs`, `GroupNormAttrs` and
`NormAttrs` (layer and instance norm).

Batch norm in training mode updates its running statistics in place, but the
registered forward stays pure (activation checkpointing replays forwards): it
returns the batch statistics as its saved data, and `NormOps.batch_norm`
performs the update after the node was appended.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from ..compute import norm as N
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import check_ndim, shape_error

_LEAF = int(Op.LEAF)


# --------------------------------------------------------------- attributes
class BatchNormAttrs(NamedTuple):
    training: bool
    momentum: float
    eps: float
    has_gamma: bool
    has_beta: bool


class GroupNormAttrs(NamedTuple):
    num_groups: int
    eps: float
    has_gamma: bool
    has_beta: bool


class NormAttrs(NamedTuple):
    """layer_norm and instance_norm."""
    eps: float
    has_gamma: bool
    has_beta: bool


def _affine(vals, has_gamma: bool, has_beta: bool):
    """(gamma, beta, rest) from the input values after ``x``."""
    k = 0
    gamma = beta = None
    if has_gamma:
        gamma = vals[k]
        k += 1
    if has_beta:
        beta = vals[k]
        k += 1
    return gamma, beta, vals[k:]


# --------------------------------------------------------------- forwards
@register_forward(Op.BATCH_NORM)
def batch_norm_forward(attrs, x, *rest):
    """Inputs x, [gamma], [beta], [running_mean, running_var] (absent only in
    training mode without tracking). Saved: float64 (mean[1, C], var[1, C])
    used to normalise (batch statistics in training mode, a copy of the
    running ones in eval mode)."""
    gamma, beta, running = _affine(rest, attrs.has_gamma, attrs.has_beta)
    if attrs.training:
        return N.group_train_forward(x, gamma, beta, attrs.eps, False, 1)
    running_mean, running_var = running
    mean = running_mean.astype(np.float64).reshape(1, -1)
    var = running_var.astype(np.float64).reshape(1, -1)
    y = N.group_normalize(x, gamma, beta, mean, var, attrs.eps, False, 1)
    return y, (mean, var)


@register_forward(Op.INSTANCE_NORM)
def instance_norm_forward(attrs, x, *rest):
    """Statistics per (sample, channel); saved float64 (mean[N, C], var[N, C])."""
    gamma, beta, _ = _affine(rest, attrs.has_gamma, attrs.has_beta)
    return N.group_train_forward(x, gamma, beta, attrs.eps, True, 1)


@register_forward(Op.GROUP_NORM)
def group_norm_forward(attrs, x, *rest):
    """Statistics per (sample, group of C / num_groups channels); saved
    float64 (mean[N, G], var[N, G])."""
    gamma, beta, _ = _affine(rest, attrs.has_gamma, attrs.has_beta)
    return N.group_train_forward(x, gamma, beta, attrs.eps, True,
                                 x.shape[-1] // attrs.num_groups)


@register_forward(Op.LAYER_NORM)
def layer_norm_forward(attrs, x, *rest):
    """Statistics per row of ``x.reshape(-1, C)``; saved float64 (mean[M], var[M])."""
    gamma, beta, _ = _affine(rest, attrs.has_gamma, attrs.has_beta)
    return N.layer_norm_forward(x, gamma, beta, attrs.eps)


# ------------------------------------------------------------- validation
def _check_eps(eps, op: str) -> float:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"{op}: eps must be a real number, got {eps!r}")
    eps = float(eps)
    if not (eps > 0.0 and math.isfinite(eps)):
        raise ValueError(f"{op}: eps must be a finite number > 0, got {eps}")
    return eps


class NormOps:
    """Graph methods of the norm category."""

    def _norm_x(self, x, op: str, min_ndim: int):
        """Shape of ``x`` after checking its rank and channel count."""
        _, v, _ = self._operand(x, op, "x")
        if v.ndim < min_ndim:
            raise shape_error(
                op, f"x must be at least {min_ndim}-d with channels last, got shape {v.shape}",
                expected=f">= {min_ndim}-d", got=v.shape)
        if v.shape[-1] == 0:
            raise shape_error(op, f"x has no channels (shape {v.shape})", got=v.shape)
        return v.shape

    def _norm_affine(self, x, gamma, beta, op: str, channels: int):
        """Operands and presence flags of the optional gamma / beta ([C] each)."""
        operands = [x]
        for name, p in (("gamma", gamma), ("beta", beta)):
            if p is None:
                continue
            _, v, _ = self._operand(p, op, name)
            if v.shape != (channels,):
                raise shape_error(
                    op, f"{name} must have shape ({channels},) (one value per channel), "
                    f"got {v.shape}", expected=(channels,), got=v.shape)
            operands.append(p)
        return operands, gamma is not None, beta is not None

    def _running_stat(self, node, op: str, name: str, channels: int) -> int:
        """Arena index of a running-statistics leaf of shape [C]."""
        if type(node) is not NodeId:
            raise TypeError(
                f"{op}: {name} must be a NodeId of a leaf (e.g. g.constant(np.zeros(C))), "
                f"got {type(node).__name__}; it is updated in place in training mode")
        i = self._index(node)
        if self._ops[i] != _LEAF:
            raise TypeError(
                f"{op}: {name} must be a leaf (variable or constant), got a "
                f"{Op(self._ops[i]).name.lower()} node (node {i}); running statistics are "
                "updated in place, which only leaves allow")
        shape = self._shape(i)
        if shape != (channels,):
            raise shape_error(
                op, f"{name} must have shape ({channels},), got {shape}",
                expected=(channels,), got=shape)
        return i

    def batch_norm(self, x, gamma, beta, running_mean, running_var, training=False,
                   momentum=0.1, eps=1e-5):
        """Batch normalisation over every axis but the last (channel-last).

        ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` per channel. In
        training mode ``mean``/``var`` are the batch statistics (biased
        variance), and after the node is appended the running-statistic
        leaves are updated in place, as PyTorch:

            running_mean = (1 - momentum) * running_mean + momentum * mean
            running_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)

        with ``n`` values per channel. In eval mode the running statistics
        are used. ``gamma``/``beta`` ([C]) may each be None (no scale / no
        shift); ``running_mean``/``running_var`` are [C] leaves and receive
        no gradient (in training mode both may be None: nothing is tracked,
        as PyTorch's ``F.batch_norm``). Saved for backward: float64
        per-channel (mean, var).
        """
        op = "batch_norm"
        if not isinstance(training, (bool, np.bool_)):
            raise TypeError(f"{op}: training must be a bool, got {training!r}")
        training = bool(training)
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real):
            raise TypeError(f"{op}: momentum must be a real number in [0, 1], got {momentum!r}")
        momentum = float(momentum)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{op}: momentum must be in [0, 1], got {momentum}")
        eps = _check_eps(eps, op)
        shape = self._norm_x(x, op, 2)
        c = shape[-1]
        per_channel = math.prod(shape[:-1])
        if training and per_channel <= 1:
            raise ValueError(
                f"{op}: training needs more than 1 value per channel to estimate the "
                f"variance, got x of shape {shape}")
        operands, has_gamma, has_beta = self._norm_affine(x, gamma, beta, op, c)
        track = running_mean is not None or running_var is not None
        if track:
            i_mean = self._running_stat(running_mean, op, "running_mean", c)
            i_var = self._running_stat(running_var, op, "running_var", c)
            if i_mean == i_var:
                raise ValueError(
                    f"{op}: running_mean and running_var are the same node ({i_mean}); "
                    "pass two separate [C] leaves")
            operands += [running_mean, running_var]
        elif not training:
            raise ValueError(
                f"{op}: eval mode (training=False) normalises with running_mean and "
                "running_var; both are None")
        attrs = BatchNormAttrs(training, momentum, eps, has_gamma, has_beta)
        out = self._apply(Op.BATCH_NORM, operands, attrs)
        if training and track:
            self._update_running_stats(out, i_mean, i_var, momentum, per_channel)
        return out

    def _update_running_stats(self, out, i_mean, i_var, momentum, n) -> None:
        """In-place PyTorch-style running-statistics update after ``out`` was
        appended (never in the forward: replays must not update twice)."""
        saved = self._saved[out.index]
        if saved is None:  # the node does not require grad, so it kept no saved data
            x = self._values[self._inputs[out.index][0]]
            saved = N.group_statistics(x, False, 1)
        mean, var = saved
        keep = 1.0 - momentum
        old_mean = self._values[i_mean].astype(np.float64)
        old_var = self._values[i_var].astype(np.float64)
        self._update_leaf_inplace(i_mean, momentum * mean[0] + keep * old_mean)
        self._update_leaf_inplace(i_var, momentum * (var[0] * (n / (n - 1))) + keep * old_var)

    def batch_norm2d_nhwc(self, x, gamma, beta, mean, var, eps=1e-5):
        """Eval-mode `batch_norm` of a 4-d NHWC ``x`` with
        running statistics ``mean``/``var``."""
        _, v, _ = self._operand(x, "batch_norm2d_nhwc", "x")
        check_ndim(v.shape, 4, "batch_norm2d_nhwc", "x", "NHWC")
        return self.batch_norm(x, gamma, beta, mean, var, training=False, eps=eps)

    def layer_norm(self, x, gamma=None, beta=None, eps=1e-5):
        """Layer normalisation over the last axis of ``x[..., C]`` (>= 1-d).

        ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` with per-row
        mean and biased variance; ``gamma``/``beta`` ([C]) are each optional.
        Saved for backward: float64 (mean, var) per row.
        """
        op = "layer_norm"
        eps = _check_eps(eps, op)
        shape = self._norm_x(x, op, 1)
        operands, has_gamma, has_beta = self._norm_affine(x, gamma, beta, op, shape[-1])
        return self._apply(Op.LAYER_NORM, operands, NormAttrs(eps, has_gamma, has_beta))

    def group_norm(self, x, gamma, beta, num_groups, eps=1e-5):
        """Group normalisation of ``x[N, ..., C]`` (PyTorch GroupNorm, channel-last).

        Channels split into ``num_groups`` groups of ``C / num_groups``
        consecutive channels; mean and biased variance per (sample, group)
        over all spatial positions and the group's channels; ``gamma``/``beta``
        ([C], each optional) are per channel. Saved: float64 (mean, var) [N, G].
        """
        op = "group_norm"
        eps = _check_eps(eps, op)
        if isinstance(num_groups, bool) or not isinstance(num_groups, numbers.Integral):
            raise TypeError(f"{op}: num_groups must be an int, got {num_groups!r}")
        num_groups = int(num_groups)
        shape = self._norm_x(x, op, 2)
        c = shape[-1]
        if num_groups <= 0 or c % num_groups:
            raise ValueError(
                f"{op}: num_groups={num_groups} must be > 0 and divide the {c} channels "
                f"of x (shape {shape})")
        operands, has_gamma, has_beta = self._norm_affine(x, gamma, beta, op, c)
        return self._apply(Op.GROUP_NORM, operands,
                           GroupNormAttrs(num_groups, eps, has_gamma, has_beta))

    def instance_norm(self, x, gamma=None, beta=None, eps=1e-5):
        """Instance normalisation of ``x[N, ..., C]`` (PyTorch InstanceNorm with
        affine parameters, no running statistics).

        Mean and biased variance per (sample, channel) over the spatial axes;
        ``gamma``/``beta`` ([C]) are each optional (None: no scale / shift).
        Needs more than one spatial position, as PyTorch. Saved: float64
        (mean, var) [N, C].
        """
        op = "instance_norm"
        eps = _check_eps(eps, op)
        shape = self._norm_x(x, op, 2)
        if math.prod(shape[1:-1]) <= 1:
            raise ValueError(
                f"{op}: x of shape {shape} has {math.prod(shape[1:-1])} spatial position(s) "
                "per sample; instance norm needs more than 1 (x is [N, ..., C])")
        operands, has_gamma, has_beta = self._norm_affine(x, gamma, beta, op, shape[-1])
        return self._apply(Op.INSTANCE_NORM, operands, NormAttrs(eps, has_gamma, has_beta))

    def instance_norm_nhwc(self, x, gamma=None, beta=None, eps=1e-5):
        """`instance_norm` of a 4-d NHWC ``x`` (ShapeError for another rank)."""
        _, v, _ = self._operand(x, "instance_norm_nhwc", "x")
        check_ndim(v.shape, 4, "instance_norm_nhwc", "x", "NHWC")
        return self.instance_norm(x, gamma, beta, eps)
