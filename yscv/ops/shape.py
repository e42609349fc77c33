"""Shape ops (forward): reshapes, views, concatenation and slicing (split and
chunk are narrows).

Ops NumPy can express as a view (reshape, flatten, unsqueeze, squeeze, expand,
select, narrow, getitem, flip) return a view of the input value, as PyTorch's
do: no copy. Values are never written in place by the library, so the sharing
is only visible through memory accounting (``g.summary()`` counts the bytes a
view exposes). ``expand`` returns a read-only zero-stride broadcast view.

Every attribute (the reshapes' output shape, select/narrow/getitem's
canonical basic-slicing key, cat's split offsets) is resolved at graph-build
time into a named record of `yscv.compute.shape`; forwards are one NumPy
call. Nothing is saved for backward beyond the input values.

Padding, tiling, pixel shuffle, nearest upsampling, triangles, roll, diagonal,
outer, unfold/fold and interpolate are in `yscv.ops.shape_windows`,
which takes its argument helpers from here.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from ..compute.shape import (CatAttrs, ExpandAttrs, FlipAttrs, IndexAttrs, ReshapeAttrs,
                             StackAttrs)
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import (MAX_INTP, check_array_size, check_int_bound, normalize_axes,
                      normalize_axis, operand_shape, shape_error)


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


# ----------------------------------------------------------- Graph methods
class ShapeOps:
    """Graph methods of the shape category: reshapes, views, joins and slicing."""

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

    # ----------------------------------------------------- more shape ops
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
