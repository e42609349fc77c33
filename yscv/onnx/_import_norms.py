"""Handlers of ONNX's RMSNormalization, GroupNormalization and LRN, and the
extra outputs of LayerNormalization (Mean, InvStdDev) and
BatchNormalization in training mode (the updated running mean and variance).

Every float value is a graph op (gradients reach the input and the scale /
bias); NCHW inputs run channel-last as yscv's norms take them.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import ChannelLast, bn_buffer, handler


@handler("RMSNormalization")
def _rms_norm(run, node):
    """``x / sqrt(mean(x^2 over the axes from axis on) + epsilon) * scale``
    (opset 23); ``scale`` broadcasts against the normalised tail."""
    g = run.g
    x = run.node(node.inputs[0])
    ndim = len(x.shape)
    axis = int(node.attrs.get("axis", -1)) % ndim
    eps = float(node.attrs.get("epsilon", 1e-5))
    axes = tuple(range(axis, ndim))
    inv = g.rsqrt(g.mean(x * x, axis=axes, keepdims=True) + eps)
    return [x * inv * run.node(node.inputs[1])]


@handler("GroupNormalization")
def _group_norm(run, node):
    """yscv's channel-last group_norm on [N, C, ``*S``] with ``scale`` / ``bias``
    per channel (opset 21; the per-group form of opset 18 is deprecated, and
    the ONNX checker refuses it at load)."""
    g = run.g
    x = run.cl(node.inputs[0])
    y = g.group_norm(x, run.node(node.inputs[1]), run.node(node.inputs[2]),
                     int(node.attrs["num_groups"]), eps=float(node.attrs.get("epsilon", 1e-5)))
    return [ChannelLast(y) if len(x.shape) > 2 else y]


@handler("LRN")
def _lrn(run, node):
    """Local response normalisation across channels, ONNX's formula (and
    PyTorch's LocalResponseNorm): ``x / (bias + alpha / size * S)^beta`` with
    ``S`` the sum of ``x^2`` over the channels ``c - (size-1)//2`` to
    ``c + ceil((size-1)/2)``; a sum of shifted slices of the zero-padded
    channel-last square."""
    g = run.g
    at = node.attrs
    x = run.cl(node.inputs[0])
    size = int(at["size"])
    alpha, beta = float(at.get("alpha", 1e-4)), float(at.get("beta", 0.75))
    bias = float(at.get("bias", 1.0))
    ndim, c = len(x.shape), x.shape[-1]
    lo = (size - 1) // 2
    sq = g.pad(x * x, [(0, 0)] * (ndim - 1) + [(lo, size - 1 - lo)], 0.0)
    total = g.narrow(sq, ndim - 1, 0, c)
    for k in range(1, size):
        total = total + g.narrow(sq, ndim - 1, k, c)
    y = x / g.pow(total * (alpha / size) + bias, beta)
    return [ChannelLast(y) if ndim > 2 else y]


def layer_norm_stats(run, node):
    """LayerNormalization's outputs 1 and 2: the mean and 1 / sqrt(var + eps)
    over the axes from ``axis`` on, those axes kept with size 1."""
    g = run.g
    x = run.node(node.inputs[0])
    ndim = len(x.shape)
    axes = tuple(range(int(node.attrs.get("axis", -1)) % ndim, ndim))
    mean = g.mean(x, axis=axes, keepdims=True)
    d = x - mean
    inv = g.rsqrt(g.mean(d * d, axis=axes, keepdims=True)
                  + float(node.attrs.get("epsilon", 1e-5)))
    return [mean, inv]


def batch_norm_training(run, node):
    """BatchNormalization with ``training_mode=1`` (opset 14+): batch
    statistics normalise (biased variance), and outputs 1 and 2 are the
    running statistics ``input * momentum + batch * (1 - momentum)`` (the
    module's buffers are not updated: the new values are outputs)."""
    g = run.g
    x = run.cl(node.inputs[0])
    axes = tuple(range(len(x.shape) - 1))
    eps = float(node.attrs.get("epsilon", 1e-5))
    momentum = float(node.attrs.get("momentum", 0.9))
    mean = g.mean(x, axis=axes)
    d = x - mean
    var = g.mean(d * d, axis=axes)
    y = d * g.rsqrt(var + eps) * run.node(node.inputs[1]) + run.node(node.inputs[2])
    outs = [ChannelLast(y) if len(x.shape) > 2 else y]
    for slot, batch in ((3, mean), (4, var)):
        old = bn_buffer(run, node, slot)  # an initializer: the module's buffer
        old = run.node(node.inputs[slot]) if old is None else old
        outs.append(old * momentum + batch * (1.0 - momentum))
    return outs


def seeded_keep(node, shape, ratio):
    """The keep mask of a Dropout node that carries a ``seed`` (None without
    one), in the file's layout: ``RandomState(seed).uniform(0, 1, shape) >=
    ratio``, ONNX's reference draw, so a seeded node drops what ONNX's
    reference drops (the operator leaves the generator to the runtime)."""
    seed = node.attrs.get("seed")
    if seed is None:
        return None
    return np.random.RandomState(int(seed)).uniform(0.0, 1.0, tuple(shape)) >= ratio


def seeded_dropout(run, node, ratio):
    """``(y, mask)`` of a seeded Dropout in training mode: the data times the
    constant keep-scale ``mask / (1 - ratio)`` (gradients flow through the
    kept positions), in the data's own layout; None without a seed."""
    mask = seeded_keep(node, run.shape(node.inputs[0]), ratio)
    if mask is None:
        return None
    g = run.g
    v = run.raw(node.inputs[0])
    x = v.node if isinstance(v, ChannelLast) else run.node(node.inputs[0])
    scale = mask * np.asarray(1.0 / (1.0 - ratio), dtype=g.dtype) if ratio < 1.0 else \
        np.zeros(mask.shape, g.dtype)
    keep = np.moveaxis(scale, 1, -1) if isinstance(v, ChannelLast) else scale
    y = g.mul(x, g.constant(np.ascontiguousarray(keep, dtype=g.dtype)))
    return (ChannelLast(y) if isinstance(v, ChannelLast) else y), mask


def dropout_with_mask(run, node, ratio, training):
    """Dropout's output 1 (the boolean keep mask) with the output: all True
    outside training; in training a keep-scale drawn by yscv's dropout on
    ones (or, for a node with a ``seed``, ONNX's reference draw,
    `seeded_keep`), the data multiplied by it (inverted dropout, as
    ``g.dropout``)."""
    g = run.g
    v = run.raw(node.inputs[0])
    x = v.node if isinstance(v, ChannelLast) else run.node(node.inputs[0])
    if training and ratio != 0.0 and "seed" in node.attrs:
        return list(seeded_dropout(run, node, ratio))
    if not training or ratio == 0.0:
        y, mask = x, np.ones(run.shape(node.inputs[0]), bool)
    else:
        keep = g.dropout(g.constant(np.ones(tuple(x.shape), g.dtype)), ratio, training=True)
        y = x * keep
        mask = np.asarray(g.value(keep)) != 0
        if isinstance(v, ChannelLast):
            mask = np.moveaxis(mask, -1, 1)
    return [ChannelLast(y) if isinstance(v, ChannelLast) else y, mask]
