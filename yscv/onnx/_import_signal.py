"""Handlers of the signal-processing ONNX operators: DFT, STFT, the window
generators HannWindow, HammingWindow and BlackmanWindow, and
MelWeightMatrix.

ONNX holds a complex tensor as a real one with a last axis of 2 (real,
imaginary) or 1 (real only). DFT and STFT are linear maps of their input:
each is recorded as matmuls with cosine and sine matrices computed with
NumPy in float64 for the given lengths, so gradients reach the signal
(and STFT's window). The window generators and MelWeightMatrix depend on
their static arguments only and give static arrays of ``output_datatype``.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler

__all__ = ["check"]


def _dft_matrices(length, n, inverse, onesided):
    """(Re, Im) of the map from ``length`` input entries to the output
    entries, each [length, out] (rows past ``n`` or past the one-sided
    spectrum are 0): ``sum_j x_j exp(-+2 pi i j k / n)`` (inverse: over
    ``n``; one-sided inverse: the real signal of a Hermitian spectrum)."""
    if inverse and onesided:
        half = n // 2 + 1
        k = np.arange(min(length, half))[:, None]
        t = np.arange(n)[None, :]
        w = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0) / n
        theta = 2 * np.pi * k * t / n
        re, im = np.zeros((length, n)), np.zeros((length, n))
        re[:k.shape[0]], im[:k.shape[0]] = w * np.cos(theta), -w * np.sin(theta)
        return re, im   # output = xr @ re + xi @ im (real)
    out = n // 2 + 1 if onesided else n
    j = np.arange(min(length, n))[:, None]
    k = np.arange(out)[None, :]
    theta = 2 * np.pi * ((j * k) % n) / n
    cos, sin = np.zeros((length, out)), np.zeros((length, out))
    cos[:j.shape[0]], sin[:j.shape[0]] = np.cos(theta), np.sin(theta)
    if inverse:
        return cos / n, sin / n
    return cos, -sin


def _complex_parts(g, x):
    """(real, imaginary or None) of ONNX's complex layout [..., 1 or 2]."""
    if x.shape[-1] == 1:
        return g.squeeze(x, -1), None
    return g.select(x, -1, 0), g.select(x, -1, 1)


def _np_dft(v, axis, n, inverse, onesided):
    """The DFT of array ``v`` [..., 1 or 2] with NumPy's FFT in ``v``'s float
    type (as ONNX's reference computes it, rounding included)."""
    z = v[..., 0] if v.shape[-1] == 1 else v[..., 0] + 1j * v[..., 1]
    if inverse and onesided:
        return np.fft.irfft(z, n=n, axis=axis)[..., None].astype(v.dtype)
    y = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], -1).astype(v.dtype)


def _dft(g, x, axis, n, inverse, onesided):
    """The DFT of NodeId ``x`` [..., 1 or 2] along ``axis``; [..., out, 2],
    or [..., n, 1] for the one-sided inverse. The values are NumPy's FFT
    of ``x``'s values; the gradient is that of the linear map (the
    matmuls of `_dft_linear`, whose values are the same up to rounding)."""
    lin = _dft_linear(g, x, axis, n, inverse, onesided)
    ref = _np_dft(np.asarray(g.value(x)), axis, n, inverse, onesided)
    return g.add(g.constant(ref), g.sub(lin, g.constant(np.asarray(g.value(lin)))))


def _dft_linear(g, x, axis, n, inverse, onesided):
    """The DFT of NodeId ``x`` as matmuls with the cosine and sine matrices."""
    nd = len(x.shape)
    if x.shape[-1] not in (1, 2) or not 0 <= axis < nd - 1:
        raise ValueError(f"DFT: the input {tuple(x.shape)} must end in an axis of 1 or 2 "
                         f"and axis {axis} must be another axis")
    re_x, im_x = _complex_parts(g, x)
    perm = [a for a in range(nd - 1) if a != axis] + [axis]
    back = list(np.argsort(perm))

    def along(v):
        return g.transpose(v, perm) if axis != nd - 2 else v

    def unmove(v):
        return g.transpose(v, back) if axis != nd - 2 else v

    re_x = along(re_x)
    im_x = along(im_x) if im_x is not None else None
    a, b = _dft_matrices(x.shape[axis], n, inverse, onesided)
    c = (lambda m: g.constant(m.astype(g.dtype)))
    if inverse and onesided:
        y = g.matmul(re_x, c(a))
        if im_x is not None:
            y = y + g.matmul(im_x, c(b))
        return g.unsqueeze(unmove(y), -1)
    # (xr + i xi)(a + i b) with a = cos, b = -+sin
    re = g.matmul(re_x, c(a))
    im = g.matmul(re_x, c(b))
    if im_x is not None:
        re = re - g.matmul(im_x, c(b))
        im = im + g.matmul(im_x, c(a))
    return g.stack([unmove(re), unmove(im)], -1)


def _int_arg(run, node, slot, default):
    if not run.has(node, slot):
        return default
    return int(run.arr(node.inputs[slot]).reshape(-1)[0])


@handler("DFT")
def _dft_handler(run, node):
    """The discrete Fourier transform along ``axis`` (an attribute before
    opset 20, default 1; an input since, default -2), ``inverse``,
    ``onesided``, the ``dft_length`` input (truncates or zero-pads)."""
    name = node.inputs[0]
    shape = run.shape(name)
    if run.m.opset >= 20:
        axis = _int_arg(run, node, 2, -2)
    else:
        axis = int(node.attrs.get("axis", 1))
    if not -len(shape) <= axis < len(shape):
        raise node.fail(f"axis={axis} is out of range for an input of rank {len(shape)}")
    axis %= len(shape)
    inverse = bool(node.attrs.get("inverse", 0))
    onesided = bool(node.attrs.get("onesided", 0))
    default = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    n = _int_arg(run, node, 1, default)
    if n < 1:
        raise node.fail(f"dft_length={n} must be positive")
    if axis == len(shape) - 1:
        raise node.fail(f"axis={axis} is the complex axis (real, imaginary) of the input")
    return [_dft(run.g, run.node(name), axis, n, inverse, onesided)]


@handler("STFT")
def _stft(run, node):
    """Frames of ``frame_length`` samples every ``frame_step`` of the signal
    [batch, length, 1 or 2], times the window, each transformed (one-sided
    by default): [batch, frames, bins, 2]."""
    g = run.g
    name = node.inputs[0]
    shape = run.shape(name)
    if len(shape) != 3 or shape[2] not in (1, 2):
        raise node.fail(f"the signal must be [batch, length, 1 or 2], got {tuple(shape)}")
    step = _int_arg(run, node, 1, 0)
    window = run.node(node.inputs[2]) if run.has(node, 2) else None
    default = window.shape[0] if window is not None else shape[1]
    length = _int_arg(run, node, 3, default)
    if step < 1 or not 1 <= length <= shape[1]:
        raise node.fail(f"frame_step={step} and frame_length={length} do not fit a signal of "
                        f"length {shape[1]}")
    if window is not None and tuple(window.shape) != (length,):
        raise node.fail(f"the window of shape {tuple(window.shape)} does not match "
                        f"frame_length={length}")
    frames = 1 + (shape[1] - length) // step
    idx = (np.arange(frames)[:, None] * step + np.arange(length)).reshape(-1)
    x = g.index_select(run.node(name), 1, idx)
    x = g.reshape(x, (shape[0], frames, length, shape[2]))
    if window is not None:
        x = g.mul(x, g.reshape(window, (1, 1, length, 1)))
    return [_dft(g, x, 2, length, False, bool(node.attrs.get("onesided", 1)))]


def _window(run, node):
    size = _int_arg(run, node, 0, 0)
    if size < 0:
        raise node.fail(f"size={size} must not be negative")
    periodic = int(node.attrs.get("periodic", 1))
    return np.arange(size, dtype=np.float64), (size if periodic else size - 1)


_WINDOWS = {
    "HannWindow": lambda t: np.sin(np.pi * t) ** 2,
    "HammingWindow": lambda t: 25 / 46 - (1 - 25 / 46) * np.cos(2 * np.pi * t),
    "BlackmanWindow": lambda t: 0.42 - 0.5 * np.cos(2 * np.pi * t) + 0.08 * np.cos(4 * np.pi * t),
}


@handler(*_WINDOWS)
def _window_handler(run, node):
    """The window of ``size`` points (``periodic`` 1: of a period of
    ``size``; 0: symmetric) in ``output_datatype``."""
    n, denom = _window(run, node)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = _WINDOWS[node.op](n / denom) if denom else np.ones_like(n)
    return [y.astype(node.attrs["_np_out"])]


@handler("MelWeightMatrix")
def _mel_weight_matrix(run, node):
    """[dft_length // 2 + 1, num_mel_bins] triangular filters on the mel
    scale between the edge frequencies, as ONNX's reference computes them."""
    bins = _int_arg(run, node, 0, 0)
    n = _int_arg(run, node, 1, 0)
    rate = _int_arg(run, node, 2, 0)
    lo = float(run.arr(node.inputs[3]).reshape(-1)[0])
    hi = float(run.arr(node.inputs[4]).reshape(-1)[0])
    if bins < 1 or n < 1 or rate < 1 or not 0 <= lo < hi:
        raise node.fail(f"num_mel_bins={bins}, dft_length={n}, sample_rate={rate} must be "
                        f"positive and 0 <= lower_edge_hertz={lo} < upper_edge_hertz={hi}")
    mel = lambda f: 2595 * np.log1p(f / 700) / np.log(10)   # noqa: E731
    step = (mel(hi) - mel(lo)) / (bins + 2)
    hz = 700 * np.expm1((np.arange(bins + 2) * step + mel(lo)) / 2595 * np.log(10))
    edges = (((n + 1) * hz) // rate).astype(np.int64)
    out = np.zeros((n // 2 + 1, bins))
    if edges.max() > n // 2:
        raise node.fail(f"upper_edge_hertz={hi} is past the spectrum of sample_rate={rate}")
    for i in range(bins):
        left, mid, right = edges[i:i + 3]
        if mid == left:
            out[mid, i] = 1
        else:
            out[left:mid + 1, i] = (np.arange(left, mid + 1) - left) / (mid - left)
        if right > mid:
            out[mid:right, i] = (right - np.arange(mid, right)) / (right - mid)
    return [out.astype(node.attrs["_np_out"])]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not implement."""
    if node.op in (*_WINDOWS, "MelWeightMatrix"):
        dt = int(node.attrs.get("output_datatype", 1))
        out = np.dtype(np_dtype_of(dt))
        if out.kind not in "iuf":
            raise node.fail(f"output_datatype={dt} ({out}) is not supported (an integer or "
                            "float type)")
        node.attrs["_np_out"] = out
