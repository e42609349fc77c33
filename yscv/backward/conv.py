"""Convolution ops (backward). The column blocks are recomputed from the
input values (chunk by chunk, in yscv/compute/conv.py), which the walk
passes in anyway; the only thing a forward saves is conv1d/2d/3d's
zero-padded input on the direct and Winograd paths (one copy of x plus its
border, kept while the node lives, released and replayed like any saved
data under checkpointing), so the weight pass does not pad x again. ``needs`` skips whole
GEMMs: a constant input (the first layer's image) costs no data-gradient GEMM
or col2im. Attributes are the named records built by yscv/ops/conv.py."""
from __future__ import annotations

import itertools

import numpy as np

from ..compute import conv as C
from ..node import Op
from ..registry import register_backward
from ._recorded import composite


def _bias_grad(g, needs, k):
    """Sum of g over every axis but the last (or None when input k needs none)."""
    if len(needs) <= k or not needs[k]:
        return None
    return C.bias_grad(g)


@register_backward(Op.CONV1D)
@register_backward(Op.CONV2D)
@register_backward(Op.CONV3D)
def conv_nd_backward(g, inputs, out, attrs, saved, needs):
    """dx, dW and the bias gradient; on the direct tiles the bias gradient
    is summed in the dW pass (yscv/compute/conv.py)."""
    x, w = inputs[0], inputs[1]
    need_b = len(needs) > 2 and bool(needs[2])
    dx, dw, db = C.conv_backward(C.lift_x(g), C.lift_w(w), attrs.stride, attrs.padding,
                                 attrs.dilation, attrs.groups, x=C.lift_x(x),
                                 need_x=needs[0], need_w=needs[1], need_b=need_b,
                                 padded=saved)
    dx = None if dx is None else dx.reshape(x.shape)
    dw = None if dw is None else dw.reshape(w.shape)
    return (dx, dw, db)[:len(inputs)]


@register_backward(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d_backward(g, inputs, out, attrs, saved, needs):
    x, w = inputs[0], inputs[1]
    dx = dw = None
    if needs[0] or needs[1]:
        dx, dw = C.depthwise_backward(g, x, w, attrs.stride, attrs.padding, attrs.dilation,
                                      needs[0], needs[1])
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.CONV_TRANSPOSE2D)
def conv_transpose2d_backward(g, inputs, out, attrs, saved, needs):
    """dx = conv2d(g, w) on x's grid; dw = conv2d's weight pass with the roles
    of input and output gradient exchanged."""
    x, w = inputs[0], inputs[1]
    g5 = C.lift_x(g)
    w5 = C.lift_w(w)
    dx = dw = None
    if needs[0]:
        x5 = C.lift_x(x)
        dx = C.conv_forward(g5, w5, attrs.stride, attrs.padding, attrs.dilation, attrs.groups,
                            out_sp=x5.shape[1:4]).reshape(x.shape)
    if needs[1]:
        _, dw, _ = C.conv_backward(C.lift_x(x), w5, attrs.stride, attrs.padding, attrs.dilation,
                                   attrs.groups, x=g5, need_x=False, need_w=True)
        dw = dw.reshape(w.shape)
    return (dx, dw, _bias_grad(g, needs, 2))[:len(inputs)]


@register_backward(Op.DEFORMABLE_CONV2D)
def deformable_conv2d_backward(g, inputs, out, attrs, saved, needs):
    x, w, off = inputs[0], inputs[1], inputs[2]
    dx = dw = doff = None
    if needs[0] or needs[1] or needs[2]:
        dx, dw, doff = C.deform_backward(
            np.ascontiguousarray(g), np.ascontiguousarray(x), np.ascontiguousarray(w),
            np.ascontiguousarray(off), attrs.stride, attrs.padding, attrs.dilation,
            bool(needs[0]), bool(needs[1]), bool(needs[2]))
    return (dx, dw, doff, _bias_grad(g, needs, 3))[:len(inputs)]


# --------------------------------------------------------------- recorded
# Each convolution said with primitive ops (composites): one strided slice of
# the padded input per kernel tap, times that tap's weights, summed. The
# recorded backward is the composite's recorded walk: exact to any order.
# A transposed convolution is the vector-Jacobian product of the convolution
# it is the adjoint of, taken as recorded nodes.
def _tap_slices(G, x, ks, stride, padding, dilation):
    """(padded x, output extents, key per tap) of an N-d window."""
    nsp = len(ks)
    if any(padding):
        x = G.pad(x, ((0, 0),) + tuple((p, p) for p in padding) + ((0, 0),))
    sp = tuple(x.shape[1:1 + nsp])
    out = tuple((sp[i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(nsp))
    keys = []
    for tap in itertools.product(*(range(k) for k in ks)):
        key = (slice(None),) + tuple(
            slice(t * d, t * d + s * (o - 1) + 1, s)
            for t, d, s, o in zip(tap, dilation, stride, out)) + (slice(None),)
        keys.append((tap, key))
    return x, out, keys


def _grouped_matmul(G, xt, wt, groups):
    """xt [..., Cin] @ wt [Cin/groups, Cout], group by group."""
    if groups == 1:
        return G.matmul(xt, wt)
    cin_g = wt.shape[0]
    cout_g = wt.shape[1] // groups
    parts = [G.matmul(G.narrow(xt, -1, k * cin_g, cin_g), G.narrow(wt, 1, k * cout_g, cout_g))
             for k in range(groups)]
    return G.cat(parts, -1)


def conv_nodes(G, x, w, stride, padding, dilation, groups):
    """Grouped N-d cross-correlation of x [N, *sp, Cin] with w [*k, Cin/g, Cout]."""
    nsp = len(x.shape) - 2
    ks = tuple(w.shape[:nsp])
    xp, _, keys = _tap_slices(G, x, ks, stride, padding, dilation)
    total = None
    for tap, key in keys:
        term = _grouped_matmul(G, G.getitem(xp, key), G.getitem(w, tap), groups)
        total = term if total is None else G.add(total, term)
    return total


def _bias(G, y, rest, has_bias):
    return G.add(y, rest[0]) if has_bias else y


def _conv_composite(G, x, w, *rest):
    *rest, at = rest
    nsp = len(x.shape) - 2
    y = conv_nodes(G, x, w, at.stride[-nsp:], at.padding[-nsp:], at.dilation[-nsp:], at.groups)
    return _bias(G, y, rest, at.has_bias)


def _depthwise_composite(G, x, w, *rest):
    *rest, at = rest
    ks = tuple(w.shape[:2])
    c, m = w.shape[2], w.shape[3]
    xp, out, keys = _tap_slices(G, x, ks, at.stride, at.padding, at.dilation)
    total = None
    for tap, key in keys:
        term = G.mul(G.unsqueeze(G.getitem(xp, key), -1), G.getitem(w, tap))
        total = term if total is None else G.add(total, term)
    y = G.reshape(total, (x.shape[0],) + out + (c * m,))
    return _bias(G, y, rest, at.has_bias)


def _conv_transpose_composite(G, x, w, *rest):
    *rest, at = rest
    nsp = len(x.shape) - 2
    st, pd, dl, op_ = (at.stride[-nsp:], at.padding[-nsp:], at.dilation[-nsp:],
                       at.output_padding[-nsp:])
    ks = tuple(w.shape[:nsp])
    sp = tuple(C.transpose_out_size(n, k, s, p, d, o)
               for n, k, s, p, d, o in zip(x.shape[1:1 + nsp], ks, st, pd, dl, op_))
    cout = w.shape[nsp] * at.groups
    z = G.variable(np.zeros((x.shape[0],) + sp + (cout,), dtype=G.dtype))
    conv = conv_nodes(G, z, w, st, pd, dl, at.groups)
    # with stride 1, an output_padding (< dilation) adds positions whose
    # conv reaches past x's extent: the adjoint is of the conv cropped to x
    if tuple(conv.shape[1:1 + nsp]) != tuple(x.shape[1:1 + nsp]):
        conv = G.getitem(conv, (slice(None),) + tuple(slice(0, n) for n in x.shape[1:1 + nsp])
                         + (slice(None),))
    (y,) = G.gradients(conv, [z], grad=x, create_graph=True)
    return _bias(G, y, rest, at.has_bias)


def _deform_sample(G, x, offsets, tap, k, at):
    """The bilinear samples [N, OH, OW, C] of tap ``tap`` (index k) at the
    offset positions, as torchvision: the cell's floor corners are constants
    (the derivative from the right at integer coordinates), a corner outside
    the image and a sample outside (-1, H) x (-1, W) contribute zero."""
    n, h, w, c = x.shape
    _, oh, ow, _ = offsets.shape
    (sh, sw), (ph, pw), (dh, dw) = at.stride, at.padding, at.dilation
    base_y = (np.arange(oh) * sh - ph + tap[0] * dh).astype(G.dtype)[None, :, None]
    base_x = (np.arange(ow) * sw - pw + tap[1] * dw).astype(G.dtype)[None, None, :]
    py = G.add(G.select(offsets, 3, 2 * k), base_y)
    px = G.add(G.select(offsets, 3, 2 * k + 1), base_x)
    vy, vx = G.value(py), G.value(px)
    inside = (vy > -1) & (vx > -1) & (vy < h) & (vx < w)   # False for NaN and +-inf
    # a sample outside becomes position 0 through where: its offsets get a
    # zero gradient, and no NaN or inf reaches the products below
    py, px = G.where(inside, py, 0.0), G.where(inside, px, 0.0)
    y0 = np.floor(np.where(inside, vy, 0)).astype(np.int64)
    x0 = np.floor(np.where(inside, vx, 0)).astype(np.int64)
    ly, lx = G.sub(py, y0.astype(G.dtype)), G.sub(px, x0.astype(G.dtype))
    hy, hx = G.sub(1.0, ly), G.sub(1.0, lx)
    flat = G.reshape(x, (n, h * w, c))
    total = None
    for dy, dx, wy, wx in ((0, 0, hy, hx), (0, 1, hy, lx), (1, 0, ly, hx), (1, 1, ly, lx)):
        yc, xc = y0 + dy, x0 + dx
        ok = inside & (yc >= 0) & (yc < h) & (xc >= 0) & (xc < w)
        pos = np.where(ok, yc * w + xc, 0).reshape(n, oh * ow, 1)
        vals = G.gather(flat, 1, np.broadcast_to(pos, (n, oh * ow, c)).copy())
        vals = G.reshape(vals, (n, oh, ow, c))
        weight = G.where(ok, G.mul(wy, wx), 0.0)
        term = G.mul(vals, G.unsqueeze(weight, -1))
        total = term if total is None else G.add(total, term)
    return total


def _deformable_composite(G, x, w, offsets, *rest):
    *rest, at = rest
    kh, kw = w.shape[0], w.shape[1]
    total = None
    for k, tap in enumerate(itertools.product(range(kh), range(kw))):
        term = G.matmul(_deform_sample(G, x, offsets, tap, k, at), G.getitem(w, tap))
        total = term if total is None else G.add(total, term)
    return _bias(G, total, rest, at.has_bias)


composite(Op.CONV1D, _conv_composite)
composite(Op.CONV2D, _conv_composite)
composite(Op.CONV3D, _conv_composite)
composite(Op.DEPTHWISE_CONV2D, _depthwise_composite)
composite(Op.CONV_TRANSPOSE2D, _conv_transpose_composite)
composite(Op.DEFORMABLE_CONV2D, _deformable_composite)
