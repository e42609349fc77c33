"""Handlers of selection and indexing ONNX operators: TopK, ArgMax, ArgMin,
Hardmax, Trilu, OneHot, EyeLike, Det, NonZero, GatherND, Compress and
SpaceToDepth.

Indices and masks are NumPy arrays (int64 / bool, no gradient), computed
from the values at call; selected float data records graph ops
(``topk``, ``index_select``, ``tril`` / ``triu``, ``det``, ...), so
gradients reach the selected elements. Static inputs give static outputs.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler

__all__ = ["STATIC_SLOTS"]

STATIC_SLOTS = {"TopK": {1}, "Trilu": {1}, "OneHot": {1}}


@handler("TopK")
def _top_k(run, node):
    """The k largest (``largest=0``: smallest) along ``axis``: values (data:
    a graph node) and int64 indices; equal values lower index first."""
    name = node.inputs[0]
    shape = run.shape(name)
    axis = int(node.attrs.get("axis", -1)) % len(shape)
    largest = bool(node.attrs.get("largest", 1))
    if run.has(node, 1):
        k = int(run.arr(node.inputs[1]).reshape(-1)[0])
    else:
        k = int(node.attrs["k"])  # opset 1-9
    if not 0 <= k <= shape[axis]:
        raise node.fail(f"k={k} is out of range for axis {axis} of size {shape[axis]}")
    if run.is_static(name):
        a = run.arr(name)
        key = -a if largest and a.dtype.kind != "u" else a
        if largest and a.dtype.kind == "u":
            key = np.iinfo(a.dtype).max - a
        idx = np.argsort(key, axis=axis, kind="stable").take(np.arange(k), axis=axis)
        return [np.take_along_axis(a, idx, axis), idx.astype(np.int64)]
    values, idx = run.g.topk(run.node(name), k, axis=axis, largest=largest)
    return [values, idx]


@handler("ArgMax", "ArgMin")
def _arg_extremum(run, node):
    """int64 index of the max / min along ``axis`` (``keepdims``; the last
    occurrence with ``select_last_index=1``, else the first)."""
    a = run.arr(node.inputs[0])
    axis = int(node.attrs.get("axis", 0)) % max(a.ndim, 1)
    keep = bool(node.attrs.get("keepdims", 1))
    fn = np.argmax if node.op == "ArgMax" else np.argmin
    if node.attrs.get("select_last_index", 0):
        idx = a.shape[axis] - 1 - fn(np.flip(a, axis), axis=axis, keepdims=keep)
    else:
        idx = fn(a, axis=axis, keepdims=keep)
    return [np.asarray(idx, dtype=np.int64)]


def _flat_2d(shape, axis):
    lead = int(np.prod(shape[:axis], dtype=np.int64))
    return lead, int(np.prod(shape, dtype=np.int64)) // max(lead, 1)


@handler("Hardmax")
def _hardmax(run, node):
    """1 at the first maximum along ``axis``, 0 elsewhere (before opset 13:
    over the input flattened to 2-D at ``axis``). Piecewise constant: no
    gradient, so computed on the values."""
    a = run.arr(node.inputs[0])
    if a.size == 0:
        return [a]
    if run.m.opset >= 13:
        axis = int(node.attrs.get("axis", -1)) % a.ndim
        flat = a
    else:
        axis = int(node.attrs.get("axis", 1)) % a.ndim
        flat, axis = a.reshape(_flat_2d(a.shape, axis)), 1
    y = np.zeros_like(flat)
    np.put_along_axis(y, np.expand_dims(np.argmax(flat, axis=axis), axis), 1, axis=axis)
    return [y.reshape(a.shape)]


@handler("Trilu")
def _trilu(run, node):
    """The lower (``upper=0``) or upper triangle of the last two axes from
    diagonal ``k`` (input 1, default 0); the rest zero."""
    name = node.inputs[0]
    k = int(run.arr(node.inputs[1]).reshape(-1)[0]) if run.has(node, 1) else 0
    upper = bool(node.attrs.get("upper", 1))
    if run.is_static(name):
        a = run.arr(name)
        return [np.triu(a, k) if upper else np.tril(a, k)]
    g, x = run.g, run.node(name)
    rows, cols = x.shape[-2:]
    k = max(min(k, cols + 1), -rows - 1)  # beyond the matrix: everything or nothing
    return [g.triu(x, k) if upper else g.tril(x, k)]


@handler("OneHot")
def _one_hot(run, node):
    """``values[1]`` at each index along the new ``axis`` (default -1) of size
    ``depth``, ``values[0]`` elsewhere; negative indices count from the
    end, indices outside [-depth, depth) give a row of ``values[0]``. Data
    values record ``off + (on - off) * mask``."""
    idx = run.arr(node.inputs[0])
    depth = int(np.asarray(run.arr(node.inputs[1])).reshape(-1)[0])
    rank = idx.ndim + 1
    axis = int(node.attrs.get("axis", -1)) % rank
    idx = np.asarray(idx).astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    mask = np.expand_dims(idx, -1) == np.arange(depth)
    mask = np.moveaxis(mask, -1, axis)
    vname = node.inputs[2]
    if run.is_static(vname):
        v = run.arr(vname).reshape(-1)
        return [np.where(mask, v[1], v[0]).astype(v.dtype)]
    g, vals = run.g, run.node(vname)
    vals = g.reshape(vals, (2,))
    off, on = g.narrow(vals, 0, 0, 1), g.narrow(vals, 0, 1, 1)
    return [g.add(off, g.mul(g.sub(on, off), mask.astype(g.dtype)))]


@handler("EyeLike")
def _eye_like(run, node):
    """A 2-D array of the input's shape with ones on diagonal ``k``, of
    ``dtype`` (default: the input's)."""
    name = node.inputs[0]
    shape = run.shape(name)
    dt = node.attrs.get("_np_dtype")
    if dt is None:
        dt = run.arr(name).dtype if run.is_static(name) else run.g.dtype
    return [np.eye(shape[0], shape[1], int(node.attrs.get("k", 0)), dtype=dt)]


@handler("Det")
def _det(run, node):
    """Determinant of the last two axes (batched)."""
    name = node.inputs[0]
    if run.is_static(name):
        return [np.asarray(np.linalg.det(run.arr(name)))]
    return [run.g.det(run.node(name))]


@handler("NonZero")
def _non_zero(run, node):
    """The indices of the non-zero elements, [rank, count] int64 (row-major)."""
    a = run.arr(node.inputs[0])
    if a.ndim == 0:
        return [np.zeros((0, int(a != 0)), np.int64)]
    return [np.array(np.nonzero(a), dtype=np.int64).reshape(a.ndim, -1)]


@handler("GatherND")
def _gather_nd(run, node):
    """Slices of data at index tuples into its axes after ``batch_dims``:
    data [``*B``, ``*D``, ``*R``] and indices [``*B``, ``*I``, k] with k = len(D)
    give [``*B``, ``*I``, ``*R``]; data records one index_select over rows."""
    name = node.inputs[0]
    shape = tuple(run.shape(name))
    idx = run.arr(node.inputs[1]).astype(np.int64)
    b = int(node.attrs.get("batch_dims", 0))
    k = idx.shape[-1]
    bshape, dshape, rest = shape[:b], shape[b:b + k], shape[b + k:]
    idx = np.where(idx < 0, idx + np.array(dshape, np.int64), idx)
    nb = int(np.prod(bshape, dtype=np.int64))
    nd = int(np.prod(dshape, dtype=np.int64))
    flat_idx = idx.reshape(nb, -1, k)
    if k:
        inner = np.ravel_multi_index(tuple(np.moveaxis(flat_idx, -1, 0)), dshape)
    else:
        inner = np.zeros(flat_idx.shape[:2], np.int64)
    rows = (inner + np.arange(nb)[:, None] * nd).reshape(-1)
    out_shape = idx.shape[:-1] + rest
    width = int(np.prod(rest, dtype=np.int64))
    if run.is_static(name):
        return [run.arr(name).reshape(nb * nd, width)[rows].reshape(out_shape)]
    g = run.g
    x2 = g.reshape(run.node(name), (nb * nd, width))
    return [g.reshape(g.index_select(x2, 0, rows), out_shape)]


@handler("Compress")
def _compress(run, node):
    """The slices along ``axis`` (none: of the flattened input) where
    ``condition`` is true; a condition shorter than the axis selects among
    its first entries."""
    name = node.inputs[0]
    cond = run.arr(node.inputs[1]).astype(bool).reshape(-1)
    shape = run.shape(name)
    axis = node.attrs.get("axis")
    if axis is None:
        size = int(np.prod(shape, dtype=np.int64))
    else:
        axis = int(axis) % len(shape)
        size = shape[axis]
    if cond.size > size:
        raise ValueError(f"Compress: condition has {cond.size} entries, more than the "
                         f"{size} of the selected axis")
    keep = np.nonzero(cond)[0].astype(np.int64)
    if run.is_static(name):
        a = run.arr(name)
        return [np.take(a.reshape(-1) if axis is None else a, keep, axis=0 if axis is None
                        else axis)]
    g, x = run.g, run.node(name)
    if axis is None:
        x, axis = g.reshape(x, (size,)), 0
    return [g.index_select(x, axis, keep)]


@handler("SpaceToDepth")
def _space_to_depth(run, node):
    """[N, C, H, W] -> [N, ``C*b*b``, H/b, W/b]: each b x b block becomes
    channels, ordered block row, block column, channel (``mode`` DCR, the
    default: DepthToSpace's DCR inverse) or channel, block row, block
    column (CRD, opset 28)."""
    b = int(node.attrs["blocksize"])
    name = node.inputs[0]
    n, c, h, w = run.shape(name)
    split = (n, c, h // b, b, w // b, b)
    perm = (0, 1, 3, 5, 2, 4) if node.attrs.get("mode", "DCR") == "CRD" else (0, 3, 5, 1, 2, 4)
    out = (n, c * b * b, h // b, w // b)
    if run.is_static(name):
        return [run.arr(name).reshape(split).transpose(perm).reshape(out)]
    g = run.g
    return [g.reshape(g.transpose(g.reshape(run.node(name), split), perm), out)]


def check(node, np_dtype_of) -> None:
    """Load-time refusals of the attribute values these handlers do not
    implement; EyeLike's ``dtype`` decoded to NumPy."""
    at = node.attrs
    if node.op == "SpaceToDepth" and int(at.get("blocksize", 0)) < 1:
        raise node.fail(f"blocksize={at.get('blocksize')} is not supported (a positive int)")
    if node.op == "SpaceToDepth" and at.get("mode", "DCR") not in ("DCR", "CRD"):
        raise node.fail(f"mode={at['mode']!r} is not supported (DCR or CRD)")
    if node.op == "EyeLike" and "dtype" in at:
        at["_np_dtype"] = np_dtype_of(int(at["dtype"]))
