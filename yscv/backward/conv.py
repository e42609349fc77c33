"""Convolution ops (backward): one rule per op against the namespace ``ns``
(yscv/engine/namespace/__init__.py), run on arrays by the first-order walks and on
the graph by ``create_graph=True``.

The convolution's two gradients are ops of their own (PyTorch's
convolution_backward): conv(x, w), its input gradient GI(g, w)
(``conv_grad_input``) and its weight gradient GW(x, g) (``conv_grad_weight``)
are bilinear and each one's derivatives are the other two, so derivatives
of any order stay on the fused kernels. A transposed convolution is GI of
the convolution it is the adjoint of. The bias gradient is the sum of g over
positions, in the order of ``C.bias_grad`` (`_bias_grad`).

conv1d/2d/3d's rule has a written-out array copy (`conv_nd_array`, the CNN
hot path): dx and dW in one call of the compute driver, reading the padded
input the forward saved (conv1d/2d/3d's only saved data: x plus its zero
border on the direct and Winograd paths, so the weight pass does not pad x
again), with the bits of ``conv_grad_input`` / ``conv_grad_weight``
(tests/test_rule_flags.py). ``needs`` skips whole GEMMs: a constant input
(the first layer's image) costs no data-gradient GEMM or col2im.

Depthwise and deformable convolutions keep array rules on their fused
kernels and declare composites (their forwards in primitive ops) for
``create_graph``. Attributes are the named records built by yscv/ops/conv.py."""
from __future__ import annotations

import itertools

import numpy as np

from ..compute import conv as C
from ..node import Op
from ..registry import register_composite, register_rule


def _geometry(at, nsp):
    """The Graph methods' geometry arguments (per-axis tuples of nsp) from
    the attributes' tuples of 3."""
    return dict(stride=at.stride[-nsp:], padding=at.padding[-nsp:],
                dilation=at.dilation[-nsp:], groups=at.groups)


def _conv(ns, x, w, at):
    """conv(x, w) with the attributes' geometry (no bias)."""
    nsp = len(x.shape) - 2
    return (ns.conv1d, ns.conv2d, ns.conv3d)[nsp - 1](x, w, None, **_geometry(at, nsp))


def _bias_grad(ns, g):
    """g [N, ``*sp``, C] summed over every axis but the last, in the order of
    ``C.bias_grad`` (rows of k positions, then the k partial sums), which
    the written-out copy calls: one long inner loop per row instead of C
    values at a time."""
    shape = g.shape
    c = shape[-1]
    k = C.wide_row_count(shape)
    rows = 1
    for n in shape[:-1]:
        rows *= n
    total = ns.sum(ns.reshape(g, (rows // k, k * c)), axis=0)
    return ns.sum(ns.reshape(total, (k, c)), axis=0) if k > 1 else total


def _needs_bias(inputs, needs):
    return len(inputs) > 2 and needs[2]


def conv_nd_array(ns, g, inputs, out, at, saved, needs):
    """`conv_nd_rule` written out for arrays: dx, dW and the bias gradient
    in one call of the compute driver, which reads the padded input the
    forward saved (and sums the bias gradient in its weight pass)."""
    x, w = inputs[0], inputs[1]
    need_b = len(inputs) > 2 and needs[2]
    dx, dw, db = C.conv_backward(C.lift_x(g), C.lift_w(w), at.stride, at.padding, at.dilation,
                                 at.groups, x=C.lift_x(x), need_x=needs[0], need_w=needs[1],
                                 need_b=need_b, padded=saved)
    dx = None if dx is None else dx.reshape(x.shape)
    dw = None if dw is None else dw.reshape(w.shape)
    if len(inputs) == 2:
        return dx, dw
    return dx, dw, db


def conv_nd_rule(ns, g, inputs, out, at, saved, needs):
    """(GI(g, w), GW(x, g), the sum of g over positions)."""
    x, w = inputs[0], inputs[1]
    geo = _geometry(at, len(x.shape) - 2)
    gx = ns.conv_grad_input(g, w, x.shape, **geo) if needs[0] else None
    gw = ns.conv_grad_weight(x, g, w.shape, **geo) if needs[1] else None
    if len(inputs) == 2 or not needs[2]:
        return (gx, gw, None)[:len(inputs)]
    # with the weight gradient, conv's backward sums the bias gradient in the
    # same pass (conv_grad_bias: that order); without it, as C.bias_grad
    gb = ns.conv_grad_bias(x, g, w.shape, **geo) if needs[1] else _bias_grad(ns, g)
    return gx, gw, gb


for _op in (Op.CONV1D, Op.CONV2D, Op.CONV3D):
    register_rule(_op, array=conv_nd_array)(conv_nd_rule)


@register_rule(Op.CONV_GRAD_BIAS)
def conv_grad_bias_rule(ns, c, inputs, out, at, saved, needs):
    """For GB(x, g) and its cotangent c [Cout]: db/dg is c at every position
    of g; db does not depend on x."""
    x, g = inputs
    shape = g.shape
    return None, (ns.expand(ns.reshape(c, (1,) * (len(shape) - 1) + (shape[-1],)), shape)
                  if needs[1] else None)


@register_rule(Op.CONV_GRAD_INPUT)
def conv_grad_input_rule(ns, c, inputs, out, at, saved, needs):
    """For GI(g, w) and its cotangent c (x-shaped): dg = conv(c, w), dw = GW(c, g)."""
    g, w = inputs
    geo = _geometry(at, len(g.shape) - 2)
    return (_conv(ns, c, w, at) if needs[0] else None,
            ns.conv_grad_weight(c, g, w.shape, **geo) if needs[1] else None)


@register_rule(Op.CONV_GRAD_WEIGHT)
def conv_grad_weight_rule(ns, c, inputs, out, at, saved, needs):
    """For GW(x, g) and its cotangent c (w-shaped): dx = GI(g, c), dg = conv(x, c)."""
    x, g = inputs
    geo = _geometry(at, len(x.shape) - 2)
    return (ns.conv_grad_input(g, c, x.shape, **geo) if needs[0] else None,
            _conv(ns, x, c, at) if needs[1] else None)


def conv_transpose_nd_rule(ns, g, inputs, out, at, saved, needs):
    """y = GI(x, w): dx = conv(g, w), dw = GW(g, x), the bias the sum of g.

    With output_padding >= stride (allowed below the dilation) conv(g, w)
    has positions past x's, which no input of the transpose feeds: dx is
    cut to x's extents and GW reads x padded with zeros there."""
    x, w = inputs[0], inputs[1]
    nsp = len(x.shape) - 2
    geo = _geometry(at, nsp)
    xsp = tuple(x.shape[1:-1])
    full = tuple(C.out_size(n, k, s, p, d) for n, k, s, p, d in zip(
        g.shape[1:-1], w.shape[:nsp], geo["stride"], geo["padding"], geo["dilation"]))
    extra = tuple(f - n for f, n in zip(full, xsp))
    gx = gw = None
    if needs[0]:
        gx = _conv(ns, g, w, at)
        if any(extra):
            gx = ns.getitem(gx, (slice(None),) + tuple(slice(0, n) for n in xsp))
    if needs[1]:
        xg = ns.pad(x, ((0, 0),) + tuple((0, e) for e in extra) + ((0, 0),)) if any(extra) else x
        gw = ns.conv_grad_weight(g, xg, w.shape, **geo)
    if len(inputs) == 2:
        return gx, gw
    return gx, gw, (_bias_grad(ns, g) if needs[2] else None)


for _op in (Op.CONV_TRANSPOSE1D, Op.CONV_TRANSPOSE2D, Op.CONV_TRANSPOSE3D):
    register_rule(_op)(conv_transpose_nd_rule)


# --------------------------------------------------------------- composites
# Depthwise and deformable convolutions: array rules on their fused kernels
# (never run on the graph), and their forwards said with primitive ops
# (composites): one strided slice (or bilinear sample) of the input per
# kernel tap, times that tap's weights, summed. Under create_graph each
# input gradient is an Op.VJP node: the array rule's bits, the composite's
# derivatives.
def _array_bias_grad(g, needs, k):
    """Sum of g over every axis but the last (or None when input k needs none)."""
    if len(needs) <= k or not needs[k]:
        return None
    return C.bias_grad(g)


@register_rule(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d_array_rule(ns, g, inputs, out, attrs, saved, needs):
    x, w = inputs[0], inputs[1]
    dx = dw = None
    if needs[0] or needs[1]:
        dx, dw = C.depthwise_backward(g, x, w, attrs.stride, attrs.padding, attrs.dilation,
                                      needs[0], needs[1])
    return (dx, dw, _array_bias_grad(g, needs, 2))[:len(inputs)]


@register_rule(Op.DEFORMABLE_CONV2D)
def deformable_conv2d_array_rule(ns, g, inputs, out, attrs, saved, needs):
    x, w, off = inputs[0], inputs[1], inputs[2]
    dx = dw = doff = None
    if needs[0] or needs[1] or needs[2]:
        dx, dw, doff = C.deform_backward(
            np.ascontiguousarray(g), np.ascontiguousarray(x), np.ascontiguousarray(w),
            np.ascontiguousarray(off), attrs.stride, attrs.padding, attrs.dilation,
            bool(needs[0]), bool(needs[1]), bool(needs[2]))
    return (dx, dw, doff, _array_bias_grad(g, needs, 3))[:len(inputs)]


def _tap_slices(G, x, ks, stride, padding, dilation):
    """(padded x, output extents, key per tap) of an N-d window."""
    nsp = len(ks)
    if any(padding):
        x = G.pad(x, ((0, 0),) + tuple((p, p) for p in padding) + ((0, 0),))
    sp = tuple(x.shape[1:1 + nsp])
    out = tuple(C.out_size(sp[i], ks[i], stride[i], 0, dilation[i]) for i in range(nsp))
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


register_composite(Op.DEPTHWISE_CONV2D, _depthwise_composite)
register_composite(Op.DEFORMABLE_CONV2D, _deformable_composite)
