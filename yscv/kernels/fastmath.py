"""The kernels' shared scalar math and row reductions: one definition each.

Every function works on float32 and float64 and returns its argument's dtype.
float64 calls libm (``math.exp``, ``math.tanh``, ``math.erf``,
``math.log1p``), so float64 results are libm's. float32 uses branch-free,
pure-arithmetic forms: a libm call cannot be vectorised (Numba has no SVML
here) and a data-dependent branch mispredicts on mixed-sign data, while these
let LLVM vectorise the loops that call them (kernels/_jit.py stamps every
kernel with all the files of this folder, so a kernel inlining these helpers
recompiles when this file changes).

The contract (float32; float64 is libm's, which agrees on every point
below except that it has gradual underflow and the exact overflow point):

* NaN in, NaN out, for every function.
* `fast_exp`: ``+inf`` -> ``+inf``, ``-inf`` -> ``0``. Results below
  the smallest normal float32 (``x < -87.33654``, ``exp = 2**-126``) are
  exactly ``+0`` (no subnormals). Overflow gives ``+inf`` from
  ``x >= 127.5 ln 2 ~ 88.3763`` (np.exp overflows above 88.72284; between
  the two the exact value is finite, ``> 2.4e38``). In between the relative
  error is below 1 ulp (8.3e-8 on a 4-million-point grid): Cody-Waite
  reduction ``x = n ln2 + r``, ``|r| <= ln2/2``, Cephes' expf polynomial,
  ``2**n`` built in the exponent bits.
* `fast_tanh`: Eigen's 13/6-degree odd/even rational function of the
  argument clamped to ``+-7.9053`` (where tanh rounds to ``+-1``); max error
  6.6 ulp (4e-7 absolute, near ``|x| = 5.8``); ``|x| < 4e-4`` returns ``x``;
  ``+-inf`` -> ``+-1``; odd, so ``tanh(-0) = -0``.
* `fast_erf`: Eigen's 13/8-degree rational function of the argument
  clamped to ``+-4`` (where erf rounds to ``+-1``); max error 4.4e-7
  absolute (7.5 ulp of 1, near ``|x| = 3.2``), so ``1 + erf(x)`` loses
  relative accuracy below ``x ~ -1.4``; just inside ``+-4`` ``|erf|`` may
  exceed 1 by up to 2 ulp; ``+-inf`` -> ``+-1``.
* `fast_sigmoid` (and `sigmoid_parts`, which also returns the
  slope ``s (1 - s) = e / (1 + e)**2``): ``1 / (1 + e)`` for ``x >= 0``
  and ``e / (1 + e)`` otherwise, ``e = exp(-|x|)``: never the exp of a
  positive number, so it neither overflows nor cancels; ``sigmoid(+inf) =
  1``, ``sigmoid(-inf) = 0``, and results below ``2**-126`` are 0 (float32).
* `fast_log1p_unit`: ``log(1 + e)`` for ``0 <= e <= 1`` only
  (softplus's ``log1p(exp(-|z|))``): ``2 atanh(s)``, ``s = e / (2 + e)``,
  as an odd series to ``s**13`` (truncation below 1.4e-8 relative;
  subnormal ``e`` keeps only absolute accuracy, ``s`` underflowing).
* `row_max`: the maximum of ``a[:n]`` IGNORING NaN, ``-inf`` when
  ``n == 0`` or every value is NaN. Callers that need NaN to propagate get
  it from ``exp(a - max)``: a NaN entry turns the row's sum into NaN.
* `row_sum`, `row_dot`: eight independent partial sums (lane
  ``j % 8``; the tail ``a[n - n % 8:]`` goes to lane 0, in order), combined
  as ``((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))``. IEEE arithmetic
  in the data dtype, so NaN and inf propagate.

Without fast-math flags (the project rule) LLVM keeps a sum in source order
and will not vectorise a single accumulator; eight accumulators written side
by side give it independent chains (and are more accurate than one).

The row reductions are Numba-inlined (``inline="always"``: the attention
softmax measured ~10% slower calling them), and also exist as called
functions, ``row_max_called`` and ``row_sum_called`` (the same Python
functions jitted without inlining): Numba's inlining re-types and re-lowers
the body at every call site, so a kernel whose time is not in these rows
(cross-entropy: ~0.4 s of first-call compile time for its sites) calls
them instead; they compile once per array type.

In plain Python (``NUMBA_DISABLE_JIT=1``) the functions are the libm forms.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload

from ._jit import jit

# the project's flags (kernels/_jit.py) for the overload implementations:
# without error_model="numpy" a division gets a zero check that raises, and
# the loops calling it no longer vectorise
_OVERLOAD_OPTS = {"cache": True, "nogil": True, "error_model": "numpy"}
_ONE32 = np.float32(1.0)
_ZERO32 = np.float32(0.0)
_TWO32 = np.float32(2.0)


def _f32(*coefficients):
    return tuple(np.float32(c) for c in coefficients)


@jit(inline="always")
def _horner(x, c):
    """``c[0] x**k + c[1] x**(k-1) + ... + c[k]`` by Horner's rule (``c`` a
    tuple of float32, highest degree first): one multiply and one add per
    coefficient, in that order."""
    p = c[0]
    for k in range(1, len(c)):
        p = p * x + c[k]
    return p


def _with_float32(impl32):
    """Decorates a plain-Python (libm, float64) function ``fn``: jitted code
    calling ``fn`` compiles ``impl32`` for a float32 argument (``fn`` itself
    when None) and ``fn`` for any other. Arguments are named ``v``."""
    def register(fn):
        def typer(v):
            return impl32 if (v == types.float32 and impl32 is not None) else fn
        overload(fn, jit_options=_OVERLOAD_OPTS)(typer)
        return fn
    return register


@jit(inline="always")
def _clamp(v, lo, hi):
    """``min(max(v, lo), hi)`` exactly as Numba's builtins select (a NaN ``v``
    passes through), written as conditional expressions: the builtins
    compiled a helper of their own per type on first call (docs/engine.md,
    "Cold start")."""
    t = lo if lo > v else v
    return hi if hi < t else t


@jit(inline="always")
def _odd_rational(x, num, den):
    """``x P(x**2) / Q(x**2)``, the form of Eigen's float32 tanh and erf."""
    x2 = x * x
    return (_horner(x2, num) * x) / _horner(x2, den)


# ------------------------------------------------------------------- exp
_EXP_LO = np.float32(-87.33654)   # exp(_EXP_LO) = 2**-126, the smallest normal
_EXP_HI = np.float32(88.72284)    # log(FLT_MAX); from 127.5 ln 2 on, n = 128 and 2**n is inf
_LOG2E = np.float32(1.4426950408889634)
_ROUND = np.float32(12582912.0)   # 1.5 * 2**23: adding it rounds to an integer
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_EXP_P = _f32(1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
              1.6666665459e-1, 5.0000001201e-1)   # Cephes' expf


def _exp32(v):
    c = _clamp(v, _EXP_LO, _EXP_HI)
    nf = (c * _LOG2E + _ROUND) - _ROUND
    r = c - nf * _LN2_HI - nf * _LN2_LO
    p = _horner(r, _EXP_P) * r * r + r + _ONE32
    scale = np.int32((np.int32(nf) + np.int32(127)) << np.int32(23)).view(np.float32)
    y = p * scale
    y = _ZERO32 if v < _EXP_LO else y
    return y if v == v else v


@_with_float32(_exp32)
def fast_exp(v):
    """exp(v), see the module contract."""
    return math.exp(v)


# ------------------------------------------------------------- tanh, erf
# Eigen's generic_fast_tanh_float and generic_fast_erf_float: odd numerator
# and even denominator coefficients (highest degree first), and the clamps
# beyond which tanh and erf round to +-1 in float32.
_TANH_P = _f32(-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
               5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
               4.89352455891786e-03)
_TANH_Q = _f32(1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
               4.89352518554385e-03)
_TANH_CLAMP = np.float32(7.90531110763549805)
_TANH_LINEAR = np.float32(0.0004)
_ERF_P = _f32(-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
              -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
              -1.60960333262415e-02)
_ERF_Q = _f32(-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
              -7.37332916720468e-03, -1.42647390514189e-02)
_ERF_CLAMP = np.float32(4.0)


def _tanh32(v):
    r = _odd_rational(_clamp(v, -_TANH_CLAMP, _TANH_CLAMP), _TANH_P, _TANH_Q)
    r = v if abs(v) < _TANH_LINEAR else r
    return r if v == v else v


@_with_float32(_tanh32)
def fast_tanh(v):
    """tanh(v), see the module contract."""
    return math.tanh(v)


def _erf32(v):
    r = _odd_rational(_clamp(v, -_ERF_CLAMP, _ERF_CLAMP), _ERF_P, _ERF_Q)
    return r if v == v else v


@_with_float32(_erf32)
def fast_erf(v):
    """erf(v), see the module contract."""
    return math.erf(v)


# --------------------------------------------------------------- sigmoid
def _sigmoid_parts32(v):
    e = fast_exp(-abs(v))
    r = _ONE32 / (_ONE32 + e)
    return (r if v >= _ZERO32 else e * r), e * r * r


@_with_float32(_sigmoid_parts32)
def sigmoid_parts(v):
    """``(s, s (1 - s))`` with ``s = sigmoid(v)`` in the stable form of the
    module contract; ``s (1 - s)`` is computed as ``e / (1 + e)**2``, without
    cancellation."""
    e = math.exp(-abs(v))
    r = 1.0 / (1.0 + e)
    return (r if v >= 0.0 else e * r), e * r * r


@_with_float32(None)
def fast_sigmoid(v):
    """sigmoid(v) = 1 / (1 + exp(-v)), as `sigmoid_parts`."""
    return sigmoid_parts(v)[0]


# ------------------------------------------------------------ log1p(e)
_LOG1P_SERIES = _f32(1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0, 1.0 / 7.0, 1.0 / 5.0, 1.0 / 3.0, 1.0)


def _log1p_unit32(v):
    s = v / (_TWO32 + v)
    return _TWO32 * s * _horner(s * s, _LOG1P_SERIES)


@_with_float32(_log1p_unit32)
def fast_log1p_unit(v):
    """log(1 + v) for 0 <= v <= 1, see the module contract."""
    return math.log1p(v)


# -------------------------------------------------------- row reductions
@jit(inline="always")
def row_max(a, n):
    """max(a[:n]) ignoring NaN; -inf when n == 0 or every value is NaN."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = a.dtype.type(-np.inf)
    j = 0
    while j + 8 <= n:
        m0 = a[j] if a[j] > m0 else m0
        m1 = a[j + 1] if a[j + 1] > m1 else m1
        m2 = a[j + 2] if a[j + 2] > m2 else m2
        m3 = a[j + 3] if a[j + 3] > m3 else m3
        m4 = a[j + 4] if a[j + 4] > m4 else m4
        m5 = a[j + 5] if a[j + 5] > m5 else m5
        m6 = a[j + 6] if a[j + 6] > m6 else m6
        m7 = a[j + 7] if a[j + 7] > m7 else m7
        j += 8
    while j < n:
        m0 = a[j] if a[j] > m0 else m0
        j += 1
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    return m4 if m4 > m0 else m0


@jit(inline="always")
def row_sum(a, n):
    """sum(a[:n]) with eight partial sums (lane j % 8, tail to lane 0)."""
    z = a.dtype.type(0.0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        s0 += a[j]
        s1 += a[j + 1]
        s2 += a[j + 2]
        s3 += a[j + 3]
        s4 += a[j + 4]
        s5 += a[j + 5]
        s6 += a[j + 6]
        s7 += a[j + 7]
        j += 8
    while j < n:
        s0 += a[j]
        j += 1
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@jit(inline="always")
def row_dot(a, b, n):
    """sum(a[:n] * b[:n]) with eight partial sums, as `row_sum`."""
    z = a.dtype.type(0.0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
        s4 += a[j + 4] * b[j + 4]
        s5 += a[j + 5] * b[j + 5]
        s6 += a[j + 6] * b[j + 6]
        s7 += a[j + 7] * b[j + 7]
        j += 8
    while j < n:
        s0 += a[j] * b[j]
        j += 1
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


#: the row reductions as called functions (see the module docstring)
row_max_called = jit(row_max.py_func)
row_sum_called = jit(row_sum.py_func)
