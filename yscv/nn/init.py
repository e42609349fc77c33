"""Weight initialisation, PyTorch's defaults, drawing from ``yscv.random.generator()``.

Fan-in / fan-out follow ``torch.nn.init._calculate_fan_in_and_fan_out`` for
the equivalent PyTorch tensor, but our weights are input-major (channel-last):

| layer | yscv weight | fan_in |
|---|---|---|
| Linear | [in, out] | in |
| Conv (1/2/3-d) | [``*kernel``, in/groups, out] | in/groups * prod(kernel) |
| ConvTranspose2d | [KH, KW, out, in] | out * KH * KW (as torch) |
| DepthwiseConv2d | [KH, KW, C, M] | KH * KW |

Every function fills an array (or a Parameter's ``.data``) IN PLACE and
returns it. Draws are float64 from the library generator, then cast, so a
given ``yscv.manual_seed`` gives the same weights in float32 and float64
(up to rounding). The generator draws in the array's own (C) order.

``orthogonal_`` follows PyTorch on the array it is given: axis 0 against the
flattened trailing axes. yscv weights are input-major (Linear ``[in, out]``,
conv ``[*kernel, in, out]``), so for a conv weight this is not PyTorch's
``[out, in * prod(kernel)]`` split; for 2-D weights the two agree up to the
transpose (rows or columns orthonormal either way).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import random as _random
from .parameter import Parameter

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "orthogonal_", "constant_",
    "zeros_", "ones_",
    "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_",
    "fan_in_linear", "fan_in_conv",
]


def _array(t, fn: str = "init") -> np.ndarray:
    arr = t.data if isinstance(t, Parameter) else t
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{fn}: expected an ndarray or Parameter, got {type(t).__name__}")
    if arr.dtype.kind != "f":
        raise TypeError(f"{fn}: expected a floating-point array, got dtype {arr.dtype}")
    return arr


def _real(fn: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise TypeError(f"{fn}: {name} must be a finite real number, got {v!r}")
    return float(v)


def _fill(t, values):
    arr = _array(t)
    arr[...] = values
    return t


def calculate_gain(nonlinearity: str, param=None) -> float:
    """``torch.nn.init.calculate_gain``."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
              "conv_transpose2d", "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def uniform_(t, a: float = 0.0, b: float = 1.0):
    """Fill with U(a, b)."""
    arr = _array(t)
    return _fill(t, _random.generator().uniform(a, b, size=arr.shape))


def normal_(t, mean: float = 0.0, std: float = 1.0):
    """Fill with N(mean, std^2)."""
    arr = _array(t)
    return _fill(t, _random.generator().normal(mean, std, size=arr.shape))


def _std_normal_quantile(p: np.ndarray) -> np.ndarray:
    """Quantile function of N(0, 1), vectorised, for p in [0, 1] (float64;
    +-inf at 0 and 1). Wichura's AS241 rational approximations (double
    precision, ~1e-16 relative), the algorithm of Python's
    ``statistics.NormalDist.inv_cdf``."""
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    out = np.empty_like(p)
    central = np.abs(q) <= 0.425
    qc = q[central]
    r = 0.180625 - qc * qc
    num = (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r
                + 6.7265770927008700853e+4) * r + 4.5921953931549871457e+4) * r
              + 1.3731693765509461125e+4) * r + 1.9715909503065514427e+3) * r
            + 1.3314166789178437745e+2) * r + 3.3871328727963666080e+0) * qc
    den = (((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r
                + 3.9307895800092710610e+4) * r + 2.1213794301586595867e+4) * r
              + 5.3941960214247511077e+3) * r + 6.8718700749205790830e+2) * r
            + 4.2313330701600911252e+1) * r + 1.0)
    out[central] = num / den
    tail = ~central
    qt, pt = q[tail], p[tail]
    with np.errstate(divide="ignore"):
        r = np.sqrt(-np.log(np.where(qt <= 0.0, pt, 1.0 - pt)))
    x = np.empty_like(r)
    near = r <= 5.0
    rn = r[near] - 1.6
    x[near] = ((((((((7.74545014278341407640e-4 * rn + 2.27238449892691845833e-2) * rn
                     + 2.41780725177450611770e-1) * rn + 1.27045825245236838258e+0) * rn
                   + 3.64784832476320460504e+0) * rn + 5.76949722146069140550e+0) * rn
                 + 4.63033784615654529590e+0) * rn + 1.42343711074968357734e+0)
               / (((((((1.05075007164441684324e-9 * rn + 5.47593808499534494600e-4) * rn
                       + 1.51986665636164571966e-2) * rn + 1.48103976427480074590e-1) * rn
                     + 6.89767334985100004550e-1) * rn + 1.67638483018380384940e+0) * rn
                   + 2.05319162663775882187e+0) * rn + 1.0))
    far = ~near
    rf = r[far] - 5.0
    with np.errstate(invalid="ignore"):  # r = inf at p = 0 or 1 gives +-inf below
        x[far] = ((((((((2.01033439929228813265e-7 * rf + 2.71155556874348757815e-5) * rf
                        + 1.24266094738807843860e-3) * rf + 2.65321895265761230930e-2) * rf
                      + 2.96560571828504891230e-1) * rf + 1.78482653991729133580e+0) * rf
                    + 5.46378491116411436990e+0) * rf + 6.65790464350110377720e+0)
                  / (((((((2.04426310338993978564e-15 * rf + 1.42151175831644588870e-7) * rf
                          + 1.84631831751005468180e-5) * rf + 7.86869131145613259100e-4) * rf
                        + 1.48753612908506148525e-2) * rf + 1.36929880922735805310e-1) * rf
                      + 5.99832206555887937690e-1) * rf + 1.0))
    x[far & np.isinf(r)] = np.inf
    out[tail] = np.where(qt < 0.0, -x, x)
    return out


def _std_normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def trunc_normal_(t, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0):
    """Fill with N(mean, std^2) truncated to [a, b] (``torch.nn.init.trunc_normal_``).

    ``a`` and ``b`` are ABSOLUTE bounds (not multiples of ``std``), as in
    PyTorch. Values are drawn by inverting the normal CDF on uniform draws
    in [CDF(a), CDF(b)] (PyTorch's method), with a double-precision
    quantile and the interval mirrored into the lower tail when it lies
    above the mean, so intervals far in a tail keep their shape; every
    value lies in [a, b]. Requires std > 0 and a < b.
    """
    fn = "trunc_normal_"
    arr = _array(t, fn)
    mean, std, a, b = (_real(fn, k, v) for k, v in
                       (("mean", mean), ("std", std), ("a", a), ("b", b)))
    if std <= 0:
        raise ValueError(f"{fn}: std must be > 0, got {std!r}")
    if not a < b:
        raise ValueError(f"{fn}: the bounds must satisfy a < b, got a={a!r}, b={b!r}")
    lo, hi = (a - mean) / std, (b - mean) / std
    mirror = lo > 0  # upper tail: sample its mirror image, where the CDF keeps precision
    if mirror:
        lo, hi = -hi, -lo
    u = _random.generator().uniform(_std_normal_cdf(lo), _std_normal_cdf(hi), size=arr.shape)
    z = _std_normal_quantile(u)
    if mirror:
        z = -z
    return _fill(t, np.clip(mean + std * z, a, b))


def orthogonal_(t, gain: float = 1.0):
    """Fill with a (semi-)orthogonal matrix times ``gain`` (``torch.nn.init.orthogonal_``).

    The array is viewed as ``[rows, cols]`` = ``[shape[0], prod(shape[1:])]``
    (PyTorch's split, applied to the array as given); a standard normal
    draw of that shape is orthogonalised by QR with the signs of R's
    diagonal folded in (a uniformly random orthogonal matrix). Then
    ``W W^T = gain^2 I`` when rows <= cols, else ``W^T W = gain^2 I``.
    Needs at least 2 dimensions; an empty array is left as is.
    """
    fn = "orthogonal_"
    arr = _array(t, fn)
    gain = _real(fn, "gain", gain)
    if arr.ndim < 2:
        raise ValueError(f"{fn}: only arrays with 2 or more dimensions are supported, got "
                         f"shape {arr.shape}")
    if arr.size == 0:
        return t
    rows = arr.shape[0]
    cols = arr.size // rows
    flat = _random.generator().standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    if rows < cols:
        q = q.T
    return _fill(t, (gain * q).reshape(arr.shape))


def constant_(t, val: float):
    """Fill with ``val`` (a real number)."""
    arr = _array(t, "constant_")
    if isinstance(val, bool) or not isinstance(val, numbers.Real):
        raise TypeError(f"constant_: val must be a real number, got {val!r}")
    arr[...] = val
    return t


def zeros_(t):
    """Fill with 0."""
    _array(t, "zeros_")
    return _fill(t, 0.0)


def ones_(t):
    """Fill with 1."""
    _array(t, "ones_")
    return _fill(t, 1.0)


def kaiming_uniform_(t, fan_in: int, a: float = 0.0, nonlinearity: str = "leaky_relu"):
    """U(-b, b) with b = gain * sqrt(3 / fan_in). With ``a=sqrt(5)`` (PyTorch's
    Linear/Conv default) b = 1/sqrt(fan_in)."""
    if fan_in <= 0:
        return t  # zero-element tensor, as torch warns and skips
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan_in)
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, fan_in: int, a: float = 0.0, nonlinearity: str = "leaky_relu"):
    """N(0, std^2) with std = gain / sqrt(fan_in)."""
    if fan_in <= 0:
        return t
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan_in))


def xavier_uniform_(t, fan_in: int, fan_out: int, gain: float = 1.0):
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, fan_in: int, fan_out: int, gain: float = 1.0):
    return normal_(t, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def fan_in_linear(in_features: int) -> int:
    return int(in_features)


def fan_in_conv(kernel: tuple, in_per_group: int) -> int:
    return int(in_per_group) * int(np.prod(kernel))


def default_weight_and_bias(weight, bias, fan_in: int) -> None:
    """PyTorch's Linear/Conv reset_parameters: kaiming_uniform(a=sqrt(5)) on
    the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias."""
    kaiming_uniform_(weight, fan_in, a=math.sqrt(5))
    if bias is not None and fan_in > 0:
        bound = 1.0 / math.sqrt(fan_in)
        uniform_(bias, -bound, bound)
