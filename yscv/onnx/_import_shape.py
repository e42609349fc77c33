"""Handlers of shape and indexing ONNX operators (the exporters' shape
plumbing included): NumPy on static values, graph ops on data."""
from __future__ import annotations

import numpy as np

from ._import_checks import check_reshape_target, constant_of_shape_size, range_size
from ._import_dtypes import NARROW_TYPES, narrow_cast
from ._import_layout import channel_first_perm, channel_last_perm
from ._import_registry import ChannelLast, handler


def _ints(run, node, slot, attr=None):
    """An int list from input ``slot`` (static) or, in older opsets, attribute ``attr``."""
    if run.has(node, slot):
        return [int(v) for v in run.arr(node.inputs[slot]).reshape(-1)]
    if attr is not None and attr in node.attrs:
        return [int(v) for v in node.attrs[attr]]
    return None


@handler("Constant")
def _constant(run, node):
    at = node.attrs
    if "value" in at:
        return [np.array(at["value"])]
    for key, dt in (("value_float", np.float32), ("value_int", np.int64)):
        if key in at:
            return [np.array(at[key], dtype=dt)]
    for key, dt in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in at:
            return [np.array(at[key], dtype=dt).reshape(-1)]
    raise node.fail(f"no supported value attribute among {sorted(at)}")


@handler("Shape")
def _shape(run, node):
    shape = run.shape(node.inputs[0])
    start = int(node.attrs.get("start", 0))
    end = node.attrs.get("end")
    return [np.array(shape[start:None if end is None else int(end)], dtype=np.int64)]


@handler("Size")
def _size(run, node):
    return [np.array(int(np.prod(run.shape(node.inputs[0]), dtype=np.int64)), dtype=np.int64)]


@handler("ConstantOfShape")
def _constant_of_shape(run, node):
    value = node.attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    shape = constant_of_shape_size(node, run.arr(node.inputs[0]).reshape(-1))
    return [np.full(shape, value.reshape(-1)[0], dtype=value.dtype)]


@handler("Range")
def _range(run, node):
    start, limit, delta = (run.arr(n) for n in node.inputs[:3])
    range_size(node, start, limit, delta)
    start, limit, delta = (a.reshape(()) for a in (start, limit, delta))
    return [np.arange(start, limit, delta, dtype=np.result_type(start, limit, delta))]


@handler("Cast", "CastLike")
def _cast(run, node):
    """Cast (``to``) and CastLike (the type of input 1). Float data stays a
    graph node in the graph's float dtype; integer, bool and the narrow
    types (`yscv.onnx._import_dtypes.NARROW_TYPES`) give static arrays."""
    from onnx.helper import np_dtype_to_tensor_dtype

    name = node.inputs[0]
    if node.op == "CastLike":
        dt = np.dtype(run.arr(node.inputs[1]).dtype) if run.is_static(node.inputs[1]) \
            else run.g.dtype
        to = int(np_dtype_to_tensor_dtype(dt))
    else:
        dt = node.attrs["_np_to"]
        to = int(node.attrs["to"])
    if to in NARROW_TYPES:  # a static value, whatever the input (no gradient)
        return [narrow_cast(run.arr(name), to, dt, bool(node.attrs.get("saturate", 1)),
                            node.attrs.get("round_mode", "up"))]
    if run.is_static(name):
        return [run.arr(name).astype(dt)]
    if dt.kind == "f":
        return [run.raw(name)]  # data stays in the graph's float dtype
    return [run.arr(name).astype(dt)]  # an integer/bool view of data has no gradient


def _target_shape(in_shape, shape, allowzero):
    out = []
    for i, s in enumerate(shape):
        out.append(in_shape[i] if s == 0 and not allowzero else s)
    if -1 in out:
        known = int(np.prod([s for s in out if s != -1], dtype=np.int64))
        total = int(np.prod(in_shape, dtype=np.int64))
        out[out.index(-1)] = total // known if known else 0
    return tuple(out)


@handler("Reshape")
def _reshape(run, node):
    name = node.inputs[0]
    shape = _ints(run, node, 1, "shape")
    check_reshape_target(node, shape)
    target = _target_shape(run.shape(name), shape, node.attrs.get("allowzero", 0))
    if run.is_static(name):
        return [run.arr(name).reshape(target)]
    return [run.g.reshape(run.node(name), target)]


@handler("Flatten")
def _flatten(run, node):
    name = node.inputs[0]
    shape = run.shape(name)
    axis = int(node.attrs.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis  # -1 keeps the last axis apart
    target = (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))
    if run.is_static(name):
        return [run.arr(name).reshape(target)]
    return [run.g.reshape(run.node(name), target)]


@handler("Unsqueeze")
def _unsqueeze(run, node):
    name = node.inputs[0]
    shape = list(run.shape(name))
    axes = _ints(run, node, 1, "axes")
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    if run.is_static(name):
        return [run.arr(name).reshape(shape)]
    return [run.g.reshape(run.node(name), tuple(shape))]


@handler("Squeeze")
def _squeeze(run, node):
    name = node.inputs[0]
    shape = run.shape(name)
    axes = _ints(run, node, 1, "axes")
    if axes is None:
        drop = {i for i, s in enumerate(shape) if s == 1}
    else:
        drop = {a % len(shape) for a in axes}
    bad = [a for a in drop if shape[a] != 1]
    if bad:
        raise ValueError(f"onnx Squeeze (node {node.name!r}): axis {bad[0]} of shape "
                         f"{tuple(shape)} is not 1")
    target = tuple(s for i, s in enumerate(shape) if i not in drop)
    if run.is_static(name):
        return [run.arr(name).reshape(target)]
    return [run.g.reshape(run.node(name), target)]


@handler("Transpose")
def _transpose(run, node):
    """Channel-last -> channel-first of data is recorded as nothing: the value
    is marked channel-last (the NCHW ops inside a channel-last file then
    take it as it is), and the transpose back returns the held node."""
    name = node.inputs[0]
    perm = node.attrs.get("perm")
    perm = None if perm is None else tuple(int(p) for p in perm)
    if run.is_static(name):
        return [np.transpose(run.arr(name), perm)]
    v = run.raw(name)
    ndim = len(run.shape(name))
    if perm is not None and ndim >= 3:
        if isinstance(v, ChannelLast) and perm == channel_last_perm(ndim):
            return [v.node]
        if not isinstance(v, ChannelLast) and perm == channel_first_perm(ndim):
            return [ChannelLast(v)]
    return [run.g.transpose(run.node(name), perm)]


@handler("Concat")
def _concat(run, node):
    names = [n for n in node.inputs if n]
    axis = int(node.attrs["axis"])
    if all(run.is_static(n) for n in names):
        return [np.concatenate([run.arr(n) for n in names], axis=axis)]
    nodes = [run.node(n) for n in names if run.shape(n)[axis % len(run.shape(n))] != 0]
    return [run.g.cat(nodes, axis=axis) if len(nodes) > 1 else nodes[0]]


@handler("Split")
def _split(run, node):
    name = node.inputs[0]
    shape = run.shape(name)
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    sizes = _ints(run, node, 1, "split")
    if sizes is None:
        k = len(node.outputs)
        per = -(-shape[axis] // k)
        sizes = [min(per, shape[axis] - i * per) for i in range(k)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    if run.is_static(name):
        a = run.arr(name)
        return [np.take(a, range(s, s + n), axis=axis) for s, n in zip(starts, sizes)]
    x = run.node(name)
    return [run.g.narrow(x, axis, int(s), int(n)) for s, n in zip(starts, sizes)]


def _slice_key(shape, starts, ends, axes, steps):
    key = [slice(None)] * len(shape)
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) % len(shape)
        r = range(*slice(int(s), int(e), int(st)).indices(shape[a]))
        stop = r.stop if r.stop >= 0 else None
        key[a] = slice(r.start, stop, r.step)
    return tuple(key)


@handler("Slice")
def _slice(run, node):
    name = node.inputs[0]
    if run.m.opset < 10:
        starts, ends = node.attrs["starts"], node.attrs["ends"]
        axes, steps = node.attrs.get("axes"), None
    else:
        starts, ends = _ints(run, node, 1), _ints(run, node, 2)
        axes, steps = _ints(run, node, 3), _ints(run, node, 4)
    key = _slice_key(run.shape(name), starts, ends, axes, steps)
    if run.is_static(name):
        return [run.arr(name)[key]]
    return [run.g.getitem(run.node(name), key)]


@handler("Gather")
def _gather(run, node):
    name = node.inputs[0]
    shape = run.shape(name)
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    idx = run.arr(node.inputs[1]).astype(np.int64)
    idx = np.where(idx < 0, idx + shape[axis], idx)
    if run.is_static(name):
        return [np.asarray(np.take(run.arr(name), idx, axis=axis))]  # 0-d index: an array
    g = run.g
    x = run.node(name)
    if idx.ndim == 0:
        return [g.select(x, axis, int(idx))]
    if axis == 0 and len(shape) == 2:
        return [g.embedding(x, idx)]
    # move the gathered axis first, gather rows, put the index axes in its place
    rest = [i for i in range(len(shape)) if i != axis]
    moved = g.reshape(g.transpose(x, (axis, *rest)), (shape[axis], -1))
    rows = g.reshape(g.embedding(moved, idx), idx.shape + tuple(shape[i] for i in rest))
    k = idx.ndim
    perm = (tuple(range(k, k + axis)) + tuple(range(k)) + tuple(range(k + axis, k + len(rest))))
    return [g.transpose(rows, perm)]


@handler("Expand")
def _expand(run, node):
    name = node.inputs[0]
    shape = run.shape(name)
    target = np.broadcast_shapes(tuple(shape), tuple(_ints(run, node, 1)))
    if run.is_static(name):
        return [np.broadcast_to(run.arr(name), target).copy()]
    x = run.node(name)
    if len(shape) < len(target):
        x = run.g.reshape(x, (1,) * (len(target) - len(shape)) + tuple(shape))
    return [x if tuple(x.shape) == target else run.g.expand(x, target)]


@handler("Tile")
def _tile(run, node):
    name = node.inputs[0]
    reps = tuple(_ints(run, node, 1))
    if run.is_static(name):
        return [np.tile(run.arr(name), reps)]
    return [run.g.repeat(run.node(name), reps)]
