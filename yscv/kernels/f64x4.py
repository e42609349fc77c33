"""``F64x4``: four float64 lanes in one register, for sums whose order the
source fixes.

Numba runs LLVM's loop vectoriser but not its SLP vectoriser, so scalar
accumulators written side by side stay scalar, and the loop vectoriser only
vectorises a float sum it may reassociate (fast-math, which the project does
not use). ``F64x4`` is a value of four float64 lanes (LLVM ``<4 x double>``,
kept in a register); the intrinsics below are plain lane-wise IEEE
operations, so a sum written with them has exactly the order the source
gives, on every machine (without AVX LLVM splits each into two SSE2 halves,
same results), and is not contracted into FMAs. Loads widen float32 to
float64 exactly. Used by the layer-norm kernels (yscv/kernels/layer_norm.py);
yscv/kernels/simd.py holds the data-dtype vectors of the other kernels.

=====================  ====================================================
``vzero()``            ``[0, 0, 0, 0]``
``vsplat(s)``          ``[s, s, s, s]`` (``s`` float64)
``vadd vsub vmul``     lane-wise IEEE operations
``vload(a, i)``        ``a[i:i + 4]`` widened to float64 (no bounds check)
``vstore(a, i, v)``    ``a[i:i + 4] = v`` (``a`` float64, no bounds check)
``hsum(v)``            ``(v[0] + v[1]) + (v[2] + v[3])``
=====================  ====================================================
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, models, register_model



class F64x4Type(types.Type):
    """Four float64 lanes (see the module docstring)."""

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
