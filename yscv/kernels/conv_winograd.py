"""Winograd F(2x2, 3x3) convolution: 3x3 kernel, stride 1, on the register
tiles of yscv/kernels/conv_direct.py.

Each 2x2 block of outputs (a *tile*) of a 3x3 stride-1 correlation comes
from a 4x4 patch ``d`` of the zero-padded channel-last input ``xp``
(Lavin & Gray, 2015):

    Y = A^T [ sum_ci (B^T d_ci B) * U_ci ] A,      U = G w G^T (per ci, co)

    B^T = [[1, 0,-1, 0],   G = [[  1,    0,   0],   A^T = [[1, 1, 1, 0],
           [0, 1, 1, 0],        [1/2,  1/2, 1/2],          [0, 1,-1,-1]]
           [0,-1, 1, 0],        [1/2, -1/2, 1/2],
           [0, 1, 0,-1]]        [  0,    0,   1]]

The sum over input channels is, for each of the 16 positions ``k`` of the
4x4 transformed patch, a matrix product ``M_k [tiles, Cout] = V_k [tiles,
Cin] @ U_k [Cin, Cout]``: 16 products per 2x2 outputs where the direct
convolution does 36 (2.25x fewer multiply-adds).

`winograd_region` (on the 8-row or the 6 x 4-vector tiles, as
`yscv.kernels.conv_direct.wide_tiles` picks) runs, per block of ``T``
tiles (all of it in L2 with ``U``; one thread per block):

1. the input transform of the block into ``V`` [16, T, Cin] (vectors along
   the channels, 16 loads, 24 additions and 16 stores per channel vector);
2. the 16 products on the direct tiles, which read ``V`` through the
   offset tables ``ro[r] = r*Cin`` (rows) and ``so[s] = s mod Cin`` (``s`` =
   ``k*Cin + ci``), so row ``k*T + t`` times the rows ``[k*Cin, (k+1)*Cin)``
   of ``U`` [``16*Cin``, Cout] gives ``M`` [16, T, Cout] in place;
3. the output transform ``A^T M A`` (+ the bias) of each tile straight into
   ``y``, dropping the outputs past an odd edge.

The transforms (`_input_tile`, `_output_tile`) are compiled
functions of their own, called once per tile, not inlined: when the two
tile families had a region kernel each, sharing them took ~0.7 s off the
first compile of a model that ran both (docs/ops/conv.md, "Compile time"),
at no measurable cost; kept so.
``Cin`` and ``Cout`` are whole vectors (the caller checks). Numerics: the
products sum over ``ci`` in order with one rounding per fused multiply-add;
the transforms are additions only. Every output depends on its own tile
alone, so neither the block size nor the split over threads changes a bit.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .conv_direct import _rows, _wide
from .simd import lanes, vadd, vload, vstore, vsub
from .sync import region_chunks

# dims: the int64 geometry array the drivers pass (yscv/compute/conv_winograd.py)
TH, TW, HP, WP, CIN, COUT, OH, OW, TB = range(9)


@jit
def _bt(d0, d1, d2, d3):
    """``B^T [d0, d1, d2, d3]``."""
    return vsub(d0, d2), vadd(d1, d2), vsub(d2, d1), vsub(d1, d3)


@jit
def _at(m0, m1, m2, m3):
    """``A^T [m0, m1, m2, m3]``."""
    return vadd(vadd(m0, m1), m2), vsub(vsub(m1, m2), m3)


@jit
def _input_tile(xf, dims, t, vf, ti):
    """``V[k, ti, :] = (B^T d B)[k]`` for tile ``t``: its 4x4 patch of ``xp``
    [N, HP, WP, CIN] (flat ``xf``) at rows ``2*ty``, columns ``2*tx``."""
    L = lanes(vf)
    th, tw, cin = dims[TH], dims[TW], dims[CIN]
    n = t // (th * tw)
    ty = (t // tw) % th
    tx = t % tw
    rs = np.uint64(dims[WP] * cin)
    cs = np.uint64(cin)
    p0 = np.uint64(((n * dims[HP] + 2 * ty) * dims[WP] + 2 * tx) * cin)
    p1 = p0 + rs
    p2 = p1 + rs
    p3 = p2 + rs
    vs = np.uint64(dims[TB] * cin)
    v0 = np.uint64(ti * cin)
    for c in range(0, cin, L):
        uc = np.uint64(c)
        e00, e10, e20, e30 = _bt(vload(xf, p0 + uc), vload(xf, p1 + uc),
                                 vload(xf, p2 + uc), vload(xf, p3 + uc))
        uc += cs
        e01, e11, e21, e31 = _bt(vload(xf, p0 + uc), vload(xf, p1 + uc),
                                 vload(xf, p2 + uc), vload(xf, p3 + uc))
        uc += cs
        e02, e12, e22, e32 = _bt(vload(xf, p0 + uc), vload(xf, p1 + uc),
                                 vload(xf, p2 + uc), vload(xf, p3 + uc))
        uc += cs
        e03, e13, e23, e33 = _bt(vload(xf, p0 + uc), vload(xf, p1 + uc),
                                 vload(xf, p2 + uc), vload(xf, p3 + uc))
        o = v0 + np.uint64(c)
        a, b, c_, d = _bt(e00, e01, e02, e03)
        vstore(vf, o, a); vstore(vf, o + vs, b); vstore(vf, o + 2 * vs, c_); vstore(vf, o + 3 * vs, d)
        o += 4 * vs
        a, b, c_, d = _bt(e10, e11, e12, e13)
        vstore(vf, o, a); vstore(vf, o + vs, b); vstore(vf, o + 2 * vs, c_); vstore(vf, o + 3 * vs, d)
        o += 4 * vs
        a, b, c_, d = _bt(e20, e21, e22, e23)
        vstore(vf, o, a); vstore(vf, o + vs, b); vstore(vf, o + 2 * vs, c_); vstore(vf, o + 3 * vs, d)
        o += 4 * vs
        a, b, c_, d = _bt(e30, e31, e32, e33)
        vstore(vf, o, a); vstore(vf, o + vs, b); vstore(vf, o + 2 * vs, c_); vstore(vf, o + 3 * vs, d)


@jit
def _output_tile(mf, dims, t, ti, yf, init, mode):
    """``y`` of tile ``t`` = ``A^T M[:, ti, :] A`` (+ ``init``, the bias,
    when ``mode`` is 1), outputs past the bottom or right edge dropped;
    ``y`` [N, OH, OW, COUT] flat."""
    L = lanes(mf)
    th, tw, cout, oh, ow = dims[TH], dims[TW], dims[COUT], dims[OH], dims[OW]
    n = t // (th * tw)
    ty = (t // tw) % th
    tx = t % tw
    ms = np.uint64(dims[TB] * cout)
    m0 = np.uint64(ti * cout)
    y0 = np.uint64(((n * oh + 2 * ty) * ow + 2 * tx) * cout)
    y1 = y0 + np.uint64(ow * cout)
    down = 2 * ty + 1 < oh
    right = 2 * tx + 1 < ow
    uo = np.uint64(cout)
    for j in range(0, cout, L):
        o = m0 + np.uint64(j)
        q00, q10 = _at(vload(mf, o), vload(mf, o + 4 * ms), vload(mf, o + 8 * ms), vload(mf, o + 12 * ms))
        o += ms
        q01, q11 = _at(vload(mf, o), vload(mf, o + 4 * ms), vload(mf, o + 8 * ms), vload(mf, o + 12 * ms))
        o += ms
        q02, q12 = _at(vload(mf, o), vload(mf, o + 4 * ms), vload(mf, o + 8 * ms), vload(mf, o + 12 * ms))
        o += ms
        q03, q13 = _at(vload(mf, o), vload(mf, o + 4 * ms), vload(mf, o + 8 * ms), vload(mf, o + 12 * ms))
        a, b = _at(q00, q01, q02, q03)
        c, d = _at(q10, q11, q12, q13)
        if mode == 1:
            bias = vload(init, np.uint64(j))
            a = vadd(a, bias); b = vadd(b, bias); c = vadd(c, bias); d = vadd(d, bias)
        uj = np.uint64(j)
        vstore(yf, y0 + uj, a)
        if right:
            vstore(yf, y0 + uo + uj, b)
        if down:
            vstore(yf, y1 + uj, c)
            if right:
                vstore(yf, y1 + uo + uj, d)


@jit(inline="always")
def _block(xf, dims, t0, t1, vf, rb):
    """The input transform of tiles ``[t0, t1)`` (at most ``dims[TB]``)
    into ``vf``; returns the rows the products must cover (``t1 - t0``
    rounded up to ``rb``, the register tile's rows; those extra rows of
    ``V`` are zeroed, their outputs never stored)."""
    cin = dims[CIN]
    for t in range(t0, t1):
        _input_tile(xf, dims, t, vf, t - t0)
    rows = -(-(t1 - t0) // rb) * rb
    tb = dims[TB]
    for k in range(16):
        for i in range((k * tb + t1 - t0) * cin, (k * tb + rows) * cin):
            vf[i] = 0
    return rows


@jit(inline="always")
def _finish(mf, dims, t0, t1, yf, init, mode):
    """The output transform of tiles ``[t0, t1)`` into ``y``."""
    for t in range(t0, t1):
        _output_tile(mf, dims, t, t - t0, yf, init, mode)


@jit
def winograd_region(xf, dims, uf, yf, init, mode, ro, so, bounds, st):
    """``y`` = the 3x3 stride-1 correlation of ``xp`` with the weights whose
    transform is ``uf`` [16, CIN, COUT] (+ the bias ``init`` when ``mode`` is
    1), tiles ``[bounds[k], bounds[k+1])`` per chunk ``k``, in blocks of
    ``dims[TB]`` tiles (24: a multiple of 6 and 8); the register tiles
    `yscv.kernels.conv_direct.wide_tiles` picks for ``COUT``. ``ro``
    ``[16*TB]`` and ``so`` ``[16*CIN]`` are the tables of the module docstring."""
    tb, cin, cout = dims[TB], dims[CIN], dims[COUT]
    vf = np.empty(16 * tb * cin, dtype=uf.dtype)
    mf = np.empty(16 * tb * cout, dtype=uf.dtype)
    zero = tb - tb                # a run-time 0 (see conv_direct._rows)
    rb = 6 if _wide(cout, uf) else 8
    for k in region_chunks(st, bounds.shape[0] - 1):
        for t0 in range(bounds[k], bounds[k + 1], tb):
            t1 = bounds[k + 1] if bounds[k + 1] < t0 + tb else t0 + tb   # min()
            rows = _block(xf, dims, t0, t1, vf, rb)
            for q in range(16):
                _rows(vf, ro, q * tb, q * tb + rows, so, q * cin, (q + 1) * cin, uf, cout,
                      mf, zero, uf, 0, zero, cout)
            _finish(mf, dims, t0, t1, yf, init, mode)


