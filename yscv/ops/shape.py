"""Shape ops (forward): reshapes, views, concatenation, padding, tiling,
pixel shuffle and nearest upsampling; triangles, roll, diagonal, outer,
unfold/fold and interpolate (split and chunk are narrows).

Ops NumPy can express as a view (reshape, flatten, unsqueeze, squeeze, expand,
select, narrow, getitem, flip) return a view of the input value, as PyTorch's
do: no copy. Values are never written in place by the library, so the sharing
is only visible through memory accounting (``g.summary()`` counts the bytes a
view exposes). ``expand`` returns a read-only zero-stride broadcast view.

Every attribute (the reshapes' output shape, select/narrow/getitem's
canonical basic-slicing key, cat's split offsets, pad widths, full tile reps)
is resolved at graph-build time into a named record of
:mod:`yscv.compute.shape`; forwards are one NumPy call. Nothing is saved for
backward beyond the input values.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from ..compute.shape import (CatAttrs, DiagonalAttrs, ExpandAttrs, FlipAttrs, IndexAttrs,
                             InterpolateAttrs, PadAttrs, PixelShuffleAttrs, RepeatAttrs,
                             ReshapeAttrs, RollAttrs, StackAttrs, UpsampleAttrs, WindowAttrs,
                             fold, interp_along, interp_axis, pad_interior, pixel_shuffle, unfold)
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import (MAX_INTP, check_array_size, check_int_bound, check_ndim, int_tuple,
                      is_scalar, normalize_axes, normalize_axis, operand_shape, shape_error)


# --------------------------------------------------------------- helpers
def _is_int(v) -> bool:
    if type(v) is int:  # the common case, without the slower abc check below
        return True
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _new_axis(axis, nd: int, op: str, inputs: str) -> int:
    """The position of a new axis, in ``[-nd-1, nd]``, as a non-negative int."""
    if not _is_int(axis):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}")
    if not -nd - 1 <= axis <= nd:
        raise ValueError(f"{op}: axis={axis} is out of range [{-nd - 1}, {nd}] for {inputs}")
    return int(axis) % (nd + 1)


def _need_ndim(shape, least: int, op: str, arg: str = "x") -> None:
    if len(shape) < least:
        raise shape_error(op, f"{arg} must have at least {least} dimension(s), got shape {shape}",
                          expected=f">= {least}-d", got=shape)


def _shape_arg(shape, op: str, arg: str = "shape") -> tuple:
    """An int or a sequence of ints as a tuple: entries that fit in an array
    index (ValueError otherwise), signs not yet checked."""
    if _is_int(shape):
        out = (int(shape),)
    elif ((isinstance(shape, (tuple, list)) and all(_is_int(s) for s in shape))
          or (isinstance(shape, np.ndarray) and shape.ndim == 1 and shape.dtype.kind in "iu")):
        out = tuple(int(s) for s in shape)
    else:
        raise TypeError(f"{op}: {arg} must be an int or a sequence of ints, got {shape!r}")
    for e in out:
        if not -MAX_INTP <= e <= MAX_INTP:
            check_int_bound(e, op, arg, shape)
    return out


def _resolve_reshape(in_shape: tuple, shape, op: str = "reshape") -> tuple:
    """NumPy's reshape rule: one -1 inferred, every other entry >= 0."""
    new = _shape_arg(shape, op)
    unknown = [k for k, s in enumerate(new) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in new):
        raise ValueError(f"{op}: shape={new} may hold at most one -1 and no other negative entry")
    size = math.prod(in_shape)
    known = math.prod([s for s in new if s != -1])
    if unknown:
        if known == 0 or size % known:
            raise shape_error(op, f"cannot reshape an input of shape {in_shape} ({size} elements) "
                                  f"into {new}", expected=new, got=in_shape)
        new = tuple(size // known if s == -1 else s for s in new)
    elif known != size:
        raise shape_error(op, f"cannot reshape an input of shape {in_shape} ({size} elements) "
                              f"into {new} ({known} elements)", expected=new, got=in_shape)
    return new


def _list_operands(g, nodes, op: str):
    """Operands and shapes of the ``nodes`` list of cat / stack."""
    if isinstance(nodes, NodeId) or not isinstance(nodes, (list, tuple)):
        raise TypeError(f"{op}: nodes must be a list or tuple of NodeIds, "
                        f"got {type(nodes).__name__}")
    if len(nodes) == 0:
        raise ValueError(f"{op}: nodes is empty; need at least one input")
    ops, shapes = [], []
    for k, n in enumerate(nodes):
        o, s = operand_shape(g, n, op, f"nodes[{k}]")
        ops.append(o)
        shapes.append(s)
    return ops, shapes


def _pad_widths(pad_width, in_shape: tuple) -> tuple:
    """np.pad's pad_width broadcast to one (before, after) pair of ints per axis."""
    nd = len(in_shape)
    if (type(pad_width) in (tuple, list) and len(pad_width) == nd
            and all(type(p) in (tuple, list) and len(p) == 2 and type(p[0]) is int
                    and type(p[1]) is int for p in pad_width)):
        widths = tuple((p[0], p[1]) for p in pad_width)  # the common spelling, fast
    else:
        try:
            pw = np.asarray(pad_width)
        except Exception:
            pw = np.asarray([], dtype=object)
        if pw.dtype.kind not in "iu":
            raise TypeError(f"pad: pad_width must hold ints, got {pad_width!r}")
        try:
            pw = np.broadcast_to(pw, (nd, 2))
        except ValueError:
            raise ValueError(f"pad: pad_width={pad_width!r} must be one (before, after) pair per "
                             f"axis ({nd} pairs for shape {in_shape}), one pair or an int") from None
        widths = tuple((int(b), int(a)) for b, a in pw.tolist())
    if any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"pad: pad_width={pad_width!r} has a negative width")
    for e in itertools.chain.from_iterable(widths):
        check_int_bound(e, "pad", "pad_width", pad_width)
    return widths


_ADVANCED_HINT = (
    "only basic slicing is supported (ints, slices, None, Ellipsis and tuples of those); "
    "for integer-array indexing use g.gather(x, axis, index) or g.embedding(weight, indices) "
    "(g.select for one index); for a boolean mask use g.where or multiply by the mask")


def _slice_part(v, op: str):
    if v is None or _is_int(v):
        return None if v is None else int(v)
    raise TypeError(f"{op}: slice bounds and steps must be ints or None, got {v!r}")


def basic_key(key, shape: tuple, op: str = "getitem") -> tuple:
    """Canonical form of a basic-slicing key for an input of ``shape``.

    Ellipsis is expanded to explicit full slices, ints are made non-negative
    (IndexError when out of range), slice parts become ints or None; a
    trailing Ellipsis is appended so that indexing always returns an array
    view (never a NumPy scalar). Advanced indices raise TypeError.
    """
    if not isinstance(key, tuple):
        key = (key,)
    parts = []
    n_index = 0
    n_ellipsis = 0
    for k in key:
        if k is None or k is Ellipsis:
            n_ellipsis += k is Ellipsis
            parts.append(k)
        elif isinstance(k, slice):
            if k.step is not None and _is_int(k.step) and int(k.step) == 0:
                raise ValueError(f"{op}: slice step cannot be zero")
            parts.append(slice(_slice_part(k.start, op), _slice_part(k.stop, op),
                               _slice_part(k.step, op)))
            n_index += 1
        elif _is_int(k):
            parts.append(int(k))
            n_index += 1
        elif isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
            parts.append(int(k))
            n_index += 1
        elif type(k) is NodeId:
            raise TypeError(f"{op}: a NodeId cannot be used as an index (graph values are "
                            f"floats); {_ADVANCED_HINT}")
        elif isinstance(k, (list, tuple, np.ndarray, bool, np.bool_)) or hasattr(k, "__array__"):
            raise TypeError(f"{op}: got an advanced index of type {type(k).__name__}; "
                            f"{_ADVANCED_HINT}")
        else:
            raise TypeError(f"{op}: unsupported index {k!r} of type {type(k).__name__}; "
                            f"{_ADVANCED_HINT}")
    ndim = len(shape)
    if n_ellipsis > 1:
        raise IndexError(f"{op}: an index can only have a single Ellipsis (...)")
    if n_index > ndim:
        raise IndexError(f"{op}: too many indices: {n_index} for an input of shape {shape}")
    out = []
    dim = 0
    for k in parts:
        if k is Ellipsis:
            fill = ndim - n_index
            out.extend([slice(None)] * fill)
            dim += fill
        elif k is None:
            out.append(None)
        elif isinstance(k, slice):
            out.append(k)
            dim += 1
        else:
            size = shape[dim]
            if not -size <= k < size:
                raise IndexError(f"{op}: index {k} is out of range for axis {dim} of size {size} "
                                 f"(input shape {shape})")
            out.append(k % size)
            dim += 1
    out.append(Ellipsis)
    return tuple(out)


# -------------------------------------------------------------- forwards
@register_forward(Op.RESHAPE)
@register_forward(Op.FLATTEN)
@register_forward(Op.UNSQUEEZE)
@register_forward(Op.SQUEEZE)
def reshape_forward(attrs: ReshapeAttrs, x):
    return x.reshape(attrs.shape), None


@register_forward(Op.EXPAND)
def expand_forward(attrs: ExpandAttrs, x):
    return np.broadcast_to(x, attrs.shape), None


@register_forward(Op.CAT)
def cat_forward(attrs: CatAttrs, *xs):
    return np.concatenate(xs, axis=attrs.axis), None


@register_forward(Op.STACK)
def stack_forward(attrs: StackAttrs, *xs):
    return np.stack(xs, axis=attrs.axis), None


@register_forward(Op.SELECT)
@register_forward(Op.NARROW)
@register_forward(Op.GETITEM)
def index_view_forward(attrs: IndexAttrs, x):
    return x[attrs.key], None


@register_forward(Op.FLIP)
def flip_forward(attrs: FlipAttrs, x):
    return np.flip(x, attrs.axes), None


@register_forward(Op.PAD)
def pad_forward(attrs: PadAttrs, x):
    widths, value = attrs.widths, attrs.value
    shape = tuple(n + b + a for n, (b, a) in zip(x.shape, widths))
    out = np.zeros(shape, x.dtype) if value == 0.0 else np.full(shape, value, x.dtype)
    out[pad_interior(widths, x.shape)] = x
    return out, None


@register_forward(Op.REPEAT)
def repeat_forward(attrs: RepeatAttrs, x):
    return np.tile(x, attrs.reps), None


@register_forward(Op.PIXEL_SHUFFLE)
def pixel_shuffle_forward(attrs: PixelShuffleAttrs, x):
    return pixel_shuffle(x, attrs.r), None


@register_forward(Op.UPSAMPLE_NEAREST)
def upsample_nearest_forward(attrs: UpsampleAttrs, x):
    n, *spatial, c = x.shape
    scales = attrs.scales
    inter, full = [n], [n]
    for s, r in zip(spatial, scales):
        inter += [s, 1]
        full += [s, r]
    y = np.broadcast_to(x.reshape(inter + [c]), tuple(full) + (c,))
    return y.reshape((n,) + tuple(s * r for s, r in zip(spatial, scales)) + (c,)), None


@register_forward(Op.TRIL)
def tril_forward(k: int, x):
    return np.tril(x, k), None


@register_forward(Op.TRIU)
def triu_forward(k: int, x):
    return np.triu(x, k), None


@register_forward(Op.ROLL)
def roll_forward(attrs: RollAttrs, x):
    if attrs.axes is None:
        return np.roll(x.reshape(-1), attrs.shifts[0]).reshape(x.shape), None
    return np.roll(x, attrs.shifts, attrs.axes), None


@register_forward(Op.DIAGONAL)
def diagonal_forward(attrs: DiagonalAttrs, x):
    return np.diagonal(x, attrs.offset, attrs.axis1, attrs.axis2), None


@register_forward(Op.OUTER)
def outer_forward(attrs, a, b):
    return np.multiply.outer(a, b), None


@register_forward(Op.UNFOLD)
def unfold_forward(attrs: WindowAttrs, x):
    return unfold(x, attrs), None


@register_forward(Op.FOLD)
def fold_forward(attrs: WindowAttrs, x):
    return fold(x, attrs), None


@register_forward(Op.INTERPOLATE)
def interpolate_forward(attrs: InterpolateAttrs, x):
    ah, aw = attrs.axes
    return interp_along(interp_along(x, 1, ah), 2, aw), None


def _window_attrs(op: str, kernel, dilation, padding, stride, size: tuple) -> WindowAttrs:
    """unfold/fold's arguments as pairs, and the sliding-block counts over
    the image of spatial ``size`` (ValueError when there is no block)."""
    k = int_tuple(kernel, 2, op, "kernel", minimum=1)
    d = int_tuple(dilation, 2, op, "dilation", minimum=1)
    p = int_tuple(padding, 2, op, "padding", minimum=0)
    s = int_tuple(stride, 2, op, "stride", minimum=1)
    blocks = []
    for axis, n in enumerate(size):
        span = d[axis] * (k[axis] - 1) + 1
        free = n + 2 * p[axis] - span
        if free < 0:
            raise ValueError(f"{op}: kernel={kernel!r} with dilation={dilation!r} spans {span} "
                             f"on spatial axis {axis}, more than the padded size "
                             f"{n + 2 * p[axis]} (size {n}, padding={padding!r})")
        blocks.append(free // s[axis] + 1)
    return WindowAttrs(k, d, p, s, tuple(size), tuple(blocks))


def _interp_size(in_hw: tuple, size, scale_factor) -> tuple:
    """interpolate's output (OH, OW) and the scale per axis (None where the
    index rule uses in/out)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor, got "
                         f"size={size!r}, scale_factor={scale_factor!r}")
    if size is not None:
        return int_tuple(size, 2, "interpolate", "size", minimum=1), (None, None)
    if is_scalar(scale_factor):
        scales = (float(scale_factor),) * 2
    elif (isinstance(scale_factor, (tuple, list)) and len(scale_factor) == 2
          and all(is_scalar(v) for v in scale_factor)):
        scales = tuple(float(v) for v in scale_factor)
    else:
        raise TypeError("interpolate: scale_factor must be a number or a pair of numbers, got "
                        f"{scale_factor!r}")
    if not all(math.isfinite(v) and v > 0 for v in scales):
        raise ValueError(f"interpolate: scale_factor={scale_factor!r} must be finite and > 0")
    out = tuple(int(math.floor(n * v)) for n, v in zip(in_hw, scales))
    if min(out) < 1:
        raise ValueError(f"interpolate: scale_factor={scale_factor!r} gives an output size "
                         f"{out} for the input size {tuple(in_hw)}; each must be >= 1")
    return out, scales


# ----------------------------------------------------------- Graph methods
class ShapeOps:
    """Graph methods of the shape category."""

    def reshape(self, x, shape):
        """``x`` with a new ``shape`` (int or tuple; one -1 is inferred, as
        NumPy). A view when NumPy can make one. ShapeError on a size mismatch.
        Backward: the gradient reshaped to ``x``'s shape."""
        x, in_shape = operand_shape(self, x, "reshape")
        return self._apply1(Op.RESHAPE, x, ReshapeAttrs(_resolve_reshape(in_shape, shape)))

    def flatten(self, x, start_axis=1, end_axis=-1):
        """Merge axes ``start_axis..end_axis`` (inclusive) into one, as
        ``torch.flatten``; the default keeps the batch axis. A 0-d input gives
        shape (1,)."""
        x, in_shape = operand_shape(self, x, "flatten")
        nd = len(in_shape)
        # a 0-d input counts as 1-d here (torch.flatten gives shape (1,))
        s = normalize_axis(start_axis, max(nd, 1), "flatten", "start_axis")
        e = normalize_axis(end_axis, max(nd, 1), "flatten", "end_axis")
        if s > e:
            raise ValueError(f"flatten: start_axis={start_axis} comes after end_axis={end_axis} "
                             f"for a {nd}-d input")
        if nd == 0:
            out = (1,)
        else:
            merged = math.prod(in_shape[s:e + 1])
            out = in_shape[:s] + (merged,) + in_shape[e + 1:]
        return self._apply1(Op.FLATTEN, x, ReshapeAttrs(out))

    def unsqueeze(self, x, axis):
        """Insert a size-1 axis at position ``axis`` of the output, in
        ``[-ndim-1, ndim]`` (as ``np.expand_dims`` / ``torch.unsqueeze``)."""
        x, in_shape = operand_shape(self, x, "unsqueeze")
        a = _new_axis(axis, len(in_shape), "unsqueeze", f"a {len(in_shape)}-d input")
        return self._apply1(Op.UNSQUEEZE, x, ReshapeAttrs(in_shape[:a] + (1,) + in_shape[a:]))

    def squeeze(self, x, axis=None):
        """Remove size-1 axes: ``axis`` an int or a tuple of ints (each must
        have size 1, else ShapeError), or None for every size-1 axis (as
        ``np.squeeze``)."""
        x, in_shape = operand_shape(self, x, "squeeze")
        axes = normalize_axes(axis, len(in_shape), "squeeze")
        if axes is None:
            axes = tuple(k for k, s in enumerate(in_shape) if s == 1)
        for a in axes:
            if in_shape[a] != 1:
                raise shape_error("squeeze", f"axis {a} has size {in_shape[a]}, not 1 "
                                             f"(input shape {in_shape})", expected=1, got=in_shape)
        out = tuple(s for k, s in enumerate(in_shape) if k not in axes)
        return self._apply1(Op.SQUEEZE, x, ReshapeAttrs(out))

    def expand(self, x, shape):
        """Broadcast ``x`` to ``shape`` (``np.broadcast_to`` rules, new axes
        at the front; -1 keeps an existing axis' size, as ``torch.expand``).
        The value is a read-only broadcast view; backward sums the gradient
        over the broadcast axes."""
        x, in_shape = operand_shape(self, x, "expand")
        new = _shape_arg(shape, "expand")
        lead = len(new) - len(in_shape)
        if lead < 0:
            raise shape_error("expand", f"shape={new} has fewer axes than the input "
                                        f"shape {in_shape}", expected=new, got=in_shape)
        out = []
        for k, s in enumerate(new):
            if k < lead:
                if s < 0:
                    raise ValueError(f"expand: shape={new}: new leading axis {k} must have a "
                                     f"size >= 0, got {s} (-1 is only allowed for existing axes)")
                out.append(s)
                continue
            cur = in_shape[k - lead]
            if s == -1 or s == cur:
                out.append(cur)
            elif s < -1:
                raise ValueError(f"expand: shape={new} has a negative size {s}")
            elif cur == 1:
                out.append(s)
            else:
                raise shape_error("expand", f"cannot expand axis {k - lead} of size {cur} "
                                            f"(input shape {in_shape}) to {s}; only size-1 axes "
                                            f"can be expanded", expected=new, got=in_shape)
        # a broadcast view, but NumPy cannot form it (nor backward the
        # gradient of that shape) beyond the array limits
        check_array_size("expand", out, self.dtype.itemsize, shape=shape)
        return self._apply1(Op.EXPAND, x, ExpandAttrs(tuple(out)))

    def cat(self, nodes, axis=0):
        """Concatenate ``nodes`` along an existing ``axis``; shapes must match
        on every other axis (ShapeError naming the offending input). Backward
        splits the gradient at the input boundaries (views)."""
        ops, shapes = _list_operands(self, nodes, "cat")
        first = shapes[0]
        if len(first) == 0:
            raise shape_error("cat", "zero-dimensional inputs cannot be concatenated; use stack",
                              got=first)
        a = normalize_axis(axis, len(first), "cat")
        for k, s in enumerate(shapes[1:], 1):
            if len(s) != len(first) or s[:a] + s[a + 1:] != first[:a] + first[a + 1:]:
                raise shape_error("cat", f"nodes[{k}] has shape {s}, which does not match "
                                         f"nodes[0]'s shape {first} except on axis {a}",
                                  expected=first, got=s)
        offsets = tuple(itertools.accumulate(s[a] for s in shapes[:-1]))
        return self._apply(Op.CAT, tuple(ops), CatAttrs(a, offsets))

    def stack(self, nodes, axis=0):
        """Stack equally shaped ``nodes`` along a new ``axis`` in
        ``[-ndim-1, ndim]`` (ShapeError naming the offending input)."""
        ops, shapes = _list_operands(self, nodes, "stack")
        first = shapes[0]
        a = _new_axis(axis, len(first), "stack", f"{len(first)}-d inputs")
        for k, s in enumerate(shapes[1:], 1):
            if s != first:
                raise shape_error("stack", f"nodes[{k}] has shape {s}, nodes[0] has {first}; "
                                           "stack needs equal shapes", expected=first, got=s)
        return self._apply(Op.STACK, tuple(ops), StackAttrs(a))

    def select(self, x, axis, index):
        """``x`` at ``index`` along ``axis``, which is removed (``torch.select``).
        A negative index counts from the end; out of range raises IndexError."""
        x, in_shape = operand_shape(self, x, "select")
        _need_ndim(in_shape, 1, "select")
        a = normalize_axis(axis, len(in_shape), "select")
        if not _is_int(index):
            raise TypeError(f"select: index must be an int, got {type(index).__name__}")
        size = in_shape[a]
        if not -size <= index < size:
            raise IndexError(f"select: index={index} is out of range for axis {a} of size {size}")
        key = (slice(None),) * a + (int(index) % size, Ellipsis)
        return self._apply1(Op.SELECT, x, IndexAttrs(key))

    def narrow(self, x, axis, start, length):
        """``x`` restricted to ``[start, start + length)`` along ``axis``
        (``torch.narrow``; a negative ``start`` counts from the end)."""
        x, in_shape = operand_shape(self, x, "narrow")
        _need_ndim(in_shape, 1, "narrow")
        a = normalize_axis(axis, len(in_shape), "narrow")
        for name, v in (("start", start), ("length", length)):
            if not _is_int(v):
                raise TypeError(f"narrow: {name} must be an int, got {type(v).__name__}")
        size = in_shape[a]
        if not -size <= start <= size:
            raise IndexError(f"narrow: start={start} is out of range for axis {a} of size {size}")
        s = int(start) % size if start < 0 else int(start)
        if length < 0 or s + length > size:
            raise ValueError(f"narrow: start={start} with length={length} does not fit in "
                             f"axis {a} of size {size}")
        key = (slice(None),) * a + (slice(s, s + int(length)), Ellipsis)
        return self._apply1(Op.NARROW, x, IndexAttrs(key))

    def getitem(self, x, key):
        """``x[key]`` with NumPy basic slicing: ints, slices (any step), None,
        Ellipsis and tuples of those; ``x[key]`` on a NodeId calls this.
        Advanced (array / list / mask) indices raise TypeError: use gather,
        embedding or where. Backward writes the gradient into zeros of
        ``x``'s shape at the same key."""
        x, in_shape = operand_shape(self, x, "getitem")
        return self._apply1(Op.GETITEM, x, IndexAttrs(basic_key(key, in_shape)))

    def flip(self, x, axes=None):
        """Reverse the order of elements along ``axes`` (int or tuple; None:
        every axis, as ``np.flip``). A view; backward flips the gradient."""
        x, in_shape = operand_shape(self, x, "flip")
        ax = normalize_axes(axes, len(in_shape), "flip", "axes")
        if ax is None:
            ax = tuple(range(len(in_shape)))
        return self._apply1(Op.FLIP, x, FlipAttrs(ax))

    def pad(self, x, pad_width, value=0.0):
        """Constant padding, ``np.pad(x, pad_width, constant_values=value)``:
        ``pad_width`` is one ``(before, after)`` pair per axis (or, as in
        np.pad, an int or one pair used for every axis); widths >= 0.
        Backward: the gradient's interior slice."""
        x, in_shape = operand_shape(self, x, "pad")
        if not is_scalar(value):
            raise TypeError(f"pad: value must be a real number, got {value!r}")
        widths = _pad_widths(pad_width, in_shape)
        check_array_size("pad", tuple(n + b + a for n, (b, a) in zip(in_shape, widths)),
                         self.dtype.itemsize, pad_width=pad_width)
        return self._apply1(Op.PAD, x, PadAttrs(widths, float(value)))

    def repeat(self, x, repeats):
        """Tile ``x`` (``np.tile`` semantics): ``repeats`` an int or a tuple of
        ints >= 0; a longer tuple adds leading axes. Backward sums the
        gradient over the copies."""
        x, in_shape = operand_shape(self, x, "repeat")
        reps = _shape_arg(repeats, "repeat", "repeats")
        if any(r < 0 for r in reps):
            raise ValueError(f"repeat: repeats={reps} must be >= 0")
        d = max(len(reps), len(in_shape))
        reps = (1,) * (d - len(reps)) + reps
        full = (1,) * (d - len(in_shape)) + tuple(in_shape)
        check_array_size("repeat", tuple(n * r for n, r in zip(full, reps)), self.dtype.itemsize,
                         repeats=repeats)
        return self._apply1(Op.REPEAT, x, RepeatAttrs(reps))

    def pixel_shuffle(self, x, r):
        """[N, H, W, C*r*r] -> [N, H*r, W*r, C] in PyTorch's channel order:
        input channel ``c*r*r + i*r + j`` goes to output pixel
        ``(h*r + i, w*r + j)``, channel ``c``."""
        x, in_shape = operand_shape(self, x, "pixel_shuffle")
        if len(in_shape) != 4:
            raise shape_error("pixel_shuffle", f"x must be 4-d (NHWC), got shape {in_shape}",
                              expected=4, got=in_shape)
        (r,) = int_tuple(r, 1, "pixel_shuffle", "r", minimum=1)
        if in_shape[3] % (r * r):
            raise shape_error("pixel_shuffle", f"channels {in_shape[3]} (shape {in_shape}) are "
                                               f"not divisible by r*r = {r * r}", got=in_shape)
        return self._apply1(Op.PIXEL_SHUFFLE, x, PixelShuffleAttrs(r))

    def upsample_nearest(self, x, r):
        """Nearest-neighbour upsampling by an integer factor: [N, H, W, C] ->
        [N, H*r, W*r, C] (each pixel repeated r x r). ``r`` is an int or one
        int per spatial axis; NLC and NDHWC inputs work alike. Backward sums
        each r x r block of the gradient."""
        x, in_shape = operand_shape(self, x, "upsample_nearest")
        if len(in_shape) not in (3, 4, 5):
            raise shape_error("upsample_nearest", f"x must be 3-d (NLC), 4-d (NHWC) or 5-d "
                                                  f"(NDHWC), got shape {in_shape}", got=in_shape)
        scales = int_tuple(r, len(in_shape) - 2, "upsample_nearest", "r", minimum=1)
        out = (in_shape[0], *(n * k for n, k in zip(in_shape[1:-1], scales)), in_shape[-1])
        check_array_size("upsample_nearest", out, self.dtype.itemsize, r=r)
        return self._apply1(Op.UPSAMPLE_NEAREST, x, UpsampleAttrs(scales))

    # ------------------------------------------- SPEC section 11 shape ops
    def tril(self, x, k=0):
        """The lower triangle of the last two axes (``torch.tril``): entries
        with ``col - row > k`` zeroed. Backward: ``tril(g, k)``."""
        return self._triangle(Op.TRIL, "tril", x, k)

    def triu(self, x, k=0):
        """The upper triangle of the last two axes (``torch.triu``): entries
        with ``col - row < k`` zeroed. Backward: ``triu(g, k)``."""
        return self._triangle(Op.TRIU, "triu", x, k)

    def _triangle(self, op, name, x, k):
        x, in_shape = operand_shape(self, x, name)
        _need_ndim(in_shape, 2, name)
        if not _is_int(k):
            raise TypeError(f"{name}: k must be an int, got {type(k).__name__}")
        return self._apply1(op, x, int(check_int_bound(int(k), name, "k")))

    def roll(self, x, shifts, axis=None):
        """``torch.roll``: elements shifted by ``shifts`` along ``axis``
        (ints, or equally long tuples), wrapping around; ``axis=None`` rolls
        the flattened input (one int shift) and restores the shape.
        Backward: the gradient rolled back."""
        x, in_shape = operand_shape(self, x, "roll")
        sh = _shape_arg(shifts, "roll", "shifts")
        if axis is None:
            if len(sh) != 1:
                raise ValueError(f"roll: shifts={shifts!r} must be one int when axis is None")
            return self._apply1(Op.ROLL, x, RollAttrs(sh, None))
        axes = (axis,) if _is_int(axis) else axis
        if not isinstance(axes, (tuple, list)) or len(axes) != len(sh) or not sh:
            raise ValueError(f"roll: shifts={shifts!r} and axis={axis!r} must be ints or "
                             "tuples of the same length")
        _need_ndim(in_shape, 1, "roll")
        ax = tuple(normalize_axis(a, len(in_shape), "roll") for a in axes)
        return self._apply1(Op.ROLL, x, RollAttrs(sh, ax))

    def diagonal(self, x, offset=0, axis1=0, axis2=1):
        """``torch.diagonal``: the ``offset`` diagonal of the planes spanned
        by ``axis1`` and ``axis2`` (removed), as a new last axis. A view.
        Backward: zeros with ``g`` written on that diagonal."""
        x, in_shape = operand_shape(self, x, "diagonal")
        _need_ndim(in_shape, 2, "diagonal")
        if not _is_int(offset):
            raise TypeError(f"diagonal: offset must be an int, got {type(offset).__name__}")
        a1 = normalize_axis(axis1, len(in_shape), "diagonal", "axis1")
        a2 = normalize_axis(axis2, len(in_shape), "diagonal", "axis2")
        if a1 == a2:
            raise ValueError(f"diagonal: axis1={axis1} and axis2={axis2} are the same axis")
        offset = int(check_int_bound(int(offset), "diagonal", "offset"))
        return self._apply1(Op.DIAGONAL, x, DiagonalAttrs(offset, a1, a2))

    def outer(self, a, b):
        """``torch.outer``: ``out[i, j] = a[i] * b[j]`` for 1-d ``a`` [n] and
        ``b`` [m]. Backward: ``g @ b`` and ``a @ g``."""
        a, sa = operand_shape(self, a, "outer", "a")
        b, sb = operand_shape(self, b, "outer", "b")
        for arg, s in (("a", sa), ("b", sb)):
            if len(s) != 1:
                raise shape_error("outer", f"{arg} must be 1-d, got shape {s}", expected=1, got=s)
        return self._apply(Op.OUTER, (a, b))

    def split(self, x, size_or_sections, axis=0) -> tuple:
        """``torch.split``: a tuple of narrows of ``x`` along ``axis``. An int
        is the size of every piece (the last may be smaller); a list or tuple
        gives each piece's size (they must add up to the axis' size). No op
        of its own: each piece is a ``narrow`` node."""
        x, in_shape = operand_shape(self, x, "split")
        _need_ndim(in_shape, 1, "split")
        a = normalize_axis(axis, len(in_shape), "split")
        n = in_shape[a]
        if _is_int(size_or_sections):
            size = int(size_or_sections)
            if size < 0 or (size == 0 and n != 0):
                raise ValueError(f"split: size_or_sections={size} must be > 0 (0 only for an "
                                 f"empty axis; axis {a} has size {n})")
            sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
        elif isinstance(size_or_sections, (tuple, list)) and all(
                _is_int(v) for v in size_or_sections):
            sizes = [int(v) for v in size_or_sections]
            if any(v < 0 for v in sizes) or sum(sizes) != n:
                raise ValueError(f"split: size_or_sections={tuple(sizes)} must be sizes >= 0 "
                                 f"adding up to {n}, the size of axis {a}")
        else:
            raise TypeError("split: size_or_sections must be an int or a list of ints, got "
                            f"{size_or_sections!r}")
        return self._pieces(x, a, sizes)

    def chunk(self, x, chunks, axis=0) -> tuple:
        """``torch.chunk``: ``x`` split along ``axis`` into pieces of
        ``ceil(size / chunks)`` (the last may be smaller, and there may be
        fewer than ``chunks``; an empty axis gives ``chunks`` empty pieces).
        Each piece is a ``narrow`` node."""
        x, in_shape = operand_shape(self, x, "chunk")
        _need_ndim(in_shape, 1, "chunk")
        a = normalize_axis(axis, len(in_shape), "chunk")
        if not _is_int(chunks):
            raise TypeError(f"chunk: chunks must be an int, got {type(chunks).__name__}")
        if chunks < 1:
            raise ValueError(f"chunk: chunks={chunks} must be > 0")
        n = in_shape[a]
        if n == 0:
            return self._pieces(x, a, [0] * int(chunks))
        size = -(-n // int(chunks))
        return self._pieces(x, a, [min(size, n - s) for s in range(0, n, size)])

    def _pieces(self, x, axis: int, sizes) -> tuple:
        if type(x) is not NodeId:
            x = self.constant(x)
        starts = itertools.accumulate([0] + sizes[:-1])
        return tuple(self.narrow(x, axis, s, n) for s, n in zip(starts, sizes))

    def unfold(self, x, kernel, dilation=1, padding=0, stride=1):
        """``torch.nn.functional.unfold`` on NHWC: [N, H, W, C] -> [N, L,
        KH*KW*C], block ``l = oh*OW + ow`` (row-major over the OH x OW
        sliding blocks), feature ``(i*KW + j)*C + c`` (channels fastest: the
        order of yscv's conv weights [KH, KW, C, Cout] flattened).
        ``kernel``, ``dilation``, ``padding`` (zeros), ``stride``: an int or an
        (H, W) pair. Backward: ``fold`` of the gradient."""
        x, in_shape = operand_shape(self, x, "unfold")
        check_ndim(in_shape, 4, "unfold", "x", "NHWC")
        attrs = _window_attrs("unfold", kernel, dilation, padding, stride, in_shape[1:3])
        (kh, kw), (oh, ow) = attrs.kernel, attrs.blocks
        check_array_size("unfold", (in_shape[0], oh * ow, kh * kw * in_shape[3]),
                         self.dtype.itemsize, kernel=kernel, stride=stride)
        return self._apply1(Op.UNFOLD, x, attrs)

    def fold(self, x, output_size, kernel, dilation=1, padding=0, stride=1):
        """``torch.nn.functional.fold`` on yscv's layout: [N, L, KH*KW*C] ->
        [N, H, W, C] with ``output_size = (H, W)``; each block's taps are
        summed into the image (overlaps add up): the adjoint of ``unfold``,
        and its inverse where blocks do not overlap. ``L`` must be the number
        of sliding blocks. Backward: ``unfold`` of the gradient."""
        x, in_shape = operand_shape(self, x, "fold")
        check_ndim(in_shape, 3, "fold", "x", "[N, L, KH*KW*C]")
        size = int_tuple(output_size, 2, "fold", "output_size", minimum=1)
        attrs = _window_attrs("fold", kernel, dilation, padding, stride, size)
        (kh, kw), (oh, ow) = attrs.kernel, attrs.blocks
        if in_shape[2] % (kh * kw):
            raise shape_error("fold", f"x's last axis ({in_shape[2]}, shape {in_shape}) is not "
                                      f"divisible by KH*KW = {kh * kw}", got=in_shape)
        if in_shape[1] != oh * ow:
            raise shape_error("fold", f"x has {in_shape[1]} blocks (shape {in_shape}) but "
                                      f"output_size={output_size!r} with kernel={kernel!r} "
                                      f"gives {oh} x {ow} = {oh * ow}",
                              expected=oh * ow, got=in_shape)
        check_array_size("fold", (in_shape[0], *size, in_shape[2] // (kh * kw)),
                         self.dtype.itemsize, output_size=output_size)
        return self._apply1(Op.FOLD, x, attrs)

    def interpolate(self, x, size=None, scale_factor=None, mode="nearest", align_corners=None):
        """``torch.nn.functional.interpolate`` on NHWC [N, H, W, C], ``mode``
        "nearest" or "bilinear", with PyTorch's index rules: ``size`` (an int
        or (OH, OW)) or ``scale_factor`` (a number or a pair: OH =
        floor(H * s), and the index rule uses 1/s as PyTorch does without
        ``recompute_scale_factor``); ``align_corners`` (bilinear only; None =
        False). Backward: the gradient summed back onto the source pixels
        with the same weights."""
        x, in_shape = operand_shape(self, x, "interpolate")
        check_ndim(in_shape, 4, "interpolate", "x", "NHWC")
        if mode not in ("nearest", "bilinear"):
            raise ValueError(f"interpolate: mode={mode!r} must be 'nearest' or 'bilinear'")
        if align_corners is not None and not isinstance(align_corners, (bool, np.bool_)):
            raise TypeError(f"interpolate: align_corners must be None or a bool, got "
                            f"{align_corners!r}")
        if mode == "nearest" and align_corners is not None:
            raise ValueError("interpolate: align_corners can only be set with mode='bilinear', "
                             f"got align_corners={align_corners!r} with mode='nearest'")
        if min(in_shape[1:3]) < 1:
            raise shape_error("interpolate", f"x has an empty spatial axis (shape {in_shape})",
                              got=in_shape)
        out_hw, scales = _interp_size(in_shape[1:3], size, scale_factor)
        corners = bool(align_corners)
        check_array_size("interpolate", (in_shape[0], *out_hw, in_shape[3]), self.dtype.itemsize,
                         size=size, scale_factor=scale_factor)
        axes = tuple(interp_axis(n, m, s, mode, corners, self.dtype)
                     for n, m, s in zip(in_shape[1:3], out_hw, scales))
        return self._apply1(Op.INTERPOLATE, x, InterpolateAttrs(mode, corners, out_hw, axes))
