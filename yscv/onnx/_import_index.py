"""Handlers of the indexing ONNX operators (GatherElements, ScatterElements,
ScatterND, DepthToSpace) and value tests (IsInf, IsNaN).
Indices are static (NumPy integer arrays); data gives graph ops."""
from __future__ import annotations

import numpy as np

from ._import_registry import handler


def _indices(run, name, size):
    idx = run.arr(name).astype(np.int64)
    return np.where(idx < 0, idx + size, idx)


@handler("IsInf", "IsNaN")
def _value_tests(run, node):
    a = run.arr(node.inputs[0])
    if node.op == "IsNaN":
        return [np.isnan(a)]
    pos, neg = node.attrs.get("detect_positive", 1), node.attrs.get("detect_negative", 1)
    return [(np.isposinf(a) & bool(pos)) | (np.isneginf(a) & bool(neg))]


@handler("GatherElements")
def _gather_elements(run, node):
    name = node.inputs[0]
    shape = run.shape(name)
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    idx = _indices(run, node.inputs[1], shape[axis])
    if run.is_static(name):
        return [np.take_along_axis(run.arr(name), idx, axis=axis)]
    return [run.g.gather(run.node(name), axis, idx)]


@handler("ScatterElements", "Scatter")
def _scatter_elements(run, node):
    """reduction "add": scatter_add; "none": the written positions of x
    zeroed, then the updates added there (duplicates undefined, as in ONNX)."""
    g = run.g
    shape = run.shape(node.inputs[0])
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    idx = _indices(run, node.inputs[1], shape[axis])
    x, src = run.node(node.inputs[0]), run.node(node.inputs[2])
    if node.attrs.get("reduction", "none") == "add":
        return [g.scatter_add(x, axis, idx, src)]
    keep = np.ones(shape, g.dtype)
    np.put_along_axis(keep, idx, 0.0, axis=axis)
    zeros = g.constant(np.zeros(shape, g.dtype))
    return [g.add(g.mul(x, keep), g.scatter_add(zeros, axis, idx, src))]


@handler("ScatterND")
def _scatter_nd(run, node):
    """Index tuples into the leading k axes: rows of x viewed as
    [prod(shape[:k]), rest] replaced (``scatter``) or added to."""
    g = run.g
    shape = tuple(run.shape(node.inputs[0]))
    idx = run.arr(node.inputs[1]).astype(np.int64)
    k = idx.shape[-1]
    lead = shape[:k]
    idx = np.where(idx < 0, idx + np.array(lead), idx)
    rows = np.ravel_multi_index(tuple(np.moveaxis(idx.reshape(-1, k), -1, 0)), lead)
    rest = int(np.prod(shape[k:], dtype=np.int64))
    x2 = g.reshape(run.node(node.inputs[0]), (int(np.prod(lead, dtype=np.int64)), rest))
    upd = g.reshape(run.node(node.inputs[2]), (rows.size, rest))
    if node.attrs.get("reduction", "none") == "add":
        y = g.scatter_add(x2, 0, np.broadcast_to(rows[:, None], (rows.size, rest)).copy(), upd)
    else:
        y = g.scatter(x2, rows, upd)
    return [g.reshape(y, shape)]


@handler("DepthToSpace")
def _depth_to_space(run, node):
    """[N, C, H, W] -> [N, C/b^2, ``H*b``, ``W*b``]; DCR (depth-column-row, the
    default) or CRD (PyTorch's pixel_shuffle order)."""
    g = run.g
    b = int(node.attrs["blocksize"])
    n, c, h, w = run.shape(node.inputs[0])
    x = run.node(node.inputs[0])
    if node.attrs.get("mode", "DCR") == "CRD":
        y = g.transpose(g.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    else:
        y = g.transpose(g.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    return [g.reshape(y, (n, c // (b * b), h * b, w * b))]
