"""ONNX's DeformConv on yscv's ``deformable_conv2d`` (one group, one offset
group, no mask), composed from it for the other variants:

- ``group`` G and ``offset_group`` OG: the input channels are cut at the
  boundaries of both (G groups of Cin/G, OG offset groups of Cin/OG); each
  piece runs with its group's weights [KH, KW, piece, Cout/G] and its offset
  group's offsets, the pieces of a group are summed and the groups' outputs
  concatenated;
- the mask [N, ``OG*KH*KW``, OH, OW] (modulated deformable convolution):
  one call per kernel tap with the weights of the other taps zeroed, each
  output scaled by its tap's mask and summed.

Everything is graph ops, so gradients reach the input, weights, offsets,
mask and bias. Values are channel-last inside (x [N, H, W, C], offsets and
mask [N, OH, OW, channels]).
"""
from __future__ import annotations

import numpy as np

from ._import_registry import ChannelLast, handler


def _pieces(cin, group, offset_group):
    """[(start, size, group index, offset-group index)] of the input channels."""
    cg, cog = cin // group, cin // offset_group
    cuts = sorted(set(range(0, cin, cg)) | set(range(0, cin, cog)) | {cin})
    return [(a, b - a, a // cg, a // cog) for a, b in zip(cuts, cuts[1:])]


def _check(node, cin, cout, group, offset_group, kk, off_ch, mask_ch):
    if group < 1 or cin % group or cout % group:
        raise node.fail(f"group={group} must divide the {cin} input and {cout} output channels")
    if offset_group < 1 or cin % offset_group:
        raise node.fail(f"offset_group={offset_group} must divide the {cin} input channels")
    if off_ch != 2 * kk * offset_group:
        raise node.fail(f"offsets have {off_ch} channels, expected 2 * {kk} taps * "
                        f"offset_group={offset_group}")
    if mask_ch is not None and mask_ch != kk * offset_group:
        raise node.fail(f"the mask has {mask_ch} channels, expected {kk} taps * "
                        f"offset_group={offset_group}")


@handler("DeformConv")
def _deform_conv(run, node):
    """y = deformable convolution of X [N, C, H, W] with W [Cout, C/G, KH, KW],
    offsets [N, ``OG*2*KH*KW``, OH, OW] ((dy, dx) per tap), the optional
    bias [Cout] and mask [N, ``OG*KH*KW``, OH, OW]."""
    g = run.g
    at = node.attrs
    x = run.cl(node.inputs[0])
    w = run.conv_weight(node.inputs[1])                      # [KH, KW, C/G, Cout]
    offsets = run.cl(node.inputs[2])
    mask = run.cl(node.inputs[4]) if run.has(node, 4) else None
    group, offset_group = int(at.get("group", 1)), int(at.get("offset_group", 1))
    kh, kw, _, cout = w.shape
    kk = kh * kw
    cin = x.shape[-1]
    _check(node, cin, cout, group, offset_group, kk, offsets.shape[-1],
           None if mask is None else mask.shape[-1])
    pads = [int(p) for p in at.get("pads") or [0, 0, 0, 0]]
    if pads[:2] != pads[2:]:
        x = g.pad(x, [(0, 0), (pads[0], pads[2]), (pads[1], pads[3]), (0, 0)])
        pads = [0, 0, 0, 0]
    geometry = dict(stride=tuple(int(s) for s in at.get("strides") or [1, 1]),
                    padding=tuple(pads[:2]),
                    dilation=tuple(int(d) for d in at.get("dilations") or [1, 1]))
    bias = run.opt_node(node, 3)
    if group == offset_group == 1 and mask is None:
        return [ChannelLast(g.deformable_conv2d(x, w, offsets, bias, **geometry))]
    cg, co = cin // group, cout // group
    outs = [None] * group
    for start, size, gi, oi in _pieces(cin, group, offset_group):
        xc = g.narrow(x, 3, start, size)
        wc = g.narrow(g.narrow(w, 2, start - gi * cg, size), 3, gi * co, co)
        oc = g.narrow(offsets, 3, oi * 2 * kk, 2 * kk)
        if mask is None:
            y = g.deformable_conv2d(xc, wc, oc, **geometry)
        else:
            y = None
            for k in range(kk):
                tap = np.zeros((kh, kw, 1, 1), g.dtype)
                tap[k // kw, k % kw] = 1.0
                yk = g.deformable_conv2d(xc, g.mul(wc, g.constant(tap)), oc, **geometry)
                yk = g.mul(yk, g.narrow(mask, 3, oi * kk + k, 1))
                y = yk if y is None else g.add(y, yk)
        outs[gi] = y if outs[gi] is None else g.add(outs[gi], y)
    y = outs[0] if group == 1 else g.cat(outs, axis=3)
    return [ChannelLast(y if bias is None else g.add(y, bias))]
