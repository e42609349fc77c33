"""Handlers of the NCHW layer operators: convolutions, pooling, norms,
dropout. Each takes its input channel-last (``run.cl``), calls yscv's
channel-last op and returns a `ChannelLast` value."""
from __future__ import annotations

import math

import numpy as np

from ._import_norms import batch_norm_training, dropout_with_mask, layer_norm_stats, seeded_dropout
from ._import_registry import ChannelLast, bn_buffer, handler


def _spatial_pads(node, in_sizes, kernel, strides, dilations):
    """(begin, end) padding per spatial axis from ``pads`` or ``auto_pad``."""
    k = len(in_sizes)
    auto = node.attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for n, kk, s, d in zip(in_sizes, kernel, strides, dilations):
            total = max((math.ceil(n / s) - 1) * s + (kk - 1) * d + 1 - n, 0)
            small = total // 2
            out.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return out
    if auto == "VALID":
        return [(0, 0)] * k
    pads = node.attrs.get("pads") or [0] * (2 * k)
    return [(int(pads[i]), int(pads[i + k])) for i in range(k)]


def _geometry(node, w_kernel=None, nspatial=None):
    at = node.attrs
    kernel = tuple(int(v) for v in at["kernel_shape"]) if "kernel_shape" in at else w_kernel
    k = len(kernel) if kernel is not None else nspatial
    strides = tuple(int(v) for v in at.get("strides") or [1] * k)
    dilations = tuple(int(v) for v in at.get("dilations") or [1] * k)
    return kernel, strides, dilations


def _pad_channel_last(g, x, pads, value=0.0):
    if all(b == 0 and e == 0 for b, e in pads):
        return x
    return g.pad(x, [(0, 0)] + list(pads) + [(0, 0)], value)


@handler("Conv")
def _conv(run, node):
    g = run.g
    x = run.cl(node.inputs[0])
    w = run.conv_weight(node.inputs[1])
    nsp = len(x.shape) - 2
    kernel, strides, dilations = _geometry(node, tuple(w.shape[:nsp]))
    pads = _spatial_pads(node, x.shape[1:-1], kernel, strides, dilations)
    if all(b == e for b, e in pads):
        padding = tuple(b for b, _ in pads)
    else:
        x, padding = _pad_channel_last(g, x, pads), 0
    bias = run.opt_node(node, 2)
    conv = {1: g.conv1d, 2: g.conv2d, 3: g.conv3d}[nsp]
    y = conv(x, w, bias, stride=strides, padding=padding, dilation=dilations,
             groups=int(node.attrs.get("group", 1)))
    return [ChannelLast(y)]


@handler("ConvTranspose")
def _conv_transpose(run, node):
    """ONNX W [Cin, Cout/g, ``*K``] as yscv's [``*K``, Cout/g, Cin]; 1-D as 2-D
    with a unit height, 3-D on g.conv_transpose3d; asymmetric padding (and ``output_shape``) by cropping
    the unpadded result, or padding it with zeros where ``output_shape`` is
    larger."""
    g = run.g
    at = node.attrs
    x = run.cl(node.inputs[0])
    w = run.node(node.inputs[1])
    nsp = len(x.shape) - 2
    kernel, strides, dilations = _geometry(node, tuple(w.shape[2:]))
    out_pad = [int(v) for v in at.get("output_padding") or [0] * nsp]
    in_sizes = x.shape[1:-1]
    full = [(n - 1) * s + (k - 1) * d + 1 + op
            for n, s, k, d, op in zip(in_sizes, strides, kernel, dilations, out_pad)]
    if "output_shape" in at or at.get("auto_pad") in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX: total = full - output_shape (output_shape = input * stride
        # under SAME_*), SAME_UPPER puts the larger half at the end, the
        # others at the start; a negative total pads the result with zeros
        if "output_shape" in at:
            want = [int(v) for v in at["output_shape"]][-nsp:]
        else:
            want = [n * s for n, s in zip(in_sizes, strides)]
        pads = []
        for f, o in zip(full, want):
            total = f - o
            small = total // 2
            pads.append((small, total - small) if at.get("auto_pad") == "SAME_UPPER"
                        else (total - small, small))
    else:
        pads = _spatial_pads(node, in_sizes, kernel, strides, dilations)
    wy = g.transpose(w, tuple(range(2, 2 + nsp)) + (1, 0))
    if nsp == 1:
        x = g.unsqueeze(x, 1)
        wy = g.unsqueeze(wy, 0)
    sym = all(b == e >= 0 for b, e in pads)
    p2 = [b for b, _ in pads] if sym else [0] * nsp
    lift = (lambda v, neutral: (neutral,) + tuple(v)) if nsp == 1 else (lambda v, _: tuple(v))
    if nsp > 3:
        raise node.fail(f"{nsp}-D transposed convolution is not supported")
    y = (g.conv_transpose3d if nsp == 3 else g.conv_transpose2d)(
        x, wy, run.opt_node(node, 2), stride=lift(strides, 1), padding=lift(p2, 0),
        output_padding=lift(out_pad, 0), groups=int(at.get("group", 1)),
        dilation=lift(dilations, 1))
    if nsp == 1:
        y = g.squeeze(y, 1)
    if not sym:
        if any(b < 0 or e < 0 for b, e in pads):  # zeros where the result is too short
            y = g.pad(y, [(0, 0)] + [(max(-b, 0), max(-e, 0)) for b, e in pads] + [(0, 0)], 0.0)
            full = [f + max(-b, 0) + max(-e, 0) for (b, e), f in zip(pads, full)]
            pads = [(max(b, 0), max(e, 0)) for b, e in pads]
        key = (slice(None),) + tuple(slice(b, f - e) for (b, e), f in zip(pads, full)) \
            + (slice(None),)
        y = g.getitem(y, key)
    return [ChannelLast(y)]


def _pool_pads(node, in_sizes, kernel, strides):
    """(begin, end) pads per axis, the end widened for ``ceil_mode`` as ONNX
    and PyTorch do (the last window starts inside the input or left pad); also
    the un-widened pads (what count_include_pad counts)."""
    pads = _spatial_pads(node, in_sizes, kernel, strides, [1] * len(kernel))
    if not node.attrs.get("ceil_mode", 0):
        return pads, pads
    wide = []
    for n, k, s, (b, e) in zip(in_sizes, kernel, strides, pads):
        out = math.ceil((n + b + e - k) / s) + 1
        if (out - 1) * s >= n + b:
            out -= 1
        wide.append((b, max(e, (out - 1) * s + k - n - b)))
    return wide, pads


def _pool_setup(run, node):
    """Channel-last input lifted to 2-D pooling ([N, L, C] -> [N, 1, L, C]),
    with its 2-D kernel, strides, (begin, end) pads and the counted pads."""
    x = run.cl(node.inputs[0])
    nsp = len(x.shape) - 2
    kernel, strides, _ = _geometry(node)
    pads, counted = _pool_pads(node, x.shape[1:-1], kernel, strides)
    if nsp == 1:
        x = run.g.unsqueeze(x, 1)
        kernel, strides = (1,) + kernel, (1,) + strides
        pads, counted = [(0, 0)] + list(pads), [(0, 0)] + list(counted)
    return x, nsp, kernel, strides, pads, counted


def _pool_output(run, y, nsp):
    return [ChannelLast(run.g.squeeze(y, 1) if nsp == 1 else y)]


def _max_pool(run, node):
    """1-D / 2-D MaxPool without dilation (`_import_pool` dispatches here)."""
    g = run.g
    x, nsp, kernel, strides, pads, _ = _pool_setup(run, node)
    if all(b == e and 2 * b <= k for (b, e), k in zip(pads, kernel)):
        y = g.max_pool2d(x, kernel, strides, tuple(b for b, _ in pads))
    else:
        y = g.max_pool2d(_pad_channel_last(g, x, pads, -np.inf), kernel, strides, 0)
    return _pool_output(run, y, nsp)


def _avg_pool(run, node):
    """The padded-input average divided by the fraction of each window that
    counts: count_include_pad counts the explicit pads, never the ceil_mode
    overhang (as ONNX Runtime and PyTorch)."""
    g = run.g
    x, nsp, kernel, strides, pads, counted = _pool_setup(run, node)
    sizes = x.shape[1:-1]
    y = g.avg_pool2d(_pad_channel_last(g, x, pads), kernel, strides, 0)
    include = bool(node.attrs.get("count_include_pad", 0))
    mask = np.zeros(tuple(n + b + e for n, (b, e) in zip(sizes, pads)), np.float64)
    region = tuple(slice(b - cb, b + n + ce) if include else slice(b, b + n)
                   for n, (b, _), (cb, ce) in zip(sizes, pads, counted))
    mask[region] = 1.0
    frac = _window_means(mask, kernel, strides)
    if not np.all(frac == 1.0):
        y = g.div(y, frac[None, :, :, None].astype(g.dtype))
    return _pool_output(run, y, nsp)


def _window_means(mask, kernel, strides):
    (kh, kw), (sh, sw) = kernel, strides
    oh = (mask.shape[0] - kh) // sh + 1
    ow = (mask.shape[1] - kw) // sw + 1
    out = np.empty((oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[i, j] = mask[i * sh:i * sh + kh, j * sw:j * sw + kw].mean()
    return out


@handler("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(run, node):
    """[N, C, ``*S``] -> [N, C, 1, ...]: a reduction over the spatial axes; the
    result has the same memory order in both layouts, so it is returned in
    the file's layout."""
    g = run.g
    x = run.cl(node.inputs[0])
    nsp = len(x.shape) - 2
    axes = tuple(range(1, 1 + nsp))
    y = g.mean(x, axis=axes) if node.op == "GlobalAveragePool" else g.max(x, axis=axes)
    return [g.reshape(y, (x.shape[0], x.shape[-1]) + (1,) * nsp)]


@handler("BatchNormalization")
def _batch_norm(run, node):
    """Channel-last batch norm; eval mode uses the running statistics, train
    mode (``m.train()``) batch statistics with the running-stat update at
    PyTorch's momentum = 1 - ONNX momentum. The file's ``training_mode=1``
    normalises with batch statistics and gives the updated running mean and
    variance as outputs 1 and 2."""
    if node.attrs.get("training_mode", 0):
        return batch_norm_training(run, node)
    g = run.g
    x = run.cl(node.inputs[0])
    gamma, beta = run.node(node.inputs[1]), run.node(node.inputs[2])
    mean, var = bn_buffer(run, node, 3), bn_buffer(run, node, 4)
    training = run.training
    if mean is None or var is None:  # statistics computed in the graph: no update
        mean = g.constant(run.arr(node.inputs[3]))
        var = g.constant(run.arr(node.inputs[4]))
    y = g.batch_norm(x, gamma, beta, mean, var, training=training,
                     momentum=1.0 - float(node.attrs.get("momentum", 0.9)),
                     eps=float(node.attrs.get("epsilon", 1e-5)))
    return [ChannelLast(y) if len(x.shape) > 2 else y]


@handler("InstanceNormalization")
def _instance_norm(run, node):
    g = run.g
    x = run.cl(node.inputs[0])
    y = g.instance_norm(x, run.node(node.inputs[1]), run.node(node.inputs[2]),
                        eps=float(node.attrs.get("epsilon", 1e-5)))
    return [ChannelLast(y)]


@handler("LayerNormalization")
def _layer_norm(run, node):
    """Over the axes from ``axis`` on: the tail flattened into one axis when
    it holds several. Outputs 1 and 2 (Mean, InvStdDev) when the file uses them."""
    g = run.g
    stats = layer_norm_stats(run, node) if len(node.outputs) > 1 else []
    x = run.node(node.inputs[0])
    shape = tuple(x.shape)
    axis = int(node.attrs.get("axis", -1)) % len(shape)
    eps = float(node.attrs.get("epsilon", 1e-5))
    gamma, beta = run.node(node.inputs[1]), run.opt_node(node, 2)
    if axis == len(shape) - 1:
        if tuple(gamma.shape) != shape[-1:]:
            gamma = g.expand(gamma, shape[-1:])
        if beta is not None and tuple(beta.shape) != shape[-1:]:
            beta = g.expand(beta, shape[-1:])
        return [g.layer_norm(x, gamma, beta, eps)] + stats
    tail = int(np.prod(shape[axis:], dtype=np.int64))
    flat = g.reshape(x, shape[:axis] + (tail,))

    def flat_affine(p):
        if p is None:
            return None
        return g.reshape(g.expand(p, shape[axis:]) if tuple(p.shape) != shape[axis:] else p,
                         (tail,))
    y = g.layer_norm(flat, flat_affine(gamma), flat_affine(beta), eps)
    return [g.reshape(y, shape)] + stats


@handler("Dropout")
def _dropout(run, node):
    """The identity in eval mode; in train mode (``m.train()``) inverted
    dropout with the file's ratio; also in train mode when the file's
    ``training_mode`` input is true. A node with a ``seed`` drops ONNX's
    reference draw (`seeded_keep`); otherwise yscv's generator draws. Output
    1 is the boolean keep mask."""
    name = node.inputs[0]
    ratio = float(node.attrs.get("ratio", 0.5))
    if run.has(node, 1):
        ratio = float(run.arr(node.inputs[1]).reshape(()))
    training = run.training or (run.has(node, 2) and bool(run.arr(node.inputs[2]).reshape(())))
    if len(node.outputs) > 1 and node.outputs[1]:
        return dropout_with_mask(run, node, ratio, training)
    if training and ratio != 0.0 and "seed" in node.attrs:
        return [seeded_dropout(run, node, ratio)[0]]
    if not training or ratio == 0.0 or run.is_static(name):
        return [run.raw(name)]
    v = run.raw(name)
    if isinstance(v, ChannelLast):
        return [ChannelLast(run.g.dropout(v.node, ratio, training=True))]
    return [run.g.dropout(run.node(name), ratio, training=True)]
