"""The arena's storage: node records, values and uids in lists indexed by
arena position, the node append and its one- and two-input fast paths, the
accessors, ``truncate`` and ``no_grad`` (`_GraphCore`; yscv/engine/graph.py
composes it into ``Graph``).

Nodes live in three lists indexed by arena position:

==============  ==========================================================
``_nodes``      the node's record, one tuple ``(op, inputs, attrs, saved,
                rg, needs, plain, shape)`` (fields: `yscv.node.N_OP` ...)
``_values``     np.ndarray value (None once released by checkpointing)
``_uids``       process-unique number; detects stale NodeIds after truncate
``_grads``      dict index -> stored gradient (leaves and retained nodes only)
==============  ==========================================================

One record per node rather than one list per field: the append builds one
tuple instead of seven list appends, and the walk reads a node with one list
index and an unpack (docs/engine.md, "Where the per-node time goes"). The
records are also what a replay of a recorded step reads. ``_ops``,
``_inputs``, ``_attrs``, ``_saved``, ``_rg``, ``_needs`` and ``_plain`` are
read-only column views of the records (``_saved`` also takes assignment),
for code off the per-node path.

Op methods validate their arguments and call `_GraphCore._apply` (or the
one- and two-input fast paths ``_apply1`` / ``_apply2``), which runs the
registered pure forward and appends the node only if the forward succeeded.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .. import registry, runtime
from ..errors import AnomalyError, NodeNotFoundError, ShapeError
from ..node import NodeId, Op, make_node_id
from ..node import N_ATTRS, N_INPUTS, N_NEEDS, N_OP, N_PLAIN, N_RG, N_SAVED, N_SHAPE
from ..node import _NodeIdBuilder, _next_uid, with_saved
from ..ops._common import as_graph_array

_FORWARD = registry.FORWARD
_UFUNC = registry.UFUNC
_LEAF = int(Op.LEAF)
_ndarray = np.ndarray


class _Column:
    """One field of every node record as a list-like view (``g._ops`` ...):
    index, slice, ``len``, iteration, ``==`` against a list or column.
    Only the ``saved`` column takes item assignment."""

    __slots__ = ("_nodes", "_field")

    def __init__(self, nodes: list, field: int):
        self._nodes = nodes
        self._field = field

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [r[self._field] for r in self._nodes[i]]
        return self._nodes[i][self._field]

    def __setitem__(self, i, value) -> None:
        if self._field != N_SAVED:
            raise TypeError("node records are read-only but for their saved data")
        self._nodes[i] = with_saved(self._nodes[i], value)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self):
        f = self._field
        return iter([r[f] for r in self._nodes])

    def __eq__(self, other) -> bool:
        if isinstance(other, _Column):
            other = list(other)
        return list(self) == other if isinstance(other, list) else NotImplemented

    def __repr__(self) -> str:
        return repr(list(self))


class _GraphCore:
    """Arena storage, the node append and accessors (see module docstring)."""

    def __init__(self, dtype=np.float32, detect_anomaly: bool = False):
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"Graph: dtype must be float32 or float64, got {dt}")
        if not runtime.malloc_tuned():
            runtime.tune_malloc_once()
        self.dtype = dt
        self.detect_anomaly = bool(detect_anomaly)
        self._nodes: list = []          # records (yscv.node: N_OP ... N_SHAPE)
        self._values: list = []
        self._uids: list = []
        self._grads: dict = {}
        self._grad_nodes: dict = {}     # index -> NodeId of a recorded gradient (create_graph)
        self._grad_enabled = True
        self._has_released = False      # any value released (checkpointing)?
        self._segments: list = []       # checkpoint segments (release groups)
        self._segment_starts: dict = {} # segment start index -> [segments]
        self._hooks: dict = {}          # index -> [fn(grad) -> grad | None]
        self._post_hooks: dict = {}     # leaf index -> [fn(graph, leaf)]
        self._retained: set = set()     # non-leaf indices whose grads are kept
        self._params: dict = {}         # id(Parameter) -> (index, uid, Parameter)
        self._buffers: dict = {}        # id(array) -> (index, uid, array) (g.buffer)
        self._param_of: dict = {}       # leaf index -> Parameter
        self._taken = None              # a walk's uncopied Parameter.grads (schedule.settle_taken)
        self._end_hooks: list = []      # fn(graph) after each successful backward

    # ------------------------------------------------- record column views
    _ops = property(lambda self: _Column(self._nodes, N_OP))
    _inputs = property(lambda self: _Column(self._nodes, N_INPUTS))
    _attrs = property(lambda self: _Column(self._nodes, N_ATTRS))
    _saved = property(lambda self: _Column(self._nodes, N_SAVED))
    _rg = property(lambda self: _Column(self._nodes, N_RG))
    _needs = property(lambda self: _Column(self._nodes, N_NEEDS))
    _plain = property(lambda self: _Column(self._nodes, N_PLAIN))

    # ------------------------------------------------------------------ ids
    def _index(self, nid) -> int:
        """Arena index of ``nid``; raises NodeNotFoundError if foreign or stale."""
        if type(nid) is not NodeId:
            raise TypeError(f"expected a NodeId, got {type(nid).__name__}")
        i = nid.index
        if nid.graph is not self:
            raise NodeNotFoundError(
                f"NodeId({i}) belongs to another graph", node=i
            )
        uids = self._uids
        if i >= len(uids) or uids[i] != nid.uid:
            raise NodeNotFoundError(
                f"NodeId({i}) no longer exists in this graph (removed by truncate"
                f"{'' if i >= len(uids) else ' and its index reused'})",
                node=i,
            )
        return i

    def _node_id(self, i: int) -> NodeId:
        return make_node_id(self, i, self._uids[i])

    # --------------------------------------------------------------- append
    def _append(self, op: int, inputs: tuple, value, saved, attrs, rg: bool, needs) -> NodeId:
        """Append one node and return its NodeId (leaves, ``_apply``; the hot
        paths ``_apply1``/``_apply2`` carry inline copies of this body).

        ``saved`` is dropped when the node does not require grad (no backward
        will read it). The NodeId is built without ``make_node_id``'s extra
        call."""
        k = len(self._uids)
        uid = _next_uid()
        self._nodes.append((op, inputs, attrs, saved if rg else None, rg, needs, False,
                            value.shape))
        self._values.append(value)
        self._uids.append(uid)
        nid = _NodeIdBuilder()
        nid.graph = self
        nid.index = k
        nid.uid = uid
        nid.__class__ = NodeId
        return nid

    def _operand(self, x, opname: str, argname: str):
        """(index or -1, value, requires_grad) of a NodeId or array-like operand."""
        if type(x) is NodeId:
            i = self._index(x)
            v = self._values[i]
            if v is None:
                v = self._recompute_value(i)
            return i, v, self._nodes[i][N_RG]
        return -1, as_graph_array(x, self.dtype, opname, argname, copy=True), False

    def _apply(self, op: Op, operands, attrs=None) -> NodeId:
        """Run op's forward on ``operands`` (NodeIds or array-likes) and append.

        Array-like operands become constant leaves, appended only after the
        forward succeeded, so a failing op leaves the graph unchanged.
        """
        opcode = int(op)
        idx = []
        vals = []
        needs = []
        for k, x in enumerate(operands):
            i, v, r = self._operand(x, op.name.lower(), f"input {k}")
            idx.append(i)
            vals.append(v)
            needs.append(r)
        value, saved = _FORWARD[opcode](attrs, *vals)
        if type(value) is not _ndarray:
            value = np.asarray(value)
        if self.detect_anomaly:
            self._check_forward_finite(opcode, value)
        for k, i in enumerate(idx):
            if i < 0:
                idx[k] = self._append(_LEAF, (), vals[k], None, None, False, ()).index
        needs = tuple(needs)
        rg = self._grad_enabled and any(needs)
        return self._append(opcode, tuple(idx), value, saved, attrs, rg, needs)

    def _apply2(self, op: Op, a, b, attrs=None) -> NodeId:
        """Fast path of `_apply` for two NodeId operands; NumPy
        broadcasting failures become a ShapeError naming the op and both shapes.

        This and `_apply1` are the per-node hot path (the scalar-chain
        benchmark): the id checks and the append are inlined on purpose (a
        call to `_append` measured slower, see docs/engine.md); keep the
        two inline copies in step with `_append`.
        """
        if type(a) is NodeId and type(b) is NodeId:
            uids = self._uids
            i = a.index
            j = b.index
            # uids are process-unique, so a uid match also proves ownership
            try:
                stale = uids[i] != a.uid or uids[j] != b.uid
            except IndexError:  # index past the end: truncated away
                stale = True
            if stale:
                self._index(a)
                self._index(b)
            values = self._values
            va = values[i]
            vb = values[j]
            if va is None:
                va = self._recompute_value(i)
            if vb is None:
                vb = self._recompute_value(j)
            nodes = self._nodes
            na = nodes[i]
            nb = nodes[j]
            sa = na[N_SHAPE]
            same = sa == nb[N_SHAPE]  # the recorded shapes: no shape tuples built
            uf = _UFUNC[op]
            try:
                if uf is not None and (same or va.ndim == vb.ndim):  # the forward is this ufunc
                    value = uf(va, vb)
                    saved = None
                    # an elementwise rule on operands of the output's shape:
                    # its gradients need no conforming (the walk skips the test)
                    plain = same and sa != ()
                else:
                    value, saved = _FORWARD[op](attrs, va, vb)
                    plain = False
            except ValueError as exc:
                raise self._binary_shape_error(op, va, vb, exc) from None
            if type(value) is not _ndarray:
                value = np.asarray(value)
            if self.detect_anomaly:
                self._check_forward_finite(op, value)
            ra = na[N_RG]
            rb = nb[N_RG]
            rg = (ra or rb) and self._grad_enabled
            # _append inlined (a call measured slower: docs/engine.md)
            k = len(uids)
            uid = _next_uid()
            nodes.append((op, (i, j), attrs, saved if rg else None, rg, (ra, rb), plain,
                          sa if plain else value.shape))
            values.append(value)
            uids.append(uid)
            nid = _NodeIdBuilder()
            nid.graph = self
            nid.index = k
            nid.uid = uid
            nid.__class__ = NodeId
            return nid
        try:
            return self._apply(op, (a, b), attrs)
        except ValueError as exc:
            if isinstance(exc, ShapeError) or "broadcast" not in str(exc):
                raise
            va = self._values[self._index(a)] if type(a) is NodeId else np.asarray(a)
            vb = self._values[self._index(b)] if type(b) is NodeId else np.asarray(b)
            raise self._binary_shape_error(op, va, vb, exc) from None

    @staticmethod
    def _binary_shape_error(op, va, vb, exc) -> Exception:
        if isinstance(exc, ShapeError) or "broadcast" not in str(exc):
            return exc
        name = Op(op).name.lower()
        return ShapeError(
            f"{name}: operands of shapes {va.shape} and {vb.shape} do not broadcast",
            op=name, expected=va.shape, got=vb.shape)

    def _apply1(self, op: Op, x, attrs=None) -> NodeId:
        """Fast path of `_apply` for one NodeId input (see _apply2)."""
        if type(x) is not NodeId:
            return self._apply(op, (x,), attrs)
        uids = self._uids
        i = x.index
        try:
            stale = uids[i] != x.uid
        except IndexError:  # index past the end: truncated away
            stale = True
        if stale:
            self._index(x)
        values = self._values
        v = values[i]
        if v is None:
            v = self._recompute_value(i)
        nodes = self._nodes
        rec = nodes[i]
        uf = _UFUNC[op]
        if uf is not None:  # the forward is this ufunc (registry.UFUNC)
            value = uf(v)
            saved = None
            shape = rec[N_SHAPE]  # elementwise: the input's shape
            plain = shape != ()  # see _apply2
        else:
            value, saved = _FORWARD[op](attrs, v)
            plain = False
            shape = None
        if type(value) is not _ndarray:
            value = np.asarray(value)
        if shape is None:
            shape = value.shape
        if self.detect_anomaly:
            self._check_forward_finite(op, value)
        r = rec[N_RG]
        rg = r and self._grad_enabled
        # _append inlined (see _apply2)
        k = len(uids)
        uid = _next_uid()
        nodes.append((op, (i,), attrs, saved if rg else None, rg, (r,), plain, shape))
        values.append(value)
        uids.append(uid)
        nid = _NodeIdBuilder()
        nid.graph = self
        nid.index = k
        nid.uid = uid
        nid.__class__ = NodeId
        return nid

    def _check_forward_finite(self, opcode: int, value) -> None:
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            i = len(self._uids)
            name = Op(opcode).name.lower()
            raise AnomalyError(
                f"anomaly: forward of {name} (node {i}) produced NaN or Inf",
                op=name,
                node=i,
            )

    # ------------------------------------------------------------ accessors
    def __len__(self) -> int:
        return len(self._uids)

    def node_count(self) -> int:
        """Number of nodes in the arena."""
        return len(self._uids)

    def value(self, n: NodeId) -> np.ndarray:
        """The node's value, read-only (``flags.writeable == False``)."""
        i = self._index(n)
        v = self._values[i]
        if v is None:
            v = self._recompute_value(i)
        if v.flags.writeable:
            v.flags.writeable = False
        return v

    def op(self, n: NodeId) -> Op:
        """The node's `Op`."""
        return Op(self._nodes[self._index(n)][N_OP])

    def inputs(self, n: NodeId) -> tuple:
        """The node's inputs as NodeIds."""
        return tuple(self._node_id(j) for j in self._nodes[self._index(n)][N_INPUTS])

    def requires_grad(self, n: NodeId) -> bool:
        return self._nodes[self._index(n)][N_RG]

    def grad(self, n: NodeId):
        """Accumulated gradient of a leaf or retained node, or None."""
        return self._grads.get(self._index(n))

    def set_grad(self, n: NodeId, a) -> None:
        """Set a node's stored gradient (None clears it); same shape as its value."""
        i = self._index(n)
        self._grad_nodes.pop(i, None)
        if a is None:
            self._grads.pop(i, None)
            return
        arr = as_graph_array(a, self.dtype, "set_grad", "a", copy=True)
        shape = self._shape(i)
        if arr.shape != shape:
            raise ShapeError(
                f"set_grad: node {i} has shape {shape}, got {arr.shape}",
                op="set_grad",
                node=i,
                expected=shape,
                got=arr.shape,
            )
        self._grads[i] = arr

    def zero_grads(self) -> None:
        """Every stored gradient back to None."""
        self._grads.clear()  # in place: a running backward walk holds this dict
        self._grad_nodes.clear()

    def retain_grad(self, n: NodeId) -> None:
        """Keep (and accumulate) the gradient of a non-leaf node on backward."""
        self._retained.add(self._index(n))

    def _shape(self, i: int) -> tuple:
        """Node i's shape, from its record (also when its value is released)."""
        return self._nodes[i][N_SHAPE]

    def truncate(self, k: int) -> None:
        """Drop every node with index >= k; their NodeIds become invalid."""
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise TypeError(f"truncate: k must be an int, got {type(k).__name__}")
        k = int(k)
        if k < 0 or k > len(self._uids):
            raise IndexError(f"truncate: k={k} outside [0, {len(self._uids)}]")
        for lst in (self._nodes, self._values, self._uids):
            del lst[k:]
        for d in (self._hooks, self._post_hooks, self._param_of, self._grads, self._grad_nodes):
            for i in [i for i in d if i >= k]:
                del d[i]
        self._retained = {i for i in self._retained if i < k}
        self._params = {key: e for key, e in self._params.items() if e[0] < k}
        self._buffers = {key: e for key, e in self._buffers.items() if e[0] < k}
        segs = []
        for seg in self._segments:
            if seg.start < k:
                seg.end = min(seg.end, k)
                segs.append(seg)
        self._segments = segs
        self._segment_starts = {}
        for seg in segs:
            self._segment_starts.setdefault(seg.start, []).append(seg)
        if self._has_released:  # only a release sets it: no scan otherwise
            self._has_released = any(v is None for v in self._values)

    @contextlib.contextmanager
    def no_grad(self):
        """Within the block, nodes recorded on this graph do not require grad
        (``yscv.no_grad()`` does it for every graph, in the calling thread)."""
        own = self.__dict__  # the graph's own flag (yscv.grad_mode may stand in for the read)
        prev = own["_grad_enabled"]
        own["_grad_enabled"] = False
        try:
            yield
        finally:
            own["_grad_enabled"] = prev


def unary_ufunc_method(op: Op, plain):
    """``Graph.<op>`` for a one-input op that may have a ufunc form
    (`registry.UFUNC`; ``plain`` the op method it replaces, which is
    ``self._apply1(op, x)``): `_GraphCore._apply1`'s ufunc path written
    into the method itself, one Python frame fewer per node; any other
    operand, or no ufunc form, goes to ``_apply1``. Keep the body in step with
    ``_apply1`` (a test compares the two node for node)."""

    def method(self, x):
        uf = _UFUNC[op]  # None (tanh where NumPy's is not vectorised): _apply1
        if uf is None or type(x) is not NodeId:
            return self._apply1(op, x)
        uids = self._uids
        i = x.index
        try:
            stale = uids[i] != x.uid
        except IndexError:  # index past the end: truncated away
            stale = True
        if stale:
            self._index(x)
        values = self._values
        v = values[i]
        if v is None:
            v = self._recompute_value(i)
        nodes = self._nodes
        rec = nodes[i]
        value = uf(v)
        shape = rec[N_SHAPE]  # elementwise: the input's shape
        if type(value) is not _ndarray:
            value = np.asarray(value)
        if self.detect_anomaly:
            self._check_forward_finite(op, value)
        r = rec[N_RG]
        rg = r and self._grad_enabled
        k = len(uids)
        uid = _next_uid()
        nodes.append((op, (i,), None, None, rg, (r,), shape != (), shape))
        values.append(value)
        uids.append(uid)
        nid = _NodeIdBuilder()
        nid.graph = self
        nid.index = k
        nid.uid = uid
        nid.__class__ = NodeId
        return nid

    method.__name__ = plain.__name__
    method.__qualname__ = plain.__qualname__
    method.__doc__ = plain.__doc__
    return method
