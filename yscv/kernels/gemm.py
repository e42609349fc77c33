"""Register-blocked matrix products for kernels that run a GEMM next to other
work in one call (the recurrent ops' per-step products and their weight
gradients), where a BLAS call per step would cost its dispatch and could not
share a thread's cache with the work around it.

Two products, on C-contiguous arrays of one float dtype (no promotion):

* `matmul_rows` / `matmul_add_rows` -- ``c[r0:r1] = a[r0:r1] @ b``
  (or ``+=``), a row range of ``a[M, K] @ b[K, N]``: disjoint row ranges can
  run on different threads.
* `matmul_tn_steps` -- ``c += sum_t sum_i outer(a[t - shift, i], b[t, i])``
  over steps ``t`` in ``[t0, t1)`` and rows ``i`` in ``[i0, i1)`` of
  ``a[Ta, R, M]`` and ``b[T, R, N]``: a weight gradient ``X^T G`` summed over
  a sequence and a block of batch rows, without gathering the rows first.

A product with a transposed weight (``g @ w.T``) takes ``w.T`` made once by
`transpose_into` (an in-register block transpose, much faster than
``np.ascontiguousarray(w.T)``), so every product above is of one form.

Tiles. The inner tile is 4 rows x ``V`` vectors: 4 x 4 with AVX-512 (4 x 64
float32 columns; 16 accumulators of the 32 vector registers), 4 x 3 on CPUs
with 16 vector registers (AVX2: 12 accumulators, 3 vectors of ``b`` and a
broadcast; 4 x 4 spills registers there and runs slower). Each
step of the ``k`` loop loads ``V`` vectors of ``b``, broadcasts 4 scalars of
``a`` and issues ``4 V`` fused multiply-adds (yscv/kernels/simd.py). Edges
use the same loop with fewer accumulators (4 x 1 vectors, 1 x V, 1 x 1, and
a scalar loop for the last ``N % L`` columns).

Numerics: every element is ``c0 + a[., 0] * b[0, .] + a[., 1] * b[1, .] + ...``
summed in ``k`` order with one rounding per fused multiply-add (``c0`` = 0,
or ``c``'s value when accumulating; the scalar column tail rounds the product
and the sum separately, in the same order). The order depends neither on the
row range, nor on the tile an element falls in, nor on the thread that runs
it, nor on the vector width: splitting rows over threads gives the same bits.

Compile time: every function here compiles once per combination of argument
types, and Numba types a constant argument by its value (``True`` and
``False`` would be two specialisations), so the entry points take no flags,
and callers pass their inputs as read-only arrays (one array type); see
yscv/kernels/recurrent_seq.py.
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .simd import VBYTES, lanes, transpose_block, vfma, vload, vsplat, vstore
from .sync import region_chunks

#: vectors per tile row: 4 with AVX-512's 32 vector registers, else 3
TILE_VECS = 4 if VBYTES == 64 else 3


# ------------------------------------------------------------ c (+)= a @ b
@jit
def _nn_4x4(a, b, c, r, j):
    """c[r:r+4, j:j+4L] += a[r:r+4] @ b[:, j:j+4L]."""
    K = a.shape[1]
    N = b.shape[1]
    L = lanes(c)
    o0 = r * N + j
    o1 = o0 + N
    o2 = o1 + N
    o3 = o2 + N
    c00 = vload(c, o0); c01 = vload(c, o0 + L); c02 = vload(c, o0 + 2 * L); c03 = vload(c, o0 + 3 * L)
    c10 = vload(c, o1); c11 = vload(c, o1 + L); c12 = vload(c, o1 + 2 * L); c13 = vload(c, o1 + 3 * L)
    c20 = vload(c, o2); c21 = vload(c, o2 + L); c22 = vload(c, o2 + 2 * L); c23 = vload(c, o2 + 3 * L)
    c30 = vload(c, o3); c31 = vload(c, o3 + L); c32 = vload(c, o3 + 2 * L); c33 = vload(c, o3 + 3 * L)
    for k in range(K):
        q = k * N + j
        b0 = vload(b, q); b1 = vload(b, q + L); b2 = vload(b, q + 2 * L); b3 = vload(b, q + 3 * L)
        s = vsplat(a[r, k])
        c00 = vfma(s, b0, c00); c01 = vfma(s, b1, c01); c02 = vfma(s, b2, c02); c03 = vfma(s, b3, c03)
        s = vsplat(a[r + 1, k])
        c10 = vfma(s, b0, c10); c11 = vfma(s, b1, c11); c12 = vfma(s, b2, c12); c13 = vfma(s, b3, c13)
        s = vsplat(a[r + 2, k])
        c20 = vfma(s, b0, c20); c21 = vfma(s, b1, c21); c22 = vfma(s, b2, c22); c23 = vfma(s, b3, c23)
        s = vsplat(a[r + 3, k])
        c30 = vfma(s, b0, c30); c31 = vfma(s, b1, c31); c32 = vfma(s, b2, c32); c33 = vfma(s, b3, c33)
    vstore(c, o0, c00); vstore(c, o0 + L, c01); vstore(c, o0 + 2 * L, c02); vstore(c, o0 + 3 * L, c03)
    vstore(c, o1, c10); vstore(c, o1 + L, c11); vstore(c, o1 + 2 * L, c12); vstore(c, o1 + 3 * L, c13)
    vstore(c, o2, c20); vstore(c, o2 + L, c21); vstore(c, o2 + 2 * L, c22); vstore(c, o2 + 3 * L, c23)
    vstore(c, o3, c30); vstore(c, o3 + L, c31); vstore(c, o3 + 2 * L, c32); vstore(c, o3 + 3 * L, c33)


@jit
def _nn_4x3(a, b, c, r, j):
    """c[r:r+4, j:j+3L] += a[r:r+4] @ b[:, j:j+3L] (the tile for 16 registers)."""
    K = a.shape[1]
    N = b.shape[1]
    L = lanes(c)
    o0 = r * N + j
    o1 = o0 + N
    o2 = o1 + N
    o3 = o2 + N
    c00 = vload(c, o0); c01 = vload(c, o0 + L); c02 = vload(c, o0 + 2 * L)
    c10 = vload(c, o1); c11 = vload(c, o1 + L); c12 = vload(c, o1 + 2 * L)
    c20 = vload(c, o2); c21 = vload(c, o2 + L); c22 = vload(c, o2 + 2 * L)
    c30 = vload(c, o3); c31 = vload(c, o3 + L); c32 = vload(c, o3 + 2 * L)
    for k in range(K):
        q = k * N + j
        b0 = vload(b, q); b1 = vload(b, q + L); b2 = vload(b, q + 2 * L)
        s = vsplat(a[r, k])
        c00 = vfma(s, b0, c00); c01 = vfma(s, b1, c01); c02 = vfma(s, b2, c02)
        s = vsplat(a[r + 1, k])
        c10 = vfma(s, b0, c10); c11 = vfma(s, b1, c11); c12 = vfma(s, b2, c12)
        s = vsplat(a[r + 2, k])
        c20 = vfma(s, b0, c20); c21 = vfma(s, b1, c21); c22 = vfma(s, b2, c22)
        s = vsplat(a[r + 3, k])
        c30 = vfma(s, b0, c30); c31 = vfma(s, b1, c31); c32 = vfma(s, b2, c32)
    vstore(c, o0, c00); vstore(c, o0 + L, c01); vstore(c, o0 + 2 * L, c02)
    vstore(c, o1, c10); vstore(c, o1 + L, c11); vstore(c, o1 + 2 * L, c12)
    vstore(c, o2, c20); vstore(c, o2 + L, c21); vstore(c, o2 + 2 * L, c22)
    vstore(c, o3, c30); vstore(c, o3 + L, c31); vstore(c, o3 + 2 * L, c32)


@jit
def _nn_4x1(a, b, c, r, j):
    """c[r:r+4, j:j+L] += a[r:r+4] @ b[:, j:j+L]."""
    K = a.shape[1]
    N = b.shape[1]
    o0 = r * N + j
    c0 = vload(c, o0); c1 = vload(c, o0 + N); c2 = vload(c, o0 + 2 * N); c3 = vload(c, o0 + 3 * N)
    for k in range(K):
        bv = vload(b, k * N + j)
        c0 = vfma(vsplat(a[r, k]), bv, c0)
        c1 = vfma(vsplat(a[r + 1, k]), bv, c1)
        c2 = vfma(vsplat(a[r + 2, k]), bv, c2)
        c3 = vfma(vsplat(a[r + 3, k]), bv, c3)
    vstore(c, o0, c0); vstore(c, o0 + N, c1); vstore(c, o0 + 2 * N, c2); vstore(c, o0 + 3 * N, c3)


@jit
def _nn_1x4(a, b, c, r, j):
    """c[r, j:j+4L] += a[r] @ b[:, j:j+4L]."""
    K = a.shape[1]
    N = b.shape[1]
    L = lanes(c)
    o = r * N + j
    c0 = vload(c, o); c1 = vload(c, o + L); c2 = vload(c, o + 2 * L); c3 = vload(c, o + 3 * L)
    for k in range(K):
        q = k * N + j
        s = vsplat(a[r, k])
        c0 = vfma(s, vload(b, q), c0)
        c1 = vfma(s, vload(b, q + L), c1)
        c2 = vfma(s, vload(b, q + 2 * L), c2)
        c3 = vfma(s, vload(b, q + 3 * L), c3)
    vstore(c, o, c0); vstore(c, o + L, c1); vstore(c, o + 2 * L, c2); vstore(c, o + 3 * L, c3)


@jit
def _nn_1x3(a, b, c, r, j):
    """c[r, j:j+3L] += a[r] @ b[:, j:j+3L]."""
    K = a.shape[1]
    N = b.shape[1]
    L = lanes(c)
    o = r * N + j
    c0 = vload(c, o); c1 = vload(c, o + L); c2 = vload(c, o + 2 * L)
    for k in range(K):
        q = k * N + j
        s = vsplat(a[r, k])
        c0 = vfma(s, vload(b, q), c0)
        c1 = vfma(s, vload(b, q + L), c1)
        c2 = vfma(s, vload(b, q + 2 * L), c2)
    vstore(c, o, c0); vstore(c, o + L, c1); vstore(c, o + 2 * L, c2)


@jit
def _nn_1x1(a, b, c, r, j):
    """c[r, j:j+L] += a[r] @ b[:, j:j+L]."""
    K = a.shape[1]
    N = b.shape[1]
    o = r * N + j
    acc = vload(c, o)
    for k in range(K):
        acc = vfma(vsplat(a[r, k]), vload(b, k * N + j), acc)
    vstore(c, o, acc)


@jit
def _nn_scalar(a, b, c, r, j0):
    """c[r, j0:] += a[r] @ b[:, j0:], one column at a time (the tail)."""
    K = a.shape[1]
    N = b.shape[1]
    for j in range(j0, N):
        s = c[r, j]
        for k in range(K):
            s += a[r, k] * b[k, j]
        c[r, j] = s


@jit
def matmul_add_rows(a, b, c, r0, r1):
    """Rows ``[r0, r1)`` of ``c += a @ b``.

    ``a[M, K]``, ``b[K, N]``, ``c[M, N]``: C-contiguous, one float dtype;
    ``c`` must not overlap ``a`` or ``b``.
    """
    N = b.shape[1]
    L = lanes(c)
    w = TILE_VECS * L
    n_tiles = N - N % w
    n_vecs = N - N % L
    r = r0
    while r + 4 <= r1:
        for j in range(0, n_tiles, w):
            _NN_4V(a, b, c, r, j)
        for j in range(n_tiles, n_vecs, L):
            _nn_4x1(a, b, c, r, j)
        for i in range(r, r + 4):
            _nn_scalar(a, b, c, i, n_vecs)
        r += 4
    while r < r1:
        for j in range(0, n_tiles, w):
            _NN_1V(a, b, c, r, j)
        for j in range(n_tiles, n_vecs, L):
            _nn_1x1(a, b, c, r, j)
        _nn_scalar(a, b, c, r, n_vecs)
        r += 1


@jit(inline="always")
def matmul_rows(a, b, c, r0, r1):
    """Rows ``[r0, r1)`` of ``c = a @ b`` (zeroed, then
    `matmul_add_rows`: one set of tiles serves both, so each compiles
    once per dtype). ``K = 0`` gives zeros."""
    zero = c.dtype.type(0)
    for r in range(r0, r1):
        row = c[r]
        for j in range(row.shape[0]):
            row[j] = zero
    matmul_add_rows(a, b, c, r0, r1)


# ------------------------------------------- c += sum_t a[t - shift]^T b[t]
@jit
def _tn_packed_4x4(ap, bp, c, m, j, rows):
    """c[m:m+4, j:j+4L] += ap[:rows].T @ bp[:rows]: packed operands, ``ap[q]``
    the 4 values of ``a`` for row ``q``, ``bp[q]`` its 4L values of ``b``."""
    N = c.shape[1]
    L = lanes(c)
    w = 4 * L
    o0 = m * N + j
    o1 = o0 + N
    o2 = o1 + N
    o3 = o2 + N
    c00 = vload(c, o0); c01 = vload(c, o0 + L); c02 = vload(c, o0 + 2 * L); c03 = vload(c, o0 + 3 * L)
    c10 = vload(c, o1); c11 = vload(c, o1 + L); c12 = vload(c, o1 + 2 * L); c13 = vload(c, o1 + 3 * L)
    c20 = vload(c, o2); c21 = vload(c, o2 + L); c22 = vload(c, o2 + 2 * L); c23 = vload(c, o2 + 3 * L)
    c30 = vload(c, o3); c31 = vload(c, o3 + L); c32 = vload(c, o3 + 2 * L); c33 = vload(c, o3 + 3 * L)
    for q in range(rows):
        p = q * w
        b0 = vload(bp, p); b1 = vload(bp, p + L); b2 = vload(bp, p + 2 * L); b3 = vload(bp, p + 3 * L)
        s = vsplat(ap[q, 0])
        c00 = vfma(s, b0, c00); c01 = vfma(s, b1, c01); c02 = vfma(s, b2, c02); c03 = vfma(s, b3, c03)
        s = vsplat(ap[q, 1])
        c10 = vfma(s, b0, c10); c11 = vfma(s, b1, c11); c12 = vfma(s, b2, c12); c13 = vfma(s, b3, c13)
        s = vsplat(ap[q, 2])
        c20 = vfma(s, b0, c20); c21 = vfma(s, b1, c21); c22 = vfma(s, b2, c22); c23 = vfma(s, b3, c23)
        s = vsplat(ap[q, 3])
        c30 = vfma(s, b0, c30); c31 = vfma(s, b1, c31); c32 = vfma(s, b2, c32); c33 = vfma(s, b3, c33)
    vstore(c, o0, c00); vstore(c, o0 + L, c01); vstore(c, o0 + 2 * L, c02); vstore(c, o0 + 3 * L, c03)
    vstore(c, o1, c10); vstore(c, o1 + L, c11); vstore(c, o1 + 2 * L, c12); vstore(c, o1 + 3 * L, c13)
    vstore(c, o2, c20); vstore(c, o2 + L, c21); vstore(c, o2 + 2 * L, c22); vstore(c, o2 + 3 * L, c23)
    vstore(c, o3, c30); vstore(c, o3 + L, c31); vstore(c, o3 + 2 * L, c32); vstore(c, o3 + 3 * L, c33)


@jit
def _tn_packed_4x3(ap, bp, c, m, j, rows):
    """c[m:m+4, j:j+3L] += ap[:rows].T @ bp[:rows] (the tile for 16 registers)."""
    N = c.shape[1]
    L = lanes(c)
    w = 3 * L
    o0 = m * N + j
    o1 = o0 + N
    o2 = o1 + N
    o3 = o2 + N
    c00 = vload(c, o0); c01 = vload(c, o0 + L); c02 = vload(c, o0 + 2 * L)
    c10 = vload(c, o1); c11 = vload(c, o1 + L); c12 = vload(c, o1 + 2 * L)
    c20 = vload(c, o2); c21 = vload(c, o2 + L); c22 = vload(c, o2 + 2 * L)
    c30 = vload(c, o3); c31 = vload(c, o3 + L); c32 = vload(c, o3 + 2 * L)
    for q in range(rows):
        p = q * w
        b0 = vload(bp, p); b1 = vload(bp, p + L); b2 = vload(bp, p + 2 * L)
        s = vsplat(ap[q, 0])
        c00 = vfma(s, b0, c00); c01 = vfma(s, b1, c01); c02 = vfma(s, b2, c02)
        s = vsplat(ap[q, 1])
        c10 = vfma(s, b0, c10); c11 = vfma(s, b1, c11); c12 = vfma(s, b2, c12)
        s = vsplat(ap[q, 2])
        c20 = vfma(s, b0, c20); c21 = vfma(s, b1, c21); c22 = vfma(s, b2, c22)
        s = vsplat(ap[q, 3])
        c30 = vfma(s, b0, c30); c31 = vfma(s, b1, c31); c32 = vfma(s, b2, c32)
    vstore(c, o0, c00); vstore(c, o0 + L, c01); vstore(c, o0 + 2 * L, c02)
    vstore(c, o1, c10); vstore(c, o1 + L, c11); vstore(c, o1 + 2 * L, c12)
    vstore(c, o2, c20); vstore(c, o2 + L, c21); vstore(c, o2 + 2 * L, c22)
    vstore(c, o3, c30); vstore(c, o3 + L, c31); vstore(c, o3 + 2 * L, c32)


#: the tiles for this CPU (see TILE_VECS)
_NN_4V, _NN_1V, _TN_PACKED = ((_nn_4x4, _nn_1x4, _tn_packed_4x4) if TILE_VECS == 4
                              else (_nn_4x3, _nn_1x3, _tn_packed_4x3))

#: rows (steps x batch rows) per block of `matmul_tn_steps`: a packed
#: column stripe of ``b`` (128 rows x 4 vectors = 32 KB with AVX-512 float32)
#: stays in L1 while every row tile of ``c`` reads it
_TN_BLOCK_ROWS = 128


@jit
def _pack_a(a, ap, q0, q1, t0, shift, i0, i1, p0):
    """``ap[p, q - q0, u] = a[t - shift, i, 4 (p0 + p) + u]`` for the rows
    ``q`` in ``[q0, q1)`` of the (t, i) sequence (row q is step
    ``t0 + q // (i1 - i0)``, batch row ``i0 + q % (i1 - i0)``); zero where
    the column is past ``M`` (the last panel is padded)."""
    M = a.shape[2]
    R = i1 - i0
    zero = ap.dtype.type(0)
    t = t0 + q0 // R                  # walked row by row: no division in the loop
    i = i0 + q0 % R
    for q in range(q1 - q0):
        src = a[t - shift, i]
        for p in range(ap.shape[0]):
            m0 = 4 * (p0 + p)
            dst = ap[p, q]
            for u in range(4):
                m = m0 + u
                dst[u] = src[m] if m < M else zero
        i += 1
        if i == i1:
            i = i0
            t += 1


@jit
def _pack_b(b, bp, q0, q1, t0, i0, i1, j):
    """``bp[q - q0] = b[t, i, j:j+V*L]`` for the rows ``q`` in ``[q0, q1)``
    of the (t, i) sequence; zero past the last column of ``b``."""
    Rb, N = b.shape[1], b.shape[2]
    R = i1 - i0
    L = lanes(bp)
    w = TILE_VECS * L
    zero = bp.dtype.type(0)
    t = t0 + q0 // R
    i = i0 + q0 % R
    full = j + w <= N
    for q in range(q1 - q0):
        src = (t * Rb + i) * N + j
        dst = q * w
        if full:
            for v in range(TILE_VECS):
                vstore(bp, dst + v * L, vload(b, src + v * L))
        else:
            row = bp[q]
            for u in range(w):
                row[u] = b.flat[src + u] if j + u < N else zero
        i += 1
        if i == i1:
            i = i0
            t += 1


@jit
def matmul_tn_steps(a, b, c, t0, t1, shift, i0, i1, m0, m1):
    """``c[m0:m1] += sum_{t in [t0, t1)} sum_{i in [i0, i1)} outer(a[t - shift, i], b[t, i])[m0:m1]``.

    ``a[Ta, R, M]``, ``b[T, R, N]``, ``c[M, N]``: C-contiguous, one float
    dtype; ``t - shift`` must index ``a``; ``m0`` a multiple of 4. For a
    recurrent layer with ``a = x`` (shift 0) this is ``dW_ih += X^T dG`` over
    the batch rows ``[i0, i1)``; with ``a = h`` and shift 1 it is
    ``dW_hh += H_{t-1}^T dG_t``; with one step it is ``a[0]^T @ b[0]``. The
    rows ``[m0, m1)`` of ``c`` can be split over threads. Each element of
    ``c`` adds its terms in ``(t, i)`` order.

    The (t, i) rows go in blocks of ``_TN_BLOCK_ROWS``. In a block, the 4-wide
    column panels of ``a`` and, one at a time, each column stripe of ``b``
    are first copied to contiguous buffers (rows of ``b`` lie ``N`` elements
    apart, so an unpacked stripe touches a new page every few rows); the
    tiles then run from L1. The last panel and stripe are zero-padded, and a tile that
    overhangs ``c`` (the last ``M % 4`` rows, the last ``N % VL`` columns)
    runs on a 4 x VL copy of its part of ``c``: the padding adds exact zeros
    to lanes that are not copied back, so every element gets the same terms
    in the same order as in a full tile.
    """
    # conditional expressions, not min(), and one allocation: the builtin and
    # each np.empty / np.zeros compiled a Numba helper of its own on first
    # call (docs/engine.md, "Cold start")
    ma = a.shape[2]
    M = ma if ma < m1 else m1
    N = b.shape[2]
    L = lanes(c)
    w = TILE_VECS * L
    Q = (t1 - t0) * (i1 - i0)
    p0 = m0 // 4
    panels = (M - m0 + 3) // 4
    if Q <= 0 or panels <= 0:
        return
    rows = Q if Q < _TN_BLOCK_ROWS else _TN_BLOCK_ROWS
    # the packed panels, then the packed stripe and the edge tile, each
    # starting on a multiple of 16 elements (as aligned as separate arrays)
    na = panels * rows * 4
    sa = (na + 15) // 16 * 16
    sb = sa + rows * w
    buf = np.empty(sb + 4 * w, dtype=c.dtype)
    ap = buf[:na].reshape((panels, rows, 4))
    bp = buf[sa:sb].reshape((rows, w))
    edge = buf[sb:].reshape((4, w))
    zero = c.dtype.type(0)
    for u in range(4):
        for v in range(w):
            edge[u, v] = zero
    for q0 in range(0, Q, rows):
        q1 = q0 + rows if q0 + rows < Q else Q
        _pack_a(a, ap, q0, q1, t0, shift, i0, i1, p0)
        for j in range(0, N, w):
            _pack_b(b, bp, q0, q1, t0, i0, i1, j)
            nj = N - j if N - j < w else w
            for p in range(panels):
                m = m0 + 4 * p
                nm = M - m if M - m < 4 else 4
                if nm == 4 and nj == w:
                    _TN_PACKED(ap[p], bp, c, m, j, q1 - q0)
                else:
                    for u in range(nm):
                        for v in range(nj):
                            edge[u, v] = c[m + u, j + v]
                    origin = m - m   # a run-time 0: a literal 0 compiles a second tile
                    _TN_PACKED(ap[p], bp, edge, origin, origin, q1 - q0)
                    for u in range(nm):
                        for v in range(nj):
                            c[m + u, j + v] = edge[u, v]


# -------------------------------------------------------------- transpose
@jit
def transpose_into(a, out):
    """``out[:] = a.T`` for ``a[M, N]``, ``out[N, M]`` (C-contiguous, one
    float dtype): ``L x L`` blocks transposed in registers, a scalar loop
    for the edges."""
    M, N = a.shape
    L = lanes(a)
    m_full = M - M % L
    n_full = N - N % L
    for i in range(0, m_full, L):
        for j in range(0, n_full, L):
            transpose_block(a, i * N + j, N, out, j * M + i, M)
    for i in range(m_full, M):
        for j in range(N):
            out[j, i] = a[i, j]
    for i in range(m_full):
        for j in range(n_full, N):
            out[j, i] = a[i, j]


# ----------------------------------------------------------------- regions
# One call per thread (yscv/compute/regions.py); each claims blocks of rows of
# ``c`` (``[bounds[k], bounds[k + 1])``) until none is left.
@jit
def matmul_region(a, b, c, bounds, st):
    """``c = a @ b`` (``a[M, K]``, ``b[K, N]``), by blocks of rows of ``c``."""
    for k in region_chunks(st, bounds.shape[0] - 1):
        matmul_rows(a, b, c, bounds[k], bounds[k + 1])


@jit
def matmul_tn_region(x, b, c, bounds, st):
    """``c += x.T @ b`` (``x[K, M]``, ``b[K, N]``, ``c[M, N]``), by blocks of
    rows of ``c`` (the bounds multiples of 4)."""
    K = x.shape[0]
    zero = K - K                      # run-time integers: see recurrent_seq.param_grads_rows
    one = zero + 1
    x3 = x.reshape((1, K, x.shape[1]))
    b3 = b.reshape((1, K, b.shape[1]))
    for k in region_chunks(st, bounds.shape[0] - 1):
        matmul_tn_steps(x3, b3, c, zero, one, zero, zero, K, bounds[k], bounds[k + 1])


# ------------------------------------------------- batched outer products
@jit
def outer_rows_region(a, b, c, bounds, st):
    """``c[i, m, n] = a[i, m] * b[i, n]`` for ``a[B, M]``, ``b[B, N]``,
    ``c[B, M, N]`` (C-contiguous, flat views of rows ``i`` in chunk
    ``[bounds[k], bounds[k + 1])``): a batch of rank-1 products, vmap's
    per-sample weight gradients ``x^T g`` of a linear layer. One rounding
    per element, the bits of ``np.multiply``."""
    M = a.shape[1]
    N = b.shape[1]
    for k in region_chunks(st, bounds.shape[0] - 1):
        for i in range(bounds[k], bounds[k + 1]):
            for m in range(M):
                s = a[i, m]
                for n in range(N):
                    c[i, m, n] = s * b[i, n]

