"""Convolution ops: naive NumPy loop references, float64 gradcheck, bad arguments,
multi-chunk paths, thread safety, and (when torch imports) PyTorch comparisons."""
import dataclasses
import threading

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_same_bits_on_threads, check_second_order_float32,
                          check_torch_build, make_op_tests, make_second_order_tests)


# ------------------------------------------------------------ naive references
def _tup(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


def ref_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Grouped N-d cross-correlation, channel-last, one output element at a time."""
    nsp = x.ndim - 2
    st, pd, dl = _tup(stride, nsp), _tup(padding, nsp), _tup(dilation, nsp)
    ksz = w.shape[:nsp]
    cg, cout = w.shape[-2:]
    og = cout // groups
    insz = x.shape[1:-1]
    outsz = [(insz[a] + 2 * pd[a] - dl[a] * (ksz[a] - 1) - 1) // st[a] + 1 for a in range(nsp)]
    y = np.zeros((x.shape[0], *outsz, cout))
    for n in range(x.shape[0]):
        for opos in np.ndindex(*outsz):
            for co in range(cout):
                gi = co // og
                s = 0.0 if b is None else b[co]
                for kpos in np.ndindex(*ksz):
                    ipos = [opos[a] * st[a] - pd[a] + kpos[a] * dl[a] for a in range(nsp)]
                    if all(0 <= ipos[a] < insz[a] for a in range(nsp)):
                        for c in range(cg):
                            s += x[(n, *ipos, gi * cg + c)] * w[(*kpos, c, co)]
                y[(n, *opos, co)] = s
    return y


def ref_depthwise(x, w, b=None, stride=1, padding=0, dilation=1):
    st, pd, dl = _tup(stride, 2), _tup(padding, 2), _tup(dilation, 2)
    n_, h, wd, c_ = x.shape
    kh, kw, _, m_ = w.shape
    oh = (h + 2 * pd[0] - dl[0] * (kh - 1) - 1) // st[0] + 1
    ow = (wd + 2 * pd[1] - dl[1] * (kw - 1) - 1) // st[1] + 1
    y = np.zeros((n_, oh, ow, c_ * m_))
    for n in range(n_):
        for oy in range(oh):
            for ox in range(ow):
                for c in range(c_):
                    for m in range(m_):
                        s = 0.0 if b is None else b[c * m_ + m]
                        for i in range(kh):
                            for j in range(kw):
                                iy = oy * st[0] - pd[0] + i * dl[0]
                                ix = ox * st[1] - pd[1] + j * dl[1]
                                if 0 <= iy < h and 0 <= ix < wd:
                                    s += x[n, iy, ix, c] * w[i, j, c, m]
                        y[n, oy, ox, c * m_ + m] = s
    return y


def ref_conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                         dilation=1):
    """Scatter definition: every input pixel adds x * w at its strided place,
    then the padding is cropped off both sides."""
    st, pd, op_, dl = (_tup(v, 2) for v in (stride, padding, output_padding, dilation))
    n_, h, wd, cin = x.shape
    kh, kw, cog, _ = w.shape
    cig = cin // groups
    full = np.zeros((n_, (h - 1) * st[0] + dl[0] * (kh - 1) + 1 + op_[0],
                     (wd - 1) * st[1] + dl[1] * (kw - 1) + 1 + op_[1], cog * groups))
    for n in range(n_):
        for iy in range(h):
            for ix in range(wd):
                for ci in range(cin):
                    gi = ci // cig
                    for i in range(kh):
                        for j in range(kw):
                            for co in range(cog):
                                full[n, iy * st[0] + i * dl[0], ix * st[1] + j * dl[1],
                                     gi * cog + co] += x[n, iy, ix, ci] * w[i, j, co, ci]
    y = full[:, pd[0]:full.shape[1] - pd[0], pd[1]:full.shape[2] - pd[1]]
    return y if b is None else y + b


def _bilinear(img, py, px):
    """torchvision's bilinear sample of img [H, W, C]: zero outside (-1, H) x (-1, W),
    out-of-image corners contribute zero."""
    h, wd = img.shape[:2]
    if py <= -1 or px <= -1 or py >= h or px >= wd:
        return np.zeros(img.shape[2])
    y0, x0 = int(np.floor(py)), int(np.floor(px))
    ly, lx = py - y0, px - x0
    out = np.zeros(img.shape[2])
    for yy, xx, wt in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x0 + 1, (1 - ly) * lx),
                       (y0 + 1, x0, ly * (1 - lx)), (y0 + 1, x0 + 1, ly * lx)):
        if 0 <= yy < h and 0 <= xx < wd:
            out += wt * img[yy, xx]
    return out


def ref_deform(x, w, off, b=None, stride=1, padding=0, dilation=1):
    st, pd, dl = _tup(stride, 2), _tup(padding, 2), _tup(dilation, 2)
    kh, kw, _, cout = w.shape
    n_, oh, ow, _ = off.shape
    y = np.zeros((n_, oh, ow, cout))
    for n in range(n_):
        for oy in range(oh):
            for ox in range(ow):
                acc = np.zeros(cout) if b is None else np.array(b, dtype=float)
                for i in range(kh):
                    for j in range(kw):
                        k = i * kw + j
                        py = oy * st[0] - pd[0] + i * dl[0] + off[n, oy, ox, 2 * k]
                        px = ox * st[1] - pd[1] + j * dl[1] + off[n, oy, ox, 2 * k + 1]
                        acc += _bilinear(x[n], py, px) @ w[i, j]
                y[n, oy, ox] = acc
    return y


# ------------------------------------------------------------ inputs
def _offsets(shape, spread=2):
    """Offsets k + f with integer k in [-spread-1, spread] and fraction f in
    [0.15, 0.85]: samples are never within 0.15 of a grid line (where the
    bilinear interpolation has a kink), and many fall partly or wholly
    outside the image."""
    def make(rng):
        k = rng.integers(-spread - 1, spread + 1, size=shape)
        return k + rng.uniform(0.15, 0.85, size=shape)
    return make


def _deform_inputs(xs, ws, offs, bias=None):
    def make(rng):
        arrs = [rng.uniform(-2, 2, xs), rng.uniform(-2, 2, ws), _offsets(offs)(rng)]
        if bias is not None:
            arrs.append(rng.uniform(-2, 2, bias))
        return arrs
    return make


# ------------------------------------------------------------ PyTorch twins
# torch_build of each row: the same function of the same arrays in PyTorch,
# channel-last arrays moved to channel-first and weights to [Cout, Cin/g, *K].
def _cf(x):
    return x.movedim(-1, 1)


def _cl(y):
    return y.movedim(1, -1)


def _oik(w):
    """w [*K, Cin/groups, Cout] -> PyTorch's [Cout, Cin/groups, *K]."""
    nk = w.dim() - 2
    return w.permute(nk + 1, nk, *range(nk))


def t_conv(stride=1, padding=0, dilation=1, groups=1):
    def build(t, x, w, b=None):
        conv = {3: t.nn.functional.conv1d, 4: t.nn.functional.conv2d,
                5: t.nn.functional.conv3d}[x.dim()]
        return _cl(conv(_cf(x), _oik(w), b, stride, padding, dilation, groups))
    return build


def t_depthwise(stride=1, padding=0, dilation=1):
    """w [KH, KW, C, M] (output channel c*M + m) -> [C*M, 1, KH, KW], groups=C."""
    def build(t, x, w, b=None):
        kh, kw, c, m = w.shape
        tw = w.reshape(kh, kw, c * m).permute(2, 0, 1).unsqueeze(1)
        return _cl(t.nn.functional.conv2d(_cf(x), tw, b, stride, padding, dilation, c))
    return build


def t_conv_transpose(stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """w [KH, KW, Cout/groups, Cin] -> PyTorch's [Cin, Cout/groups, KH, KW]."""
    def build(t, x, w, b=None):
        return _cl(t.nn.functional.conv_transpose2d(_cf(x), w.permute(3, 2, 0, 1), b, stride,
                                                    padding, output_padding, groups, dilation))
    return build


def t_deform(stride=1, padding=0, dilation=1):
    """torchvision's deform_conv2d (not installed here) with grid_sample: tap
    (i, j) samples x bilinearly at its offset positions (pixel p is grid
    (2p + 1) / W - 1 with align_corners=False; zero padding is torchvision's
    zero outside (-1, H) x (-1, W) and at out-of-image corners), times w[i, j]."""
    st, pd, dl = _tup(stride, 2), _tup(padding, 2), _tup(dilation, 2)

    def build(t, x, w, off, b=None):
        n, h, wd, _ = x.shape
        kh, kw = w.shape[:2]
        oh, ow = off.shape[1:3]
        ys = (t.arange(oh, dtype=x.dtype) * st[0] - pd[0])[None, :, None]
        xs = (t.arange(ow, dtype=x.dtype) * st[1] - pd[1])[None, None, :]
        out = 0.0
        for i in range(kh):
            for j in range(kw):
                k = i * kw + j
                py = ys + i * dl[0] + off[..., 2 * k]
                px = xs + j * dl[1] + off[..., 2 * k + 1]
                grid = t.stack([(2 * px + 1) / wd - 1, (2 * py + 1) / h - 1], -1)
                sample = t.nn.functional.grid_sample(_cf(x), grid, mode="bilinear",
                                                     padding_mode="zeros", align_corners=False)
                out = out + _cl(sample) @ w[i, j]
        return out if b is None else out + b
    return build


def _row(op, build, shapes, ref, name, **kw):
    return OpCase(op, build, shapes, ref, name=name, fwd_atol32=1e-4, **kw)


C1, C2, C3 = Op.CONV1D, Op.CONV2D, Op.CONV3D
DW, CT, DF = Op.DEPTHWISE_CONV2D, Op.CONV_TRANSPOSE2D, Op.DEFORMABLE_CONV2D

CASES = [
    # conv1d
    _row(C1, lambda g, x, w: g.conv1d(x, w), [(2, 7, 2), (3, 2, 3)],
         lambda x, w: ref_conv(x, w), "conv1d_basic", torch_build=t_conv()),
    _row(C1, lambda g, x, w, b: g.conv1d(x, w, b, stride=2, padding=1, dilation=2),
         [(2, 9, 2), (3, 2, 3), (3,)],
         lambda x, w, b: ref_conv(x, w, b, 2, 1, 2), "conv1d_stride_pad_dilation_bias", torch_build=t_conv(2, 1, 2)),
    _row(C1, lambda g, x, w, b: g.conv1d(x, w, b, padding=(2,), groups=2),
         [(1, 5, 4), (2, 2, 6), (6,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 2, 1, 2), "conv1d_groups_batch1", torch_build=t_conv(1, 2, 1, 2)),
    _row(C1, lambda g, x, w: g.conv1d(x, w, stride=2, padding=1, groups=2), [(2, 7, 2), (3, 1, 4)],
         lambda x, w: ref_conv(x, w, None, 2, 1, 1, 2), "conv1d_groups_cin_depthwise_form",
         torch_build=t_conv(2, 1, 1, 2)),
    _row(C1, lambda g, x, w, b: g.conv1d(x, w, b, padding=2), [(2, 6, 3), (5, 3, 2), (2,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 2), "conv1d_k15_padded_rows", torch_build=t_conv(1, 2)),
    _row(C1, lambda g, x, w: g.conv1d(x, w), [(2, 5, 3), (1, 3, 4)],
         lambda x, w: ref_conv(x, w), "conv1d_pointwise", torch_build=t_conv()),
    _row(C1, lambda g, x, w: g.conv1d_nlc(x, w, None, 3), [(2, 8, 2), (2, 2, 2)],
         lambda x, w: ref_conv(x, w, None, 3), "conv1d_nlc_alias_stride3", torch_build=t_conv(3)),
    # conv2d
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, padding=1), [(2, 4, 4, 2), (3, 3, 2, 3), (3,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 1), "conv2d_3x3_pad1_bias", torch_build=t_conv(1, 1)),
    _row(C2, lambda g, x, w: g.conv2d(x, w, padding=1), [(1, 4, 4, 3), (3, 3, 3, 2)],
         lambda x, w: ref_conv(x, w, None, 1, 1), "conv2d_rgb_3x3_padded_rows", torch_build=t_conv(1, 1)),
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
         [(2, 6, 4, 2), (3, 2, 2, 3), (3,)],
         lambda x, w, b: ref_conv(x, w, b, (2, 1), (1, 2), (2, 1)),
         "conv2d_nonsquare_stride_pad_dilation", torch_build=t_conv((2, 1), (1, 2), (2, 1))),
    _row(C2, lambda g, x, w: g.conv2d(x, w, stride=2, padding=1, groups=2),
         [(2, 5, 5, 4), (3, 3, 2, 4)],
         lambda x, w: ref_conv(x, w, None, 2, 1, 1, 2), "conv2d_groups2_stride2", torch_build=t_conv(2, 1, 1, 2)),
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, groups=2), [(2, 3, 3, 4), (1, 1, 2, 6), (6,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 0, 1, 2), "conv2d_pointwise_groups", torch_build=t_conv(1, 0, 1, 2)),
    # groups == Cin: the depthwise form (yscv/compute/conv.py runs it on the depthwise kernel)
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2), groups=3),
         [(2, 5, 6, 3), (3, 2, 1, 3), (3,)],
         lambda x, w, b: ref_conv(x, w, b, 2, 1, (1, 2), 3), "conv2d_groups_cin_depthwise_form",
         torch_build=t_conv(2, 1, (1, 2), 3)),
    _row(C2, lambda g, x, w: g.conv2d(x, w, padding=(0, 1), groups=2), [(1, 4, 4, 2), (3, 3, 1, 6)],
         lambda x, w: ref_conv(x, w, None, 1, (0, 1), 1, 2), "conv2d_groups_cin_multiplier3",
         torch_build=t_conv(1, (0, 1), 1, 2)),
    _row(C2, lambda g, x, w: g.conv2d(x, w, stride=2), [(1, 5, 5, 3), (1, 1, 3, 2)],
         lambda x, w: ref_conv(x, w, None, 2), "conv2d_1x1_stride2", torch_build=t_conv(2)),
    _row(C2, lambda g, x, w: g.conv2d(x, w), [(1, 3, 4, 2), (3, 4, 2, 2)],
         lambda x, w: ref_conv(x, w), "conv2d_kernel_covers_input_batch1", torch_build=t_conv()),
    _row(C2, lambda g, x, w, b: g.conv2d_nhwc(x, w, b, (1, 2), (0, 1), 1, 1),
         [(2, 3, 5, 2), (2, 3, 2, 2), (2,)],
         lambda x, w, b: ref_conv(x, w, b, (1, 2), (0, 1)), "conv2d_nhwc_alias", torch_build=t_conv((1, 2), (0, 1))),
    # conv3d
    _row(C3, lambda g, x, w, b: g.conv3d(x, w, b, padding=1), [(1, 3, 3, 3, 2), (2, 2, 2, 2, 2), (2,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 1), "conv3d_pad_bias", torch_build=t_conv(1, 1)),
    _row(C3, lambda g, x, w: g.conv3d(x, w, stride=(1, 2, 1), padding=(1, 0, 1),
                                      dilation=(2, 1, 1), groups=2),
         [(2, 3, 4, 2, 2), (2, 2, 1, 1, 4)],
         lambda x, w: ref_conv(x, w, None, (1, 2, 1), (1, 0, 1), (2, 1, 1), 2),
         "conv3d_stride_dilation_groups", torch_build=t_conv((1, 2, 1), (1, 0, 1), (2, 1, 1), 2)),
    _row(C3, lambda g, x, w: g.conv3d_ndhwc(x, w, None, 2), [(1, 4, 3, 3, 1), (2, 1, 2, 1, 2)],
         lambda x, w: ref_conv(x, w, None, 2), "conv3d_ndhwc_alias", torch_build=t_conv(2)),
    # direct tiles (yscv/compute/conv_direct.py): output channels in whole
    # vectors (16 float32 / 8 float64 values) -- forward and dW; input
    # channels too, with stride 1 -- dx
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, padding=1),
         [(2, 3, 4, 16), (3, 3, 16, 16), (16,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 1), "direct_conv2d_3x3_pad1_bias", torch_build=t_conv(1, 1)),
    _row(C2, lambda g, x, w: g.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
         [(2, 5, 4, 3), (3, 2, 3, 16)],
         lambda x, w: ref_conv(x, w, None, (2, 1), (1, 2), (1, 2)),
         "direct_conv2d_stride_pad_dilation_cin3", torch_build=t_conv((2, 1), (1, 2), (1, 2))),
    _row(C2, lambda g, x, w: g.conv2d(x, w, padding=(2, 1), dilation=2),
         [(1, 5, 4, 8), (2, 2, 8, 24)],
         lambda x, w: ref_conv(x, w, None, 1, (2, 1), 2), "direct_conv2d_dilation2_cout24", torch_build=t_conv(1, (2, 1), 2)),
    _row(C1, lambda g, x, w, b: g.conv1d(x, w, b, stride=2, padding=1, dilation=2),
         [(2, 9, 2), (3, 2, 16), (16,)],
         lambda x, w, b: ref_conv(x, w, b, 2, 1, 2), "direct_conv1d_stride_pad_dilation_bias", torch_build=t_conv(2, 1, 2)),
    _row(C3, lambda g, x, w, b: g.conv3d(x, w, b, padding=(1, 0, 1)),
         [(1, 3, 3, 4, 8), (2, 2, 3, 8, 8), (8,)],
         lambda x, w, b: ref_conv(x, w, b, 1, (1, 0, 1)), "direct_conv3d_pad_bias", torch_build=t_conv(1, (1, 0, 1))),
    _row(CT, lambda g, x, w, b: g.conv_transpose2d(x, w, b, padding=1),
         [(1, 3, 3, 16), (3, 3, 16, 16), (16,)],
         lambda x, w, b: ref_conv_transpose2d(x, w, b, 1, 1), "direct_conv_transpose2d_pad1_bias", torch_build=t_conv_transpose(1, 1)),
    _row(CT, lambda g, x, w: g.conv_transpose2d(x, w, output_padding=1, dilation=2),
         [(1, 3, 2, 8), (2, 2, 8, 8)],
         lambda x, w: ref_conv_transpose2d(x, w, None, 1, 0, 1, 1, 2),
         "direct_conv_transpose2d_dilation_outpad", torch_build=t_conv_transpose(1, 0, 1, 1, 2)),
    # 6 x 4-vector tiles (float64: 32 channels = four vectors) and, for 40
    # channels (not whole fours), the 8-row tiles; every pass
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, padding=1),
         [(1, 3, 4, 32), (3, 3, 32, 32), (32,)],
         lambda x, w, b: ref_conv(x, w, b, 1, 1), "direct_conv2d_wide_tiles_cout32_bias", torch_build=t_conv(1, 1)),
    _row(C2, lambda g, x, w, b: g.conv2d(x, w, b, stride=(1, 2), padding=(1, 0)),
         [(1, 4, 5, 40), (2, 2, 40, 40), (40,)],
         lambda x, w, b: ref_conv(x, w, b, (1, 2), (1, 0)), "direct_conv2d_wide_and_narrow_cout40", torch_build=t_conv((1, 2), (1, 0))),
    # depthwise
    _row(DW, lambda g, x, w, b: g.depthwise_conv2d(x, w, b, padding=1),
         [(2, 4, 4, 3), (3, 3, 3, 1), (3,)],
         lambda x, w, b: ref_depthwise(x, w, b, 1, 1), "depthwise_3x3_m1_bias", torch_build=t_depthwise(1, 1)),
    _row(DW, lambda g, x, w: g.depthwise_conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
         [(2, 5, 5, 2), (2, 2, 2, 2)],
         lambda x, w: ref_depthwise(x, w, None, (2, 1), (1, 0), (1, 2)),
         "depthwise_multiplier2_stride_dilation", torch_build=t_depthwise((2, 1), (1, 0), (1, 2))),
    _row(DW, lambda g, x, w, b: g.depthwise_conv2d(x, w, b), [(1, 3, 4, 2), (3, 2, 2, 3), (6,)],
         lambda x, w, b: ref_depthwise(x, w, b), "depthwise_nonsquare_batch1_m3", torch_build=t_depthwise()),
    _row(DW, lambda g, x, w: g.depthwise_conv2d_nhwc(x, w, None, 2, 1), [(2, 4, 4, 2), (3, 3, 2, 1)],
         lambda x, w: ref_depthwise(x, w, None, 2, 1), "depthwise_nhwc_alias", torch_build=t_depthwise(2, 1)),
    # conv_transpose2d
    _row(CT, lambda g, x, w, b: g.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
         [(2, 3, 3, 2), (3, 3, 2, 2), (2,)],
         lambda x, w, b: ref_conv_transpose2d(x, w, b, 2, 1, 1), "conv_transpose2d_stride2_outpad1_bias", torch_build=t_conv_transpose(2, 1, 1)),
    _row(CT, lambda g, x, w: g.conv_transpose2d(x, w, stride=(2, 3), padding=(0, 1),
                                                output_padding=(1, 2)),
         [(1, 3, 2, 2), (2, 3, 3, 2)],
         lambda x, w: ref_conv_transpose2d(x, w, None, (2, 3), (0, 1), (1, 2)),
         "conv_transpose2d_nonsquare_stride_outpad", torch_build=t_conv_transpose((2, 3), (0, 1), (1, 2))),
    _row(CT, lambda g, x, w: g.conv_transpose2d(x, w, output_padding=1, groups=2, dilation=2),
         [(2, 3, 2, 4), (2, 2, 1, 4)],
         lambda x, w: ref_conv_transpose2d(x, w, None, 1, 0, 1, 2, 2),
         "conv_transpose2d_groups_dilation_outpad_lt_dilation", torch_build=t_conv_transpose(1, 0, 1, 2, 2)),
    _row(CT, lambda g, x, w, b: g.conv_transpose2d(x, w, b), [(1, 3, 3, 3), (1, 1, 2, 3), (2,)],
         lambda x, w, b: ref_conv_transpose2d(x, w, b), "conv_transpose2d_pointwise_batch1", torch_build=t_conv_transpose()),
    _row(CT, lambda g, x, w: g.conv_transpose2d_nhwc(x, w, None, 2, 1), [(2, 2, 3, 2), (4, 3, 2, 2)],
         lambda x, w: ref_conv_transpose2d(x, w, None, 2, 1), "conv_transpose2d_nhwc_alias", torch_build=t_conv_transpose(2, 1)),
    # deformable (fractional offsets, many samples partly or wholly outside the image)
    _row(DF, lambda g, x, w, o, b: g.deformable_conv2d(x, w, o, b), (),
         lambda x, w, o, b: ref_deform(x, w, o, b), "deformable_fractional_bias", torch_build=t_deform(),
         inputs=_deform_inputs((1, 4, 4, 2), (2, 2, 2, 2), (1, 3, 3, 8), (2,))),
    _row(DF, lambda g, x, w, o: g.deformable_conv2d(x, w, o, stride=2, padding=1), (),
         lambda x, w, o: ref_deform(x, w, o, None, 2, 1), "deformable_stride_pad_nonsquare_batch2", torch_build=t_deform(2, 1),
         inputs=_deform_inputs((2, 3, 4, 1), (2, 3, 1, 2), (2, 2, 2, 12))),
    _row(DF, lambda g, x, w, o: g.deformable_conv2d(x, w, o, padding=(0, 1), dilation=(1, 2)), (),
         lambda x, w, o: ref_deform(x, w, o, None, 1, (0, 1), (1, 2)), "deformable_dilation", torch_build=t_deform(1, (0, 1), (1, 2)),
         inputs=_deform_inputs((1, 3, 4, 1), (2, 2, 1, 2), (1, 2, 4, 8))),
    _row(DF, lambda g, x, w, o: g.deformable_conv2d_nhwc(x, w, o, None, 1, 1), (),
         lambda x, w, o: ref_deform(x, w, o, None, 1, 1), "deformable_nhwc_alias", torch_build=t_deform(1, 1),
         inputs=_deform_inputs((1, 2, 3, 2), (3, 3, 2, 1), (1, 2, 3, 18))),
]


# Second order (SPEC section 9): gradgradcheck's finite differences of first
# derivatives cost a composite build per element, so the direct-tile rows
# (channels in whole vectors, which only the first-order kernels care about)
# are compared with PyTorch's double backward as they are, and checked by
# finite differences on a small twin with the same options (or on the row
# above with the same options).
_SAME_OPTIONS = {
    "direct_conv2d_3x3_pad1_bias": "conv2d_3x3_pad1_bias",
    "direct_conv2d_wide_tiles_cout32_bias": "conv2d_3x3_pad1_bias",
}
_TWINS = {   # the twin's shapes, or its inputs(rng)
    "direct_conv2d_stride_pad_dilation_cin3": [(1, 5, 4, 2), (3, 2, 2, 2)],
    "direct_conv2d_dilation2_cout24": [(1, 5, 4, 2), (2, 2, 2, 3)],
    "direct_conv3d_pad_bias": [(1, 3, 3, 4, 1), (2, 2, 3, 1, 2), (2,)],
    "direct_conv_transpose2d_pad1_bias": [(1, 3, 3, 2), (3, 3, 2, 2), (2,)],
    "direct_conv_transpose2d_dilation_outpad": [(1, 3, 2, 2), (2, 2, 2, 2)],
    "direct_conv2d_wide_and_narrow_cout40": [(1, 4, 5, 2), (2, 2, 2, 3), (3,)],
    # the slowest of the rest (batch 2 is covered by the other rows): batch 1
    "conv2d_groups2_stride2": [(1, 5, 5, 4), (3, 3, 2, 4)],
    "conv3d_stride_dilation_groups": [(1, 3, 4, 2, 2), (2, 2, 1, 1, 4)],
    "conv_transpose2d_stride2_outpad1_bias": [(1, 3, 3, 2), (3, 3, 2, 2), (2,)],
    "conv_transpose2d_groups_dilation_outpad_lt_dilation": [(1, 3, 2, 4), (2, 2, 1, 4)],
    "conv_transpose2d_nhwc_alias": [(1, 2, 3, 2), (4, 3, 2, 2)],
    "deformable_stride_pad_nonsquare_batch2": _deform_inputs((1, 3, 4, 1), (2, 3, 1, 2),
                                                             (1, 2, 2, 12)),
    # nine deformable taps with 18 offset channels: one output row
    "deformable_nhwc_alias": _deform_inputs((1, 1, 3, 1), (3, 3, 1, 1), (1, 1, 3, 18)),
}


def _second_order_rows(cases):
    rows = []
    for c in cases:
        if c.id in _SAME_OPTIONS:
            rows.append(dataclasses.replace(
                c, check_grad2=False, grad2_why=f"second order on {_SAME_OPTIONS[c.id]}"))
        elif c.id in _TWINS:
            twin = _TWINS[c.id]
            rows.append(dataclasses.replace(c, check_grad2=False,
                                            grad2_why=f"second order on {c.id}_small"))
            rows.append(dataclasses.replace(c, name=f"{c.id}_small",
                                            **({"inputs": twin} if callable(twin) else
                                               {"shapes": twin})))
        else:
            rows.append(c)
    return rows


CASES = _second_order_rows(CASES)


# ------------------------------------------------------------ bad arguments
def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


def _bad(op, name, shapes, call, exc=ValueError, match=None):
    return BadCase(op, name, _leaves(*shapes), call, exc, match or op.name.lower())


X4, W4 = (2, 5, 5, 4), (3, 3, 4, 6)
BIG = 2 ** 63   # one more than the largest array index
BAD = [
    # conv1d
    _bad(C1, "conv1d_x_rank", [(5, 4), (3, 4, 2)], lambda g, x, w: g.conv1d(x, w), yscv.ShapeError),
    _bad(C1, "conv1d_channel_mismatch", [(2, 5, 4), (3, 3, 2)], lambda g, x, w: g.conv1d(x, w),
         yscv.ShapeError, "conv1d: w has 3 input channels"),
    _bad(C1, "conv1d_kernel_too_large", [(2, 3, 2), (4, 2, 2)], lambda g, x, w: g.conv1d(x, w),
         ValueError, "larger than the padded input"),
    _bad(C1, "conv1d_stride_tuple_length", [(2, 5, 2), (3, 2, 2)],
         lambda g, x, w: g.conv1d(x, w, stride=(1, 1)), TypeError, "stride"),
    # conv2d
    _bad(C2, "conv2d_w_rank", [X4, (3, 3, 4)], lambda g, x, w: g.conv2d(x, w), yscv.ShapeError),
    _bad(C2, "conv2d_negative_stride", [X4, W4], lambda g, x, w: g.conv2d(x, w, stride=-1),
         ValueError, "conv2d: stride=-1"),
    _bad(C2, "conv2d_zero_stride", [X4, W4], lambda g, x, w: g.conv2d(x, w, stride=(1, 0)),
         ValueError, "stride"),
    _bad(C2, "conv2d_negative_padding", [X4, W4], lambda g, x, w: g.conv2d(x, w, padding=-1),
         ValueError, "padding"),
    _bad(C2, "conv2d_zero_dilation", [X4, W4], lambda g, x, w: g.conv2d(x, w, dilation=0),
         ValueError, "dilation"),
    _bad(C2, "conv2d_kernel_larger_than_padded_input", [(1, 2, 2, 4), W4],
         lambda g, x, w: g.conv2d(x, w), ValueError, "larger than the padded input"),
    _bad(C2, "conv2d_dilated_kernel_too_large", [X4, W4],
         lambda g, x, w: g.conv2d(x, w, padding=0, dilation=3), ValueError, "dilation 3"),
    _bad(C2, "conv2d_groups_in_channels", [(2, 5, 5, 5), (3, 3, 1, 6)],
         lambda g, x, w: g.conv2d(x, w, groups=2), ValueError, "input channels 5"),
    _bad(C2, "conv2d_groups_out_channels", [X4, (3, 3, 2, 5)],
         lambda g, x, w: g.conv2d(x, w, groups=2), ValueError, "output channels 5"),
    _bad(C2, "conv2d_groups_zero", [X4, W4], lambda g, x, w: g.conv2d(x, w, groups=0),
         ValueError, "groups=0"),
    _bad(C2, "conv2d_groups_float", [X4, W4], lambda g, x, w: g.conv2d(x, w, groups=1.0),
         TypeError, "groups"),
    _bad(C2, "conv2d_channel_mismatch", [X4, (3, 3, 3, 6)], lambda g, x, w: g.conv2d(x, w),
         yscv.ShapeError, "expected w.shape"),
    _bad(C2, "conv2d_bias_size", [X4, W4, (5,)], lambda g, x, w, b: g.conv2d(x, w, b),
         yscv.ShapeError, "bias"),
    _bad(C2, "conv2d_complex_x", [W4], lambda g, w: g.conv2d(np.ones(X4) * 1j, w),
         TypeError, "conv2d"),
    # conv3d
    _bad(C3, "conv3d_x_rank", [X4, (1, 3, 3, 4, 6)], lambda g, x, w: g.conv3d(x, w),
         yscv.ShapeError, "NDHWC"),
    _bad(C3, "conv3d_kernel_too_deep", [(1, 2, 4, 4, 2), (3, 1, 1, 2, 2)],
         lambda g, x, w: g.conv3d(x, w), ValueError, "along D"),
    # depthwise
    _bad(DW, "depthwise_channel_mismatch", [X4, (3, 3, 3, 2)],
         lambda g, x, w: g.depthwise_conv2d(x, w), yscv.ShapeError, "w.shape"),
    _bad(DW, "depthwise_bias_size", [X4, (3, 3, 4, 2), (4,)],
         lambda g, x, w, b: g.depthwise_conv2d(x, w, b), yscv.ShapeError, "C\\*M"),
    _bad(DW, "depthwise_kernel_too_large", [(1, 2, 2, 4), (3, 3, 4, 1)],
         lambda g, x, w: g.depthwise_conv2d(x, w), ValueError, "larger than the padded input"),
    _bad(DW, "depthwise_negative_stride", [X4, (3, 3, 4, 1)],
         lambda g, x, w: g.depthwise_conv2d(x, w, stride=-2), ValueError, "stride"),
    # conv_transpose2d
    _bad(CT, "conv_transpose2d_output_padding_ge_stride", [X4, (3, 3, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, stride=2, output_padding=2),
         ValueError, "output_padding"),
    _bad(CT, "conv_transpose2d_output_padding_stride1", [X4, (3, 3, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, output_padding=(0, 1)),
         ValueError, "output_padding"),
    _bad(CT, "conv_transpose2d_output_size_nonpositive", [(1, 1, 1, 4), (1, 1, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, padding=1), ValueError, "output size"),
    _bad(CT, "conv_transpose2d_channel_mismatch", [X4, (3, 3, 2, 3)],
         lambda g, x, w: g.conv_transpose2d(x, w), yscv.ShapeError, "w.shape\\[3\\]"),
    _bad(CT, "conv_transpose2d_groups", [(2, 3, 3, 3), (3, 3, 2, 3)],
         lambda g, x, w: g.conv_transpose2d(x, w, groups=2), ValueError, "groups"),
    _bad(CT, "conv_transpose2d_bias_size", [X4, (3, 3, 2, 4), (3,)],
         lambda g, x, w, b: g.conv_transpose2d(x, w, b), yscv.ShapeError, "bias"),
    _bad(CT, "conv_transpose2d_negative_padding", [X4, (3, 3, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, padding=(-1, 0)), ValueError, "padding"),
    # deformable
    _bad(DF, "deformable_offsets_shape", [(1, 4, 4, 2), (3, 3, 2, 2), (1, 4, 4, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o), yscv.ShapeError, "offsets"),
    _bad(DF, "deformable_offsets_channels", [(1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 9)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o), yscv.ShapeError, "offsets"),
    _bad(DF, "deformable_channel_mismatch", [(1, 4, 4, 2), (3, 3, 3, 2), (1, 2, 2, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o), yscv.ShapeError, "w.shape\\[2\\]"),
    _bad(DF, "deformable_bias_size", [(1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 18), (3,)],
         lambda g, x, w, o, b: g.deformable_conv2d(x, w, o, b), yscv.ShapeError, "bias"),
    _bad(DF, "deformable_zero_stride", [(1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o, stride=0), ValueError, "stride"),
    _bad(DF, "deformable_kernel_too_large", [(1, 2, 2, 2), (3, 3, 2, 2), (1, 1, 1, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o), ValueError, "larger than the padded"),
    # int arguments beyond an array index, sizes beyond any array (issue 12.8): a ValueError
    # naming the op and the argument, not a Numba TypingError, an OverflowError or NumPy's
    # "array is too big" / "Maximum allowed dimension exceeded"
    _bad(C1, "conv1d_stride_2pow63", [(2, 5, 2), (3, 2, 2)],
         lambda g, x, w: g.conv1d(x, w, stride=BIG), ValueError, f"conv1d: stride={BIG} is too large"),
    _bad(C1, "conv1d_padding_2pow64", [(2, 5, 2), (3, 2, 2)],
         lambda g, x, w: g.conv1d(x, w, padding=2 * BIG), ValueError, "conv1d: padding=.* too large"),
    _bad(C2, "conv2d_stride_2pow63", [X4, W4], lambda g, x, w: g.conv2d(x, w, stride=(1, BIG)),
         ValueError, rf"conv2d: stride=\(1, {BIG}\) is too large: {BIG} does not fit"),
    _bad(C2, "conv2d_padding_2pow63", [X4, W4], lambda g, x, w: g.conv2d(x, w, padding=BIG),
         ValueError, f"conv2d: padding={BIG} is too large"),
    _bad(C2, "conv2d_dilation_uint64", [X4, W4],
         lambda g, x, w: g.conv2d(x, w, dilation=np.uint64(BIG)), ValueError, "conv2d: dilation="),
    _bad(C2, "conv2d_padded_input_beyond_index", [X4, W4],
         lambda g, x, w: g.conv2d(x, w, padding=(0, BIG // 2)), ValueError,
         "conv2d: padding=4611686018427387904 along W gives a padded input of "),
    _bad(C2, "conv2d_padding_1e7_output_beyond_any_array", [(1, 4, 4, 1), (1, 1, 1, 8192)],
         lambda g, x, w: g.conv2d(x, w, padding=10 ** 7), ValueError,
         r"conv2d: stride=\(1, 1\), padding=\(10000000, 10000000\), dilation=\(1, 1\) gives "
         r"an output of shape \(1, 20000004, 20000004, 8192\)"),
    _bad(C2, "conv2d_padding_1e7_small_image_beyond_memory", [(1, 4, 4, 1), (3, 3, 1, 2)],
         lambda g, x, w: g.conv2d(x, w, padding=10 ** 7), ValueError,
         r"conv2d: stride=\(1, 1\), padding=\(10000000, 10000000\), dilation=\(1, 1\) gives "
         r"an output of shape \(1, 20000002, 20000002, 2\) .* more than this machine's memory"),
    _bad(C3, "conv3d_stride_2pow63", [(1, 3, 3, 3, 2), (1, 1, 1, 2, 2)],
         lambda g, x, w: g.conv3d(x, w, stride=BIG), ValueError, "conv3d: stride=.* too large"),
    _bad(C3, "conv3d_padding_1e7_output_beyond_any_array", [(1, 3, 3, 3, 2), (1, 1, 1, 2, 2)],
         lambda g, x, w: g.conv3d(x, w, padding=10 ** 7), ValueError,
         "conv3d: .*padding=.* gives an output of shape"),
    _bad(DW, "depthwise_stride_2pow63", [X4, (3, 3, 4, 1)],
         lambda g, x, w: g.depthwise_conv2d(x, w, stride=BIG), ValueError,
         "depthwise_conv2d: stride=.* too large"),
    _bad(DW, "depthwise_padding_2pow63", [X4, (3, 3, 4, 1)],
         lambda g, x, w: g.depthwise_conv2d(x, w, padding=(BIG, 0)), ValueError,
         "depthwise_conv2d: padding=.* too large"),
    _bad(DW, "depthwise_padding_1e9_output_beyond_any_array", [X4, (3, 3, 4, 1)],
         lambda g, x, w: g.depthwise_conv2d(x, w, padding=10 ** 9), ValueError,
         "depthwise_conv2d: .*padding=.* gives an output of shape"),
    _bad(CT, "conv_transpose2d_stride_2pow63", [X4, (3, 3, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, stride=BIG), ValueError,
         "conv_transpose2d: stride=.* too large"),
    _bad(CT, "conv_transpose2d_padding_2pow63", [X4, (3, 3, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, padding=BIG), ValueError,
         "conv_transpose2d: padding=.* too large"),
    _bad(CT, "conv_transpose2d_stride_1e10_output_beyond_any_array", [X4, (3, 3, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, stride=10 ** 10), ValueError,
         "conv_transpose2d: stride=.* gives an output of shape"),
    _bad(CT, "conv_transpose2d_padded_output_beyond_index", [X4, (1, 1, 2, 4)],
         lambda g, x, w: g.conv_transpose2d(x, w, stride=BIG // 2, padding=BIG // 2), ValueError,
         "conv_transpose2d: .* padded output extent"),
    _bad(DF, "deformable_stride_2pow63", [(1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o, stride=BIG), ValueError,
         "deformable_conv2d: stride=.* too large"),
    _bad(DF, "deformable_padding_2pow63", [(1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o, padding=BIG), ValueError,
         "deformable_conv2d: padding=.* too large"),
    _bad(DF, "deformable_padding_1e9_output_beyond_any_array",
         [(1, 4, 4, 2), (3, 3, 2, 2), (1, 2, 2, 18)],
         lambda g, x, w, o: g.deformable_conv2d(x, w, o, padding=10 ** 9), ValueError,
         "deformable_conv2d: .*padding=.* gives an output of shape"),
]


# The convolution's gradients as ops (recorded by create_graph=True): NumPy
# references through the linearity of ref_conv (one basis vector at a time).
GI, GW, GB = Op.CONV_GRAD_INPUT, Op.CONV_GRAD_WEIGHT, Op.CONV_GRAD_BIAS


def ref_conv_grad_input(g, w, x_shape, **kw):
    out = np.zeros(x_shape)
    for i in np.ndindex(*x_shape):
        e = np.zeros(x_shape)
        e[i] = 1.0
        out[i] = np.sum(ref_conv(e, w, **kw) * g)
    return out


def ref_conv_grad_weight(x, g, w_shape, **kw):
    out = np.zeros(w_shape)
    for i in np.ndindex(*w_shape):
        e = np.zeros(w_shape)
        e[i] = 1.0
        out[i] = np.sum(ref_conv(x, e, **kw) * g)
    return out


def _torch_grad_op(kind, nsp, shape, **kw):
    """torch.nn.grad.conv{n}d_input / _weight on channel-last arrays."""
    def build(t, a, b):
        to_cf = lambda z: z.permute(0, nsp + 1, *range(1, nsp + 1))
        to_cl = lambda z: z.permute(0, *range(2, nsp + 2), 1)
        w_cf = lambda z: z.permute(nsp + 1, nsp, *range(nsp))
        w_cl = lambda z: z.permute(*range(2, nsp + 2), 1, 0)
        fn = getattr(t.nn.grad, f"conv{nsp}d_{kind}")
        if kind == "input":   # a = grad, b = w
            xs = (shape[0], shape[-1]) + tuple(shape[1:-1])
            return to_cl(fn(xs, w_cf(b), to_cf(a), **kw))
        ws = (shape[-1], shape[-2]) + tuple(shape[:-2])   # a = x, b = grad
        return w_cl(fn(to_cf(a), ws, to_cf(b), **kw))
    return build


CASES += [
    _row(GI, lambda g, gr, w: g.conv_grad_input(gr, w, (2, 5, 5, 2), stride=2, padding=1),
         [(2, 3, 3, 3), (3, 3, 2, 3)],
         lambda gr, w: ref_conv_grad_input(gr, w, (2, 5, 5, 2), stride=2, padding=1),
         "conv_grad_input_2d_stride_pad",
         torch_build=_torch_grad_op("input", 2, (2, 5, 5, 2), stride=2, padding=1)),
    _row(GI, lambda g, gr, w: g.conv_grad_input(gr, w, (1, 6, 4), dilation=2, groups=2),
         [(1, 2, 4), (3, 2, 4)],
         lambda gr, w: ref_conv_grad_input(gr, w, (1, 6, 4), dilation=2, groups=2),
         "conv_grad_input_1d_dilation_groups",
         torch_build=_torch_grad_op("input", 1, (1, 6, 4), dilation=2, groups=2)),
    _row(GI, lambda g, gr, w: g.conv_grad_input(gr, w, (1, 3, 3, 3, 2)),
         [(1, 2, 2, 2, 2), (2, 2, 2, 2, 2)],
         lambda gr, w: ref_conv_grad_input(gr, w, (1, 3, 3, 3, 2)),
         "conv_grad_input_3d", torch_build=_torch_grad_op("input", 3, (1, 3, 3, 3, 2))),
    _row(GW, lambda g, x, gr: g.conv_grad_weight(x, gr, (3, 3, 2, 3), stride=2, padding=1),
         [(2, 5, 5, 2), (2, 3, 3, 3)],
         lambda x, gr: ref_conv_grad_weight(x, gr, (3, 3, 2, 3), stride=2, padding=1),
         "conv_grad_weight_2d_stride_pad",
         torch_build=_torch_grad_op("weight", 2, (3, 3, 2, 3), stride=2, padding=1)),
    _row(GW, lambda g, x, gr: g.conv_grad_weight(x, gr, (3, 2, 4), dilation=2, groups=2),
         [(1, 6, 4), (1, 2, 4)],
         lambda x, gr: ref_conv_grad_weight(x, gr, (3, 2, 4), dilation=2, groups=2),
         "conv_grad_weight_1d_dilation_groups",
         torch_build=_torch_grad_op("weight", 1, (3, 2, 4), dilation=2, groups=2)),
    _row(GW, lambda g, x, gr: g.conv_grad_weight(x, gr, (2, 2, 2, 2, 2)),
         [(1, 3, 3, 3, 2), (1, 2, 2, 2, 2)],
         lambda x, gr: ref_conv_grad_weight(x, gr, (2, 2, 2, 2, 2)),
         "conv_grad_weight_3d", torch_build=_torch_grad_op("weight", 3, (2, 2, 2, 2, 2))),
    # the bias gradient: grad summed over every axis but the last (on the
    # direct path, 8 output channels, in conv's fused weight pass)
    _row(GB, lambda g, x, gr: g.conv_grad_bias(x, gr, (3, 3, 2, 8), stride=2, padding=1),
         [(2, 5, 5, 2), (2, 3, 3, 8)],
         lambda x, gr: gr.sum(axis=(0, 1, 2)), "conv_db_2d_direct",
         torch_build=lambda t, x, gr: gr.sum(dim=(0, 1, 2)) + 0 * x.sum()),
    _row(GB, lambda g, x, gr: g.conv_grad_bias(x, gr, (3, 2, 4), dilation=2, groups=2),
         [(1, 6, 4), (1, 2, 4)],
         lambda x, gr: gr.sum(axis=(0, 1)), "conv_db_1d_dilation_groups",
         torch_build=lambda t, x, gr: gr.sum(dim=(0, 1)) + 0 * x.sum()),
]

BAD += [
    _bad(GI, "conv_grad_input_grad_shape", [(2, 4, 4, 3), (3, 3, 2, 3)],
         lambda g, gr, w: g.conv_grad_input(gr, w, (2, 5, 5, 2), stride=2, padding=1),
         yscv.ShapeError, "conv_grad_input: grad has shape"),
    _bad(GI, "conv_grad_input_channels", [(2, 3, 3, 3), (3, 3, 2, 3)],
         lambda g, gr, w: g.conv_grad_input(gr, w, (2, 5, 5, 4), stride=2, padding=1),
         yscv.ShapeError, "conv_grad_input: w"),
    _bad(GI, "conv_grad_input_rank", [(2, 3, 3), (3, 2, 3)],
         lambda g, gr, w: g.conv_grad_input(gr, w, (5, 2)), ValueError, "conv_grad_input"),
    _bad(GW, "conv_grad_weight_grad_shape", [(2, 5, 5, 2), (2, 3, 3, 4)],
         lambda g, x, gr: g.conv_grad_weight(x, gr, (3, 3, 2, 3), stride=2, padding=1),
         yscv.ShapeError, "conv_grad_weight: grad has shape"),
    _bad(GB, "conv_grad_bias_grad_shape", [(2, 5, 5, 2), (2, 3, 3, 4)],
         lambda g, x, gr: g.conv_grad_bias(x, gr, (3, 3, 2, 3), stride=2, padding=1),
         yscv.ShapeError, "conv_grad_bias: grad has shape"),
    _bad(GW, "conv_grad_weight_bad_stride", [(2, 5, 5, 2), (2, 3, 3, 3)],
         lambda g, x, gr: g.conv_grad_weight(x, gr, (3, 3, 2, 3), stride=0),
         ValueError, "conv_grad_weight: stride"),
]

test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD2_ROWS = [c for c in CASES if c.check_grad and c.check_grad2]


@pytest.mark.parametrize("case", _GRAD2_ROWS, ids=[c.id for c in _GRAD2_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)


_TORCH_ROWS = [c for c in CASES if c.torch_build is not None]


@pytest.mark.parametrize("case", _TORCH_ROWS, ids=[c.id for c in _TORCH_ROWS])
def test_torch_build_is_the_rows_function(case):
    """Each row's PyTorch twin (layouts permuted, deformable through
    grid_sample) computes the row's NumPy reference."""
    pytest.importorskip("torch")
    check_torch_build(case, rtol=1e-12)


def _sum_of_squares(g, nodes):
    total = g.sum(g.mul(nodes[0], nodes[0]))
    for d in nodes[1:]:
        total = g.add(total, g.sum(g.mul(d, d)))
    return total


def test_conv2d_third_derivative_matches_pytorch():
    """conv2d (stride 2, padding 1, bias) inside a tanh, differentiated three
    times: each order's recorded walk runs through the previous one's
    composite."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    arrays = [rng.uniform(-1, 1, (1, 5, 4, 2)), rng.uniform(-1, 1, (3, 3, 2, 3)),
              rng.uniform(-1, 1, 3)]
    g = yscv.Graph(np.float64)
    nodes = [g.variable(a) for a in arrays]
    y = g.tanh(g.conv2d(*nodes, stride=2, padding=1))
    d1 = g.gradients(_sum_of_squares(g, [y]), nodes, create_graph=True)
    d2 = g.gradients(_sum_of_squares(g, d1), nodes, create_graph=True)
    d3 = g.gradients(_sum_of_squares(g, d2), nodes)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    yt = torch.tanh(t_conv(2, 1)(torch, *ts))
    t1 = torch.autograd.grad((yt * yt).sum(), ts, create_graph=True)
    t2 = torch.autograd.grad(sum((d * d).sum() for d in t1), ts, create_graph=True)
    t3 = torch.autograd.grad(sum((d * d).sum() for d in t2), ts)
    for k in range(3):
        np.testing.assert_allclose(g.value(d2[k]), t2[k].detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(d3[k], t3[k].numpy(), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------ targeted tests
def _grads(build, arrays, dtype=np.float64, cot_seed=1):
    g = yscv.Graph(dtype)
    nodes = [g.variable(a) for a in arrays]
    out = build(g, *nodes)
    cot = np.random.default_rng(cot_seed).standard_normal(g.value(out).shape)
    g.backward(out, grad=cot)
    return g.value(out), [g.grad(n) for n in nodes]


def test_deformable_zero_offsets_equal_conv2d():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 5, 3))
    w = rng.standard_normal((3, 3, 3, 4))
    b = rng.standard_normal(4)
    off = np.zeros((2, 3, 3, 18))
    yd, gd = _grads(lambda g, x, w, b: g.deformable_conv2d(x, w, off, b, stride=2, padding=1),
                    [x, w, b])
    yc, gc = _grads(lambda g, x, w, b: g.conv2d(x, w, b, stride=2, padding=1), [x, w, b])
    np.testing.assert_allclose(yd, yc, atol=1e-12)
    for a, c in zip(gd, gc):
        np.testing.assert_allclose(a, c, atol=1e-12)


def test_deformable_integer_offset_shifts_the_window():
    """Offset (+1, -1) on every tap equals conv2d of x shifted down-left (zero fill)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 5, 5, 2))
    w = rng.standard_normal((3, 3, 2, 2))
    off = np.tile(np.array([1.0, -1.0]), 9)[None, None, None, :].repeat(3, 1).repeat(3, 2)
    g = yscv.Graph(np.float64)
    y = g.value(g.deformable_conv2d(g.constant(x), g.constant(w), off))
    xs = np.zeros_like(x)
    xs[:, :4, 1:] = x[:, 1:, :4]
    np.testing.assert_allclose(y, ref_conv(xs, w), atol=1e-12)


def test_deformable_samples_fully_outside_give_zero_and_no_offset_grad():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 3, 2))
    w = rng.standard_normal((1, 1, 2, 3))
    off = np.full((1, 3, 3, 2), 7.5)  # every sample far below-right of the image
    (y, (gx, gw, go)) = _grads(lambda g, x, w, o: g.deformable_conv2d(x, w, o), [x, w, off])
    assert np.all(y == 0) and np.all(gx == 0) and np.all(gw == 0) and np.all(go == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_deformable_non_finite_offset_is_outside(dtype, bad):
    """Issue 12.11: a NaN (or +-inf) offset is a sample outside the image:
    zero contribution, zero gradients for it (x, w and that offset), and
    everything else as with a far-outside finite offset. NaN used to pass
    the bounds test and index with int(floor(NaN)) = INT64_MIN."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 4, 3))
    w = rng.standard_normal((3, 3, 3, 2))
    off = _offsets((2, 5, 4, 18), spread=1)(rng)
    sel = rng.random(off.shape) < 0.3
    sel[0, 1, 1, 8] = True               # dy of the centre tap: a sample that would be inside
    far = off.copy()
    far[sel] = 1e6                       # a finite position far outside the image
    off[sel] = bad
    y, (gx, gw, go) = _grads(lambda g, x, w, o: g.deformable_conv2d(x, w, o, padding=1),
                             [x, w, off], dtype)
    yf, (gxf, gwf, gof) = _grads(lambda g, x, w, o: g.deformable_conv2d(x, w, o, padding=1),
                                 [x, w, far], dtype)
    for a in (y, gx, gw, go):
        assert np.all(np.isfinite(a))
    np.testing.assert_array_equal(y, yf)
    np.testing.assert_array_equal(gx, gxf)
    np.testing.assert_array_equal(gw, gwf)
    np.testing.assert_array_equal(go, gof)
    pair = sel.reshape(2, 5, 4, 9, 2).any(-1, keepdims=True)   # a tap with either coordinate bad
    pair = np.broadcast_to(pair, (2, 5, 4, 9, 2)).reshape(off.shape)
    np.testing.assert_array_equal(go[pair], 0.0)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(y, ref_deform(x, w, far, padding=1), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["conv2d_3x3_pad1_bias", "conv3d_stride_dilation_groups",
                                  "conv2d_rgb_3x3_padded_rows", "conv1d_k15_padded_rows",
                                  "conv_transpose2d_stride2_outpad1_bias",
                                  "deformable_fractional_bias", "conv1d_groups_batch1"])
def test_multi_chunk_paths_match_single_chunk(monkeypatch, name):
    """Tiny chunks (one row each) exercise the chunk loop and dW accumulation."""
    from yscv.compute import conv as drivers

    case = next(c for c in CASES if c.id == name)
    arrays = case.arrays()
    y1, g1 = _grads(case.build, arrays)
    monkeypatch.setattr(drivers, "CHUNK_BYTES", 1)
    y2, g2 = _grads(case.build, arrays)
    np.testing.assert_allclose(y2, y1, atol=1e-12)
    for a, b in zip(g2, g1):
        np.testing.assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("name", [c.id for c in CASES if "bias" in c.id])
def test_float32_gradients_stay_float32(name):
    case = next(c for c in CASES if c.id == name)
    _, grads = _grads(case.build, case.arrays(), np.float32)
    assert all(gr.dtype == np.float32 for gr in grads)


def test_constant_input_gets_no_gradient_and_nothing_is_saved():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 5, 5, 3))
    w = rng.standard_normal((3, 3, 3, 4))
    g = yscv.Graph(np.float64)
    xc, wv = g.constant(x), g.variable(w)
    y = g.conv2d(xc, wv, padding=1)
    assert g.memory()["saved"] == 0
    cot = rng.standard_normal(g.value(y).shape)
    g.backward(y, grad=cot)
    assert g.grad(xc) is None
    # the weight gradient equals sum over positions of window^T cot
    ref = np.zeros_like(w)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    for i in range(3):
        for j in range(3):
            ref[i, j] = np.einsum("nhwc,nhwo->co", xp[:, i:i + 5, j:j + 5], cot)
    np.testing.assert_allclose(g.grad(wv), ref, atol=1e-10)


def test_two_threads_two_graphs():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 12, 12, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    expected = _grads(lambda g, x, w: g.conv2d(x, w, padding=1), [x, w], np.float32)
    results = [None] * 4

    def work(k):
        results[k] = [_grads(lambda g, x, w: g.conv2d(x, w, padding=1), [x, w], np.float32)
                      for _ in range(5)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for res in results:
        for y, grads in res:
            np.testing.assert_array_equal(y, expected[0])
            for a, b in zip(grads, expected[1]):
                np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------ PyTorch (optional)
def _torch_check(yscv_build, torch_fn, arrays, perms, out_perm):
    torch = pytest.importorskip("torch")
    y, grads = _grads(yscv_build, arrays)
    ts = [torch.tensor(a.transpose(p), requires_grad=True) for a, p in zip(arrays, perms)]
    ty = torch_fn(*ts)
    cot = np.random.default_rng(1).standard_normal(y.shape)
    ty.backward(torch.tensor(cot.transpose(np.argsort(out_perm))))
    np.testing.assert_allclose(y, ty.detach().numpy().transpose(out_perm), atol=1e-10)
    for gr, t, p in zip(grads, ts, perms):
        np.testing.assert_allclose(gr, t.grad.numpy().transpose(np.argsort(p)), atol=1e-10)


def test_conv2d_matches_torch():
    F = pytest.importorskip("torch.nn.functional")
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal((3, 11, 9, 6)), rng.standard_normal((3, 2, 3, 8)),
              rng.standard_normal(8)]
    kw = dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)
    _torch_check(lambda g, x, w, b: g.conv2d(x, w, b, **kw),
                 lambda x, w, b: F.conv2d(x, w, b, **kw), arrays,
                 [(0, 3, 1, 2), (3, 2, 0, 1), (0,)], (0, 2, 3, 1))


@pytest.mark.parametrize("cout", [32, 40])
@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, padding=(0, 1), dilation=(2, 1))])
def test_conv2d_direct_tiles_match_torch(kw, cout):
    """Shapes large enough for several row chunks and dW partials (float64;
    32 output channels: the 6 x 4-vector tiles, 40: 8 x 2 and 8 x 1)."""
    F = pytest.importorskip("torch.nn.functional")
    rng = np.random.default_rng(10)
    arrays = [rng.standard_normal((4, 12, 11, 16)), rng.standard_normal((3, 3, 16, cout)),
              rng.standard_normal(cout)]
    _torch_check(lambda g, x, w, b: g.conv2d(x, w, b, **kw),
                 lambda x, w, b: F.conv2d(x, w, b, **kw), arrays,
                 [(0, 3, 1, 2), (3, 2, 0, 1), (0,)], (0, 2, 3, 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_direct_tiles_taken_and_equal_to_im2col(monkeypatch, dtype):
    """The direct path runs for whole vectors of channels (every pass of a
    stride-1 conv), and agrees with im2col + BLAS (forced by making the
    direct path unusable)."""
    from yscv.compute import conv_direct as direct

    calls = []

    def counted(name, fn):
        def run(*a, **k):
            calls.append(name)
            return fn(*a, **k)
        return run

    for name in ("forward", "weight_grad", "data_grad"):
        monkeypatch.setattr(direct, name, counted(name, getattr(direct, name)))
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((3, 9, 10, 16)), rng.standard_normal((3, 3, 16, 32)),
              rng.standard_normal(32)]
    build = lambda g, x, w, b: g.conv2d(x, w, b, padding=1)  # noqa: E731
    y1, g1 = _grads(build, arrays, dtype)
    assert sorted(set(calls)) == ["data_grad", "forward", "weight_grad"]
    monkeypatch.setattr(direct, "usable", lambda *a: False)
    calls.clear()
    y2, g2 = _grads(build, arrays, dtype)
    assert not calls
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(y1, y2, rtol=tol, atol=tol)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("cin, cout", [(16, 32), (3, 16), (16, 64)])
def test_direct_tiles_same_bits_on_one_thread_and_two(cin, cout):
    """Row chunks and dW partials depend on the sizes only, not the threads
    (with a bias: the forward starts each block of rows from it, the dW pass
    sums its gradient; 64 channels: the 6 x 4-vector tiles with AVX-512)."""
    rng = np.random.default_rng(12)
    arrays = [rng.standard_normal((16, 16, 16, cin)).astype(np.float32),
              rng.standard_normal((3, 3, cin, cout)).astype(np.float32),
              rng.standard_normal(cout).astype(np.float32)]
    build = lambda g, x, w, b: g.conv2d(x, w, b, padding=1)  # noqa: E731

    def run():
        y, grads = _grads(build, arrays, np.float32)
        return [y, *grads]

    check_same_bits_on_threads(run)


def test_conv3d_matches_torch():
    F = pytest.importorskip("torch.nn.functional")
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal((2, 5, 6, 7, 4)), rng.standard_normal((2, 3, 3, 4, 5))]
    kw = dict(stride=(1, 2, 2), padding=1, dilation=(2, 1, 1))
    _torch_check(lambda g, x, w: g.conv3d(x, w, **kw), lambda x, w: F.conv3d(x, w, **kw), arrays,
                 [(0, 4, 1, 2, 3), (4, 3, 0, 1, 2)], (0, 2, 3, 4, 1))


def test_conv_transpose2d_matches_torch():
    F = pytest.importorskip("torch.nn.functional")
    rng = np.random.default_rng(10)
    arrays = [rng.standard_normal((2, 5, 4, 6)), rng.standard_normal((3, 4, 2, 6)),
              rng.standard_normal(4)]
    kw = dict(stride=(2, 3), padding=(1, 2), output_padding=(1, 2), groups=2)
    _torch_check(lambda g, x, w, b: g.conv_transpose2d(x, w, b, **kw),
                 lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), arrays,
                 [(0, 3, 1, 2), (3, 2, 0, 1), (0,)], (0, 2, 3, 1))


def test_conv1d_and_depthwise_match_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((2, 13, 4)), rng.standard_normal((3, 4, 5))]
    _torch_check(lambda g, x, w: g.conv1d(x, w, stride=2, padding=2, dilation=3),
                 lambda x, w: F.conv1d(x, w, stride=2, padding=2, dilation=3), arrays,
                 [(0, 2, 1), (2, 1, 0)], (0, 2, 1))
    x = rng.standard_normal((2, 7, 6, 3))
    w = rng.standard_normal((3, 2, 3, 2))
    y, (gx, gw) = _grads(lambda g, x, w: g.depthwise_conv2d(x, w, stride=2, padding=1), [x, w])
    tx = torch.tensor(x.transpose(0, 3, 1, 2), requires_grad=True)
    tw = torch.tensor(w.reshape(3, 2, 6).transpose(2, 0, 1)[:, None], requires_grad=True)
    ty = F.conv2d(tx, tw, stride=2, padding=1, groups=3)
    ty.backward(torch.tensor(np.random.default_rng(1).standard_normal(y.shape).transpose(0, 3, 1, 2)))
    np.testing.assert_allclose(y, ty.detach().numpy().transpose(0, 2, 3, 1), atol=1e-10)
    np.testing.assert_allclose(gx, tx.grad.numpy().transpose(0, 2, 3, 1), atol=1e-10)
    np.testing.assert_allclose(gw, tw.grad.numpy()[:, 0].transpose(1, 2, 0).reshape(3, 2, 3, 2),
                               atol=1e-10)


def test_non_contiguous_inputs_from_a_transpose_view():
    """Values that are views (here an axis swap) give the same result and gradients."""
    rng = np.random.default_rng(12)
    xt = rng.standard_normal((2, 6, 5, 3))  # stored as [N, W, H, C]
    w = rng.standard_normal((3, 2, 3, 4))
    off = _offsets((2, 3, 7, 12))(rng)

    def via_view(g, xt, w):
        x = g.transpose(xt, (0, 2, 1, 3))
        return (g.conv2d(x, w, stride=(2, 1), padding=1)
                + g.sum(g.deformable_conv2d(x, w, g.constant(off), padding=(0, 1))))

    x = xt.transpose(0, 2, 1, 3)
    y, (gx, gw) = _grads(via_view, [xt, w])
    y2, (gx2, gw2) = _grads(
        lambda g, x, w: (g.conv2d(x, w, stride=(2, 1), padding=1)
                         + g.sum(g.deformable_conv2d(x, w, g.constant(off), padding=(0, 1)))),
        [np.ascontiguousarray(x), w])
    np.testing.assert_allclose(y, y2, atol=1e-12)
    np.testing.assert_allclose(gx.transpose(0, 2, 1, 3), gx2, atol=1e-12)
    np.testing.assert_allclose(gw, gw2, atol=1e-12)


@pytest.mark.parametrize("op", ["conv2d", "depthwise", "transpose", "deformable"])
def test_empty_batch(op):
    g = yscv.Graph(np.float64)
    x = g.variable(np.zeros((0, 4, 4, 2)))
    if op == "conv2d":
        w = g.variable(np.ones((3, 3, 2, 3)))
        y = g.conv2d(x, w, padding=1)
        shape = (0, 4, 4, 3)
    elif op == "depthwise":
        w = g.variable(np.ones((3, 3, 2, 2)))
        y = g.depthwise_conv2d(x, w)
        shape = (0, 2, 2, 4)
    elif op == "transpose":
        w = g.variable(np.ones((2, 2, 3, 2)))
        y = g.conv_transpose2d(x, w, stride=2)
        shape = (0, 8, 8, 3)
    else:
        w = g.variable(np.ones((3, 3, 2, 3)))
        y = g.deformable_conv2d(x, w, np.zeros((0, 2, 2, 18)))
        shape = (0, 2, 2, 3)
    assert g.value(y).shape == shape
    g.backward(y, grad=np.zeros(shape))
    assert g.grad(x).shape == (0, 4, 4, 2)
    np.testing.assert_array_equal(g.grad(w), np.zeros(g.value(w).shape))


def test_largest_representable_stride_works_forward_and_backward():
    """stride = 2**63 - 1 fits an array index: it passes validation and the
    kernels (int64) compute one output position, as any stride >= 3 here."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 5, 5, 2))
    w = rng.standard_normal((3, 3, 2, 3))
    for build in (lambda s: (lambda g, x, w: g.conv2d(x, w, stride=s)),
                  lambda s: (lambda g, x, w: g.depthwise_conv2d(x, w[:, :, :, :1], stride=s))):
        y1, g1 = _grads(build(BIG - 1), [x, w])
        y2, g2 = _grads(build(3), [x, w])
        np.testing.assert_array_equal(y1, y2)
        for a, b in zip(g1, g2):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("needs", ["w_b", "x_b", "b_only"])
def test_bias_gradient_in_the_weight_pass_or_one_wide_row_sum(monkeypatch, dtype, needs):
    """With the weight gradient (the direct dW pass) the bias gradient is
    summed in that pass (the rule says it as ``conv_grad_bias``, so
    create_graph gives the same bits); without it, one call of the wide-row
    sum (``bias_grad``, the rule's ``sum`` ops). Against the float64 sum of
    the cotangent: float32 within a few ulp of the sum of |g|."""
    from yscv.compute import conv as drivers

    calls = []
    real = drivers.bias_grad
    monkeypatch.setattr(drivers, "bias_grad", lambda g: (calls.append(1), real(g))[1])
    rng = np.random.default_rng(13)
    x = rng.standard_normal((16, 32, 32, 3)).astype(dtype)
    w = rng.standard_normal((3, 3, 3, 16)).astype(dtype)
    b = rng.standard_normal(16).astype(dtype)
    cot = rng.standard_normal((16, 32, 32, 16)).astype(dtype)
    g = yscv.Graph(dtype)
    xs = g.variable(x) if needs == "x_b" else g.constant(x)
    ws = g.variable(w) if needs == "w_b" else g.constant(w)
    bs = g.variable(b)
    g.backward(g.conv2d(xs, ws, bs, padding=1), grad=cot)
    want = cot.astype(np.float64).sum(axis=(0, 1, 2))
    scale = np.abs(cot.astype(np.float64)).sum(axis=(0, 1, 2))
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(g.grad(bs) - want) <= 4 * eps * scale)
    assert g.grad(bs).dtype == dtype and g.grad(bs).shape == (16,)
    assert len(calls) == (0 if needs == "w_b" else 1)



@pytest.mark.parametrize("cout", [64, 80])
def test_direct_wide_tiles_float32_match_float64(cout):
    """float32 on the 6 x 4-vector tiles (64 channels; 80 channels, not
    whole fours of vectors, on the 8-row tiles) against the float64 result,
    every pass; the wide kernels run exactly when the channels allow."""
    from yscv.compute import conv_direct as direct

    assert direct._K.wide_tiles(64, 4) == direct._K.WIDE_TILES
    assert not direct._K.wide_tiles(80, 4) and not direct._K.wide_tiles(32, 4)
    rng = np.random.default_rng(14)
    arrays = [rng.standard_normal((2, 9, 10, 64)), rng.standard_normal((3, 3, 64, cout)) / 24,
              rng.standard_normal(cout)]
    build = lambda g, x, w, b: g.conv2d(x, w, b, padding=1)  # noqa: E731
    y64, g64 = _grads(build, arrays, np.float64)
    y32, g32 = _grads(build, [a.astype(np.float32) for a in arrays], np.float32)
    np.testing.assert_allclose(y32, y64, rtol=1e-4, atol=1e-4)
    for a, b in zip(g32, g64):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cin, cout, side", [(3, 16, 10), (64, 64, 16)])
def test_forward_padding_saved_for_the_weight_pass(monkeypatch, dtype, cin, cout, side):
    """The direct (3->16) and Winograd (64->64, 16x16) forwards save the
    zero-padded input; the dW pass reads it (x is padded once per step) and
    gives the same bits as padding x again; a conv without padding saves
    nothing; the saved copy is released with the node's other data."""
    from yscv.compute import conv_direct as direct

    rng = np.random.default_rng(15)
    x0 = rng.standard_normal((2, side, side, cin)).astype(dtype)
    w0 = (rng.standard_normal((3, 3, cin, cout)) / 8).astype(dtype)
    b0 = rng.standard_normal(cout).astype(dtype)
    cot = rng.standard_normal((2, side, side, cout)).astype(dtype)
    pads = []
    real = direct._K.pad_region
    monkeypatch.setattr(direct._K, "pad_region", lambda *a: (pads.append(1), real(*a))[1])

    def run(keep):
        g = yscv.Graph(dtype)
        x, w, b = g.variable(x0), g.variable(w0), g.variable(b0)
        y = g.conv2d(x, w, b, padding=1)
        saved = g._saved[y.index]
        if keep:
            assert saved is not None and saved.shape == (2, 1, side + 2, side + 2, cin)
            np.testing.assert_array_equal(saved[0, 0, 1:-1, 1:-1], x0[0])
            assert g.memory()["saved"] >= saved.nbytes
        else:
            g._saved[y.index] = None
        pads.clear()
        g.backward(y, grad=cot)
        # dW pads x again only without the saved copy (dx on the direct or
        # Winograd path pads the cotangent; 3 input channels take im2col)
        assert len(pads) == (cin % 16 == 0) + (0 if keep else 1)
        return [g.grad(x), g.grad(w), g.grad(b)]

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)
    g = yscv.Graph(dtype)
    y = g.conv2d(g.variable(x0), g.variable(w0[:1, :1]), padding=0)   # 1x1: no padding
    assert g._saved[y.index] is None


def test_padded_input_follows_checkpointing():
    """Inside a checkpointed segment the saved padded input is released with
    the segment (the segment's output keeps its own) and replayed by the
    backward walk: the same gradients, bit for bit, as without
    checkpointing."""
    rng = np.random.default_rng(16)
    x0 = rng.standard_normal((4, 12, 12, 3)).astype(np.float32)
    w1 = (rng.standard_normal((3, 3, 3, 16)) / 4).astype(np.float32)
    w2 = (rng.standard_normal((3, 3, 16, 16)) / 8).astype(np.float32)

    def block(g, h, w1, w2):
        return g.conv2d(g.relu(g.conv2d(h, w1, padding=1)), w2, padding=1)

    def run(ckpt):
        g = yscv.Graph(np.float32)
        x, a, b = g.variable(x0), g.variable(w1), g.variable(w2)
        y = g.checkpoint(block, x, a, b) if ckpt else block(g, x, a, b)
        if ckpt:   # released: the first conv's copy; kept: the output node's
            assert g.memory()["saved"] == g._saved[y.index].nbytes > 0
        g.backward(g.sum(y * y))
        return [g.grad(x), g.grad(a), g.grad(b)]

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)


# ------------------------------------- transposed 1-d and 3-d convolutions
from yscv.testing import make_second_order_tests  # noqa: E402


def ref_conv_transpose_nd(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                          dilation=1):
    """The scatter definition of ref_conv_transpose2d for any number of axes:
    x [N, *S, Cin], w [*K, Cout/groups, Cin]."""
    nsp = x.ndim - 2
    st, pd, op_, dl = (_tup(v, nsp) for v in (stride, padding, output_padding, dilation))
    ks, cog = w.shape[:nsp], w.shape[nsp]
    cin = x.shape[-1]
    cig = cin // groups
    full_sp = [(x.shape[1 + a] - 1) * st[a] + dl[a] * (ks[a] - 1) + 1 + op_[a] for a in range(nsp)]
    full = np.zeros((x.shape[0], *full_sp, cog * groups))
    for ipos in np.ndindex(*x.shape[1:-1]):
        for kpos in np.ndindex(*ks):
            opos = tuple(ipos[a] * st[a] + kpos[a] * dl[a] for a in range(nsp))
            for gi in range(groups):
                xs = x[(slice(None), *ipos, slice(gi * cig, (gi + 1) * cig))]   # [N, cig]
                full[(slice(None), *opos, slice(gi * cog, (gi + 1) * cog))] += \
                    xs @ w[(*kpos, slice(None), slice(gi * cig, (gi + 1) * cig))].T
    crop = tuple(slice(pd[a], full.shape[1 + a] - pd[a]) for a in range(nsp))
    y = full[(slice(None), *crop)]
    return y if b is None else y + b


def _t_conv_transpose(nsp, **kw):
    """torch's conv_transpose{nsp}d on channel-last x and yscv's weight layout."""
    def build(t, x, w, b=None):
        perm = (0, nsp + 1, *range(1, nsp + 1))
        back = (0, *range(2, nsp + 2), 1)
        wt = w.permute(nsp + 1, nsp, *range(nsp))       # [*K, Cout/g, Cin] -> [Cin, Cout/g, *K]
        fn = getattr(t.nn.functional, f"conv_transpose{nsp}d")
        return fn(x.permute(*perm), wt, b, **kw).permute(*back)
    return build


def _ct_row(nsp, shapes, name, **kw):
    op = Op.CONV_TRANSPOSE1D if nsp == 1 else Op.CONV_TRANSPOSE3D
    method = f"conv_transpose{nsp}d"
    if len(shapes) == 3:
        build = lambda g, x, w, b: getattr(g, method)(x, w, b, **kw)  # noqa: E731
        ref = lambda x, w, b: ref_conv_transpose_nd(x, w, b, **kw)  # noqa: E731
    else:
        build = lambda g, x, w: getattr(g, method)(x, w, **kw)  # noqa: E731
        ref = lambda x, w: ref_conv_transpose_nd(x, w, **kw)  # noqa: E731
    return _row(op, build, shapes, ref, name, torch_build=_t_conv_transpose(nsp, **kw))


CT1, CT3 = Op.CONV_TRANSPOSE1D, Op.CONV_TRANSPOSE3D
CONV_TRANSPOSE_ND_CASES = [
    _ct_row(1, [(2, 4, 3), (3, 2, 3), (2,)], "conv_transpose1d_bias"),
    _ct_row(1, [(1, 4, 2), (3, 3, 2)], "conv_transpose1d_stride2_pad1_outpad1",
            stride=2, padding=1, output_padding=1),
    _ct_row(1, [(1, 3, 4), (2, 1, 4), (2,)], "conv_transpose1d_groups2_dilation2",
            groups=2, dilation=2, output_padding=1),
    _ct_row(3, [(1, 2, 3, 2, 2), (2, 2, 2, 2, 2), (2,)], "conv_transpose3d_bias"),
    _ct_row(3, [(1, 2, 2, 3, 2), (2, 1, 2, 2, 2)], "conv_transpose3d_stride_pad_outpad",
            stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0)),
    _ct_row(3, [(1, 2, 2, 2, 4), (1, 2, 2, 1, 4)], "conv_transpose3d_groups2_dilation",
            groups=2, dilation=(1, 2, 1)),
]

X3C, W3C = (1, 2, 3, 3, 4), (2, 2, 2, 3, 4)
CONV_TRANSPOSE_ND_BAD = [
    _bad(CT1, "conv_transpose1d_x_rank", [(2, 5, 5, 4), (3, 2, 4)],
         lambda g, x, w: g.conv_transpose1d(x, w), yscv.ShapeError, "conv_transpose1d: x"),
    _bad(CT1, "conv_transpose1d_channel_mismatch", [(2, 5, 4), (3, 2, 3)],
         lambda g, x, w: g.conv_transpose1d(x, w), yscv.ShapeError,
         r"conv_transpose1d: w.shape\[2\]=3 must equal the input channels 4 \(w is \[K, "),
    _bad(CT1, "conv_transpose1d_output_padding_ge_stride", [(2, 5, 4), (3, 2, 4)],
         lambda g, x, w: g.conv_transpose1d(x, w, stride=2, output_padding=2), ValueError,
         "conv_transpose1d: output_padding=2 along L"),
    _bad(CT1, "conv_transpose1d_groups", [(2, 5, 3), (3, 2, 3)],
         lambda g, x, w: g.conv_transpose1d(x, w, groups=2), ValueError,
         "conv_transpose1d: groups=2 does not divide"),
    _bad(CT1, "conv_transpose1d_bias_size", [(2, 5, 4), (3, 2, 4), (3,)],
         lambda g, x, w, b: g.conv_transpose1d(x, w, b), yscv.ShapeError,
         "conv_transpose1d: bias must have shape"),
    _bad(CT1, "conv_transpose1d_output_size_nonpositive", [(1, 1, 4), (1, 2, 4)],
         lambda g, x, w: g.conv_transpose1d(x, w, padding=1), ValueError,
         "conv_transpose1d: output size"),
    _bad(CT3, "conv_transpose3d_x_rank", [(2, 5, 5, 4), W3C],
         lambda g, x, w: g.conv_transpose3d(x, w), yscv.ShapeError, "conv_transpose3d: x"),
    _bad(CT3, "conv_transpose3d_stride_pair", [X3C, W3C],
         lambda g, x, w: g.conv_transpose3d(x, w, stride=(1, 2)), TypeError,
         "conv_transpose3d: stride"),
    _bad(CT3, "conv_transpose3d_negative_padding", [X3C, W3C],
         lambda g, x, w: g.conv_transpose3d(x, w, padding=(0, -1, 0)), ValueError,
         "conv_transpose3d: padding"),
    _bad(CT3, "conv_transpose3d_output_padding_ge_stride_and_dilation", [X3C, W3C],
         lambda g, x, w: g.conv_transpose3d(x, w, output_padding=(0, 0, 1)), ValueError,
         "conv_transpose3d: output_padding=.* along W"),
    _bad(CT3, "conv_transpose3d_groups_zero", [X3C, W3C],
         lambda g, x, w: g.conv_transpose3d(x, w, groups=0), ValueError,
         "conv_transpose3d: groups=0"),
]

CASES += CONV_TRANSPOSE_ND_CASES
BAD += CONV_TRANSPOSE_ND_BAD
(test_forward_transpose_1d_3d, test_gradcheck_transpose_1d_3d,
 test_bad_arguments_transpose_1d_3d) = make_op_tests(CONV_TRANSPOSE_ND_CASES, CONV_TRANSPOSE_ND_BAD)
test_second_order_transpose_1d_3d = make_second_order_tests(CONV_TRANSPOSE_ND_CASES)


def test_conv_transpose_1d_3d_are_the_2d_op_with_singleton_axes():
    """conv_transpose1d on [N, L, C] equals conv_transpose2d on [N, 1, L, C]
    (and 3-d with D = 1), values and gradients."""
    rng = np.random.default_rng(9)
    x, w, b = rng.standard_normal((2, 5, 4)), rng.standard_normal((3, 3, 4)), rng.standard_normal(3)
    cot = rng.standard_normal((2, 10, 3))
    outs = []
    for build in (lambda g, x, w, b: g.conv_transpose1d(x, w, b, 2, 1, 1),
                  lambda g, x, w, b: g.reshape(g.conv_transpose2d(
                      g.reshape(x, (2, 1, 5, 4)), g.reshape(w, (1, 3, 3, 4)), b, (1, 2), (0, 1),
                      (0, 1)), (2, 10, 3)),
                  lambda g, x, w, b: g.reshape(g.conv_transpose3d(
                      g.reshape(x, (2, 1, 1, 5, 4)), g.reshape(w, (1, 1, 3, 3, 4)), b, (1, 1, 2),
                      (0, 0, 1), (0, 0, 1)), (2, 10, 3))):
        g = yscv.Graph(np.float64)
        ns = [g.variable(a) for a in (x, w, b)]
        y = build(g, *ns)
        g.backward(y, grad=cot)
        outs.append([g.value(y)] + [g.grad(n) for n in ns])
    for other in outs[1:]:
        for a, o in zip(outs[0], other):
            np.testing.assert_allclose(a, o, rtol=1e-12, atol=1e-12)


def test_conv_transpose2d_second_order_with_output_padding_past_the_stride():
    """output_padding >= stride (allowed below the dilation): the recorded
    rule's conv of the output grid is cropped to the input's extent (it used
    to raise ShapeError in create_graph=True)."""
    pytest.importorskip("torch")
    from yscv.testing import check_torch_second_order
    case = OpCase(CT, lambda g, x, w: g.conv_transpose2d(x, w, output_padding=1, dilation=2),
                  [(1, 2, 3, 2), (2, 2, 2, 2)], name="conv_transpose2d_outpad1_dilation2",
                  torch_build=_t_conv_transpose(2, output_padding=1, dilation=2))
    check_torch_second_order(case)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_groups_cin_is_the_depthwise_op_bit_for_bit(dtype):
    """conv2d(groups=C) (what Conv2d(groups=C) and ONNX Conv with group say)
    runs the depthwise kernel: the forward and every gradient equal
    depthwise_conv2d's on the same weights (reshaped: [KH, KW, 1, C*M] is
    [KH, KW, C, M]) bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 5, 4)).astype(dtype)
    w = rng.standard_normal((3, 3, 1, 8)).astype(dtype)
    b = rng.standard_normal(8).astype(dtype)
    out = []
    for grouped in (True, False):
        g = yscv.Graph(dtype)
        xn, wn, bn = g.variable(x), g.variable(w), g.variable(b)
        if grouped:
            y = g.conv2d(xn, wn, bn, stride=(1, 2), padding=1, dilation=(2, 1), groups=4)
        else:
            y = g.depthwise_conv2d(xn, g.reshape(wn, (3, 3, 4, 2)), bn, stride=(1, 2), padding=1,
                                   dilation=(2, 1))
        cot = rng.standard_normal(g.value(y).shape).astype(dtype) if grouped else cot
        g.backward(y, grad=cot)
        out.append((g.value(y), g.grad(xn), g.grad(wn), g.grad(bn)))
    for a, b_ in zip(*out):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b_)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride,mult", [(1, 1), (2, 1), (1, 2)])
def test_depthwise_split_over_threads_gives_the_same_bits_and_pytorchs_values(dtype, stride,
                                                                              mult):
    """A depthwise conv large enough to be split (forward by output rows, the
    backward's two passes on two threads): values and gradients are the same
    bits on one thread and two, and match PyTorch."""
    from yscv.compute.conv_depthwise import GRAIN
    rng = np.random.default_rng(21)
    c = 24
    x = rng.standard_normal((2, 40, 40, c)).astype(dtype)
    w = rng.standard_normal((3, 3, 1, c * mult)).astype(dtype)
    gy = rng.standard_normal((2, 40 // stride, 40 // stride, c * mult)).astype(dtype)
    assert 2 * 40 * 40 * c * 9 // stride ** 2 >= GRAIN

    def run():
        g = yscv.Graph(dtype)
        xn, wn = g.variable(x), g.variable(w)
        y = g.conv2d(xn, wn, stride=stride, padding=1, groups=c)
        g.backward(y, grad=gy)
        return g.value(y), g.grad(xn), g.grad(wn)

    check_same_bits_on_threads(run)
    torch = pytest.importorskip("torch")
    y, gx, gw = run()
    xt = torch.tensor(x.transpose(0, 3, 1, 2).copy(), requires_grad=True)
    wt = torch.tensor(w.transpose(3, 2, 0, 1).copy(), requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=1, groups=c)
    yt.backward(torch.tensor(gy.transpose(0, 3, 1, 2).copy()))
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(y, yt.detach().numpy().transpose(0, 2, 3, 1), rtol=tol, atol=tol)
    np.testing.assert_allclose(gx, xt.grad.numpy().transpose(0, 2, 3, 1), rtol=tol, atol=tol)
    np.testing.assert_allclose(gw, wt.grad.numpy().transpose(2, 3, 1, 0), rtol=tol,
                               atol=tol * 10)
