"""Activation ops (forward). See yscv/registry.py for the op contract.

Paths, chosen by measurement (numbers in docs/ops/activation.md):

* relu and leaky_relu forwards: one or two NumPy ufuncs at every size.
* the tiny-array path (the scalar-chain benchmark): tanh's forward is one
  ``np.tanh`` below :data:`TANH_TINY` elements, the tanh / sigmoid backward
  three ufuncs below :data:`TINY`, sigmoid's forward four ufuncs below
  :data:`SIGMOID_TINY`; a Numba call costs ~1.2 us plus ~0.4 us per array
  argument there. Above TANH_TINY a float32 tanh runs a vectorised
  rational-function kernel (float64 keeps ``np.tanh``).
* everything else with an exp in it (sigmoid, silu, gelu in three forms,
  mish, softplus, softmax, log_softmax) runs fused, branch-free Numba kernels
  built on a vectorised float32 exp (:func:`yscv.kernels.softmax.fast_exp`,
  ~0.8 ns per element vs ~1.3 for NumPy's SIMD exp and ~2.7 for libm).
* leaky_relu backward and prelu: a one-pass select kernel (``np.where`` on
  mixed signs mispredicts a branch per element, ~4 ns each).
* softmax / log_softmax work along any axis without a transpose.
* dropout draws its mask from ``np.random.default_rng(seed)``; the seed is an
  attribute (drawn from the library generator by the Graph method when not
  given), so the forward is pure and replays the same mask. The mask is saved
  packed to one bit per element.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import random as _random
from ..kernels import lazy
from ..kernels.activation_kinds import (GELU_ERF, GELU_SIGMOID, GELU_TANH, MISH, SIGMOID, SILU,
                                        SOFTPLUS, TANH)
from ..node import Op
from ..registry import register_forward
from ._common import normalize_axis, shape_error
from ..compute.arrays import readonly as ro

K = lazy("activation")
KS = lazy("softmax")

# plain module constants: Enum attribute access costs ~90 ns per node
_RELU, _LEAKY_RELU, _SIGMOID, _TANH, _GELU, _SILU, _MISH, _SOFTPLUS = (
    Op.RELU, Op.LEAKY_RELU, Op.SIGMOID, Op.TANH, Op.GELU, Op.SILU, Op.MISH, Op.SOFTPLUS)
_PRELU, _SOFTMAX, _LOG_SOFTMAX, _DROPOUT = Op.PRELU, Op.SOFTMAX, Op.LOG_SOFTMAX, Op.DROPOUT

#: sigmoid / tanh backward: arrays with fewer elements use three NumPy ufuncs
#: (1.8 us at 16 elements, 2.9 us at 2,048), larger ones the fused kernel
#: (~2.9 us with its dispatch at 2,048, ~0.1 ns per element more); measured
#: crossover ~2-3k.
TINY = 4096
#: float32 tanh forward: below this size ``np.tanh`` (0.6 us + ~2.9 ns per
#: element), above it the rational-function kernel (~2.2 us + ~0.65 ns);
#: measured crossover ~800.
TANH_TINY = 1024
#: sigmoid forward: below this size exp(-logaddexp(0, -x)) (4 ufuncs, ~2 us);
#: above, the fused kernel (~4 us dispatch, then ~1 ns per element).
SIGMOID_TINY = 32

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _const(value, dtype):
    a = np.full((), value, dtype=dtype)
    a.flags.writeable = False
    return a


# 0-d constants of each graph dtype: a ufunc with a same-dtype 0-d operand
# skips the Python-scalar conversion (~0.3 us per call on tiny arrays).
ZERO = {_F32: _const(0.0, _F32), _F64: _const(0.0, _F64)}
# ... but a NumPy SCALAR where the other operand is a scalar already (0-d
# inputs make ``y * y`` a scalar, and scalar - scalar skips the ufunc machinery)
ONE_SCALAR = {_F32: np.float32(1.0), _F64: np.float64(1.0)}

GELU_KINDS = {"none": GELU_ERF, "tanh": GELU_TANH, "sigmoid": GELU_SIGMOID}


def ro_flat(a: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous 1-D view of ``a`` (a copy only if ``a`` is not
    C-contiguous). Kernels always receive read-only inputs, so Numba compiles
    one specialisation per dtype whatever the caller's writeable flags."""
    v = a.ravel()  # a view when a is C-contiguous, else a C-ordered copy
    v.setflags(write=False)  # ~0.3 us cheaper than assigning flags.writeable
    return v


def unary_kernel_forward(x: np.ndarray, kind: int, p0: float = 0.0, p1: float = 0.0):
    """act(x) by the fused kernel, into a NumPy-allocated output.

    (Splitting a call over two threads halves the kernel alone — erf-GELU on
    262,144 float32 elements 700 -> 412 us — but in the transformer-block
    benchmark it was 1-4% slower in 3 of 4 interleaved runs: OpenBLAS's worker
    thread keeps spinning on the second core after each GEMM. Not done.)"""
    xf = ro_flat(x)
    y = np.empty(xf.shape, dtype=xf.dtype)
    K.unary_forward(xf, kind, p0, p1, y)
    return y.reshape(x.shape)


def unary_kernel_backward(g, x, y, kind: int, p0: float = 0.0, p1: float = 0.0):
    """g * act'(x) by the fused kernel, into a NumPy-allocated output."""
    gf = ro_flat(g)
    xf = ro_flat(x)
    yf = xf if y is x else ro_flat(y)
    out = np.empty(gf.shape, dtype=gf.dtype)
    K.unary_backward(gf, xf, yf, kind, p0, p1, out)
    return out.reshape(g.shape)


# ---------------------------------------------------------------- forwards
def sigmoid_values(x: np.ndarray) -> np.ndarray:
    """Stable sigmoid: Python floats for one element, ``exp(-logaddexp(0, -x))``
    (NumPy) on tiny arrays, the fused kernel otherwise. Also used by
    binary_cross_entropy_with_logits."""
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
    return unary_kernel_forward(x, SIGMOID)


def rows_of(x: np.ndarray) -> tuple:
    """The [rows, C] reshape (C = the last axis) the select kernels run on."""
    if x.ndim == 0:
        return (1, 1)
    c = x.shape[-1]
    return (x.size // c if c else 0, c)


def piecewise(g: np.ndarray, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``g`` where x > 0 else ``g * alpha`` (alpha [C] along the last axis, or [1])."""
    rows = rows_of(x)
    out = K.piecewise_linear(ro(g).reshape(rows), ro(x).reshape(rows), ro(alpha))
    return out.reshape(g.shape)


@register_forward(Op.RELU)
def relu_forward(attrs, x):
    return np.maximum(x, ZERO[x.dtype]), None


@register_forward(Op.LEAKY_RELU)
def leaky_relu_forward(slope, x):
    # max(x, s x) for s <= 1 and min(x, s x) for s > 1 select the right side
    # without np.where (which branches per element: 4 ns/element on mixed signs)
    pick = np.maximum if slope <= 1.0 else np.minimum
    return pick(x, x * slope), None


@register_forward(Op.SIGMOID)
def sigmoid_forward(attrs, x):
    return sigmoid_values(x), None


@register_forward(Op.TANH)
def tanh_forward(attrs, x):
    if x.size < TANH_TINY or x.dtype != _F32:
        return np.tanh(x), None
    return unary_kernel_forward(x, TANH), None


@register_forward(Op.GELU)
def gelu_forward(kind, x):
    return unary_kernel_forward(x, kind), None


@register_forward(Op.SILU)
def silu_forward(attrs, x):
    return unary_kernel_forward(x, SILU), None


@register_forward(Op.MISH)
def mish_forward(attrs, x):
    return unary_kernel_forward(x, MISH), None


@register_forward(Op.SOFTPLUS)
def softplus_forward(attrs, x):
    beta, threshold = attrs
    return unary_kernel_forward(x, SOFTPLUS, beta, threshold), None


@register_forward(Op.PRELU)
def prelu_forward(attrs, x, alpha):
    return piecewise(x, x, alpha), None


def softmax_layout(shape: tuple, axis: int):
    """(outer, k, inner): the C-order reshape putting ``axis`` in the middle."""
    outer = 1
    for s in shape[:axis]:
        outer *= s
    inner = 1
    for s in shape[axis + 1:]:
        inner *= s
    return outer, shape[axis], inner


def softmax_apply(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """Fused softmax / log-softmax of ``x`` along ``axis`` (non-negative)."""
    if x.ndim == 0:
        x = x.reshape(1)
    if x.size == 0:
        return np.empty(x.shape, dtype=x.dtype)
    outer, k, inner = softmax_layout(x.shape, axis)
    if inner == 1:
        out = KS.softmax_rows_forward(ro(x).reshape(outer, k), log)
    else:
        out = KS.softmax_strided_forward(ro(x).reshape(outer, k, inner), log)
    return out.reshape(x.shape)


@register_forward(Op.SOFTMAX)
def softmax_forward(axis, x):
    return softmax_apply(x, axis, False).reshape(x.shape), None


@register_forward(Op.LOG_SOFTMAX)
def log_softmax_forward(axis, x):
    return softmax_apply(x, axis, True).reshape(x.shape), None


def dropout_mask(seed: int, shape: tuple, p: float) -> np.ndarray:
    """The keep-mask of dropout: ``u >= p`` for ``u`` uniform float32 draws of
    ``np.random.default_rng(seed)`` (independent of the graph dtype)."""
    u = np.random.default_rng(seed).random(shape, dtype=np.float32)
    return u >= np.float32(p)


@register_forward(Op.DROPOUT)
def dropout_forward(attrs, x):
    """Saved for backward: the keep-mask packed to one BIT per element
    (np.packbits), 1/32 of a float32 value. Unpacking costs ~27 us for 524k
    elements, redrawing the mask from the seed ~2.4 ms, keeping it as bools
    8x the memory (docs/ops/activation.md)."""
    p, training, seed = attrs
    if not training or p == 0.0:
        return x, None
    if p == 1.0:
        return np.zeros_like(x), None
    mask = dropout_mask(seed, x.shape, p)
    y = x * x.dtype.type(1.0 / (1.0 - p))
    y *= mask
    return y, np.packbits(mask.reshape(-1))


def unpack_mask(packed: np.ndarray, shape: tuple) -> np.ndarray:
    """The bool keep-mask of ``shape`` from :func:`dropout_forward`'s saved bits."""
    n = 1
    for s in shape:
        n *= s
    return np.unpackbits(packed, count=n).view(np.bool_).reshape(shape)


# ------------------------------------------------------------ graph methods
def _real(value, op: str, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {value!r}")
    v = float(value)
    if v != v:
        raise ValueError(f"{op}: {arg} must not be NaN")
    return v


class ActivationOps:
    """Graph methods of the activation category."""

    def relu(self, x):
        """``max(x, 0)``; gradient 1 where x > 0, else 0 (0 at 0, as PyTorch)."""
        return self._apply1(_RELU, x)

    def leaky_relu(self, x, negative_slope=0.01):
        """``x`` where x > 0, else ``negative_slope * x``; the gradient at 0 is
        ``negative_slope`` (as PyTorch)."""
        slope = _real(negative_slope, "leaky_relu", "negative_slope")
        return self._apply1(_LEAKY_RELU, x, slope)

    def sigmoid(self, x):
        """``1 / (1 + exp(-x))``, stable for any x; backward g*y*(1-y)."""
        return self._apply1(_SIGMOID, x)

    def tanh(self, x):
        """``tanh(x)``; backward g*(1-y*y)."""
        return self._apply1(_TANH, x)

    def gelu(self, x, approximate="none"):
        """Gaussian error linear unit.

        ``approximate="none"``: ``x * Phi(x)`` with the exact normal CDF (erf);
        ``"tanh"``: PyTorch's ``0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))``;
        ``"sigmoid"``: ``x * sigmoid(1.702x)``.
        """
        kind = GELU_KINDS.get(approximate) if isinstance(approximate, str) else None
        if kind is None:
            raise ValueError(
                f"gelu: approximate must be 'none', 'tanh' or 'sigmoid', got {approximate!r}")
        return self._apply1(_GELU, x, kind)

    def silu(self, x):
        """``x * sigmoid(x)`` (swish)."""
        return self._apply1(_SILU, x)

    def mish(self, x):
        """``x * tanh(softplus(x))``."""
        return self._apply1(_MISH, x)

    def softplus(self, x, beta=1.0, threshold=20.0):
        """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``
        (PyTorch's defaults beta=1, threshold=20). beta must be > 0."""
        b = _real(beta, "softplus", "beta")
        t = _real(threshold, "softplus", "threshold")
        if b <= 0.0:
            raise ValueError(f"softplus: beta must be > 0, got {beta!r}")
        return self._apply1(_SOFTPLUS, x, (b, t))

    def prelu(self, x, alpha):
        """``x`` where x > 0, else ``alpha * x``; alpha has shape [C] (C = the
        last axis of x, one slope per channel) or [1] (one shared slope).
        Gradients flow to x and alpha (alpha may be a NodeId or an array)."""
        _, xv, _ = self._operand(x, "prelu", "x")
        _, av, _ = self._operand(alpha, "prelu", "alpha")
        c = xv.shape[-1] if xv.ndim else 1
        if av.shape != (1,) and av.shape != (c,):
            raise shape_error(
                "prelu", f"alpha must have shape ({c},) (the last axis of x {xv.shape}) "
                f"or (1,), got {av.shape}", expected=(c,), got=av.shape)
        return self._apply(_PRELU, (x, alpha))

    def softmax(self, x, axis=-1):
        """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (any axis)."""
        _, xv, _ = self._operand(x, "softmax", "x")
        return self._apply1(_SOFTMAX, x, normalize_axis(axis, xv.ndim, "softmax"))

    def log_softmax(self, x, axis=-1):
        """``x - max - log(sum(exp(x - max)))`` along ``axis`` (any axis)."""
        _, xv, _ = self._operand(x, "log_softmax", "x")
        return self._apply1(_LOG_SOFTMAX, x, normalize_axis(axis, xv.ndim, "log_softmax"))

    def dropout(self, x, p, training=True, seed=None):
        """Inverted dropout: zero each element with probability ``p``, scale the
        rest by ``1/(1-p)``.

        ``training=False`` or ``p=0`` is the identity (one node, value = input);
        ``p=1`` gives zeros. The mask is ``np.random.default_rng(seed).random(
        x.shape, dtype=np.float32) >= p``; with ``seed=None`` a seed is drawn
        from the library generator (:func:`yscv.manual_seed`) and recorded on
        the node, so backward and checkpoint replays reuse the same mask.
        """
        pv = _real(p, "dropout", "p")
        if not 0.0 <= pv <= 1.0:
            raise ValueError(f"dropout: p must be in [0, 1], got {p!r}")
        if not isinstance(training, (bool, np.bool_)):
            raise TypeError(f"dropout: training must be a bool, got {training!r}")
        if seed is not None and (isinstance(seed, (bool, np.bool_))
                                 or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ValueError(f"dropout: seed must be None or a non-negative int, got {seed!r}")
        self._operand(x, "dropout", "x")  # validate x before drawing a seed
        training = bool(training)
        if training and 0.0 < pv < 1.0 and seed is None:
            seed = _random.draw_seed()
        return self._apply1(_DROPOUT, x, (pv, training, None if seed is None else int(seed)))
