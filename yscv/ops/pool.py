"""Pooling ops (forward), channel-last: ``x`` is [N, H, W, C].

Every pool is a "bins" pool: output (oh, ow) covers input rows
``[hs[oh], he[oh])`` and columns ``[ws[ow], we[ow])``; strided, padded
windows (clipped to the input: padding is never materialised) and PyTorch's
adaptive bins (``start = floor(i*H/OH)``, ``end = ceil((i+1)*H/OH)``) both
become such bounds, with the average-pool divisor per output position
(yscv/compute/pool.py).

Attributes: `MaxPoolAttrs`, `AvgPoolAttrs`,
`AdaptivePoolAttrs` (global_avg_pool2d has none). The 1-d pools
([N, L, C]) are the 2-d pools of [N, 1, L, C] and record the 2-d
attributes with a height-1 window; the 3-d pools ([N, D, H, W, C]) record
`Pool3dAttrs` and run as a 2-d pool over (H, W) of every depth slice
followed by a pool over D (max and mean are separable; the first maximum
of a 3-d window in (d, h, w) order is the first of the depth maxima).

Saved for backward: max pools save only their argmax indices (int32 flat
positions ``ih*W + iw`` per output element and channel; ``(id*H + ih)*W +
iw`` for max_pool3d); average pools save nothing (the bins are recomputed from the attributes and the input shape).
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ..compute import pool as P
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import (MAX_INTP, check_array_size, check_int_bound, check_ndim, int_tuple,
                      shape_error)


_WINDOW = [("kh", int), ("kw", int), ("sh", int), ("sw", int), ("ph", int), ("pw", int)]
#: max_pool2d: kernel (kh, kw), stride (sh, sw), padding (ph, pw)
MaxPoolAttrs = NamedTuple("MaxPoolAttrs", _WINDOW)
#: avg_pool2d: as MaxPoolAttrs, plus whether padding counts in the divisor
AvgPoolAttrs = NamedTuple("AvgPoolAttrs", _WINDOW + [("count_include_pad", bool)])


class AdaptivePoolAttrs(NamedTuple):
    """adaptive_avg_pool2d / adaptive_max_pool2d: the output extents."""
    oh: int
    ow: int


# The forwards take the attributes as a sequence in the order of the
# records above (replays and tests may pass plain tuples).
@register_forward(Op.MAX_POOL2D)
def max_pool2d_forward(attrs, x):
    _, h, w, _ = x.shape
    return P.max_pool(x, P.window_plan(h, w, *attrs, True, x.dtype),
                      P.two_by_two(attrs))


@register_forward(Op.AVG_POOL2D)
def avg_pool2d_forward(attrs, x):
    _, h, w, _ = x.shape
    return P.avg_pool(x, P.window_plan(h, w, *attrs, x.dtype)), None


@register_forward(Op.ADAPTIVE_AVG_POOL2D)
def adaptive_avg_pool2d_forward(attrs, x):
    _, h, w, _ = x.shape
    return P.avg_pool(x, P.adaptive_plan(h, w, *attrs, x.dtype)), None


@register_forward(Op.ADAPTIVE_MAX_POOL2D)
def adaptive_max_pool2d_forward(attrs, x):
    _, h, w, _ = x.shape
    return P.max_pool(x, P.adaptive_plan(h, w, *attrs, x.dtype))


@register_forward(Op.GLOBAL_AVG_POOL2D)
def global_avg_pool2d_forward(attrs, x):
    return x.mean(axis=(1, 2)), None


class Pool3dAttrs(NamedTuple):
    """max_pool3d / avg_pool3d: kernel, stride, padding as (d, h, w) triples
    (count_include_pad is ignored by max_pool3d)."""
    kernel: tuple
    stride: tuple
    padding: tuple
    count_include_pad: bool


def _lift1d(x):
    """[N, L, C] as [N, 1, L, C]."""
    return x.reshape(x.shape[0], 1, x.shape[1], x.shape[2])


@register_forward(Op.MAX_POOL1D)
def max_pool1d_forward(attrs, x):
    y, arg = max_pool2d_forward(attrs, _lift1d(x))
    return y[:, 0], arg[:, 0]


@register_forward(Op.AVG_POOL1D)
def avg_pool1d_forward(attrs, x):
    return avg_pool2d_forward(attrs, _lift1d(x))[0][:, 0], None


@register_forward(Op.ADAPTIVE_AVG_POOL1D)
def adaptive_avg_pool1d_forward(attrs, x):
    return adaptive_avg_pool2d_forward(attrs, _lift1d(x))[0][:, 0], None


def _plans3d(shape, attrs, dtype):
    return P.plans3d(shape, attrs.kernel, attrs.stride, attrs.padding,
                     bool(attrs.count_include_pad), dtype)


@register_forward(Op.MAX_POOL3D)
def max_pool3d_forward(attrs, x):
    n, d, h, w, c = x.shape
    hw, depth = _plans3d(x.shape, attrs, x.dtype)
    m1, a1 = P.max_pool(x.reshape(n * d, h, w, c), hw)
    oh, ow = m1.shape[1], m1.shape[2]
    m2, a2 = P.max_pool(m1.reshape(n, d, oh * ow, c), depth)
    od = m2.shape[1]
    first = (a2 // (oh * ow)).astype(np.int64)       # the depth slice of the maximum
    within = np.take_along_axis(a1.reshape(n, d, oh * ow, c), first, axis=1)
    arg = (first * (h * w) + within).astype(P.index_dtype(d * h, w))
    return m2.reshape(n, od, oh, ow, c), arg.reshape(n, od, oh, ow, c)


@register_forward(Op.AVG_POOL3D)
def avg_pool3d_forward(attrs, x):
    n, d, h, w, c = x.shape
    hw, depth = _plans3d(x.shape, attrs, x.dtype)
    m1 = P.avg_pool(x.reshape(n * d, h, w, c), hw)
    oh, ow = m1.shape[1], m1.shape[2]
    m2 = P.avg_pool(m1.reshape(n, d, oh * ow, c), depth)
    return m2.reshape(n, m2.shape[1], oh, ow, c), None


class PoolOps:
    """Graph methods of the pool category (NHWC)."""

    # ----------------------------------------------------------- validation
    def _pool_input(self, x, op: str):
        """(operand to pass to _apply, value) after checking x is [N, H, W, C]
        with non-empty H and W."""
        _, v, _ = self._operand(x, op, "x")
        check_ndim(v.shape, 4, op, "x", "NHWC [N, H, W, C]")
        if v.shape[1] < 1 or v.shape[2] < 1:
            raise shape_error(op, f"x must have non-empty spatial dims H and W, got shape "
                                  f"{v.shape} (NHWC)", expected="H >= 1 and W >= 1", got=v.shape)
        return (x if type(x) is NodeId else v), v

    def _check_pool_output(self, op: str, shape, out_hw, **args) -> None:
        """ValueError naming ``args`` unless the output [N, OH, OW, C] (and,
        for max pools, its argmax indices) can exist as an array."""
        itemsize = self.dtype.itemsize
        if op.endswith("max_pool2d"):
            itemsize = max(itemsize, np.dtype(P.index_dtype(shape[1], shape[2])).itemsize)
        check_array_size(op, (shape[0], *out_hw, shape[3]), itemsize, **args)

    @staticmethod
    def _window_args(op: str, shape, kernel, stride, padding) -> tuple:
        """MaxPoolAttrs (kh, kw, sh, sw, ph, pw), validated as PyTorch does (ceil_mode=False)."""
        k = int_tuple(kernel, 2, op, "kernel", minimum=1)
        s = k if stride is None else int_tuple(stride, 2, op, "stride", minimum=1)
        p = int_tuple(padding, 2, op, "padding", minimum=0)
        for ax, (kk, pp) in enumerate(zip(k, p)):
            if pp > kk // 2:
                raise ValueError(
                    f"{op}: padding={padding!r} is larger than half of kernel={kernel!r} "
                    f"along {'HW'[ax]}; padding must be <= kernel // 2 (as PyTorch)")
        h, w = shape[1], shape[2]
        for name, size, kk, pp in (("H", h, k[0], p[0]), ("W", w, k[1], p[1])):
            if size + 2 * pp > MAX_INTP:  # window bounds are int64
                raise ValueError(
                    f"{op}: padding={padding!r} gives a padded input of {size + 2 * pp} along "
                    f"{name} ({name}={size} + 2*padding), larger than any array index "
                    f"(at most {MAX_INTP})")
            if size + 2 * pp < kk:
                raise ValueError(
                    f"{op}: kernel={kernel!r} is larger than the padded input along {name} "
                    f"({name}={size} + 2*padding={pp} gives {size + 2 * pp} < {kk}); "
                    "use a smaller kernel or more padding")
        return MaxPoolAttrs(*k, *s, *p)

    def _check_window_output(self, op, shape, attrs, kernel, stride, padding) -> None:
        out_hw = ((shape[1] + 2 * attrs.ph - attrs.kh) // attrs.sh + 1,
                  (shape[2] + 2 * attrs.pw - attrs.kw) // attrs.sw + 1)
        self._check_pool_output(op, shape, out_hw, kernel=kernel, stride=stride, padding=padding)

    @staticmethod
    def _output_size(op: str, output_size, shape) -> tuple:
        """(OH, OW) from an int or an (OH, OW) pair; None keeps that input size
        (as PyTorch). Any size >= 1 is allowed, also larger than the input."""
        if isinstance(output_size, numbers.Integral) and not isinstance(output_size, bool):
            pair = (output_size, output_size)
        elif isinstance(output_size, (tuple, list)) and len(output_size) == 2:
            pair = tuple(output_size)
        else:
            raise TypeError(f"{op}: output_size must be an int or a pair (OH, OW) of ints "
                            f"or None, got {output_size!r}")
        out = []
        for e, size in zip(pair, (shape[1], shape[2])):
            if e is None:
                out.append(int(size))
                continue
            if isinstance(e, bool) or not isinstance(e, numbers.Integral):
                raise TypeError(f"{op}: output_size must be an int or a pair (OH, OW) of "
                                f"ints or None, got {output_size!r}")
            if e < 1:
                raise ValueError(f"{op}: output_size={output_size!r} must be >= 1")
            out.append(check_int_bound(int(e), op, "output_size", output_size))
        return AdaptivePoolAttrs(*out)

    def _check_adaptive_output(self, op, shape, out_hw, output_size) -> None:
        self._check_pool_output(op, shape, out_hw, output_size=output_size)
        check_array_size(op, (max(out_hw),), 8, "an int64 bin-bounds vector",
                         output_size=output_size)

    # ------------------------------------------------------------------ ops
    def max_pool2d(self, x, kernel, stride=None, padding=0):
        """Max over [kh, kw] windows of x [N, H, W, C] -> [N, OH, OW, C].

        ``OH = (H + 2*ph - kh) // sh + 1`` (likewise OW); ``stride=None``
        means ``stride = kernel``; padding counts as -inf and must be
        <= kernel // 2. kernel/stride/padding: int or (h, w). The gradient goes
        to the FIRST maximum of each window (row-major), as PyTorch; NaN
        propagates. Saved for backward: the argmax indices only (int32).
        """
        op = "max_pool2d"
        arg, v = self._pool_input(x, op)
        attrs = self._window_args(op, v.shape, kernel, stride, padding)
        self._check_window_output(op, v.shape, attrs, kernel, stride, padding)
        return self._apply1(Op.MAX_POOL2D, arg, attrs)

    def avg_pool2d(self, x, kernel, stride=None, padding=0, count_include_pad=True):
        """Mean over [kh, kw] windows of x [N, H, W, C] -> [N, OH, OW, C].

        Shapes and arguments as `max_pool2d`; padding is zeros. The
        divisor is ``kh*kw`` when ``count_include_pad`` (default, as PyTorch),
        else the number of non-padding elements in the window. Nothing saved.
        """
        op = "avg_pool2d"
        if not isinstance(count_include_pad, (bool, np.bool_)):
            raise TypeError(f"{op}: count_include_pad must be a bool, got {count_include_pad!r}")
        arg, v = self._pool_input(x, op)
        attrs = self._window_args(op, v.shape, kernel, stride, padding)
        self._check_window_output(op, v.shape, attrs, kernel, stride, padding)
        return self._apply1(Op.AVG_POOL2D, arg, AvgPoolAttrs(*attrs, bool(count_include_pad)))

    def adaptive_avg_pool2d(self, x, output_size):
        """Mean over PyTorch's adaptive bins: x [N, H, W, C] -> [N, OH, OW, C].

        Bin i along H covers rows ``[floor(i*H/OH), ceil((i+1)*H/OH))``;
        output_size is an int or (OH, OW) (None keeps that input size); sizes
        larger than the input are allowed (bins then overlap). Nothing saved.
        """
        op = "adaptive_avg_pool2d"
        arg, v = self._pool_input(x, op)
        attrs = self._output_size(op, output_size, v.shape)
        self._check_adaptive_output(op, v.shape, attrs, output_size)
        return self._apply1(Op.ADAPTIVE_AVG_POOL2D, arg, attrs)

    def adaptive_max_pool2d(self, x, output_size):
        """Max over PyTorch's adaptive bins (as `adaptive_avg_pool2d`);
        ties go to the first maximum. Saved: the argmax indices only (int32)."""
        op = "adaptive_max_pool2d"
        arg, v = self._pool_input(x, op)
        attrs = self._output_size(op, output_size, v.shape)
        self._check_adaptive_output(op, v.shape, attrs, output_size)
        return self._apply1(Op.ADAPTIVE_MAX_POOL2D, arg, attrs)

    def global_avg_pool2d(self, x):
        """Mean over H and W: x [N, H, W, C] -> [N, C]. Nothing saved."""
        arg, _ = self._pool_input(x, "global_avg_pool2d")
        return self._apply1(Op.GLOBAL_AVG_POOL2D, arg, None)

    # ------------------------------------------------------- 1-d and 3-d
    def _pool_input_nd(self, x, op: str, nsp: int):
        """(operand, value) after checking x is [N, ``*spatial``, C] with nsp
        non-empty spatial axes."""
        _, v, _ = self._operand(x, op, "x")
        layout = {1: "NLC [N, L, C]", 3: "NDHWC [N, D, H, W, C]"}[nsp]
        check_ndim(v.shape, nsp + 2, op, "x", layout)
        if min(v.shape[1:-1]) < 1:
            raise shape_error(op, f"x must have non-empty spatial dims, got shape {v.shape} "
                                  f"({layout})", expected="sizes >= 1", got=v.shape)
        return (x if type(x) is NodeId else v), v

    @staticmethod
    def _window_args_nd(op: str, sizes, kernel, stride, padding) -> tuple:
        """(kernel, stride, padding) tuples of len(sizes), validated as PyTorch
        does (ceil_mode=False)."""
        nsp = len(sizes)
        axes = {1: "L", 3: "DHW"}[nsp]
        k = int_tuple(kernel, nsp, op, "kernel", minimum=1)
        s = k if stride is None else int_tuple(stride, nsp, op, "stride", minimum=1)
        p = int_tuple(padding, nsp, op, "padding", minimum=0)
        for a, size, kk, pp in zip(axes, sizes, k, p):
            if pp > kk // 2:
                raise ValueError(
                    f"{op}: padding={padding!r} is larger than half of kernel={kernel!r} "
                    f"along {a}; padding must be <= kernel // 2 (as PyTorch)")
            if size + 2 * pp > MAX_INTP:
                raise ValueError(
                    f"{op}: padding={padding!r} gives a padded input of {size + 2 * pp} along "
                    f"{a}, larger than any array index (at most {MAX_INTP})")
            if size + 2 * pp < kk:
                raise ValueError(
                    f"{op}: kernel={kernel!r} is larger than the padded input along {a} "
                    f"({a}={size} + 2*padding={pp} gives {size + 2 * pp} < {kk}); "
                    "use a smaller kernel or more padding")
        return k, s, p

    def _pool_nd(self, opm, nsp, x, kernel, stride, padding, count_include_pad):
        op = opm.name.lower()
        if not isinstance(count_include_pad, (bool, np.bool_)):
            raise TypeError(f"{op}: count_include_pad must be a bool, got {count_include_pad!r}")
        arg, v = self._pool_input_nd(x, op, nsp)
        k, s, p = self._window_args_nd(op, v.shape[1:-1], kernel, stride, padding)
        out = tuple((n + 2 * pp - kk) // ss + 1 for n, kk, ss, pp in zip(v.shape[1:-1], k, s, p))
        itemsize = self.dtype.itemsize
        if opm in (Op.MAX_POOL1D, Op.MAX_POOL3D):
            itemsize = max(itemsize, np.dtype(np.int64).itemsize)
        check_array_size(op, (v.shape[0], *out, v.shape[-1]), itemsize, kernel=kernel,
                         stride=stride, padding=padding)
        if nsp == 1:
            attrs = MaxPoolAttrs(1, k[0], 1, s[0], 0, p[0])
            if opm is Op.AVG_POOL1D:
                attrs = AvgPoolAttrs(*attrs, bool(count_include_pad))
        else:
            attrs = Pool3dAttrs(k, s, p, bool(count_include_pad))
        return self._apply1(opm, arg, attrs)

    def max_pool1d(self, x, kernel, stride=None, padding=0):
        """Max over windows of x [N, L, C] -> [N, OL, C], OL = (L + ``2*padding``
        - kernel) // stride + 1; as `max_pool2d` (stride=None means
        kernel, padding <= kernel // 2 counts as -inf, the gradient goes to
        the first maximum, NaN propagates). Saved: the argmax indices."""
        return self._pool_nd(Op.MAX_POOL1D, 1, x, kernel, stride, padding, True)

    def avg_pool1d(self, x, kernel, stride=None, padding=0, count_include_pad=True):
        """Mean over windows of x [N, L, C] -> [N, OL, C]; arguments as
        `avg_pool2d`. Nothing saved."""
        return self._pool_nd(Op.AVG_POOL1D, 1, x, kernel, stride, padding, count_include_pad)

    def max_pool3d(self, x, kernel, stride=None, padding=0):
        """Max over [kd, kh, kw] windows of x [N, D, H, W, C] -> [N, OD, OH,
        OW, C]; kernel/stride/padding an int or (d, h, w); otherwise as
        `max_pool2d` (first maximum in (d, h, w) order gets the
        gradient). Saved: the argmax indices ``(id*H + ih)*W + iw``."""
        return self._pool_nd(Op.MAX_POOL3D, 3, x, kernel, stride, padding, True)

    def avg_pool3d(self, x, kernel, stride=None, padding=0, count_include_pad=True):
        """Mean over [kd, kh, kw] windows of x [N, D, H, W, C]; arguments as
        `avg_pool2d` (the divisor ``kd*kh*kw``, or the count of
        non-padding elements). Nothing saved."""
        return self._pool_nd(Op.AVG_POOL3D, 3, x, kernel, stride, padding, count_include_pad)

    def adaptive_avg_pool1d(self, x, output_size):
        """Mean over PyTorch's adaptive bins: x [N, L, C] -> [N, OL, C]; bin i
        covers ``[floor(i*L/OL), ceil((i+1)*L/OL))``; output_size an int (or
        a 1-tuple; None keeps L). Nothing saved."""
        op = "adaptive_avg_pool1d"
        arg, v = self._pool_input_nd(x, op, 1)
        size = output_size
        if isinstance(size, (tuple, list)) and len(size) == 1:
            size = size[0]
        if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Integral)):
            raise TypeError(f"{op}: output_size must be an int (or a 1-tuple, or None), got "
                            f"{output_size!r}")
        if size is not None and size < 1:
            raise ValueError(f"{op}: output_size={output_size!r} must be >= 1")
        attrs = self._output_size(op, (1, size), (v.shape[0], 1, v.shape[1], v.shape[2]))
        check_array_size(op, (v.shape[0], attrs.ow, v.shape[2]), self.dtype.itemsize,
                         output_size=output_size)
        return self._apply1(Op.ADAPTIVE_AVG_POOL1D, arg, attrs)

    # ------------------------------------------- aliases with the layout
    def max_pool2d_nhwc(self, x, kernel, stride=None, padding=0):
        """Alias of `max_pool2d`, named with its layout (same op, same arguments)."""
        return self.max_pool2d(x, kernel, stride, padding)

    def avg_pool2d_nhwc(self, x, kernel, stride=None, padding=0, count_include_pad=True):
        """Alias of `avg_pool2d`, named with its layout (same op, same arguments)."""
        return self.avg_pool2d(x, kernel, stride, padding, count_include_pad)

    def adaptive_avg_pool2d_nhwc(self, x, output_size):
        """Alias of `adaptive_avg_pool2d`, named with its layout (same op, same arguments)."""
        return self.adaptive_avg_pool2d(x, output_size)

    def adaptive_max_pool2d_nhwc(self, x, output_size):
        """Alias of `adaptive_max_pool2d`, named with its layout (same op, same arguments)."""
        return self.adaptive_max_pool2d(x, output_size)

    def global_avg_pool2d_nhwc(self, x):
        """Alias of `global_avg_pool2d`, named with its layout (same op, same arguments)."""
        return self.global_avg_pool2d(x)
