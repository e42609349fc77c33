"""Register tiles of the direct convolution, emitted as LLVM IR.

:func:`register_tile` ``(R, V)`` makes one Numba intrinsic

    tile(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode)

that computes ``R`` rows x ``V`` vectors of the product of
yscv/kernels/conv_direct.py, ``c[i] (+)= sum_s xp[ro[i] + so[s]] * b[s]``,
with ``R * V`` accumulators in registers. It emits, in IR, this loop
(``L`` lanes per vector, ``fma`` one rounding: :func:`~.simd.vfma`; all
offsets uint64 element offsets, no bounds or wrap-around checks: the
callers keep every index inside its array)::

    o[r] = cb + (i0 + r) * ldc + j                  # row r of the tile in cf
    x[r] = ro[i0 + r]                               # row r's window in xf
    if mode == 2:   acc[r][v] = cf[o[r] + v*L : +L]       # accumulate on c
    elif mode == 1: acc[r][v] = init[j + v*L : +L]        # from the bias row
    else:           acc[r][v] = 0
    for s in range(s0, s1):
        q = so[s]
        bv[v] = bf[s * ldb + j + v*L : +L]          # v = 0 .. V-1
        for r in range(R):
            a = [xf[x[r] + q]] * L                  # a broadcast
            for v in range(V):
                acc[r][v] = fma(a, bv[v], acc[r][v])
    cf[o[r] + v*L : +L] = acc[r][v]                 # every r, v

``cf``, ``bf``, ``init`` flat C-contiguous arrays of the float dtype of
``xf`` (float32 or float64); ``ro``, ``so`` int64 tables; the integers any
width. The operations and their order per accumulator are those the
hand-unrolled tiles of earlier versions wrote with :mod:`.simd` calls, so the
results are the same bits.

Why IR. Written with ``vload``/``vsplat``/``vfma`` calls, an 8 x 2 tile is
~100 call sites, each typed, lowered and (``inline="always"``) copied by
Numba's front end, which was most of the region kernels' first compile
(not LLVM). Here the front end types one call per tile and the tile's IR is
built directly; LLVM compiles the same loop as before (docs/engine.md,
"Cold start"). The accumulators are loop-carried ``phi`` values (no
memory); the loop is ``s0 <= s < s1`` on signed int64, as ``range`` is.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .simd import _VEC, _float_array, _llvm_vec, fma_ir, splat_ir

_I64 = ir.IntType(64)


def _table(a) -> bool:
    return (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
            and a.dtype == types.int64)


def _emit(context, builder, sig, args, R: int, V: int):
    """The IR of the tile loop (module docstring) at the builder's position."""
    vt = _VEC[sig.args[8].dtype]          # cf's
    L = vt.lanes
    lty = _llvm_vec(vt)
    vptr = ir.PointerType(lty)
    al = vt.dtype.bitwidth // 8

    def data(k):
        return context.make_array(sig.args[k])(context, builder, args[k]).data

    def i64(k):
        return context.cast(builder, args[k], sig.args[k], types.int64)

    def const(n):
        return ir.Constant(_I64, n)

    def vec_at(ptr, off):           # the L elements at ptr[off]
        return builder.bitcast(builder.gep(ptr, [off], inbounds=True), vptr)

    xd, bd, cd, idat = data(0), data(6), data(8), data(12)
    i0, s0, s1, ldb, cb, ldc, j, mode = (i64(k) for k in (2, 4, 5, 7, 9, 10, 11, 13))
    o0 = builder.add(builder.add(cb, builder.mul(i0, ldc)), j)
    orow = [o0]
    for _ in range(1, R):
        orow.append(builder.add(orow[-1], ldc))
    rod = data(1)
    xrow = [builder.load(builder.gep(rod, [builder.add(i0, const(r))], inbounds=True))
            for r in range(R)]
    voff = [const(v * L) for v in range(V)]

    # start values: c (mode 2), the bias row (mode 1) or zero
    with builder.if_else(builder.icmp_signed("==", mode, const(2))) as (from_c, other):
        with from_c:
            from_c_vals = [builder.load(vec_at(cd, builder.add(orow[r], voff[v])), align=al)
                           for r in range(R) for v in range(V)]
            from_c_bb = builder.basic_block
        with other:
            zero = ir.Constant(lty, [0.0] * L)
            with builder.if_else(builder.icmp_signed("==", mode, const(1))) as (bias, zeros):
                with bias:
                    bias_vals = [builder.load(vec_at(idat, builder.add(j, voff[v])), align=al)
                                 for v in range(V)]
                    bias_bb = builder.basic_block
                with zeros:
                    zeros_bb = builder.basic_block
            start_row = []
            for v in range(V):
                p = builder.phi(lty)
                p.add_incoming(bias_vals[v], bias_bb)
                p.add_incoming(zero, zeros_bb)
                start_row.append(p)
            other_bb = builder.basic_block
    acc0 = []
    for k in range(R * V):
        p = builder.phi(lty)
        p.add_incoming(from_c_vals[k], from_c_bb)
        p.add_incoming(start_row[k % V], other_bb)
        acc0.append(p)

    # for s in range(s0, s1): the accumulators are the loop's phi values
    pre_bb = builder.basic_block
    head = builder.append_basic_block("tile.head")
    body = builder.append_basic_block("tile.body")
    done = builder.append_basic_block("tile.done")
    builder.branch(head)
    builder.position_at_end(head)
    s = builder.phi(_I64)
    s.add_incoming(s0, pre_bb)
    acc = []
    for k in range(R * V):
        p = builder.phi(lty)
        p.add_incoming(acc0[k], pre_bb)
        acc.append(p)
    builder.cbranch(builder.icmp_signed("<", s, s1), body, done)

    builder.position_at_end(body)
    sod = data(3)
    q = builder.load(builder.gep(sod, [s], inbounds=True))
    bq = builder.add(builder.mul(s, ldb), j)
    bv = [builder.load(vec_at(bd, builder.add(bq, voff[v])), align=al) for v in range(V)]
    fma = fma_ir(builder, vt)
    new = []
    for r in range(R):
        a = splat_ir(builder, vt, builder.load(builder.gep(xd, [builder.add(xrow[r], q)],
                                                           inbounds=True)))
        for v in range(V):
            new.append(builder.call(fma, [a, bv[v], acc[r * V + v]]))
    s.add_incoming(builder.add(s, const(1)), builder.basic_block)
    for k in range(R * V):
        acc[k].add_incoming(new[k], builder.basic_block)
    builder.branch(head)

    builder.position_at_end(done)
    for r in range(R):
        for v in range(V):
            builder.store(acc[r * V + v], vec_at(cd, builder.add(orow[r], voff[v])), align=al)
    return context.get_dummy_value()


def register_tile(R: int, V: int):
    """The ``R`` rows x ``V`` vectors tile intrinsic (module docstring)."""

    def tile(typingctx, xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode):
        ints = (i0, s0, s1, ldb, cb, ldc, j, mode)
        if not (_float_array(xf) and _float_array(bf) and _float_array(cf) and cf.mutable
                and _float_array(init) and xf.dtype == bf.dtype == cf.dtype == init.dtype
                and _table(ro) and _table(so)
                and all(isinstance(t, types.Integer) for t in ints)):
            return None
        sig = types.none(xf, ro, i0, so, s0, s1, bf, ldb, cf, cb, ldc, j, init, mode)

        def codegen(context, builder, sig, args):
            return _emit(context, builder, sig, args, R, V)
        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"tile{R}x{V}"
    tile.__doc__ = f"``c[i0:i0+{R}, j:j+{V}L]``: :func:`register_tile` ({R}, {V})."
    return intrinsic(tile)
