"""Winograd F(2x2, 3x3) drivers for 3x3 stride-1 convolutions: the weight
transform, the padded input, the tile blocks split over the cores
(kernels in yscv/kernels/conv_winograd.py).

Works on the 3-spatial-axis form of yscv/compute/conv.py (x [N, D, H, W, C],
w [1, 3, 3, Cin, Cout]; the depth axis is folded into the batch). Runs the
forward (bias fused) and, as a forward of the padded cotangent with the
flipped, transposed kernel, the data gradient; `usable` is the gate
(docs/ops/conv.md has the measurements behind it).
"""
from __future__ import annotations

import functools

import numpy as np

from ..kernels import lazy
from . import conv_direct as direct
from . import regions as par
from .arrays import readonly

_K = lazy("conv_winograd")

#: the weight transform G (4 x 3); U = G w G^T
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
#: tiles per block: V [16, 24, Cin] + M [16, 24, Cout] stay in L2 with U
#: (96 KB each for 64 float32 channels); larger blocks slow the input
#: transform, smaller ones the products (docs/ops/conv.md)
BLOCK_TILES = 24
#: multiply-adds (of the direct convolution) per chunk of a region
GRAIN = 1 << 20
#: the smallest output extent (H and W) that runs Winograd: smaller images
#: gain too little per call to pay the kernel's first compile (docs/ops/conv.md)
MIN_SIDE = 16
#: the smallest channel counts (Cin and Cout) that run Winograd: with fewer,
#: the transforms cost about what the products save (docs/ops/conv.md)
MIN_CHANNELS = 32


def usable(dtype, cin: int, cout: int, kernel, stride, padding, dilation, groups,
           out_sp) -> bool:
    """Whether a correlation takes the Winograd path: float32/float64,
    groups 1, a 3x3 kernel (1 deep), stride 1, dilation 1, padding <= 2 (none
    in depth), ``Cin`` and ``Cout`` whole vectors and at least
    `MIN_CHANNELS`, outputs at least `MIN_SIDE` on both sides."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64) or groups != 1:
        return False
    lanes = 64 // dtype.itemsize
    return (tuple(kernel) == (1, 3, 3) and tuple(stride) == (1, 1, 1)
            and tuple(dilation) == (1, 1, 1) and padding[0] == 0
            and padding[1] <= 2 and padding[2] <= 2
            and cin % lanes == 0 and cout % lanes == 0
            and min(cin, cout) >= MIN_CHANNELS
            and min(out_sp[1], out_sp[2]) >= MIN_SIDE)


def forward_usable(dtype, x_shape, w_shape, stride, padding, dilation, groups,
                   out_sp) -> bool:
    """Whether `forward` does conv_forward's pass for x [N, D, H, W,
    Cin] and w [KD, KH, KW, Cin, Cout]: `usable`, and ``out_sp`` the
    full stride-1 extent (conv_transpose's backward may ask for fewer rows)."""
    _, d, h, wd, cin = x_shape
    return (usable(dtype, cin, w_shape[4], w_shape[:3], stride, padding, dilation, groups, out_sp)
            and tuple(out_sp) == (d, h + 2 * padding[1] - 2, wd + 2 * padding[2] - 2))


def data_grad_usable(dtype, g_shape, w_shape, stride, padding, dilation, groups,
                     x_shape) -> bool:
    """Whether `data_grad` gives dx [N, D, H, W, Cin] for the cotangent
    g [N, D, OH, OW, Cout]: `usable` with the channels exchanged, and
    ``x``'s extent the one the padded cotangent's correlation produces."""
    return (usable(dtype, w_shape[4], w_shape[3], w_shape[:3], stride, padding, dilation,
                   groups, x_shape[1:4])
            and g_shape[2] + 2 - 2 * padding[1] == x_shape[2]
            and g_shape[3] + 2 - 2 * padding[2] == x_shape[3])


def weight_transform(w: np.ndarray) -> np.ndarray:
    """U [16, Cin, Cout] = G w G^T per (ci, co) for w [3, 3, Cin, Cout], in w's dtype."""
    g = G.astype(w.dtype)
    u = np.tensordot(g, np.tensordot(g, w, axes=(1, 1)), axes=(1, 1))   # [4, 4, Cin, Cout]
    return np.ascontiguousarray(u.reshape(16, *w.shape[2:]))


@functools.lru_cache(maxsize=32)
def _tables(tb: int, cin: int):
    """(ro ``[16*tb]`` = ``r*cin``, so ``[16*cin]`` = s mod cin), int64, read-only."""
    ro = np.arange(16 * tb, dtype=np.int64) * cin
    so = np.arange(16 * cin, dtype=np.int64) % cin
    ro.flags.writeable = False
    so.flags.writeable = False
    return ro, so


def forward(x, w, padding, bias=None, return_padded=False):
    """y [N, D, OH, OW, Cout] = the 3x3 stride-1 correlation of x [N, D, H,
    W, Cin] with w [1, 3, 3, Cin, Cout] (+ bias), by Winograd F(2x2, 3x3);
    with ``return_padded`` ``(y, xp)``, as yscv/compute/conv_direct.py's
    ``forward`` (its padded grid is the direct weight pass's when the
    output sides are even)."""
    n, d, h, wd, cin = x.shape
    cout = w.shape[4]
    oh, ow = h + 2 * padding[1] - 2, wd + 2 * padding[2] - 2
    th, tw = -(-oh // 2), -(-ow // 2)
    xp = direct._padded(x, (1, 3, 3), (1, 1, 1), padding, (1, 1, 1), (d, 2 * th, 2 * tw))
    u = readonly(weight_transform(w[0]).reshape(-1))
    tb = BLOCK_TILES
    ro, so = _tables(tb, cin)
    dims = np.array([th, tw, xp.shape[2], xp.shape[3], cin, cout, oh, ow, tb], dtype=np.int64)
    tiles = n * d * th * tw
    y = np.empty((n, d, oh, ow, cout), dtype=x.dtype)
    work = n * d * oh * ow * 9 * cin * cout      # the direct convolution's multiply-adds
    nch = par.num_chunks(tiles, work, GRAIN)
    bounds = par.bounds(par.split(tiles, nch))
    init = u if bias is None else readonly(np.ascontiguousarray(bias, dtype=x.dtype))
    mode = 0 if bias is None else 1
    xf = readonly(xp.reshape(-1))
    yf = y.reshape(-1)
    par.run_region(lambda st: _K.winograd_region(xf, dims, u, yf, init, mode, ro, so, bounds, st),
                   nch, work)
    if return_padded:
        return y, (None if xp is x else xp)
    return y


def data_grad(g, w, padding):
    """dx [N, D, H, W, Cin] of `forward` for the cotangent ``g``: the
    flipped, transposed kernel run forward over ``g`` padded by 2 - padding."""
    wf = np.ascontiguousarray(w[:, ::-1, ::-1].swapaxes(3, 4))
    return forward(g, wf, (0, 2 - padding[1], 2 - padding[2]))
