"""ONNX forms of the layer ops: convolution, pooling, normalization,
recurrent, attention and losses (one mapping function per Op member; see
`yscv.onnx._optable`)."""
from __future__ import annotations

import numpy as np

from ..node import Op
from ._forms_tensor import _softplus_stable
from ._registry import NO_ONNX, onnx_form


# ------------------------------------------------------------ convolution
def _conv_pads(padding, nsp):
    p = list(padding[-nsp:])
    return p + p


@onnx_form(Op.CONV1D, "Transpose, Conv")
def _conv1d(b, n):
    return _conv_nd(b, n, 1)


@onnx_form(Op.CONV2D, "Transpose, Conv")
def _conv2d(b, n):
    return _conv_nd(b, n, 2)


@onnx_form(Op.CONV3D, "Transpose, Conv")
def _conv3d(b, n):
    return _conv_nd(b, n, 3)


def _conv_nd(b, n, nsp):
    """x [N, ``*S``, Cin], w [``*K``, Cin/g, Cout] -> Conv on [N, Cin, ``*S``], w [Cout, Cin/g, ``*K``]."""
    a = n.attrs
    perm = [nsp + 1, nsp, *range(nsp)]
    w = b.weight(n.inputs[1], lambda v: v.transpose(perm),
                 lambda t: b.emit("Transpose", [t], perm=perm), "oihw")
    ins = [b.to_channels_first(n.x(0), nsp + 2), w]
    if a.has_bias:
        ins.append(n.x(2))
    y = b.emit("Conv", ins, strides=list(a.stride[-nsp:]), pads=_conv_pads(a.padding, nsp),
               dilations=list(a.dilation[-nsp:]), group=a.groups)
    return b.to_channels_last(y, nsp + 2)


@onnx_form(Op.DEPTHWISE_CONV2D, "Transpose, Conv (group = C)")
def _depthwise_conv2d(b, n):
    a = n.attrs
    kh, kw, c, m = b.shape(n.inputs[1])

    def relayout(v):
        return v.reshape(kh, kw, c * m, 1).transpose(2, 3, 0, 1)

    def ops(t):
        t = b.emit("Reshape", [t, b.ints([kh, kw, c * m, 1])])
        return b.emit("Transpose", [t], perm=[2, 3, 0, 1])

    ins = [b.to_channels_first(n.x(0), 4), b.weight(n.inputs[1], relayout, ops, "oihw")]
    if a.has_bias:
        ins.append(n.x(2))
    y = b.emit("Conv", ins, strides=list(a.stride), pads=_conv_pads(a.padding, 2),
               dilations=list(a.dilation), group=c)
    return b.to_channels_last(y, 4)


@onnx_form(Op.CONV_TRANSPOSE2D, "Transpose, ConvTranspose")
def _conv_transpose2d(b, n):
    a = n.attrs
    perm = [3, 2, 0, 1]   # [KH, KW, Cout/g, Cin] -> [Cin, Cout/g, KH, KW]
    w = b.weight(n.inputs[1], lambda v: v.transpose(perm),
                 lambda t: b.emit("Transpose", [t], perm=perm), "iohw")
    ins = [b.to_channels_first(n.x(0), 4), w]
    if a.has_bias:
        ins.append(n.x(2))
    y = b.emit("ConvTranspose", ins, strides=list(a.stride[-2:]),
               pads=_conv_pads(a.padding, 2), dilations=list(a.dilation[-2:]),
               output_padding=list(a.output_padding[-2:]), group=a.groups)
    return b.to_channels_last(y, 4)


# the convolution's gradients as ops: appended only by a recorded backward
# (create_graph=True), never by a model's inference
NO_ONNX[Op.VJP] = ("a fused op's gradient, recorded only by create_graph=True; "
                   "export the model's forward instead")
NO_ONNX[Op.CUSTOM] = ("an op defined with yscv.custom_op: ONNX knows only its own "
                      "operators; export a model built from yscv's ops")
for _op in (Op.CONV_GRAD_INPUT, Op.CONV_GRAD_WEIGHT, Op.CONV_GRAD_BIAS):
    NO_ONNX[_op] = ("a backward op, recorded only by create_graph=True; "
                    "export the model's forward instead")


@onnx_form(Op.DEFORMABLE_CONV2D, "Transpose, DeformConv", min_opset=19)
def _deformable_conv2d(b, n):
    a = n.attrs
    perm = [3, 2, 0, 1]   # [KH, KW, Cin, Cout] -> [Cout, Cin, KH, KW]
    w = b.weight(n.inputs[1], lambda v: v.transpose(perm),
                 lambda t: b.emit("Transpose", [t], perm=perm), "oihw")
    ins = [b.to_channels_first(n.x(0), 4), w, b.to_channels_first(n.x(2), 4)]
    if a.has_bias:
        ins.append(n.x(3))
    kh, kw = b.shape(n.inputs[1])[:2]
    y = b.emit("DeformConv", ins, strides=list(a.stride), pads=_conv_pads(a.padding, 2),
               dilations=list(a.dilation), kernel_shape=[kh, kw], group=1, offset_group=1)
    return b.to_channels_last(y, 4)


# ---------------------------------------------------------------- pooling
@onnx_form(Op.MAX_POOL2D, "Transpose, MaxPool")
def _max_pool2d(b, n):
    a = n.attrs
    y = b.emit("MaxPool", [b.to_channels_first(n.x(), 4)], kernel_shape=[a.kh, a.kw],
               strides=[a.sh, a.sw], pads=[a.ph, a.pw, a.ph, a.pw])
    return b.to_channels_last(y, 4)


@onnx_form(Op.AVG_POOL2D, "Transpose, AveragePool")
def _avg_pool2d(b, n):
    a = n.attrs
    y = b.emit("AveragePool", [b.to_channels_first(n.x(), 4)], kernel_shape=[a.kh, a.kw],
               strides=[a.sh, a.sw], pads=[a.ph, a.pw, a.ph, a.pw],
               count_include_pad=int(a.count_include_pad))
    return b.to_channels_last(y, 4)


def _adaptive(b, x, in_hw, out_hw, onnx_reduce):
    """PyTorch's adaptive bins, one axis at a time (a bin's mean / max is the
    mean / max over rows of the per-row values): Slice + Reduce + Concat."""
    for axis, (size, out) in zip((1, 2), zip(in_hw, out_hw)):
        if size == out:
            continue
        parts = []
        for i in range(out):
            lo = (i * size) // out
            hi = -((-(i + 1) * size) // out)
            s = b.emit("Slice", [x, b.ints([lo]), b.ints([hi]), b.ints([axis])])
            parts.append(b.reduce(onnx_reduce, s, (axis,), True))
        x = parts[0] if len(parts) == 1 else b.emit("Concat", parts, axis=axis)
    return x


@onnx_form(Op.ADAPTIVE_AVG_POOL2D, "Slice, ReduceMean, Concat")
def _adaptive_avg_pool2d(b, n):
    b.fixed_axes(n.inputs[0], (1, 2), n.name, n.index)
    y = _adaptive(b, n.x(), n.in_shape()[1:3], (n.attrs.oh, n.attrs.ow), "ReduceMean")
    return y if y != n.x() else b.emit("Identity", [y])


@onnx_form(Op.ADAPTIVE_MAX_POOL2D, "Slice, ReduceMax, Concat")
def _adaptive_max_pool2d(b, n):
    b.fixed_axes(n.inputs[0], (1, 2), n.name, n.index)
    y = _adaptive(b, n.x(), n.in_shape()[1:3], (n.attrs.oh, n.attrs.ow), "ReduceMax")
    return y if y != n.x() else b.emit("Identity", [y])


@onnx_form(Op.GLOBAL_AVG_POOL2D, "ReduceMean")
def _global_avg_pool2d(b, n):
    return b.reduce("ReduceMean", n.x(), (1, 2), False)


# ---------------------------------------------------------- normalization
def _affine_inputs(b, n, has_gamma, has_beta, c):
    """Names of gamma and beta (ones / zeros when absent) after input 0."""
    k = 1
    if has_gamma:
        gamma = n.x(k)
        k += 1
    else:
        gamma = b.const(np.ones(c, b.dtype), "ones")
    if has_beta:
        beta = n.x(k)
        k += 1
    else:
        beta = b.const(np.zeros(c, b.dtype), "zeros")
    return gamma, beta, k


def _normalize(b, x, axes, eps, gamma, beta):
    """(x - mean) / sqrt(var + eps) * gamma + beta, statistics over ``axes``."""
    d = b.emit("Sub", [x, b.reduce("ReduceMean", x, axes, True)])
    var = b.reduce("ReduceMean", b.emit("Mul", [d, d]), axes, True)
    y = b.emit("Div", [d, b.emit("Sqrt", [b.emit("Add", [var, b.scalar(eps)])])])
    if gamma is not None:
        y = b.emit("Mul", [y, gamma])
    if beta is not None:
        y = b.emit("Add", [y, beta])
    return y


@onnx_form(Op.BATCH_NORM, "Transpose, BatchNormalization (float64: Sub, Div, Sqrt, Mul, Add; "
           "training mode: ReduceMean ...)")
def _batch_norm(b, n):
    a = n.attrs
    shape = n.in_shape()
    c = shape[-1]
    gamma, beta, k = _affine_inputs(b, n, a.has_gamma, a.has_beta, c)
    if a.training:   # batch statistics (a function recorded in training mode)
        return _normalize(b, n.x(), tuple(range(len(shape) - 1)), a.eps,
                          gamma if a.has_gamma else None, beta if a.has_beta else None)
    if not b.exact_float_attributes:   # epsilon as a float64 constant
        d = b.emit("Sub", [n.x(), n.x(k)])
        std = b.emit("Sqrt", [b.emit("Add", [n.x(k + 1), b.scalar(a.eps)])])
        y = b.emit("Mul", [b.emit("Div", [d, std]), gamma])
        return b.emit("Add", [y, beta])
    rank = len(shape)
    y = b.emit("BatchNormalization", [b.to_channels_first(n.x(), rank), gamma, beta,
                                      n.x(k), n.x(k + 1)], epsilon=a.eps)
    return b.to_channels_last(y, rank)


@onnx_form(Op.LAYER_NORM, "LayerNormalization (float64: ReduceMean, Sub, Mul, Add, Div, Sqrt)")
def _layer_norm(b, n):
    a = n.attrs
    c = n.in_shape()[-1]
    gamma, beta, _ = _affine_inputs(b, n, a.has_gamma, a.has_beta, c)
    if not b.exact_float_attributes:   # epsilon as a float64 constant
        return _normalize(b, n.x(), (len(n.in_shape()) - 1,), a.eps,
                          gamma if a.has_gamma else None, beta if a.has_beta else None)
    return b.emit("LayerNormalization", [n.x(), gamma, beta], axis=-1, epsilon=a.eps)


@onnx_form(Op.GROUP_NORM, "Reshape, Shape, ReduceMean, Sub, Mul, Add, Div, Sqrt")
def _group_norm(b, n):
    a = n.attrs
    shape = n.in_shape()
    c = shape[-1]
    gamma, beta, _ = _affine_inputs(b, n, a.has_gamma, a.has_beta, c)
    x = n.x()
    g4 = b.emit("Reshape", [x, b.ints([0, -1, a.num_groups, c // a.num_groups])])
    y = _normalize(b, g4, (1, 3), a.eps, None, None)
    y = b.emit("Reshape", [y, b.emit("Shape", [x])])
    y = b.emit("Mul", [y, gamma]) if a.has_gamma else y
    return b.emit("Add", [y, beta]) if a.has_beta else y


@onnx_form(Op.INSTANCE_NORM, "ReduceMean, Sub, Mul, Add, Div, Sqrt")
def _instance_norm(b, n):
    a = n.attrs
    shape = n.in_shape()
    gamma, beta, _ = _affine_inputs(b, n, a.has_gamma, a.has_beta, shape[-1])
    return _normalize(b, n.x(), tuple(range(1, len(shape) - 1)), a.eps,
                      gamma if a.has_gamma else None, beta if a.has_beta else None)


# -------------------------------------------------------------- recurrent
def _gates(b, idx, order, h, transpose, hint):
    """yscv's [I, ``G*H``] (or bias ``[G*H]``) in ONNX's gate ``order`` and layout:
    W/R [1, ``G*H``, I] (``transpose``) or a bias piece ``[G*H]``."""
    def relayout(v):
        blocks = [v[..., g * h:(g + 1) * h] for g in order]
        v = np.concatenate(blocks, axis=-1)
        return v.T[None] if transpose else v

    def ops(t):
        pieces = [b.emit("Slice", [t, b.ints([g * h]), b.ints([(g + 1) * h]), b.ints([-1])])
                  for g in order]
        t = b.emit("Concat", pieces, axis=-1)
        if transpose:
            t = b.emit("Unsqueeze", [b.emit("Transpose", [t], perm=[1, 0]), b.ints([0])])
        return t

    return b.weight(idx, relayout, ops, hint)


def _recurrent(b, n, onnx_op, order, biases, states, extra=None):
    """Shared ONNX RNN/LSTM/GRU emission. ``biases``: (Wb, Rb) tensor names;
    ``states``: initial state names ("" when absent). Returns (Y [T, B, H]
    or [T, H], Y_c or None)."""
    a = n.attrs
    h = b.shape(n.inputs[2])[0]
    x = n.x(0)
    if not a.batched:
        x = b.emit("Unsqueeze", [x, b.ints([1])])
        states = [s if s == "" else b.emit("Unsqueeze", [s, b.ints([0])]) for s in states]
    states = [s if s == "" else b.emit("Unsqueeze", [s, b.ints([0])]) for s in states]
    w = _gates(b, n.inputs[1], order, h, True, "W")
    r = _gates(b, n.inputs[2], order, h, True, "R")
    bias = b.emit("Unsqueeze", [b.emit("Concat", list(biases), axis=0), b.ints([0])])
    outs = 3 if onnx_op == "LSTM" else 2
    res = b.emit(onnx_op, [x, w, r, bias, "", *states], outputs=outs, hidden_size=h,
                 **(extra or {}))
    y = b.emit("Squeeze", [res[0], b.ints([1, 2] if not a.batched else [1])])
    yc = None
    if onnx_op == "LSTM":
        yc = b.emit("Squeeze", [res[2], b.ints([0, 1] if not a.batched else [0])])
    return y, yc


def _bias_gates(b, idx, order, h):
    return _gates(b, idx, order, h, False, "B")


@onnx_form(Op.RNN, "RNN, Unsqueeze, Squeeze, Concat")
def _rnn(b, n):
    a = n.attrs
    h = b.shape(n.inputs[2])[0]
    zeros = b.const(np.zeros(h, b.dtype), "zeros")
    states = [n.x(4) if a.has_h0 else ""]
    y, _ = _recurrent(b, n, "RNN", [0], (n.x(3), zeros), states,
                      {"activations": ["Relu" if a.relu else "Tanh"]})
    return y


@onnx_form(Op.LSTM, "LSTM (gates i, f, g, o -> i, o, f, c), Unsqueeze, Squeeze, Concat; "
           "h0 or c0 alone: Shape, ConstantOfShape; weights that are not leaves: Slice, "
           "Transpose")
def _lstm(b, n):
    a = n.attrs
    h = b.shape(n.inputs[2])[0]
    order = [0, 3, 1, 2]
    zeros = b.const(np.zeros(4 * h, b.dtype), "zeros")
    k = 4
    h0 = c0 = ""
    if a.has_h0:
        h0 = n.x(k)
        k += 1
    if a.has_c0:
        c0 = n.x(k)
    if bool(c0) != bool(h0):   # ONNX takes both or neither: zeros of the given one's shape
        zero = b.helper.make_tensor("zero", b.elem_type, [1], [0.0])
        z = b.emit("ConstantOfShape", [b.emit("Shape", [h0 or c0])], value=zero)
        h0, c0 = (h0 or z), (c0 or z)
    y, yc = _recurrent(b, n, "LSTM", order, (_bias_gates(b, n.inputs[3], order, h), zeros),
                       [h0, c0])
    if not a.with_cell:
        return y
    return b.emit("Concat", [y, b.emit("Unsqueeze", [yc, b.ints([0])])], axis=0)


@onnx_form(Op.GRU, "GRU (gates r, z, n -> z, r, h; linear_before_reset), Unsqueeze, Squeeze, "
           "Concat; weights that are not leaves: Slice, Transpose")
def _gru(b, n):
    a = n.attrs
    h = b.shape(n.inputs[2])[0]
    order = [1, 0, 2]
    biases = (_bias_gates(b, n.inputs[3], order, h), _bias_gates(b, n.inputs[4], order, h))
    states = [n.x(5) if a.has_h0 else ""]
    y, _ = _recurrent(b, n, "GRU", order, biases, states, {"linear_before_reset": 1})
    return y


# -------------------------------------------------------------- attention
@onnx_form(Op.SCALED_DOT_PRODUCT_ATTENTION,
           "MatMul, Transpose, Mul, Softmax; masks: Add, And, Where, ReduceMax, Greater")
def _sdpa(b, n):
    a = n.attrs
    q, k, v = n.x(0), n.x(1), n.x(2)
    kr = len(n.in_shape(1))
    perm = list(range(kr))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    s = b.emit("MatMul", [q, b.emit("Transpose", [k], perm=perm)])
    s = b.emit("Mul", [s, b.scalar(a.scale)])
    sq, sk = n.in_shape(0)[-2], n.in_shape(1)[-2]
    allowed = None
    if a.mask is not None:
        m = np.asarray(a.mask)
        m = m[0] if m.shape[0] == 1 or bool(np.all(m == m[:1])) else m.reshape(
            tuple(a.lead) + (sq, sk))
        if m.dtype == np.bool_:
            allowed = b.const(m, "mask")
        else:
            s = b.emit("Add", [s, b.const(m.astype(b.dtype), "mask")])
    if a.causal:
        tril = b.const(np.tril(np.ones((sq, sk), dtype=np.bool_)), "causal")
        allowed = tril if allowed is None else b.emit("And", [allowed, tril])
    if allowed is not None:
        s = b.emit("Where", [allowed, s, b.scalar(-np.inf)])
    p = b.emit("Softmax", [s], axis=-1)
    if allowed is not None or a.mask is not None:
        # a row with nothing to attend gives zeros (softmax of all -inf is NaN)
        rowmax = b.reduce("ReduceMax", s, (len(n.shape) - 1,), True)
        ok = b.emit("Greater", [rowmax, b.scalar(-np.inf)])
        p = b.emit("Where", [ok, p, b.scalar(0.0)])
    return b.emit("MatMul", [p, v])


# ------------------------------------------------------------------ losses
def _reduce_loss(b, terms, reduction, denominator=None):
    """"none": the terms; "sum": their sum; "mean": the sum over
    ``denominator`` (a tensor name; default the element count)."""
    if reduction == "none":
        return terms
    if reduction == "sum":
        return b.reduce("ReduceSum", terms, None, False)
    if denominator is None:
        return b.reduce("ReduceMean", terms, None, False)
    return b.emit("Div", [b.reduce("ReduceSum", terms, None, False), denominator])


@onnx_form(Op.MSE_LOSS, "Sub, Mul, ReduceMean / ReduceSum")
def _mse_loss(b, n):
    d = b.emit("Sub", [n.x(0), n.x(1)])
    return _reduce_loss(b, b.emit("Mul", [d, d]), n.attrs)


@onnx_form(Op.L1_LOSS, "Sub, Abs, ReduceMean / ReduceSum")
def _l1_loss(b, n):
    return _reduce_loss(b, b.emit("Abs", [b.emit("Sub", [n.x(0), n.x(1)])]), n.attrs)


@onnx_form(Op.HUBER_LOSS, "Sub, Abs, Min, Mul, Add, ReduceMean / ReduceSum")
def _huber_loss(b, n):
    """With m = min(|d|, delta): 0.5 m^2 + delta (|d| - m), as yscv computes it."""
    a = b.emit("Abs", [b.emit("Sub", [n.x(0), n.x(1)])])
    m = b.emit("Min", [a, b.scalar(n.attrs.delta)])
    lin = b.emit("Mul", [b.emit("Sub", [a, m]), b.scalar(n.attrs.delta)])
    quad = b.emit("Mul", [m, b.emit("Mul", [m, b.scalar(0.5)])])
    return _reduce_loss(b, b.emit("Add", [lin, quad]), n.attrs.reduction)


@onnx_form(Op.BCE_WITH_LOGITS, "Exp, Log, Relu, Abs, Neg, Mul, Sub, Add, ReduceMean / "
           "ReduceSum")
def _bce_with_logits(b, n):
    a = n.attrs
    x, t = n.x(0), n.x(1)
    if a.pos_weight is None:     # softplus(x) - x t
        terms = b.emit("Sub", [_softplus_stable(b, x), b.emit("Mul", [x, t])])
    else:                        # (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)
        pw1 = b.const(np.asarray(a.pos_weight, b.dtype) - 1, "pos_weight_m1")
        coef = b.emit("Add", [b.emit("Mul", [pw1, t]), b.scalar(1.0)])
        terms = b.emit("Mul", [_softplus_stable(b, b.emit("Neg", [x])), coef])
        terms = b.emit("Add", [terms, b.emit("Mul", [b.emit("Sub", [b.scalar(1.0), t]), x])])
    if a.weight is not None:
        terms = b.emit("Mul", [terms, b.const(np.asarray(a.weight, b.dtype), "weight")])
    return _reduce_loss(b, terms, a.reduction)


def _class_loss(b, n, log_probs):
    """Per-target loss ``-w[y] logp[y]`` (plus label smoothing), 0 where the
    label is ``ignore_index``; the mean divides by the sum of ``w[y]`` over
    the kept targets (computed in the file, so labels may be an input)."""
    a = n.attrs
    c = n.in_shape()[-1]
    labels = b.index_tensor(a.labels, "labels")
    valid = b.emit("Not", [b.emit("Equal", [labels, b.const(np.asarray(a.ignore_index,
                                                                         np.int64))])])
    y = b.emit("Where", [valid, labels, b.const(np.asarray(0, np.int64))])
    picked = b.emit("GatherElements", [log_probs, b.emit("Unsqueeze", [y, b.ints([-1])])],
                    axis=-1)
    picked = b.emit("Squeeze", [picked, b.ints([-1])])
    keep = b.emit("Cast", [valid], to=b.elem_type)
    weight = None
    wy = keep
    if a.weight is not None:
        weight = b.const(np.asarray(a.weight, b.dtype), "class_weight")
        wy = b.emit("Mul", [b.emit("Gather", [weight, y], axis=0), keep])
    loss = b.emit("Neg", [b.emit("Mul", [picked, wy])])
    eps = a.label_smoothing
    if eps > 0.0:
        wl = log_probs if weight is None else b.emit("Mul", [log_probs, weight])
        smooth = b.emit("Neg", [b.reduce("ReduceSum", wl, (len(n.in_shape()) - 1,), False)])
        smooth = b.emit("Mul", [smooth, keep])
        loss = b.emit("Add", [b.emit("Mul", [loss, b.scalar(1.0 - eps)]),
                              b.emit("Mul", [smooth, b.scalar(eps / c)])])
    den = b.reduce("ReduceSum", wy, None, False) if a.reduction == "mean" else None
    return _reduce_loss(b, loss, a.reduction, den)


@onnx_form(Op.CROSS_ENTROPY, "LogSoftmax, GatherElements, Gather, Equal, Not, Where, Cast, "
           "Unsqueeze, Squeeze, Mul, Add, Neg, ReduceSum, Div")
def _cross_entropy(b, n):
    return _class_loss(b, n, b.emit("LogSoftmax", [n.x()], axis=-1))


@onnx_form(Op.NLL_LOSS, "GatherElements, Gather, Equal, Not, Where, Cast, Unsqueeze, "
           "Squeeze, Mul, Neg, ReduceSum, Div")
def _nll_loss(b, n):
    return _class_loss(b, n, n.x())
