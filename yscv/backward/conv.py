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
from ..registry import register_backward, register_recorded
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


@register_backward(Op.CONV_TRANSPOSE1D)
@register_backward(Op.CONV_TRANSPOSE2D)
@register_backward(Op.CONV_TRANSPOSE3D)
def conv_transpose_nd_backward(g, inputs, out, attrs, saved, needs):
    """dx = conv(g, w) on x's grid; dw = conv's weight pass with the roles
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
# Depthwise and deformable convolutions are said with primitive ops
# (composites): one strided slice (or bilinear sample) of the input per
# kernel tap, times that tap's weights, summed; the recorded backward is the
# composite's recorded walk, exact to any order. The other convolutions
# record their gradients as the ops GI and GW below.
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


def _bias(G, y, rest, has_bias):
    return G.add(y, rest[0]) if has_bias else y


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


composite(Op.DEPTHWISE_CONV2D, _depthwise_composite)
composite(Op.DEFORMABLE_CONV2D, _deformable_composite)


# The convolution's two gradients as ops of their own (PyTorch's
# convolution_backward): conv(x, w), its input gradient GI(g, w) and its
# weight gradient GW(x, g) are bilinear and each one's derivatives are the
# other two, so derivatives of any order stay on the fused kernels.
# A transposed convolution is GI of the convolution it is the adjoint of.
def _geometry(at, nsp):
    return dict(stride=at.stride[-nsp:], padding=at.padding[-nsp:],
                dilation=at.dilation[-nsp:], groups=at.groups)


def _conv_node(G, x, w, at):
    """conv(x, w) with the attributes' geometry, as a node (no bias)."""
    nsp = len(x.shape) - 2
    return (G.conv1d, G.conv2d, G.conv3d)[nsp - 1](x, w, None, **_geometry(at, nsp))


def _lifted(a):
    return C.lift_x(np.ascontiguousarray(a))


@register_backward(Op.CONV_GRAD_INPUT)
def conv_grad_input_backward(c, inputs, out, at, saved, needs):
    """For GI(g, w) and its cotangent c (x-shaped): dg = conv(c, w), dw = GW(c, g)."""
    g, w = inputs
    dg = dw = None
    if needs[0]:
        dg = C.conv_forward(_lifted(c), C.lift_w(w), at.stride, at.padding, at.dilation,
                            at.groups, out_sp=_lifted(g).shape[1:4]).reshape(g.shape)
    if needs[1]:
        _, dw, _ = C.conv_backward(_lifted(g), C.lift_w(w), at.stride, at.padding,
                                   at.dilation, at.groups, x=_lifted(c), need_x=False,
                                   need_w=True)
        dw = dw.reshape(w.shape)
    return dg, dw


@register_backward(Op.CONV_GRAD_WEIGHT)
def conv_grad_weight_backward(c, inputs, out, at, saved, needs):
    """For GW(x, g) and its cotangent c (w-shaped): dx = GI(g, c), dg = conv(x, c)."""
    x, g = inputs
    dx = dg = None
    c5 = C.lift_w(np.ascontiguousarray(c))
    if needs[0]:
        dx, _, _ = C.conv_backward(_lifted(g), c5, at.stride, at.padding, at.dilation,
                                   at.groups, x_shape=_lifted(x).shape, need_x=True,
                                   need_w=False)
        dx = dx.reshape(x.shape)
    if needs[1]:
        dg = C.conv_forward(_lifted(x), c5, at.stride, at.padding, at.dilation, at.groups,
                            out_sp=_lifted(g).shape[1:4]).reshape(g.shape)
    return dx, dg


@register_recorded(Op.CONV1D)
@register_recorded(Op.CONV2D)
@register_recorded(Op.CONV3D)
def conv_nd_recorded(G, gy, xs, y, at, saved, needs):
    x, w = xs[0], xs[1]
    nsp = len(x.shape) - 2
    geo = _geometry(at, nsp)
    gx = G.conv_grad_input(gy, w, x.shape, **geo) if needs[0] else None
    gw = G.conv_grad_weight(x, gy, w.shape, **geo) if needs[1] else None
    gb = G.sum(gy, axis=tuple(range(nsp + 1))) if len(xs) > 2 and needs[2] else None
    return (gx, gw, gb)[:len(xs)]


@register_recorded(Op.CONV_GRAD_INPUT)
def conv_grad_input_recorded(G, c, xs, y, at, saved, needs):
    g, w = xs
    geo = _geometry(at, len(g.shape) - 2)
    return (_conv_node(G, c, w, at) if needs[0] else None,
            G.conv_grad_weight(c, g, w.shape, **geo) if needs[1] else None)


@register_recorded(Op.CONV_GRAD_WEIGHT)
def conv_grad_weight_recorded(G, c, xs, y, at, saved, needs):
    x, g = xs
    geo = _geometry(at, len(x.shape) - 2)
    return (G.conv_grad_input(g, c, x.shape, **geo) if needs[0] else None,
            _conv_node(G, x, c, at) if needs[1] else None)


@register_recorded(Op.CONV_TRANSPOSE1D)
@register_recorded(Op.CONV_TRANSPOSE2D)
@register_recorded(Op.CONV_TRANSPOSE3D)
def conv_transpose_recorded(G, gy, xs, y, at, saved, needs):
    """y = GI(x, w): dx = conv(gy, w), dw = GW(gy, x), the bias the sum of gy.

    With output_padding >= stride (allowed below the dilation) conv(gy, w)
    has positions past x's, which no input of the transpose feeds: dx is
    cut to x's extents and GW reads x padded with zeros there."""
    x, w = xs[0], xs[1]
    nsp = len(x.shape) - 2
    geo = _geometry(at, nsp)
    xsp = tuple(x.shape[1:-1])
    full = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(
        gy.shape[1:-1], w.shape[:nsp], geo["stride"], geo["padding"], geo["dilation"]))
    extra = tuple(f - n for f, n in zip(full, xsp))
    gx = gw = None
    if needs[0]:
        gx = _conv_node(G, gy, w, at)
        if any(extra):
            gx = G.getitem(gx, (slice(None),) + tuple(slice(0, n) for n in xsp))
    if needs[1]:
        xg = G.pad(x, ((0, 0),) + tuple((0, e) for e in extra) + ((0, 0),)) if any(extra) else x
        gw = G.conv_grad_weight(gy, xg, w.shape, **geo)
    gb = G.sum(gy, axis=tuple(range(nsp + 1))) if len(xs) > 2 and needs[2] else None
    return (gx, gw, gb)[:len(xs)]
