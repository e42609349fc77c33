"""Explicit SIMD vectors for kernels: one register of float32 or float64 lanes.

Numba runs LLVM's loop vectoriser but not its SLP vectoriser, so register
blocking (a GEMM tile keeping 16 accumulators in registers, say) cannot be
written with scalars or small arrays: the accumulators would live in memory.
``Vec`` is an LLVM vector value (``<16 x float>`` / ``<8 x double>`` on a
CPU with AVX-512, ``<8 x float>`` / ``<4 x double>`` otherwise) that Numba
keeps in a register, with lane-wise intrinsics:

=====================  ====================================================
``vload(a, i)``        ``a.flat[i : i + L]`` (``a`` C-contiguous, any ndim)
``vstore(a, i, v)``    ``a.flat[i : i + L] = v``
``vsplat(x)``          ``[x] * L`` (``x`` a float32 / float64 scalar)
``vzero(a)``           zeros of ``a``'s dtype (``a`` an array or a scalar)
``vfma(x, y, z)``      ``x * y + z`` with one rounding (IEEE fused
                       multiply-add; a separate multiply and add, two
                       roundings, on a CPU without FMA)
``fma(x, y, z)``       the same for scalars (loops of it vectorise)
``vadd vsub vmul``     lane-wise IEEE operations
``lanes(a)``           ``L`` for ``a``'s dtype, a compile-time constant
``transpose_block``    an ``L x L`` block of one array, transposed into
                       another (in registers; see its docstring)
``copy_run``           ``copy_run(d, i, s, j, n)``: ``d.flat[i : i + n] =
                       s.flat[j : j + n]`` (one memcpy)
``zero_run``           ``zero_run(a, i, n)``: ``a.flat[i : i + n] = 0``
                       (one memset)
=====================  ====================================================

``L = VBYTES // itemsize``: ``VBYTES`` is 64 where the target CPU has AVX-512
and 32 otherwise (the target is the one Numba compiles for: the host, or
``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``; Numba's cache keys on it too).
Loads and stores do no bounds checks: callers keep ``i + L <= a.size``.
Every operation is exact IEEE arithmetic in the array's dtype (no fast-math,
no promotion); results do not depend on the vector width.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import config
from numba.extending import intrinsic, models, register_model


def _target_features() -> str:
    """The feature string Numba compiles for (``+avx512f,...``)."""
    if config.CPU_FEATURES is not None:
        return config.CPU_FEATURES
    import llvmlite.binding as ll

    return ll.get_host_cpu_features().flatten()


_FEATURES = _target_features().split(",")
#: bytes per vector register used by the kernels
VBYTES = 64 if "+avx512f" in _FEATURES else 32
_HAS_FMA = "+fma" in _FEATURES


class VecType(types.Type):
    """``L`` lanes of ``dtype`` (float32 or float64) in one register."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = VBYTES // (dtype.bitwidth // 8)
        super().__init__(name=f"yscv.Vec({dtype}x{self.lanes})")


_VEC = {types.float32: VecType(types.float32), types.float64: VecType(types.float64)}
_LLVM_FLOAT = {types.float32: ir.FloatType(), types.float64: ir.DoubleType()}


def _llvm_vec(vt: VecType):
    return ir.VectorType(_LLVM_FLOAT[vt.dtype], vt.lanes)


@register_model(VecType)
class _VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _llvm_vec(fe_type))


def _float_array(a) -> bool:
    return isinstance(a, types.Array) and a.layout == "C" and a.dtype in _VEC


def splat_ir(builder, vt: VecType, x):
    """IR of ``[x] * L`` (an insert and a broadcast shuffle) for a scalar value."""
    lty = _llvm_vec(vt)
    v = builder.insert_element(ir.Constant(lty, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vt.lanes), [0] * vt.lanes)
    return builder.shuffle_vector(v, ir.Constant(lty, ir.Undefined), mask)


def fma_ir(builder, vt: VecType):
    """The module's declaration of the lane-wise fused multiply-add for ``vt``:
    ``llvm.fma`` (one rounding), or ``llvm.fmuladd`` on a CPU without FMA."""
    lty = _llvm_vec(vt)
    name = ("llvm.fma." if _HAS_FMA else "llvm.fmuladd.") + f"v{vt.lanes}f{vt.dtype.bitwidth}"
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(lty, [lty, lty, lty]), name)
    return fn


def _elem_ptr(context, builder, aty, arr_val, idx_val, idx_ty, vt):
    arr = context.make_array(aty)(context, builder, arr_val)
    idx = context.cast(builder, idx_val, idx_ty, types.intp)
    ptr = builder.gep(arr.data, [idx], inbounds=True)
    return builder.bitcast(ptr, ir.PointerType(_llvm_vec(vt)))


@intrinsic
def vload(typingctx, a, i):
    """``a.flat[i : i + L]`` as a vector; ``a`` C-contiguous float32/64."""
    if not (_float_array(a) and isinstance(i, types.Integer)):
        return None
    vt = _VEC[a.dtype]

    def codegen(context, builder, sig, args):
        ptr = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], vt)
        return builder.load(ptr, align=vt.dtype.bitwidth // 8)
    return vt(a, i), codegen


@intrinsic
def vstore(typingctx, a, i, v):
    """``a.flat[i : i + L] = v``; ``a`` writeable C-contiguous, ``v`` of its dtype."""
    if not (_float_array(a) and a.mutable and isinstance(i, types.Integer)
            and v == _VEC[a.dtype]):
        return None

    def codegen(context, builder, sig, args):
        ptr = _elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], v)
        builder.store(args[2], ptr, align=v.dtype.bitwidth // 8)
        return context.get_dummy_value()
    return types.none(a, i, v), codegen


@intrinsic
def vsplat(typingctx, x):
    """``[x, x, ..., x]`` for a float32 or float64 scalar ``x``."""
    if x not in _VEC:
        return None
    vt = _VEC[x]

    def codegen(context, builder, sig, args):
        return splat_ir(builder, vt, args[0])
    return vt(x), codegen


def _dtype_of(a):
    if isinstance(a, types.Array):
        return a.dtype
    return a


@intrinsic
def vzero(typingctx, a):
    """Zeros with the dtype of ``a`` (an array or a float scalar)."""
    dt = _dtype_of(a)
    if dt not in _VEC:
        return None
    vt = _VEC[dt]

    def codegen(context, builder, sig, args):
        return ir.Constant(_llvm_vec(vt), [0.0] * vt.lanes)
    return vt(a), codegen


@intrinsic
def lanes(typingctx, a):
    """Lanes per vector for the dtype of ``a`` (array or scalar): a constant."""
    dt = _dtype_of(a)
    if dt not in _VEC:
        return None
    n = _VEC[dt].lanes

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(64), n)
    return types.intp(a), codegen


def _binary(op: str):
    @intrinsic
    def fn(typingctx, x, y):
        if not (isinstance(x, VecType) and x == y):
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1])
        return x(x, y), codegen
    fn.__doc__ = f"Lane-wise IEEE ``{op}``."
    return fn


vadd = _binary("fadd")
vsub = _binary("fsub")
vmul = _binary("fmul")


@intrinsic
def vfma(typingctx, x, y, z):
    """``x * y + z`` lane-wise, rounded once (``llvm.fma``); two roundings
    (``llvm.fmuladd``, lowered to a multiply and an add) on a CPU without FMA."""
    if not (isinstance(x, VecType) and x == y == z):
        return None

    def codegen(context, builder, sig, args):
        return builder.call(fma_ir(builder, x), list(args))
    return x(x, y, z), codegen


@intrinsic
def fma(typingctx, x, y, z):
    """Scalar ``x * y + z`` for float32 / float64 operands of one type,
    rounded once (``llvm.fma``), or a multiply and an add (``llvm.fmuladd``)
    on a CPU without FMA, as `vfma`. In a loop the vectoriser widens
    it to ``vfmadd``: the rounding PyTorch's vectorised CPU kernels give
    ``add(alpha=)``, ``addcmul`` and ``lerp`` (built for the same CPU)."""
    if not (isinstance(x, types.Float) and x == y == z):
        return None

    def codegen(context, builder, sig, args):
        lty = context.get_value_type(x)
        name = ("llvm.fma." if _HAS_FMA else "llvm.fmuladd.") + f"f{x.bitwidth}"
        fn = builder.module.globals.get(name)
        if fn is None:
            fn = ir.Function(builder.module, ir.FunctionType(lty, [lty, lty, lty]), name)
        return builder.call(fn, list(args))
    return x(x, y, z), codegen


def _transpose_masks(lanes_: int, step: int):
    """Shuffle masks swapping the off-diagonal ``step x step`` sub-blocks of
    the row pair (i, i + step): lane j of the new row i takes row i's lane j
    where ``j & step`` is 0, else row i+step's lane ``j - step``; the new row
    i+step takes row i's lane ``j + step`` or row i+step's lane j.
    (Indices ``>= lanes_`` select the second operand.)"""
    lo = [j if j & step == 0 else lanes_ + j - step for j in range(lanes_)]
    hi = [j + step if j & step == 0 else lanes_ + j for j in range(lanes_)]
    return lo, hi


@intrinsic
def transpose_block(typingctx, src, si, s_stride, dst, di, d_stride):
    """``dst[r][c] = src[c][r]`` for an ``L x L`` block: rows ``r`` of the
    block start at ``src.flat[si + r * s_stride]`` and its columns are written
    as rows ``dst.flat[di + c * d_stride : + L]``. Loads L vectors, swaps
    sub-blocks of size L/2, L/4, ..., 1 between row pairs with two-source
    shuffles (``L * log2(L)`` of them), stores L vectors. Exact copies."""
    if not (_float_array(src) and _float_array(dst) and dst.mutable
            and src.dtype == dst.dtype and all(isinstance(a, types.Integer)
                                               for a in (si, s_stride, di, d_stride))):
        return None
    vt = _VEC[src.dtype]

    def codegen(context, builder, sig, args):
        n = vt.lanes
        lty = _llvm_vec(vt)
        al = vt.dtype.bitwidth // 8
        s_ty, si_ty, ss_ty, d_ty, di_ty, ds_ty = sig.args
        s_arr, si_v, ss_v, d_arr, di_v, ds_v = args
        si_v = context.cast(builder, si_v, si_ty, types.intp)
        ss_v = context.cast(builder, ss_v, ss_ty, types.intp)
        di_v = context.cast(builder, di_v, di_ty, types.intp)
        ds_v = context.cast(builder, ds_v, ds_ty, types.intp)
        intp = context.get_value_type(types.intp)
        rows = []
        for r in range(n):
            off = builder.add(si_v, builder.mul(ss_v, ir.Constant(intp, r)))
            ptr = _elem_ptr(context, builder, s_ty, s_arr, off, types.intp, vt)
            rows.append(builder.load(ptr, align=al))
        step = n // 2
        while step >= 1:
            lo, hi = _transpose_masks(n, step)
            mlo = ir.Constant(ir.VectorType(ir.IntType(32), n), lo)
            mhi = ir.Constant(ir.VectorType(ir.IntType(32), n), hi)
            for i in range(n):
                if i & step:
                    continue
                a, b = rows[i], rows[i + step]
                rows[i] = builder.shuffle_vector(a, b, mlo)
                rows[i + step] = builder.shuffle_vector(a, b, mhi)
            step //= 2
        for c in range(n):
            off = builder.add(di_v, builder.mul(ds_v, ir.Constant(intp, c)))
            ptr = _elem_ptr(context, builder, d_ty, d_arr, off, types.intp, vt)
            builder.store(rows[c], ptr, align=al)
        assert lty == rows[0].type
        return context.get_dummy_value()
    return types.none(src, si, s_stride, dst, di, d_stride), codegen


# ------------------------------------------------------- runs of elements
def _contiguous(a, writeable: bool = False) -> bool:
    return (isinstance(a, types.Array) and a.layout == "C"
            and isinstance(a.dtype, (types.Float, types.Integer))
            and (a.mutable or not writeable))


def _run_args(context, builder, aty, arr_val, idx_val, idx_ty, n_val, n_ty):
    """(element pointer of ``a.flat[i]``, bytes of ``n`` elements; 0 when n <= 0)."""
    arr = context.make_array(aty)(context, builder, arr_val)
    idx = context.cast(builder, idx_val, idx_ty, types.intp)
    n = context.cast(builder, n_val, n_ty, types.intp)
    n = builder.select(builder.icmp_signed(">", n, ir.Constant(n.type, 0)), n,
                       ir.Constant(n.type, 0))
    size = context.get_abi_sizeof(context.get_data_type(aty.dtype))
    return builder.gep(arr.data, [idx], inbounds=True), builder.mul(n, ir.Constant(n.type, size))


_I8P = ir.IntType(8).as_pointer()


@intrinsic
def copy_run(typingctx, dst, i, src, j, n):
    """``dst.flat[i : i + n] = src.flat[j : j + n]`` (``llvm.memcpy``): both
    C-contiguous with one dtype, the runs not overlapping, in bounds; nothing
    for ``n <= 0``. One call where a loop would be vectorised with run-time
    overlap checks and a scalar tail, each compiled on a cold start."""
    if not (_contiguous(dst, True) and _contiguous(src) and dst.dtype == src.dtype
            and all(isinstance(t, types.Integer) for t in (i, j, n))):
        return None

    def codegen(context, builder, sig, args):
        dptr, nbytes = _run_args(context, builder, sig.args[0], args[0], args[1], sig.args[1],
                                 args[4], sig.args[4])
        sptr, _ = _run_args(context, builder, sig.args[2], args[2], args[3], sig.args[3],
                            args[4], sig.args[4])
        fn = builder.module.declare_intrinsic("llvm.memcpy", [_I8P, _I8P, nbytes.type])
        builder.call(fn, [builder.bitcast(dptr, _I8P), builder.bitcast(sptr, _I8P), nbytes,
                          ir.Constant(ir.IntType(1), 0)])
        return context.get_dummy_value()
    return types.none(dst, i, src, j, n), codegen


@intrinsic
def zero_run(typingctx, a, i, n):
    """``a.flat[i : i + n] = 0`` (all bits zero: +0.0; ``llvm.memset``);
    ``a`` writeable C-contiguous, the run in bounds; nothing for ``n <= 0``."""
    if not (_contiguous(a, True) and isinstance(i, types.Integer)
            and isinstance(n, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr, nbytes = _run_args(context, builder, sig.args[0], args[0], args[1], sig.args[1],
                                args[2], sig.args[2])
        fn = builder.module.declare_intrinsic("llvm.memset", [_I8P, nbytes.type])
        builder.call(fn, [builder.bitcast(ptr, _I8P), ir.Constant(ir.IntType(8), 0), nbytes,
                          ir.Constant(ir.IntType(1), 0)])
        return context.get_dummy_value()
    return types.none(a, i, n), codegen
