"""Activation drivers: how the activation forwards and backward rules compute.

``ops/activation.py`` and ``backward/activation.py`` (and the losses that
need a sigmoid or a softplus) call these; the choices live here:

* size tiers: tiny arrays (the scalar-chain case) run NumPy ufuncs or Python
  floats, larger ones the fused one-pass kernels of
  `yscv.kernels.activation` (a Numba call has a fixed dispatch cost that
  only pays above the tiers below; numbers in docs/ops/activation.md);
* float32 tanh is ``np.tanh`` where NumPy has a vectorised float32 tanh for
  this CPU (`NUMPY_SIMD_TANH`), else, above `TANH_TINY`
  elements, a rational-function kernel (float64 keeps ``np.tanh``);
* kernel inputs are read-only flat (or [rows, C]) views, so Numba compiles one
  specialisation per dtype;
* softmax / log-softmax along any axis as an (outer, k, inner) layout, without
  a transpose;
* dropout's mask: drawn from ``np.random.default_rng(seed)``, saved packed to
  one bit per element.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels import lazy
from ..kernels.activation_kinds import (GELU_ERF, GELU_ERF_FROM_OUTPUT, GELU_SIGMOID, GELU_TANH,
                                        MISH, SIGMOID, SILU, SOFTPLUS, TANH)
from . import regions as par
from .arrays import readonly as ro

K = lazy("activation")
KS = lazy("softmax")

#: sigmoid / tanh backward: arrays with fewer elements use three NumPy
#: ufuncs, larger ones the fused kernel (crossover in docs/ops/activation.md).
TINY = 4096
#: float32 tanh forward without NUMPY_SIMD_TANH: below this size
#: ``np.tanh``, above it the rational-function kernel.
TANH_TINY = 1024
#: sigmoid forward: below this size ``exp(-logaddexp(0, -x))`` (4 ufuncs),
#: above it the fused kernel.
SIGMOID_TINY = 32

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _const(value, dtype):
    a = np.full((), value, dtype=dtype)
    a.flags.writeable = False
    return a


#: 0-d constants of each graph dtype: a ufunc with a same-dtype 0-d operand
#: skips the Python-scalar conversion on tiny arrays.
ZERO = {_F32: _const(0.0, _F32), _F64: _const(0.0, _F64)}
#: ... but a NumPy SCALAR where the other operand is a scalar already (0-d
#: inputs make ``y * y`` a scalar, and scalar - scalar skips the ufunc machinery)
ONE_SCALAR = {_F32: np.float32(1.0), _F64: np.float64(1.0)}

#: gelu's ``approximate`` argument -> kernel kind (the kinds are defined once,
#: in yscv/kernels/activation_kinds.py, a module without numba)
GELU_KINDS = {"none": GELU_ERF, "tanh": GELU_TANH, "sigmoid": GELU_SIGMOID}


def ro_flat(a: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous 1-D view of ``a`` (a copy only if ``a`` is not
    C-contiguous)."""
    v = a.ravel()  # a view when a is C-contiguous, else a C-ordered copy
    v.setflags(write=False)  # cheaper than assigning flags.writeable
    return v


def unary_forward(x: np.ndarray, kind: int, p0: float = 0.0, p1: float = 0.0):
    """act(x) by the fused kernel, into a NumPy-allocated output. One thread:
    splitting a call over two cores was slower end to end (docs/ops/activation.md)."""
    xf = ro_flat(x)
    y = np.empty(xf.shape, dtype=xf.dtype)
    K.unary_forward(xf, kind, p0, p1, y)
    return y.reshape(x.shape)


def unary_backward(g, x, y, kind: int, p0: float = 0.0, p1: float = 0.0):
    """g * act'(x) by the fused kernel (``y`` the output, when the kind reads it)."""
    gf = ro_flat(g)
    xf = ro_flat(x)
    yf = xf if y is x else ro_flat(y)
    out = np.empty(gf.shape, dtype=gf.dtype)
    K.unary_backward(gf, xf, yf, kind, p0, p1, out)
    return out.reshape(g.shape)


def gelu_grad(g, x, y, kind: int):
    """g * gelu'(x) given the forward's output ``y``: the erf form reads
    ``Phi(x) = y / x`` from it (no second erf per element; the same values
    within an ulp), the tanh and sigmoid forms recompute from ``x``."""
    if kind == GELU_ERF:
        return unary_backward(g, x, y, GELU_ERF_FROM_OUTPUT)
    return unary_backward(g, x, x, kind)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Stable sigmoid: Python floats for one element, ``exp(-logaddexp(0, -x))``
    (NumPy) on tiny arrays, the fused kernel otherwise."""
    if x.size == 1:  # Python floats, rounded once to the graph dtype
        v = x.item()
        if v >= 0.0:
            s = 1.0 / (1.0 + math.exp(-v))
        else:
            e = math.exp(v)
            s = e / (1.0 + e)
        if x.ndim == 0:
            return x.dtype.type(s)
        out = np.empty_like(x)
        out.fill(s)
        return out
    if x.size < SIGMOID_TINY:
        return np.exp(np.negative(np.logaddexp(ZERO[x.dtype], np.negative(x))))
    return unary_forward(x, SIGMOID)


def _numpy_simd_tanh() -> bool:
    """Whether NumPy dispatches a vectorised (not its baseline) float32 tanh
    on this CPU. Where it does, ``np.tanh`` beats the kernel at every size
    and is more accurate (Xeon, AVX-512: 0.9 vs 2.0 us at 2,048 elements,
    77 vs 121 us at 262,144; max error 1.4 vs 6.9 ulp; docs/ops/activation.md)."""
    try:
        from numpy.lib.introspect import opt_func_info
        current = opt_func_info(func_name="^tanh$", signature="float32")["tanh"]["ff"]["current"]
    except Exception:  # NumPy before 2.3, or another layout of the report
        return False
    return not current.startswith("baseline")


#: NumPy's float32 tanh is vectorised on this CPU (see _numpy_simd_tanh)
NUMPY_SIMD_TANH = _numpy_simd_tanh()


def tanh(x: np.ndarray) -> np.ndarray:
    """``np.tanh``; the float32 kernel above TANH_TINY where NumPy's float32
    tanh is not vectorised (`NUMPY_SIMD_TANH`)."""
    if NUMPY_SIMD_TANH or x.size < TANH_TINY or x.dtype != _F32:
        return np.tanh(x)
    return unary_forward(x, TANH)


def softplus_exact(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) for any x (the fused kernel with an infinite threshold)."""
    return unary_forward(x, SOFTPLUS, 1.0, float("inf"))


#: one-element tiers: ``g * f`` for a Python float ``f`` is computed as
#: ``_multiply(g, _asarray(f, g.dtype))``, the same bits as NumPy's ``g * f``
#: (``f`` rounded once to g's dtype, one multiply in that dtype; an
#: out-of-range ``f`` gives inf with the same warning), ~0.3 us cheaper on a
#: one-element array than a Python-float operand (docs/engine.md)
_multiply = np.multiply
_asarray = np.asarray


def sigmoid_grad(g: np.ndarray, s: np.ndarray) -> np.ndarray:
    """g * s * (1 - s) from the output s: NumPy scalars for 0-d, a factor
    computed in Python floats for one element (rounded once to the graph
    dtype, then one multiply),
    three ufuncs below TINY, the fused kernel above."""
    if g.ndim == 0:
        v = s[()]
        return g[()] * (v * (ONE_SCALAR[g.dtype] - v))
    if g.size == 1:
        v = s.item()
        return _multiply(g, _asarray(v * (1.0 - v), g.dtype))
    if g.size < TINY:
        d = g * s
        return np.multiply(d, np.subtract(ONE_SCALAR[g.dtype], s), out=d)
    return unary_backward(g, s, s, SIGMOID)


def tanh_grad(g: np.ndarray, t: np.ndarray) -> np.ndarray:
    """g * (1 - t * t) from the output t, tiered as `sigmoid_grad`."""
    if g.ndim == 0:
        v = t[()]
        return g[()] * (ONE_SCALAR[g.dtype] - v * v)
    if g.size == 1:
        v = t.item()
        return _multiply(g, _asarray(1.0 - v * v, g.dtype))
    if g.size < TINY:  # in place into one temporary: the same bits, one allocation
        d = t * t
        np.subtract(ONE_SCALAR[g.dtype], d, out=d)
        return np.multiply(g, d, out=d)
    return unary_backward(g, t, t, TANH)


#: ReLU forward / backward: arrays with at least this many elements run the
#: one-pass select kernel split over the cores (a conv layer's activations);
#: smaller ones NumPy (docs/ops/activation.md)
RELU_BIG = 1 << 16
#: elements per chunk of the ReLU select kernel (a function of the size only)
RELU_GRAIN = 1 << 16


#: relu_grad below RELU_BIG: arrays with fewer elements take np.where, larger
#: ones the same select on the bits (np.where is slow on a random mask)
RELU_SELECT_WHERE = 1024
_UINT = {_F32: np.int32, _F64: np.int64}


def _relu_select(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``g where not (x <= 0) else 0`` by the threaded one-pass kernel (flat
    contiguous float32/float64 of one dtype and shape; see `RELU_BIG`)."""
    out = np.empty(x.shape, dtype=x.dtype)
    n = x.size
    bounds = par.bounds(par.split(n, par.num_chunks(n, n, RELU_GRAIN)))
    gf, xf, of = ro(g.reshape(-1)), ro(x.reshape(-1)), out.reshape(-1)
    par.run_region(lambda st: K.relu_select(gf, xf, of, bounds, st), len(bounds) - 1)
    return out


def _big(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the ReLU kernel takes these operands (`RELU_BIG`)."""
    return (a.size >= RELU_BIG and a.shape == b.shape and a.dtype == b.dtype
            and a.dtype in ZERO and a.flags.c_contiguous and b.flags.c_contiguous)


def relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0) (NaN stays NaN); large arrays in one threaded pass."""
    if x.size >= RELU_BIG and _big(x, x):
        return _relu_select(x, x)
    return np.maximum(x, ZERO[x.dtype])


def relu_grad(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """PyTorch's threshold_backward: +0.0 where x <= 0 (whatever g is there),
    else g, so a NaN input passes its gradient on (``x > 0`` would drop it):
    the bits of ``np.where(x <= 0, 0, g)`` at every size. One element: a
    Python comparison; large arrays: one threaded pass (`RELU_BIG`)."""
    if x.size == 1:
        return np.zeros_like(g) if x.item() <= 0.0 else g
    if _big(g, x):
        return _relu_select(g, x)
    zero = ZERO[g.dtype]
    if x.size < RELU_SELECT_WHERE:
        return np.where(x <= zero, zero, g)
    # the same select as np.where (+0.0 where dropped, whatever g is there),
    # on the bits: np.where branches per element and is slow on a random mask
    drop = (x <= zero).view(np.int8)
    drop -= 1                                   # 0 where dropped, all ones where kept
    return np.bitwise_and(g.view(_UINT[g.dtype]), drop).view(g.dtype)


#: hardswish / hardsigmoid: arrays from this many elements run the one-pass
#: kernels (split over the cores from `RELU_GRAIN` elements a chunk), smaller
#: ones NumPy's ufuncs (four to six passes over the array)
HARD_KERNEL = 4096


def _hard_ok(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the hard-activation kernels take these operands: C-contiguous
    float32/float64 of one shape and dtype, from `HARD_KERNEL` elements."""
    return (a.size >= HARD_KERNEL and a.shape == b.shape and a.dtype == b.dtype
            and a.dtype in ZERO and a.flags.c_contiguous and b.flags.c_contiguous)


def _hard_region(kernel, arrays, out, swish: bool) -> None:
    n = out.size
    bounds = par.bounds(par.split(n, par.num_chunks(n, n, RELU_GRAIN)))
    flat = [ro(a.reshape(-1)) for a in arrays]
    of = out.reshape(-1)
    par.run_region(lambda st: kernel(*flat, of, swish, bounds, st), len(bounds) - 1)


def hard_activation(x: np.ndarray, swish: bool) -> np.ndarray:
    """``x relu6(x + 3) / 6`` (``swish``: hardswish) or ``relu6(x + 3) / 6``
    (hardsigmoid), in x's float dtype, with the bits of the NumPy formula
    (``x * clip(x + 3, 0, 6)``, then ``/ 6``) at every size; large arrays in
    one threaded pass (`HARD_KERNEL`)."""
    if _hard_ok(x, x):
        y = np.empty(x.shape, x.dtype)
        _hard_region(K.hard_forward, (x,), y, swish)
        return y
    if swish:
        with np.errstate(invalid="ignore"):   # -inf * 0: NaN, as PyTorch
            y = x * np.clip(x + 3.0, 0.0, 6.0)   # x relu6(x + 3) / 6, in PyTorch's order
    else:
        y = np.clip(x + 3.0, 0.0, 6.0)
    y /= 6.0
    return y.astype(x.dtype, copy=False)


def hard_activation_grad(g: np.ndarray, x: np.ndarray, swish: bool) -> np.ndarray:
    """The input gradient of `hard_activation` by the one-pass kernel, with
    the bits of the rules' formulas (yscv/backward/activation.py); None when
    the operands are not the kernel's (the rule then computes it)."""
    if not _hard_ok(g, x):
        return None
    out = np.empty(x.shape, x.dtype)
    _hard_region(K.hard_backward, (g, x), out, swish)
    return out


def channel_rows(x: np.ndarray) -> tuple:
    """The [rows, C] reshape (C = the last axis) the select kernels run on."""
    if x.ndim == 0:
        return (1, 1)
    c = x.shape[-1]
    return (x.size // c if c else 0, c)


def piecewise(g: np.ndarray, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``g`` where x > 0 else ``g * alpha`` (alpha [C] along the last axis, or
    [1]), one branch-free select pass."""
    rows = channel_rows(x)
    out = K.piecewise_linear(ro(g).reshape(rows), ro(x).reshape(rows), ro(alpha))
    return out.reshape(g.shape)


def prelu_backward(g, x, alpha, need_x: bool):
    """(gx or None, per-channel sums of ``g*x`` where x <= 0) in one fused pass."""
    rows = channel_rows(x)
    gx, sums = K.prelu_backward(ro(g).reshape(rows), ro(x).reshape(rows), ro(alpha),
                                bool(need_x))
    return (gx.reshape(g.shape) if need_x else None), sums


def halves(x: np.ndarray, axis: int) -> tuple:
    """The first and second halves of ``x`` along ``axis`` (views; glu's
    ``a`` and ``b``; the length of ``axis`` is even)."""
    h = x.shape[axis] // 2
    lead = (slice(None),) * axis
    return x[lead + (slice(0, h),)], x[lead + (slice(h, None),)]


def softmax_layout(shape: tuple, axis: int):
    """(outer, k, inner): the C-order reshape putting ``axis`` in the middle."""
    outer = 1
    for s in shape[:axis]:
        outer *= s
    inner = 1
    for s in shape[axis + 1:]:
        inner *= s
    return outer, shape[axis], inner


def softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """Fused softmax / log-softmax of ``x`` along ``axis`` (non-negative)."""
    shape = x.shape
    if x.ndim == 0:
        x = x.reshape(1)
    if x.size == 0:
        return np.empty(shape, dtype=x.dtype)
    outer, k, inner = softmax_layout(x.shape, axis)
    if inner == 1:
        out = KS.softmax_rows_forward(ro(x).reshape(outer, k), log)
    else:
        out = KS.softmax_strided_forward(ro(x).reshape(outer, k, inner), log)
    return out.reshape(shape)


def softmax_backward(g: np.ndarray, y: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """softmax: y * (g - sum(g y)); log-softmax: g - exp(y) sum(g), along axis."""
    shape = g.shape
    if g.ndim == 0:
        g = g.reshape(1)
        y = y.reshape(1)
    if g.size == 0:
        return np.zeros(shape, dtype=g.dtype)
    outer, k, inner = softmax_layout(g.shape, axis)
    if inner == 1:
        gx = KS.softmax_rows_backward(ro(g).reshape(outer, k), ro(y).reshape(outer, k), log)
    else:
        gx = KS.softmax_strided_backward(ro(g).reshape(outer, k, inner),
                                         ro(y).reshape(outer, k, inner), log)
    return gx.reshape(shape)


def dropout_mask(seed: int, shape: tuple, p: float) -> np.ndarray:
    """The keep-mask of dropout: ``u >= p`` for ``u`` uniform float32 draws of
    ``np.random.default_rng(seed)`` (independent of the graph dtype)."""
    u = np.random.default_rng(seed).random(shape, dtype=np.float32)
    return u >= np.float32(p)


def pack_mask(mask: np.ndarray) -> np.ndarray:
    """The bool mask packed to one bit per element (1/32 of a float32 value)."""
    return np.packbits(mask.reshape(-1))


def unpack_mask(packed: np.ndarray, shape: tuple) -> np.ndarray:
    """The bool mask of ``shape`` from `pack_mask`'s bits."""
    n = 1
    for s in shape:
        n *= s
    return np.unpackbits(packed, count=n).view(np.bool_).reshape(shape)
