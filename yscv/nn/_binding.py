"""Binding layer state into a graph without copying.

``g.param(p)`` (the engine) binds a trainable Parameter. Two more bindings
are needed by layers and live here until the engine grows an equivalent:

- :func:`bind_buffer` binds a buffer (batch-norm running statistics) as a
  constant leaf whose value is a VIEW of the layer's array, once per graph.
  ``g.batch_norm(training=True)`` updates its running-stat leaves in place
  (``Graph._update_leaf_inplace``), so the update lands in the layer's buffer.
- :func:`bind_param` binds a Parameter: trainable ones through ``g.param``,
  frozen ones (``requires_grad=False``) like a buffer, so no gradient flows.

Both use Graph internals (``_leaf``, ``_uids``) and keep their per-graph
cache in ``g._nn_bound`` (id(array) -> (index, uid, array)); a cached entry is
reused only while its node still exists (``truncate`` may have removed it).
The cache holds the index and uid, never a NodeId: a NodeId references its
graph, so storing one in the graph would make a reference cycle and keep a
finished graph alive until the cycle collector runs.
"""
from __future__ import annotations

import numpy as np

from ..node import make_node_id

__all__ = ["bind_buffer", "bind_param"]


def _alive(g, i: int, uid: int) -> bool:
    uids = g._uids
    return i < len(uids) and uids[i] == uid


def bind_buffer(g, arr: np.ndarray, name: str = "buffer"):
    """A constant leaf sharing memory with ``arr`` (bound once per graph)."""
    cache = g.__dict__.get("_nn_bound")
    if cache is None:
        cache = g._nn_bound = {}
    entry = cache.get(id(arr))
    if entry is not None and entry[2] is arr and _alive(g, entry[0], entry[1]):
        return make_node_id(g, entry[0], entry[1])
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array, got {type(arr).__name__}")
    if arr.dtype != g.dtype:
        raise TypeError(
            f"{name}: dtype {arr.dtype} does not match the graph dtype {g.dtype}; "
            f"create the Graph with dtype={arr.dtype} or convert the model with "
            f"model.to({g.dtype})")
    nid = g._leaf(arr.view(), False)
    cache[id(arr)] = (nid.index, nid.uid, arr)
    return nid


def bind_param(g, p):
    """``g.param(p)`` for trainable parameters; a no-grad view leaf for frozen ones."""
    if p.requires_grad:
        return g.param(p)
    return bind_buffer(g, p.data, "param")
