"""Register-blocked matrix products for kernels that run a GEMM next to other
work in one call (the recurrent ops' per-step products and their weight
gradients), where a BLAS call per step would cost its dispatch and could not
share a thread's cache with the work around it.

Two products, on C-contiguous arrays of one float dtype (no promotion):

* :func:`matmul_rows` -- ``c[r0:r1] = a[r0:r1] @ b`` (or ``+=``), a row range
  of ``a[M, K] @ b[K, N]``: disjoint row ranges can run on different threads.
* :func:`matmul_tn_steps` -- ``c += sum_t sum_i outer(a[t - shift, i], b[t, i])``
  over steps ``t`` in ``[t0, t1)`` and rows ``i`` in ``[i0, i1)`` of
  ``a[Ta, R, M]`` and ``b[T, R, N]``: a weight gradient ``X^T G`` summed over
  a sequence and a block of batch rows, without gathering the rows first.

A product with a transposed weight (``g @ w.T``) takes ``w.T`` made once by
:func:`transpose_into` (an in-register block transpose: ~25x faster than
``np.ascontiguousarray(w.T)`` here), so every product above is of one form
and every element's sum runs over ``k`` in order, lane by lane: results do not
depend on the vector width.

Tiles. The inner tile is 4 rows x 4 vectors (4 x 64 float32 columns with
AVX-512): 16 accumulators stay in registers, and each step of the ``k`` loop
loads 4 vectors of ``b``, broadcasts 4 scalars of ``a`` and issues 16 fused
multiply-adds (yscv/kernels/simd.py). Edges use the same loop with fewer
accumulators: 4 x 1 vectors for the last full vectors of a row, 1 x 4 and
1 x 1 for the last rows, and a scalar loop for the last ``N % L`` columns.

Numerics: every element is ``c0 + a[., 0] * b[0, .] + a[., 1] * b[1, .] + ...``
summed in ``k`` order with one rounding per fused multiply-add (``c0`` = 0,
or ``c``'s value when accumulating). The order does not depend on the row
range, the tile an element falls in or the thread that runs it, so splitting
the rows over threads gives bit-identical results. (The scalar column tail
rounds the product and the sum separately; it runs in the same order.)
"""
from __future__ import annotations

import numpy as np

from ._jit import jit
from .simd import lanes, transpose_block, vfma, vload, vsplat, vstore, vzero


# ------------------------------------------------------------ c (+)= a @ b
@jit
def _nn_4x4(a, b, c, r, j, accumulate):
    """c[r:r+4, j:j+4L] (+)= a[r:r+4] @ b[:, j:j+4L]."""
    K = a.shape[1]
    N = b.shape[1]
    L = lanes(c)
    o0 = r * N + j
    o1 = o0 + N
    o2 = o1 + N
    o3 = o2 + N
    if accumulate:
        c00 = vload(c, o0); c01 = vload(c, o0 + L); c02 = vload(c, o0 + 2 * L); c03 = vload(c, o0 + 3 * L)
        c10 = vload(c, o1); c11 = vload(c, o1 + L); c12 = vload(c, o1 + 2 * L); c13 = vload(c, o1 + 3 * L)
        c20 = vload(c, o2); c21 = vload(c, o2 + L); c22 = vload(c, o2 + 2 * L); c23 = vload(c, o2 + 3 * L)
        c30 = vload(c, o3); c31 = vload(c, o3 + L); c32 = vload(c, o3 + 2 * L); c33 = vload(c, o3 + 3 * L)
    else:
        c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = vzero(c)
        c20 = c21 = c22 = c23 = c30 = c31 = c32 = c33 = vzero(c)
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
def _nn_4x1(a, b, c, r, j, accumulate):
    """c[r:r+4, j:j+L] (+)= a[r:r+4] @ b[:, j:j+L]."""
    K = a.shape[1]
    N = b.shape[1]
    o0 = r * N + j
    if accumulate:
        c0 = vload(c, o0); c1 = vload(c, o0 + N); c2 = vload(c, o0 + 2 * N); c3 = vload(c, o0 + 3 * N)
    else:
        c0 = c1 = c2 = c3 = vzero(c)
    for k in range(K):
        bv = vload(b, k * N + j)
        c0 = vfma(vsplat(a[r, k]), bv, c0)
        c1 = vfma(vsplat(a[r + 1, k]), bv, c1)
        c2 = vfma(vsplat(a[r + 2, k]), bv, c2)
        c3 = vfma(vsplat(a[r + 3, k]), bv, c3)
    vstore(c, o0, c0); vstore(c, o0 + N, c1); vstore(c, o0 + 2 * N, c2); vstore(c, o0 + 3 * N, c3)


@jit
def _nn_1x4(a, b, c, r, j, accumulate):
    """c[r, j:j+4L] (+)= a[r] @ b[:, j:j+4L]."""
    K = a.shape[1]
    N = b.shape[1]
    L = lanes(c)
    o = r * N + j
    if accumulate:
        c0 = vload(c, o); c1 = vload(c, o + L); c2 = vload(c, o + 2 * L); c3 = vload(c, o + 3 * L)
    else:
        c0 = c1 = c2 = c3 = vzero(c)
    for k in range(K):
        q = k * N + j
        s = vsplat(a[r, k])
        c0 = vfma(s, vload(b, q), c0)
        c1 = vfma(s, vload(b, q + L), c1)
        c2 = vfma(s, vload(b, q + 2 * L), c2)
        c3 = vfma(s, vload(b, q + 3 * L), c3)
    vstore(c, o, c0); vstore(c, o + L, c1); vstore(c, o + 2 * L, c2); vstore(c, o + 3 * L, c3)


@jit
def _nn_1x1(a, b, c, r, j, accumulate):
    """c[r, j:j+L] (+)= a[r] @ b[:, j:j+L]."""
    K = a.shape[1]
    N = b.shape[1]
    o = r * N + j
    acc = vload(c, o) if accumulate else vzero(c)
    for k in range(K):
        acc = vfma(vsplat(a[r, k]), vload(b, k * N + j), acc)
    vstore(c, o, acc)


@jit
def _nn_scalar(a, b, c, r, j0, accumulate):
    """c[r, j0:] (+)= a[r] @ b[:, j0:], one column at a time (the tail)."""
    K = a.shape[1]
    N = b.shape[1]
    zero = c.dtype.type(0)
    for j in range(j0, N):
        s = c[r, j] if accumulate else zero
        for k in range(K):
            s += a[r, k] * b[k, j]
        c[r, j] = s


@jit
def matmul_rows(a, b, c, r0, r1, accumulate):
    """Rows ``[r0, r1)`` of ``c = a @ b`` (``accumulate``: ``c += a @ b``).

    ``a[M, K]``, ``b[K, N]``, ``c[M, N]``: C-contiguous, one float dtype;
    ``c`` must not overlap ``a`` or ``b``. ``K = 0`` gives zeros (or leaves
    ``c`` as it is).
    """
    N = b.shape[1]
    L = lanes(c)
    w = 4 * L
    n_tiles = N - N % w
    n_vecs = N - N % L
    r = r0
    while r + 4 <= r1:
        for j in range(0, n_tiles, w):
            _nn_4x4(a, b, c, r, j, accumulate)
        for j in range(n_tiles, n_vecs, L):
            _nn_4x1(a, b, c, r, j, accumulate)
        for i in range(r, r + 4):
            _nn_scalar(a, b, c, i, n_vecs, accumulate)
        r += 4
    while r < r1:
        for j in range(0, n_tiles, w):
            _nn_1x4(a, b, c, r, j, accumulate)
        for j in range(n_tiles, n_vecs, L):
            _nn_1x1(a, b, c, r, j, accumulate)
        _nn_scalar(a, b, c, r, n_vecs, accumulate)
        r += 1


# ------------------------------------------- c += sum_t a[t - shift]^T b[t]
@jit
def _tn_4x1(a, b, c, m, j, t0, t1, shift, i0, i1):
    """c[m:m+4, j:j+L] += the same sum over one vector of columns."""
    R, M = a.shape[1], a.shape[2]
    N = b.shape[2]
    o0 = m * N + j
    c0 = vload(c, o0); c1 = vload(c, o0 + N); c2 = vload(c, o0 + 2 * N); c3 = vload(c, o0 + 3 * N)
    for t in range(t0, t1):
        for i in range(i0, i1):
            bv = vload(b, (t * R + i) * N + j)
            p = ((t - shift) * R + i) * M + m
            c0 = vfma(vsplat(a.flat[p]), bv, c0)
            c1 = vfma(vsplat(a.flat[p + 1]), bv, c1)
            c2 = vfma(vsplat(a.flat[p + 2]), bv, c2)
            c3 = vfma(vsplat(a.flat[p + 3]), bv, c3)
    vstore(c, o0, c0); vstore(c, o0 + N, c1); vstore(c, o0 + 2 * N, c2); vstore(c, o0 + 3 * N, c3)


@jit
def _tn_1x4(a, b, c, m, j, t0, t1, shift, i0, i1):
    """c[m, j:j+4L] += the same sum for one row of ``c``."""
    R, M = a.shape[1], a.shape[2]
    N = b.shape[2]
    L = lanes(c)
    o = m * N + j
    c0 = vload(c, o); c1 = vload(c, o + L); c2 = vload(c, o + 2 * L); c3 = vload(c, o + 3 * L)
    for t in range(t0, t1):
        for i in range(i0, i1):
            q = (t * R + i) * N + j
            s = vsplat(a.flat[((t - shift) * R + i) * M + m])
            c0 = vfma(s, vload(b, q), c0)
            c1 = vfma(s, vload(b, q + L), c1)
            c2 = vfma(s, vload(b, q + 2 * L), c2)
            c3 = vfma(s, vload(b, q + 3 * L), c3)
    vstore(c, o, c0); vstore(c, o + L, c1); vstore(c, o + 2 * L, c2); vstore(c, o + 3 * L, c3)


@jit
def _tn_1x1(a, b, c, m, j, t0, t1, shift, i0, i1):
    """c[m, j:j+L] += the same sum for one row and one vector."""
    R, M = a.shape[1], a.shape[2]
    N = b.shape[2]
    o = m * N + j
    acc = vload(c, o)
    for t in range(t0, t1):
        for i in range(i0, i1):
            acc = vfma(vsplat(a.flat[((t - shift) * R + i) * M + m]),
                       vload(b, (t * R + i) * N + j), acc)
    vstore(c, o, acc)


@jit
def _tn_scalar(a, b, c, m, j0, t0, t1, shift, i0, i1):
    """c[m, j0:] += the same sum, one column at a time (the tail)."""
    N = b.shape[2]
    for j in range(j0, N):
        s = c[m, j]
        for t in range(t0, t1):
            for i in range(i0, i1):
                s += a[t - shift, i, m] * b[t, i, j]
        c[m, j] = s


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


#: rows (steps x batch rows) per block of :func:`matmul_tn_steps`: a packed
#: column stripe of ``b`` (128 rows x 4 vectors = 32 KB with AVX-512 float32)
#: stays in L1 while every row tile of ``c`` reads it
_TN_BLOCK_ROWS = 128


@jit
def _pack_a(a, ap, s0, s1, shift, i0, i1, panels):
    """``ap[p, q] = a[t - shift, i, 4p:4p+4]`` for the rows ``q`` of a block."""
    for p in range(panels):
        q = 0
        for t in range(s0, s1):
            for i in range(i0, i1):
                src = a[t - shift, i]
                dst = ap[p, q]
                for u in range(4):
                    dst[u] = src[4 * p + u]
                q += 1


@jit
def _pack_b(b, bp, s0, s1, i0, i1, j):
    """``bp[q] = b[t, i, j:j+4L]`` for the rows ``q`` of a block."""
    R, N = b.shape[1], b.shape[2]
    L = lanes(bp)
    w = 4 * L
    q = 0
    for t in range(s0, s1):
        for i in range(i0, i1):
            src = (t * R + i) * N + j
            dst = q * w
            vstore(bp, dst, vload(b, src))
            vstore(bp, dst + L, vload(b, src + L))
            vstore(bp, dst + 2 * L, vload(b, src + 2 * L))
            vstore(bp, dst + 3 * L, vload(b, src + 3 * L))
            q += 1


@jit
def matmul_tn_steps(a, b, c, t0, t1, shift, i0, i1):
    """``c += sum_{t in [t0, t1)} sum_{i in [i0, i1)} outer(a[t - shift, i], b[t, i])``.

    ``a[Ta, R, M]``, ``b[T, R, N]``, ``c[M, N]``: C-contiguous, one float
    dtype; ``t - shift`` must index ``a``. For a recurrent layer with
    ``a = x`` (shift 0) this is ``dW_ih += X^T dG`` over the batch rows
    ``[i0, i1)``; with ``a = h`` and shift 1 it is ``dW_hh += H_{t-1}^T dG_t``.
    Each element of ``c`` adds its terms in ``(t, i)`` order.

    The rows go in blocks of about ``_TN_BLOCK_ROWS``. In a block, the 4-wide
    column panels of ``a`` and, one at a time, each 4-vector column stripe of
    ``b`` are first copied to contiguous buffers (rows of ``b`` lie
    ``N`` elements apart, so an unpacked stripe touches a new page every few
    rows: 151 GFLOP/s on one core instead of ~250 measured here); the
    4 x 4-vector tiles then run from L1. Edges (the last ``M % 4`` rows of
    ``c``, the last ``N % 4L`` columns) use the unpacked tiles.
    """
    M = a.shape[2]
    N = b.shape[2]
    L = lanes(c)
    w = 4 * L
    n_tiles = N - N % w
    n_vecs = N - N % L
    per_step = max(1, i1 - i0)
    steps = max(1, _TN_BLOCK_ROWS // per_step)
    panels = M // 4
    m_tiles = 4 * panels
    ap = np.empty((panels, steps * per_step, 4), dtype=c.dtype)
    bp = np.empty((steps * per_step, w), dtype=c.dtype)
    for s0 in range(t0, t1, steps):
        s1 = min(t1, s0 + steps)
        rows = (s1 - s0) * (i1 - i0)
        if n_tiles > 0 and panels > 0:
            _pack_a(a, ap, s0, s1, shift, i0, i1, panels)
        for j in range(0, n_tiles, w):
            if panels > 0:
                _pack_b(b, bp, s0, s1, i0, i1, j)
            for p in range(panels):
                _tn_packed_4x4(ap[p], bp, c, 4 * p, j, rows)
            for m in range(m_tiles, M):
                _tn_1x4(a, b, c, m, j, s0, s1, shift, i0, i1)
        for j in range(n_tiles, n_vecs, L):
            for m in range(0, m_tiles, 4):
                _tn_4x1(a, b, c, m, j, s0, s1, shift, i0, i1)
            for m in range(m_tiles, M):
                _tn_1x1(a, b, c, m, j, s0, s1, shift, i0, i1)
        for m in range(M):
            _tn_scalar(a, b, c, m, n_vecs, s0, s1, shift, i0, i1)


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
