"""Leaves of the arena ``Graph``: variables, constants, bound parameters and
buffers, and replacing a leaf's value.

A leaf is a node with no inputs (``Op.LEAF``). ``variable`` and ``constant``
copy their argument; ``param`` and ``buffer`` bind an existing array WITHOUT
copying (the leaf's value is a view of it), once per graph:

=====================  ==========================================================
``g.variable(a)``      a copy of ``a``; requires grad
``g.constant(a)``      a copy of ``a``; no grad
``g.param(p)``         a view of ``p.data`` (a `yscv.nn.Parameter`); requires
                       grad; after ``backward`` its gradient is added to ``p.grad``
``g.buffer(arr)``      a view of ``arr``; no grad; in-place updates of the leaf
                       (batch-norm running statistics) land in ``arr``
=====================  ==========================================================

Bindings are cached per graph as ``(index, uid, object)``: a cached entry is
reused only while its node still exists (``truncate`` may have removed it).
The cache never holds a NodeId: a NodeId references its graph, so storing one
in the graph would make a reference cycle and keep a finished graph alive
until the cycle collector runs.
"""
from __future__ import annotations

import numpy as np

from .. import random as _random
from ..errors import AnomalyError, ShapeError
from ..node import N_OP, NodeId, Op, make_node_id
from ..ops._common import as_graph_array

_LEAF = int(Op.LEAF)
_ndarray = np.ndarray

# binding errors: (not an ndarray, wrong dtype)
_PARAM_ERRORS = (
    "{name}: Parameter.data must be a numpy array, got {got}",
    "{name}: Parameter dtype {dt} does not match the graph dtype {gdt}; create the Graph "
    "with dtype={dt} or convert the model")
_BUFFER_ERRORS = (
    "{name}: expected a numpy array, got {got}",
    "{name}: dtype {dt} does not match the graph dtype {gdt}; create the Graph with "
    "dtype={dt} or convert the model with model.to({gdt})")


class LeavesMixin:
    """Leaf creation and binding; storage comes from ``yscv.graph``."""

    def _leaf(self, value: np.ndarray, requires_grad: bool) -> NodeId:
        if self.detect_anomaly and not np.all(np.isfinite(value)):
            raise AnomalyError(
                f"leaf value is not finite (node {len(self._uids)})",
                op="leaf",
                node=len(self._uids),
            )
        return self._append(_LEAF, (), value, None, None, requires_grad, ())

    def variable(self, a) -> NodeId:
        """A trainable leaf: a copy of ``a`` converted to the graph dtype."""
        return self._leaf(as_graph_array(a, self.dtype, "variable", "a", copy=True), True)

    def constant(self, a) -> NodeId:
        """A non-trainable leaf: a copy of ``a`` converted to the graph dtype."""
        return self._leaf(as_graph_array(a, self.dtype, "constant", "a", copy=True), False)

    def randn_like(self, x) -> NodeId:
        """A constant leaf of ``x``'s shape drawn from the standard normal
        distribution (``torch.randn_like``), in the graph dtype. Draws from
        the library generator, so ``yscv.manual_seed`` reproduces it.

        Args:
            x: a NodeId of this graph, or an array (only its shape is used).
        """
        return self._random_like(x, lambda gen, shape: gen.standard_normal(shape))

    def rand_like(self, x) -> NodeId:
        """A constant leaf of ``x``'s shape drawn uniformly from [0, 1)
        (``torch.rand_like``), in the graph dtype, from the library generator
        (``yscv.manual_seed`` reproduces it).

        Args:
            x: a NodeId of this graph, or an array (only its shape is used).
        """
        return self._random_like(x, lambda gen, shape: gen.random(shape))

    def _random_like(self, x, draw) -> NodeId:
        if type(x) is NodeId:
            shape = self._shape(self._index(x))
        else:
            shape = np.shape(x)
        a = _random.draw(lambda gen: draw(gen, shape))
        return self._leaf(np.asarray(a, dtype=self.dtype), False)

    def _bound(self, cache: dict, obj):
        """The live NodeId ``obj`` is bound to in ``cache``, or None."""
        entry = cache.get(id(obj))
        if entry is not None:
            i, uid, bound = entry
            if bound is obj and i < len(self._uids) and self._uids[i] == uid:
                return make_node_id(self, i, uid)
        return None

    def param(self, p) -> NodeId:
        """Bind a `yscv.nn.Parameter` as a variable leaf, once per graph.

        The leaf's value shares memory with ``p.data`` (no copy), so in-place
        optimizer updates are seen by the graph. After ``backward`` the leaf's
        gradient contribution is accumulated into ``p.grad``. The leaf requires
        grad whatever ``p.requires_grad`` says; bind a frozen parameter with
        ``g.buffer(p.data)`` (as ``yscv.nn.bind_param`` does).
        """
        nid = self._bound(self._params, p)
        if nid is None:
            nid = self._bind(self._params, p, p.data, True, _PARAM_ERRORS, "param")
            self._param_of[nid.index] = p
        return nid

    def buffer(self, arr: np.ndarray, name: str = "buffer") -> NodeId:
        """Bind ``arr`` as a constant leaf that shares its memory, once per graph.

        The leaf's value is a view of ``arr`` (no copy, no gradient): changes
        made to ``arr`` between steps are seen by the graph, and
        ``g.batch_norm(training=True)`` updates its running-statistics leaves
        in place, so the update lands in ``arr``. Binding the same array again
        returns the same leaf while it exists. ``arr`` must be a numpy array of
        the graph dtype, else TypeError; ``name`` is the name errors use.
        """
        nid = self._bound(self._buffers, arr)
        if nid is None:
            nid = self._bind(self._buffers, arr, arr, False, _BUFFER_ERRORS, name)
        return nid

    def _bind(self, cache: dict, obj, data, requires_grad: bool, errors, name: str) -> NodeId:
        """A new leaf viewing ``data`` (checked: an ndarray of the graph dtype),
        cached as ``obj``'s binding (index and uid, never a NodeId)."""
        if not isinstance(data, _ndarray):
            raise TypeError(errors[0].format(name=name, got=type(data).__name__))
        if data.dtype != self.dtype:
            raise TypeError(errors[1].format(name=name, dt=data.dtype, gdt=self.dtype))
        nid = self._leaf(data.view(), requires_grad)
        cache[id(obj)] = (nid.index, nid.uid, obj)
        return nid

    def set_value(self, leaf: NodeId, a) -> None:
        """Replace a leaf's value (same shape; converted to the graph dtype)."""
        i = self._index(leaf)
        op = self._nodes[i][N_OP]
        if op != _LEAF:
            raise TypeError(
                f"set_value: node {i} is a {Op(op).name.lower()} node; "
                "only leaves (variable/constant) can be set"
            )
        new = as_graph_array(a, self.dtype, "set_value", "a", copy=True)
        old = self._values[i]
        if new.shape != old.shape:
            raise ShapeError(
                f"set_value: node {i} has shape {old.shape}, got {new.shape}",
                op="set_value",
                node=i,
                expected=old.shape,
                got=new.shape,
            )
        self._values[i] = new

    def _update_leaf_inplace(self, i: int, new: np.ndarray) -> None:
        """Overwrite leaf i's value array in place (batch-norm running stats):
        whoever holds that array (a layer's buffer) sees the update."""
        v = self._values[i]
        v.flags.writeable = True
        np.copyto(v, new, casting="same_kind")
