"""ScatterElements and ScatterND with the reductions max, min and mul
(``none`` and ``add`` stay with the handlers of ``_import_index``).

Both operators come down to one form here: every element of ``updates``
has a flat target position in ``x`` (computed with NumPy from the static
indices), and each target combines ``x``'s value with all the updates sent
to it (ONNX's reductions include ``x``, as PyTorch's ``scatter_reduce`` with
``include_self=True``).

On float data the result is recorded with graph ops, with PyTorch's
gradients:

- ``mul``: ``x`` times one factor tensor per rank of duplicate (the k-th
  update sent to each target), each a ``scatter_add`` of ``u - 1`` into
  zeros, plus 1: the product rule gives every factor its gradient;
- ``max`` / ``min``: the result's values are read first; the gradient is
  shared evenly by the elements (``x`` and updates) equal to the result at
  their target, so the output is the result plus ``S - S``, with ``S`` the
  weighted sum of those elements (exact values; ``S``'s gradient).

Static ``x`` and ``updates`` give a static result in their dtype.
"""
from __future__ import annotations

import numpy as np

from ._import_registry import HANDLERS, handler

_BASE = {op: HANDLERS[op] for op in ("ScatterElements", "ScatterND")}
_UFUNC = {"max": np.maximum, "min": np.minimum, "mul": np.multiply}
REDUCTIONS = ("none", "add", "max", "min", "mul")


def _targets_elements(run, node, shape):
    """Flat target of each update element of ScatterElements (C order)."""
    axis = int(node.attrs.get("axis", 0)) % len(shape)
    idx = run.arr(node.inputs[1]).astype(np.int64)
    idx = np.where(idx < 0, idx + shape[axis], idx)
    coords = list(np.indices(idx.shape))
    coords[axis] = idx
    return np.ravel_multi_index(tuple(coords), shape).reshape(-1)


def _targets_nd(run, node, shape):
    """Flat target of each update element of ScatterND: index tuples into
    the leading k axes, each covering a contiguous row of the rest."""
    idx = run.arr(node.inputs[1]).astype(np.int64)
    k = idx.shape[-1]
    lead = shape[:k]
    idx = np.where(idx < 0, idx + np.array(lead, dtype=np.int64), idx)
    rows = np.ravel_multi_index(tuple(np.moveaxis(idx.reshape(-1, k), -1, 0)), lead)
    rest = int(np.prod(shape[k:], dtype=np.int64))
    return (rows[:, None] * rest + np.arange(rest)).reshape(-1)


def _scatter_into(g, n, tgt, src):
    """A flat [n] node: zeros with ``src`` (a flat node) added at ``tgt``."""
    return g.scatter_add(g.constant(np.zeros(n, g.dtype)), 0, tgt, src)


def _mul(g, x, u, tgt, n):
    order = np.argsort(tgt, kind="stable")
    first = np.r_[0, np.flatnonzero(np.diff(tgt[order])) + 1]
    rank = np.empty_like(tgt)
    rank[order] = np.arange(tgt.size) - np.repeat(first, np.diff(np.r_[first, tgt.size]))
    y = x
    for k in range(int(rank.max()) + 1 if rank.size else 0):
        sel = np.flatnonzero(rank == k)
        part = g.sub(g.index_select(u, 0, sel), g.constant(np.ones(sel.size, g.dtype)))
        y = g.mul(y, g.add(_scatter_into(g, n, tgt[sel], part),
                           g.constant(np.ones(n, g.dtype))))
    return y


def _extremum(g, x, u, tgt, n, xv, uv, fn):
    r = xv.copy()
    fn.at(r, tgt, uv)
    hit_x = (xv == r).astype(g.dtype)
    hit_u = (uv == r[tgt]).astype(g.dtype)
    count = hit_x.copy()
    np.add.at(count, tgt, hit_u)
    count[count == 0] = 1  # NaN targets: no element equals the result
    s = g.add(g.mul(x, g.constant(hit_x / count)),
              _scatter_into(g, n, tgt, g.mul(u, g.constant(hit_u / count[tgt]))))
    return g.add(g.constant(r.astype(g.dtype)), g.sub(s, g.constant(np.asarray(g.value(s)))))


def _scatter_reduce(run, node, targets):
    g = run.g
    name, upd = node.inputs[0], node.inputs[2]
    shape = tuple(run.shape(name))
    n = int(np.prod(shape, dtype=np.int64))
    tgt = targets(run, node, shape)
    red = node.attrs["reduction"]
    if run.is_static(name) and run.is_static(upd):
        y = run.arr(name).reshape(-1).copy()
        _UFUNC[red].at(y, tgt, run.arr(upd).reshape(-1).astype(y.dtype))
        return [y.reshape(shape)]
    if tgt.size != int(np.prod(run.shape(upd), dtype=np.int64)):
        raise node.fail(f"updates of shape {run.shape(upd)} do not match the indices")
    x, u = g.reshape(run.node(name), (n,)), g.reshape(run.node(upd), (tgt.size,))
    if red == "mul":
        y = _mul(g, x, u, tgt, n)
    else:
        xv, uv = np.asarray(g.value(x)), np.asarray(g.value(u))
        y = _extremum(g, x, u, tgt, n, xv, uv, _UFUNC[red])
    return [g.reshape(y, shape)]


@handler("ScatterElements")
def _scatter_elements(run, node):
    """ScatterElements; reductions max, min and mul here, the others as before."""
    if node.attrs.get("reduction", "none") in ("none", "add"):
        return _BASE["ScatterElements"](run, node)
    return _scatter_reduce(run, node, _targets_elements)


@handler("ScatterND")
def _scatter_nd(run, node):
    """ScatterND; reductions max, min and mul here, the others as before."""
    if node.attrs.get("reduction", "none") in ("none", "add"):
        return _BASE["ScatterND"](run, node)
    return _scatter_reduce(run, node, _targets_nd)
