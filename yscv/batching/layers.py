"""Batching rules of the convolutions, pools, norms, recurrences, attention
and unfold/fold: the vmap axis folded into the op's own batch axis (``[B, N,
...]`` as ``[B*N, ...]``, one call) where only the data input is batched; a
batched convolution weight (per-sample gradients, an ensemble) as patches
times weights or as groups; one call per sample where another weight is
batched too or the op mixes its batch (batch norm's statistics)."""
from __future__ import annotations

from ..errors import BatchingError
from ..op import Op
from ..registry import register_batching
import numpy as np

from ._rules import align, batched, loop, register_all, same


def _fold_batch(g, op, xs, bat, attrs, e):
    """Data input batched, every other input not: ``[B, N, ...]`` runs as
    ``[B*N, ...]`` and is split back."""
    if any(bat[1:]):
        return loop(g, op, xs, bat, attrs, e)
    x = xs[0]
    shape = tuple(x.shape)
    folded = g.reshape(x, (shape[0] * shape[1],) + shape[2:])
    out = g._apply(op, (folded,) + tuple(xs[1:]), attrs)
    oshape = tuple(out.shape)
    return g.reshape(out, (shape[0], shape[1]) + oshape[1:])


def _conv(g, op, xs, bat, attrs, e):
    """conv1d/2d/3d: a shared weight folds the vmap axis into the batch; a
    batched one (per-sample weights, an ensemble) into the groups: x as
    [N, ..., B*C] and w as [..., Cin/groups, B*Cout], one grouped
    convolution with ``groups * B`` groups."""
    if not any(bat[1:]):
        return _fold_batch(g, op, xs, bat, attrs, e)
    if op is Op.CONV2D and attrs.groups == 1:
        return _conv2d_columns(g, xs, bat, attrs, e)
    b = e.size
    x, w = batched(g, xs[0], bat[0], b), batched(g, xs[1], bat[1], b)
    xs_, ws_ = tuple(x.shape), tuple(w.shape)
    nx, nw = len(xs_), len(ws_)
    xt = g.transpose(x, (1,) + tuple(range(2, nx - 1)) + (0, nx - 1))
    xr = g.reshape(xt, xs_[1:-1] + (b * xs_[-1],))
    wt = g.transpose(w, tuple(range(1, nw - 1)) + (0, nw - 1))
    wr = g.reshape(wt, ws_[1:-1] + (b * ws_[-1],))
    rest = ()
    if len(xs) > 2:
        bias = batched(g, xs[2], bat[2], b)
        rest = (g.reshape(bias, (b * ws_[-1],)),)
    out = g._apply(op, (xr, wr) + rest, attrs._replace(groups=attrs.groups * b))
    os_ = tuple(out.shape)
    out = g.reshape(out, os_[:-1] + (b, ws_[-1]))
    no = len(os_) + 1
    return g.transpose(out, (no - 2,) + tuple(range(no - 2)) + (no - 1,))


def _conv2d_columns(g, xs, bat, attrs, e):
    """conv2d (one group) with a batched weight, as per-sample gradients and
    ensembles give it: every sample's patches ``unfold(x)`` [B, N*L, K]
    (``K = KH*KW*C``) times its own weight [B, K, Cout], one batched
    product. Its backward is a batched product for the weight gradients
    (``cols^T @ g`` per sample) and ``fold(g @ w^T)`` for x: no per-group
    patch copies."""
    b = e.size
    x, w = xs[0], xs[1]
    kh, kw, c, cout = tuple(w.shape)[1:]
    stride, padding, dilation = attrs.stride[1:], attrs.padding[1:], attrs.dilation[1:]
    if bat[0]:
        shape = tuple(x.shape)
        lead = (b, shape[1])
        x = g.reshape(x, (b * shape[1],) + shape[2:])
    else:
        lead = (tuple(x.shape)[0],)
    h, wd = tuple(x.shape)[1:3]
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = g.unfold(x, (kh, kw), dilation, padding, stride)
    k = kh * kw * c
    cols = g.reshape(cols, (b, -1, k) if bat[0] else (-1, k))
    out = g.matmul(cols, g.reshape(w, (b, k, cout)))
    if len(xs) > 2:
        bias = batched(g, xs[2], bat[2], b)
        out = g.add(out, g.reshape(bias, (b, 1, cout)))
    n = lead[1] if bat[0] else lead[0]
    return g.reshape(out, (b, n, oh, ow, cout))


register_all((Op.CONV1D, Op.CONV2D, Op.CONV3D), _conv)

_FOLDED = (Op.DEPTHWISE_CONV2D, Op.CONV_TRANSPOSE1D,
           Op.CONV_TRANSPOSE2D, Op.CONV_TRANSPOSE3D, Op.MAX_POOL1D,
           Op.MAX_POOL2D, Op.MAX_POOL3D, Op.AVG_POOL1D, Op.AVG_POOL2D, Op.AVG_POOL3D,
           Op.ADAPTIVE_AVG_POOL1D, Op.ADAPTIVE_AVG_POOL2D, Op.ADAPTIVE_MAX_POOL2D,
           Op.GLOBAL_AVG_POOL2D, Op.PIXEL_SHUFFLE, Op.UPSAMPLE_NEAREST, Op.INTERPOLATE,
           Op.GROUP_NORM, Op.INSTANCE_NORM, Op.UNFOLD, Op.FOLD)
register_all(_FOLDED, _fold_batch)


@register_batching(Op.DEFORMABLE_CONV2D)
def _deformable(g, op, xs, bat, attrs, e):
    """Inputs (x, w, offsets[, bias]): x and the per-position offsets fold
    into the batch together (shared offsets expanded); a batched weight loops."""
    x, w, off = xs[:3]
    if bat[1] or any(bat[3:]):
        return loop(g, op, xs, bat, attrs, e)
    off = batched(g, off, bat[2], e.size)
    shape, oshape = tuple(x.shape), tuple(off.shape) if hasattr(off, "index") else off.shape
    fx = g.reshape(x, (shape[0] * shape[1],) + shape[2:])
    fo = g.reshape(off, (oshape[0] * oshape[1],) + tuple(oshape[2:]))
    out = g._apply(op, (fx, w, fo) + tuple(xs[3:]), attrs)
    return g.reshape(out, (shape[0], shape[1]) + tuple(out.shape)[1:])


@register_batching(Op.LAYER_NORM)
def _layer_norm(g, op, xs, bat, attrs, e):
    # normalised over the trailing axes the affine parameters cover
    if any(bat[1:]):
        return loop(g, op, xs, bat, attrs, e)
    return same(g, op, xs, bat, attrs, e)


@register_batching(Op.BATCH_NORM)
def _batch_norm(g, op, xs, bat, attrs, e):
    """Eval mode is per-channel affine (any leading axes); training mode
    takes each sample's own statistics (a loop), and refuses to update
    running statistics (one update per sample would be no PyTorch semantics;
    torch.func refuses it too)."""
    n_affine = int(attrs.has_gamma) + int(attrs.has_beta)
    tracked = len(xs) > 1 + n_affine
    if not attrs.training:
        if any(bat[1:]):
            return loop(g, op, xs, bat, attrs, e)
        return same(g, op, xs, bat, attrs, e)
    if tracked:
        raise BatchingError("vmap: batch_norm in training mode updating running statistics "
                            "(pass running_mean=running_var=None, use eval mode, or keep batch "
                            "norm outside vmap)", op="batch_norm")
    return loop(g, op, xs, bat, attrs, e)


@register_batching(Op.SCALED_DOT_PRODUCT_ATTENTION)
def _attention(g, op, xs, bat, attrs, e):
    """q, k, v (shared ones expanded) aligned to one rank, the vmap axis a
    leading (batch) axis of the attention; the mask, kept per row of the
    flattened leading axes, repeated for every sample."""
    rank = max(len(tuple(x.shape)) - (1 if b else 0) for x, b in zip(xs, bat))
    ys = [align(g, batched(g, x, b, e.size), rank) for x, b in zip(xs, bat)]
    mask = attrs.mask
    if mask is not None:
        mask = np.tile(mask, (e.size,) + (1,) * (mask.ndim - 1))
        mask.flags.writeable = False
    return g._apply(op, ys, attrs._replace(mask=mask, lead=(e.size,) + tuple(attrs.lead)))


# recurrences: the attributes fix per-sample layouts
register_all((Op.RNN, Op.LSTM, Op.GRU), loop, "loop")
# the backward ops of convolution (their attributes hold per-sample shapes)
register_all((Op.CONV_GRAD_INPUT, Op.CONV_GRAD_WEIGHT, Op.CONV_GRAD_BIAS), loop, "loop")
