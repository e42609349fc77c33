"""Numba kernels of the normalization ops (batch, layer, group, instance norm).

Two layouts cover the four ops:

* **grouped columns** ``x[N, R, C]`` (C-contiguous): statistics per
  ``(n, group)`` over the ``R`` rows and the ``K`` consecutive channels of the
  group. Batch norm is ``N=1, K=1`` (rows = every position of the batch),
  instance norm ``K=1`` (rows = the spatial positions of one sample), group
  norm ``K = C // num_groups``. The kernels see it *packed*: ``x[N, R/P, W]``
  with ``P`` consecutive rows side by side (``W = P * C``, lane ``j`` holds
  channel ``j % C``; the ops layer picks ``P``, see ``packed_layout`` in
  yscv/ops/norm.py), so even a narrow tensor (C = 4) has long inner loops.
* **rows** ``x[M, C]``: layer norm, statistics per row over the last axis.

Every kernel works on a range of rows ``[r0, r1)`` and writes into
caller-allocated outputs, so the ops layer can run disjoint row ranges on
several threads (yscv/compute/regions.py). Reductions write one partial result
per chunk (index ``i``); the caller merges them in chunk order.

Precision without promotion: every reduction accumulates in float64 whatever
the data dtype, and statistics are returned as float64 (they are tiny). The
elementwise passes (normalise, input gradient) run in the data dtype, which
keeps float32 data at float32 speed; the mean is passed to them as a
two-term split ``mean_hi + mean_lo`` (both in the data dtype) and subtracted
as ``(x - mean_hi) - mean_lo``, so data with a large common offset (mean 1e4,
std 1) loses nothing: ``x - mean_hi`` is exact when x is near the mean.

Variance: shifted sums, never the raw ``E[x^2] - E[x]^2``. Each statistics
group accumulates ``sum(x - s)`` and ``sum((x - s)^2)`` around a shift ``s``
taken from the data, and ``M2 = sum((x-s)^2) - sum(x-s)^2 / n``. With a shift
near the mean this cancels nothing: the relative error of M2 is about
``eps64 * (1 + (mean - s)^2 / var)``. The grouped-column kernel walks its rows
in blocks of about ``_CHUNK`` elements; the first block is shifted by the
group's first value in the range (one value deviates from the mean by at
most ``sqrt(n) * std``, so the bound is ``eps64 * n_block``, at most ~1e-11
for the 65,536-element blocks and far less in practice), every later block
by the mean so far, and blocks (and the caller's row ranges) are merged with
Chan's pairwise update. Layer-norm rows use the row's first value (bound
``eps64 * C``).

Reductions without fast-math. No fast-math flags (project rule,
kernels/_jit.py), so LLVM keeps every floating-point sum in source order: a
plain ``s += d`` loop runs at one add per FP-add latency (~4 cycles), and
LLVM's loop vectoriser will not split it into SIMD lanes. Numba runs no SLP
vectoriser either, so eight scalar accumulators written side by side stay
eight scalar chains (measured: 1.37 ms instead of 1.93 ms for the row sums
of 4096x512 float32; ``fastmath={"reassoc"}``, which is not used, gives
0.33 ms). The sums are therefore written with independent accumulators in
the source, in two forms:

* **vector registers** (layer norm, per row): ``F64x4`` below is four
  float64 lanes in one register, with lane-wise add/sub/mul intrinsics. The
  forward's row sums use four vectors (16 lanes: element ``c`` goes to lane
  ``c % 16``), the backward's two (8 lanes); lanes combine as
  ``hsum((v0 + v1) + (v2 + v3))`` (``hsum(v) = (v0 + v1) + (v2 + v3)``),
  then the last ``C % 16`` (``C % 8``) elements are added in order. Row
  statistics 0.34 ms, backward kernel 1.1 ms instead of 1.8 ms with the
  lanes in memory (next form).
* **lanes in memory** (grouped kernels): per-channel sums over rows are
  independent across the ``W`` lanes of a packed row, so ``s[j] += d`` in a
  loop over ``j`` vectorises without reassociation (the statistics and the
  gradient sums add four rows per lane update,
  ``s[j] += (d0 + d1) + (d2 + d3)``: the lanes' loads and stores of the
  sums, not the data, bounded the passes, which got 1.3-1.5x faster than
  with two rows and one); each lane sums its rows in order, then lanes fold
  onto their channel in order (C = 4 float32 statistics of 2^21 values:
  2.1 ms serial per channel, 0.36 ms packed).

The summation order is thus fixed by the source and by the caller's chunk
split: identical on every machine and compiler, and no less accurate than
the serial loop (each running sum is 8-16x shorter).
"""
from __future__ import annotations

import math

import numpy as np

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, models, register_model

from ._jit import jit
from . import simd as sv

_CHUNK = 65536  # elements per block of the grouped-column statistics (256 KB float32, in L2)
_MIN_ROWS = 16  # rows per block at least, so very wide rows still amortise the merge


@jit
def group_stats(x, C, K, r0, r1, out, i):
    """Mean and sum of squared deviations per ``(n, group)`` over packed rows
    ``[r0, r1)`` of ``x[N, R', W]`` (``W = P * C``: ``P`` rows of ``C``
    channels side by side, lane ``j`` holding channel ``j % C``), written to
    ``out[i, 0]`` and ``out[i, 1]`` (float64 ``out[k, 2, N, G]``,
    ``G = C // K``; the range holds ``(r1 - r0) * P * K`` values per group).

    Groups are ``K`` consecutive channels. Blocks of rows are summed per lane
    as shifted data (``sum(x - s)``, ``sum((x - s)^2)``, ``s`` = the group's
    first value in the range for the first block, then the mean so far), the
    lanes folded onto their channel in order, and blocks merged with Chan's
    update; see the module docstring for the error bound.
    """
    N, _, W = x.shape
    G = C // K
    per_row = float((W // C) * K)        # values of a group in one packed row
    rows = max(_MIN_ROWS, _CHUNK // W)
    P = W // C
    s1 = np.empty(W)
    s2 = np.empty(W)
    shift = np.empty(W)                  # per lane: the shift of its channel's group
    group = np.empty(W, np.intp)         # per lane: its group (no integer division in loops)
    for j in range(W):
        group[j] = (j % C) // K
    mean = out[i, 0]
    m2 = out[i, 1]
    for n in range(N):
        mean[n, :] = 0.0
        m2[n, :] = 0.0
        if r1 <= r0:
            continue
        for j in range(W):
            shift[j] = x[n, r0, group[j] * K]
        count = 0.0
        for b0 in range(r0, r1, rows):
            b1 = min(b0 + rows, r1)
            s1[:] = 0.0
            s2[:] = 0.0
            r = b0
            while r + 4 <= b1:               # four rows per lane update
                xa = x[n, r]
                xb = x[n, r + 1]
                xc = x[n, r + 2]
                xd = x[n, r + 3]
                for j in range(W):
                    d = xa[j] - shift[j]
                    e = xb[j] - shift[j]
                    f = xc[j] - shift[j]
                    h = xd[j] - shift[j]
                    s1[j] += (d + e) + (f + h)
                    s2[j] += (d * d + e * e) + (f * f + h * h)
                r += 4
            while r < b1:
                xs = x[n, r]
                for j in range(W):
                    d = xs[j] - shift[j]
                    s1[j] += d
                    s2[j] += d * d
                r += 1
            for p in range(1, P):        # fold the lanes onto channels [0, C), in order
                for c in range(C):
                    s1[c] += s1[p * C + c]
                    s2[c] += s2[p * C + c]
            nb = (b1 - b0) * per_row
            total = count + nb
            w_new = nb / total
            w_cross = count * w_new
            for g in range(G):
                t1 = 0.0
                t2 = 0.0
                for k in range(g * K, g * K + K):
                    t1 += s1[k]
                    t2 += s2[k]
                bmean = t1 / nb
                delta = (shift[g * K] + bmean) - mean[n, g]
                mean[n, g] += delta * w_new
                m2[n, g] += (t2 - t1 * bmean) + delta * delta * w_cross
            for j in range(W):
                shift[j] = mean[n, group[j]]
            count = total
        for g in range(G):
            m2[n, g] = max(m2[n, g], 0.0)


@jit
def group_apply(x, coef, y, r0, r1):
    """``y = ((x - mean_hi) - mean_lo) * scale + shift`` for packed rows
    ``[r0, r1)`` of ``x[N, R', W]`` (as :func:`group_stats`). ``coef[N, 4,
    W]`` holds ``mean_hi``, ``mean_lo``, ``scale``, ``shift`` per lane, in
    ``x``'s dtype (``mean_hi + mean_lo`` is the float64 mean split in two);
    ``y`` too.

    Explicit vectors (yscv/kernels/simd.py), two per round, the same
    operations in the same order as the scalar tail (a separate multiply and
    add, so the results are the bits of the plain loop): LLVM vectorises the
    plain loop over a packed row too, but with runtime overlap checks of the
    arrays on every row, and it ran 1.3-1.6x slower (paired runs, one
    thread). The gradient's apply pass measured no gain from the same
    rewrite and keeps the plain loop."""
    N, R, W = x.shape
    L = sv.lanes(x)
    nv = W - W % L
    for n in range(N):
        cb = n * 4 * W
        for r in range(r0, r1):
            o = (n * R + r) * W
            j = 0
            while j + 2 * L <= nv:           # two vectors per round: independent chains
                k = j + L
                t0 = sv.vsub(sv.vsub(sv.vload(x, o + j), sv.vload(coef, cb + j)),
                             sv.vload(coef, cb + W + j))
                t1 = sv.vsub(sv.vsub(sv.vload(x, o + k), sv.vload(coef, cb + k)),
                             sv.vload(coef, cb + W + k))
                sv.vstore(y, o + j, sv.vadd(sv.vmul(t0, sv.vload(coef, cb + 2 * W + j)),
                                            sv.vload(coef, cb + 3 * W + j)))
                sv.vstore(y, o + k, sv.vadd(sv.vmul(t1, sv.vload(coef, cb + 2 * W + k)),
                                            sv.vload(coef, cb + 3 * W + k)))
                j += 2 * L
            while j < nv:
                t = sv.vsub(sv.vsub(sv.vload(x, o + j), sv.vload(coef, cb + j)),
                            sv.vload(coef, cb + W + j))
                sv.vstore(y, o + j, sv.vadd(sv.vmul(t, sv.vload(coef, cb + 2 * W + j)),
                                            sv.vload(coef, cb + 3 * W + j)))
                j += L
            for j in range(nv, W):
                y[n, r, j] = ((x[n, r, j] - coef[n, 0, j]) - coef[n, 1, j]) * coef[n, 2, j] \
                    + coef[n, 3, j]


@jit
def group_grad_sums(g, x, mean, C, r0, r1, out, i):
    """Per ``(n, c)`` over packed rows ``[r0, r1)`` of ``x[N, R', W]`` (as
    :func:`group_stats`), float64: ``sum g`` and ``sum g * (x - mean)``
    (``mean[N, W]`` per lane), written to ``out[i, 0]`` and ``out[i, 1]``
    (``out[k, 2, N, C]``); lanes summed in row order, then folded in order."""
    N, _, W = x.shape
    sg = np.empty(W)
    sgx = np.empty(W)
    for n in range(N):
        sg[:] = 0.0
        sgx[:] = 0.0
        mu = mean[n]
        r = r0
        while r + 4 <= r1:                   # four rows per lane update
            xa, xb, xc, xd = x[n, r], x[n, r + 1], x[n, r + 2], x[n, r + 3]
            ga, gb, gc, gd = g[n, r], g[n, r + 1], g[n, r + 2], g[n, r + 3]
            for j in range(W):
                va = np.float64(ga[j])
                vb = np.float64(gb[j])
                vc = np.float64(gc[j])
                vd = np.float64(gd[j])
                m = mu[j]
                sg[j] += (va + vb) + (vc + vd)
                sgx[j] += (va * (xa[j] - m) + vb * (xb[j] - m)) + (vc * (xc[j] - m) + vd * (xd[j] - m))
            r += 4
        while r < r1:
            xs = x[n, r]
            gs = g[n, r]
            for j in range(W):
                gv = np.float64(gs[j])
                sg[j] += gv
                sgx[j] += gv * (xs[j] - mu[j])
            r += 1
        for p in range(1, W // C):
            for c in range(C):
                sg[c] += sg[p * C + c]
                sgx[c] += sgx[p * C + c]
        for c in range(C):
            out[i, 0, n, c] = sg[c]
            out[i, 1, n, c] = sgx[c]


@jit
def group_grad_apply(g, x, coef, dx, r0, r1):
    """``dx = p * g + q * ((x - mean_hi) - mean_lo) + s`` for packed rows
    ``[r0, r1)``; ``coef[N, 5, W]`` holds ``mean_hi``, ``mean_lo``, ``p``,
    ``q``, ``s`` per lane (as :func:`group_apply`) in ``x``'s dtype."""
    N, _, W = x.shape
    for n in range(N):
        hi = coef[n, 0]
        lo = coef[n, 1]
        p = coef[n, 2]
        q = coef[n, 3]
        s = coef[n, 4]
        for r in range(r0, r1):
            xs = x[n, r]
            gs = g[n, r]
            ds = dx[n, r]
            for j in range(W):
                ds[j] = p[j] * gs[j] + q[j] * ((xs[j] - hi[j]) - lo[j]) + s[j]


# ------------------------------------------------- explicit float64 vectors
# Numba runs LLVM's loop vectoriser but not its SLP vectoriser, so scalar
# accumulators written side by side stay scalar, and the loop vectoriser only
# vectorises a float sum it may reassociate (fast-math). ``F64x4`` is a value
# of four float64 lanes (LLVM ``<4 x double>``, kept in a register); the
# intrinsics below are plain lane-wise IEEE operations, so a sum written with
# them has exactly the order the source gives, on every machine (without AVX
# LLVM splits each into two SSE2 halves, same results), and is not contracted
# into FMAs.


class F64x4Type(types.Type):
    """Four float64 lanes (see above)."""

    def __init__(self):
        super().__init__(name="yscv.F64x4")


f64x4 = F64x4Type()
_V4 = ir.VectorType(ir.DoubleType(), 4)
_I32 = ir.IntType(32)


@register_model(F64x4Type)
class _F64x4Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V4)


@intrinsic
def vzero(typingctx):
    """``[0, 0, 0, 0]``."""
    def codegen(context, builder, sig, args):
        return ir.Constant(_V4, [0.0] * 4)
    return f64x4(), codegen


@intrinsic
def vsplat(typingctx, s):
    """``[s, s, s, s]`` for a float64 ``s``."""
    if s != types.float64:
        return None

    def codegen(context, builder, sig, args):
        v = ir.Constant(_V4, ir.Undefined)
        for k in range(4):
            v = builder.insert_element(v, args[0], ir.Constant(_I32, k))
        return v
    return f64x4(s), codegen


def _lanewise(op: str):
    @intrinsic
    def fn(typingctx, a, b):
        if a != f64x4 or b != f64x4:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1])
        return f64x4(a, b), codegen
    return fn


vadd = _lanewise("fadd")
vsub = _lanewise("fsub")
vmul = _lanewise("fmul")


def _c_vector_array(a) -> bool:
    return (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
            and a.dtype in (types.float32, types.float64))


@intrinsic
def vload(typingctx, a, i):
    """``a[i:i + 4]`` as float64 lanes (float32 widened, exactly); ``a`` 1-d
    C-contiguous float32/float64. No bounds check: ``i + 4 <= len(a)``."""
    if not (_c_vector_array(a) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        aty = sig.args[0]
        arr = context.make_array(aty)(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        elt = context.get_value_type(aty.dtype)
        ptr = builder.bitcast(builder.gep(arr.data, [idx], inbounds=True),
                              ir.PointerType(ir.VectorType(elt, 4)))
        v = builder.load(ptr, align=aty.dtype.bitwidth // 8)
        return builder.fpext(v, _V4) if aty.dtype == types.float32 else v
    return f64x4(a, i), codegen


@intrinsic
def vstore(typingctx, a, i, v):
    """``a[i:i + 4] = v``; ``a`` 1-d C-contiguous float64, ``i + 4 <= len(a)``."""
    if not (_c_vector_array(a) and a.dtype == types.float64 and a.mutable
            and isinstance(i, types.Integer) and v == f64x4):
        return None

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = builder.bitcast(builder.gep(arr.data, [idx], inbounds=True), ir.PointerType(_V4))
        builder.store(args[2], ptr, align=8)
        return context.get_dummy_value()
    return types.none(a, i, v), codegen


@intrinsic
def hsum(typingctx, v):
    """``(v[0] + v[1]) + (v[2] + v[3])``."""
    if v != f64x4:
        return None

    def codegen(context, builder, sig, args):
        e = [builder.extract_element(args[0], ir.Constant(_I32, k)) for k in range(4)]
        return builder.fadd(builder.fadd(e[0], e[1]), builder.fadd(e[2], e[3]))
    return types.float64(v), codegen


# ---------------------------------------------------------------- layer norm
@jit
def layer_norm_forward(x, gamma, beta, eps, y, mean, var, r0, r1):
    """Layer norm of rows ``[r0, r1)`` of ``x[M, C]`` into ``y`` (x's dtype)
    and float64 ``mean[M]``, ``var[M]`` (biased); ``gamma``, ``beta`` ``[C]``
    in x's dtype.

    Row sums: 16 float64 lanes in four vectors (element ``c`` of the first
    ``C - C % 16`` goes to lane ``c % 16``), combined as
    ``hsum((v0 + v1) + (v2 + v3))``, then the last ``C % 16`` elements in
    order. Each row is read once from memory; the output pass finds it in
    cache.
    """
    M, C = x.shape
    C16 = C - C % 16
    for m in range(r0, r1):
        row = x[m]
        k = np.float64(row[0])
        kv = vsplat(k)
        a0 = vzero()
        a1 = vzero()
        a2 = vzero()
        a3 = vzero()
        b0 = vzero()
        b1 = vzero()
        b2 = vzero()
        b3 = vzero()
        for c in range(0, C16, 16):
            d0 = vsub(vload(row, c), kv)
            d1 = vsub(vload(row, c + 4), kv)
            d2 = vsub(vload(row, c + 8), kv)
            d3 = vsub(vload(row, c + 12), kv)
            a0 = vadd(a0, d0)
            a1 = vadd(a1, d1)
            a2 = vadd(a2, d2)
            a3 = vadd(a3, d3)
            b0 = vadd(b0, vmul(d0, d0))
            b1 = vadd(b1, vmul(d1, d1))
            b2 = vadd(b2, vmul(d2, d2))
            b3 = vadd(b3, vmul(d3, d3))
        s1 = hsum(vadd(vadd(a0, a1), vadd(a2, a3)))
        s2 = hsum(vadd(vadd(b0, b1), vadd(b2, b3)))
        for c in range(C16, C):
            d = row[c] - k
            s1 += d
            s2 += d * d
        dm = s1 / C
        mu = k + dm
        v = max(s2 - s1 * dm, 0.0) / C
        mean[m] = mu
        var[m] = v
        hi = x.dtype.type(mu)
        lo = x.dtype.type(mu - hi)
        inv = x.dtype.type(1.0 / math.sqrt(v + eps))
        yr = y[m]
        for c in range(C):
            yr[c] = ((row[c] - hi) - lo) * (inv * gamma[c]) + beta[c]


@jit
def layer_norm_backward(g, x, mean, inv, gamma, gamma64, dx, dgamma_out, dbeta_out, i,
                        r0, r1, need_dx, need_affine):
    """Backward of layer norm over rows ``[r0, r1)`` of ``x[M, C]``.

    With ``xhat = (x - mean) * inv`` and ``h = g * gamma``:
    ``dx = inv * (h - mean_c(h) - xhat * mean_c(h * xhat))`` (into ``dx``,
    x's dtype, when ``need_dx``), and the float64 partial sums over the range
    ``dgamma_out[i] = sum_m g * xhat``, ``dbeta_out[i] = sum_m g`` (when
    ``need_affine``; column sums, in row order). ``mean``, ``inv`` are float64
    ``[M]``; ``gamma`` is ``[C]`` in x's dtype and ``gamma64`` the same values
    in float64 (``g * gamma64`` is exact for float32 data).

    The row sums ``sum h`` and ``sum h * (x - mean)`` use 8 float64 lanes in
    two vectors (element ``c`` of the first ``C - C % 8`` to lane ``c % 8``),
    combined as ``hsum(v0 + v1)``, then the last ``C % 8`` in order; one pass
    over the row feeds them and the column sums, a second (in cache) writes
    ``dx``.
    """
    M, C = x.shape
    C8 = C - C % 8
    dg = dgamma_out[i]
    db = dbeta_out[i]
    if need_affine:
        dg[:] = 0.0
        db[:] = 0.0
    for m in range(r0, r1):
        mu = mean[m]
        iv = inv[m]
        grow = g[m]
        xrow = x[m]
        muv = vsplat(mu)
        ivv = vsplat(iv)
        a0 = vzero()
        a1 = vzero()
        b0 = vzero()
        b1 = vzero()
        for c in range(0, C8, 8):
            g0 = vload(grow, c)
            g1 = vload(grow, c + 4)
            d0 = vsub(vload(xrow, c), muv)
            d1 = vsub(vload(xrow, c + 4), muv)
            if need_dx:
                h0 = vmul(g0, vload(gamma64, c))
                h1 = vmul(g1, vload(gamma64, c + 4))
                a0 = vadd(a0, h0)
                a1 = vadd(a1, h1)
                b0 = vadd(b0, vmul(h0, d0))
                b1 = vadd(b1, vmul(h1, d1))
            if need_affine:
                vstore(dg, c, vadd(vload(dg, c), vmul(vmul(g0, d0), ivv)))
                vstore(dg, c + 4, vadd(vload(dg, c + 4), vmul(vmul(g1, d1), ivv)))
                vstore(db, c, vadd(vload(db, c), g0))
                vstore(db, c + 4, vadd(vload(db, c + 4), g1))
        sa = hsum(vadd(a0, a1))
        sb = hsum(vadd(b0, b1))
        for c in range(C8, C):
            gv = np.float64(grow[c])
            d = xrow[c] - mu
            h = gv * gamma64[c]
            sa += h
            sb += h * d
            if need_affine:
                dg[c] += gv * d * iv
                db[c] += gv
        if need_dx:
            hi = x.dtype.type(mu)
            lo = x.dtype.type(mu - hi)
            p = x.dtype.type(iv)
            q = x.dtype.type(-iv * iv * iv * sb / C)
            s = x.dtype.type(-iv * sa / C)
            dr = dx[m]
            for c in range(C):
                dr[c] = (grow[c] * gamma[c]) * p + ((xrow[c] - hi) - lo) * q + s
