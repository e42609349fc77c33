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
* :func:`fast_exp`: ``+inf`` -> ``+inf``, ``-inf`` -> ``0``. Results below
  the smallest normal float32 (``x < -87.33654``, ``exp = 2**-126``) are
  exactly ``+0`` (no subnormals). Overflow gives ``+inf`` from
  ``x >= 127.5 ln 2 ~ 88.3763`` (np.exp overflows above 88.72284; between
  the two the exact value is finite, ``> 2.4e38``). In between the relative
  error is below 2 ulp (Cody-Waite reduction ``x = n ln2 + r``,
  ``|r| <= ln2/2``, Cephes' expf polynomial, ``2**n`` built in the exponent
  bits).
* :func:`fast_tanh`: Eigen's 13/6-degree odd/even rational function of the
  argument clamped to ``+-7.9053`` (where tanh rounds to ``+-1``); max error
  6.6 ulp (4e-7 absolute, near ``|x| = 5.8``); ``|x| < 4e-4`` returns ``x``;
  ``+-inf`` -> ``+-1``; odd, so ``tanh(-0) = -0``.
* :func:`fast_erf`: Eigen's 13/8-degree rational function of the argument
  clamped to ``+-4`` (where erf rounds to ``+-1``); max error 4.4e-7
  absolute (7.5 ulp of 1, near ``|x| = 3.2``), so ``1 + erf(x)`` loses
  relative accuracy below ``x ~ -1.4``; ``+-inf`` -> ``+-1``.
* :func:`fast_sigmoid`: ``1 / (1 + e)`` for ``x >= 0`` and ``e / (1 + e)``
  otherwise, ``e = exp(-|x|)``: never the exp of a positive number, so it
  neither overflows nor cancels; ``sigmoid(+inf) = 1``, ``sigmoid(-inf) = 0``,
  and results below ``2**-126`` are 0 (float32).
* :func:`fast_log1p_unit`: ``log(1 + e)`` for ``0 <= e <= 1`` only
  (softplus's ``log1p(exp(-|z|))``): ``2 atanh(s)``, ``s = e / (2 + e)``,
  as an odd series to ``s**13`` (truncation below 1.4e-8 relative).
* :func:`row_max`: the maximum of ``a[:n]`` IGNORING NaN, ``-inf`` when
  ``n == 0`` or every value is NaN. Callers that need NaN to propagate get
  it from ``exp(a - max)``: a NaN entry turns the row's sum into NaN.
* :func:`row_sum`, :func:`row_dot`: eight independent partial sums (lane
  ``j % 8``; the tail ``a[n - n % 8:]`` goes to lane 0, in order), combined
  as ``((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))``. IEEE arithmetic
  in the data dtype, so NaN and inf propagate.

Without fast-math flags (the project rule) LLVM keeps a sum in source order
and will not vectorise a single accumulator; eight accumulators written side
by side give it independent chains (and are more accurate than one).

In plain Python (``NUMBA_DISABLE_JIT=1``) the functions are the libm forms.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload

from ._jit import jit

_ONE32 = np.float32(1.0)
_ZERO32 = np.float32(0.0)
_TWO32 = np.float32(2.0)

# ------------------------------------------------------------------- exp
_EXP_LO = np.float32(-87.33654)   # exp(_EXP_LO) = 2**-126, the smallest normal
_EXP_HI = np.float32(88.72284)    # log(FLT_MAX); from 127.5 ln 2 on, n = 128 and 2**n is inf
_LOG2E = np.float32(1.4426950408889634)
_ROUND = np.float32(12582912.0)   # 1.5 * 2**23: adding it rounds to an integer
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_P0 = np.float32(1.9875691500e-4)
_P1 = np.float32(1.3981999507e-3)
_P2 = np.float32(8.3334519073e-3)
_P3 = np.float32(4.1665795894e-2)
_P4 = np.float32(1.6666665459e-1)
_P5 = np.float32(5.0000001201e-1)


def fast_exp(a):
    """exp(a), see the module contract."""
    return math.exp(a)


def _exp32(a):
    c = min(max(a, _EXP_LO), _EXP_HI)
    nf = (c * _LOG2E + _ROUND) - _ROUND
    r = c - nf * _LN2_HI - nf * _LN2_LO
    p = _P0
    p = p * r + _P1
    p = p * r + _P2
    p = p * r + _P3
    p = p * r + _P4
    p = p * r + _P5
    p = p * r * r + r + _ONE32
    scale = np.int32((np.int32(nf) + np.int32(127)) << np.int32(23)).view(np.float32)
    y = p * scale
    y = _ZERO32 if a < _EXP_LO else y
    return y if a == a else a


def _exp64(a):
    return math.exp(a)


@overload(fast_exp, jit_options={"cache": True})
def _fast_exp_overload(a):
    if a == types.float32:
        return _exp32
    return _exp64


# ------------------------------------------------------------------ tanh
# Eigen's generic_fast_tanh_float: numerator (odd) and denominator (even)
# monomial coefficients, and the clamp beyond which tanh is +-1 in float32.
_TA1, _TA3, _TA5, _TA7, _TA9, _TA11, _TA13 = (np.float32(c) for c in (
    4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05,
    5.12229709037114e-08, -8.60467152213735e-11, 2.00018790482477e-13,
    -2.76076847742355e-16))
_TB0, _TB2, _TB4, _TB6 = (np.float32(c) for c in (
    4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04,
    1.19825839466702e-06))
_TANH_CLAMP = np.float32(7.90531110763549805)
_TANH_LINEAR = np.float32(0.0004)


def fast_tanh(v):
    """tanh(v), see the module contract."""
    return math.tanh(v)


def _tanh32(v):
    x = min(max(v, -_TANH_CLAMP), _TANH_CLAMP)
    x2 = x * x
    p = _TA13
    p = p * x2 + _TA11
    p = p * x2 + _TA9
    p = p * x2 + _TA7
    p = p * x2 + _TA5
    p = p * x2 + _TA3
    p = (p * x2 + _TA1) * x
    q = _TB6
    q = q * x2 + _TB4
    q = q * x2 + _TB2
    q = q * x2 + _TB0
    r = p / q
    r = v if abs(v) < _TANH_LINEAR else r
    return r if v == v else v


def _tanh64(v):
    return math.tanh(v)


@overload(fast_tanh, jit_options={"cache": True})
def _fast_tanh_overload(v):
    if v == types.float32:
        return _tanh32
    return _tanh64


# ------------------------------------------------------------------- erf
# Eigen's generic_fast_erf_float: odd numerator / even denominator monomial
# coefficients of a 13/8-degree rational function on [-4, 4] (erf rounds to
# +-1 in float32 beyond).
_EA1, _EA3, _EA5, _EA7, _EA9, _EA11, _EA13 = (np.float32(c) for c in (
    -1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04,
    -5.69250639462346e-05, -2.10102402082508e-06, 2.77068142495902e-08,
    -2.72614225801306e-10))
_EB0, _EB2, _EB4, _EB6, _EB8 = (np.float32(c) for c in (
    -1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03,
    -2.13374055278905e-04, -1.45660718464996e-05))
_ERF_CLAMP = np.float32(4.0)


def fast_erf(v):
    """erf(v), see the module contract."""
    return math.erf(v)


def _erf32(v):
    x = min(max(v, -_ERF_CLAMP), _ERF_CLAMP)
    x2 = x * x
    p = _EA13
    p = p * x2 + _EA11
    p = p * x2 + _EA9
    p = p * x2 + _EA7
    p = p * x2 + _EA5
    p = p * x2 + _EA3
    p = (p * x2 + _EA1) * x
    q = _EB8
    q = q * x2 + _EB6
    q = q * x2 + _EB4
    q = q * x2 + _EB2
    q = q * x2 + _EB0
    r = p / q
    return r if v == v else v


def _erf64(v):
    return math.erf(v)


@overload(fast_erf, jit_options={"cache": True})
def _fast_erf_overload(v):
    if v == types.float32:
        return _erf32
    return _erf64


# --------------------------------------------------------------- sigmoid
def fast_sigmoid(v):
    """1 / (1 + exp(-v)) in the stable form of the module contract."""
    e = math.exp(-abs(v))
    r = 1.0 / (1.0 + e)
    return r if v >= 0.0 else e * r


def _sigmoid32(v):
    e = fast_exp(-abs(v))
    r = _ONE32 / (_ONE32 + e)
    return r if v >= _ZERO32 else e * r


def _sigmoid64(v):
    e = math.exp(-abs(v))
    r = 1.0 / (1.0 + e)
    return r if v >= 0.0 else e * r


@overload(fast_sigmoid, jit_options={"cache": True})
def _fast_sigmoid_overload(v):
    if v == types.float32:
        return _sigmoid32
    return _sigmoid64


# ------------------------------------------------------------ log1p(e)
def fast_log1p_unit(e):
    """log(1 + e) for 0 <= e <= 1, see the module contract."""
    return math.log1p(e)


_THIRD = np.float32(1.0 / 3.0)
_FIFTH = np.float32(1.0 / 5.0)
_SEVENTH = np.float32(1.0 / 7.0)
_NINTH = np.float32(1.0 / 9.0)
_ELEVENTH = np.float32(1.0 / 11.0)
_THIRTEENTH = np.float32(1.0 / 13.0)


def _log1p_unit32(e):
    s = e / (_TWO32 + e)
    s2 = s * s
    p = _THIRTEENTH
    p = p * s2 + _ELEVENTH
    p = p * s2 + _NINTH
    p = p * s2 + _SEVENTH
    p = p * s2 + _FIFTH
    p = p * s2 + _THIRD
    return _TWO32 * s * (p * s2 + _ONE32)


def _log1p64(e):
    return math.log1p(e)


@overload(fast_log1p_unit, jit_options={"cache": True})
def _fast_log1p_unit_overload(e):
    if e == types.float32:
        return _log1p_unit32
    return _log1p64


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
    """sum(a[:n] * b[:n]) with eight partial sums, as :func:`row_sum`."""
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
