"""The arena ``Graph``: leaves, accessors, truncate, no_grad, and the backward walk.

Nodes live in parallel lists indexed by arena position (struct of arrays):

==============  ==========================================================
``_values``     np.ndarray value (None once released by checkpointing)
``_ops``        int(Op)
``_inputs``     tuple of input arena indices (empty for leaves)
``_attrs``      static attributes given to forward and backward
``_saved``      data saved by forward for backward (or None)
``_rg``         requires_grad flag
``_needs``      per input: does it require grad (tells backward what to skip)
``_uids``       process-unique number; detects stale NodeIds after truncate
``_grads``      dict index -> stored gradient (leaves and retained nodes only)
==============  ==========================================================

Op methods come from the category mixins in :mod:`yscv.ops`; each validates
its arguments and calls :meth:`Graph._apply`, which runs the registered pure
forward and appends the node only if the forward succeeded.
"""
from __future__ import annotations

import contextlib

import numpy as np

from . import _malloc, registry
from .errors import (
    AnomalyError,
    BackwardError,
    NodeNotFoundError,
    NonScalarTargetError,
    ShapeError,
)
from .checkpoint import CheckpointMixin
from .introspect import IntrospectionMixin
from .node import NodeId, Op, make_node_id, next_uid
from .node import _NodeIdBuilder, _new_object, _next_uid
from .ops import OP_MIXINS
from .ops._common import as_graph_array
from . import backward as _backward_rules  # noqa: F401  (fills registry.BACKWARD)

# Every Op member must have a forward and a backward, or importing fails.
registry.check_complete()

_FORWARD = registry.FORWARD
_BACKWARD = registry.BACKWARD
_LEAF = int(Op.LEAF)
_ndarray = np.ndarray


class _HookHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn):
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


class _GraphCore:
    """Arena storage, leaves, accessors and backward (see module docstring)."""

    def __init__(self, dtype=np.float32, detect_anomaly: bool = False):
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"Graph: dtype must be float32 or float64, got {dt}")
        if not _malloc._done:
            _malloc.tune_malloc_once()
        self.dtype = dt
        self.detect_anomaly = bool(detect_anomaly)
        self._values: list = []
        self._ops: list = []
        self._inputs: list = []
        self._attrs: list = []
        self._saved: list = []
        self._rg: list = []
        self._needs: list = []
        self._uids: list = []
        self._grads: dict = {}
        self._grad_enabled = True
        self._has_released = False      # any value released (checkpointing)?
        self._released_shape: dict = {} # index -> shape when its value was released
        self._segments: list = []       # checkpoint segments (release groups)
        self._segment_starts: dict = {} # segment start index -> [segments]
        self._hooks: dict = {}          # index -> [fn(grad) -> grad | None]
        self._post_hooks: dict = {}     # leaf index -> [fn(graph, leaf)]
        self._end_hooks: list = []      # [fn(graph)] after each successful backward
        self._retained: set = set()     # non-leaf indices whose grads are kept
        self._params: dict = {}         # id(Parameter) -> (NodeId, Parameter)
        self._param_of: dict = {}       # leaf index -> Parameter

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
    def _append(self, op: int, inputs: tuple, value, saved, attrs, rg: bool, needs=()) -> NodeId:
        i = len(self._uids)
        uid = next_uid()
        self._values.append(value)
        self._ops.append(op)
        self._inputs.append(inputs)
        self._attrs.append(attrs)
        self._saved.append(saved if rg else None)
        self._rg.append(rg)
        self._needs.append(needs)
        self._uids.append(uid)
        return make_node_id(self, i, uid)

    def _leaf(self, value: np.ndarray, requires_grad: bool) -> NodeId:
        if self.detect_anomaly and not np.all(np.isfinite(value)):
            raise AnomalyError(
                f"leaf value is not finite (node {len(self._uids)})",
                op="leaf",
                node=len(self._uids),
            )
        return self._append(_LEAF, (), value, None, None, requires_grad)

    def variable(self, a) -> NodeId:
        """A trainable leaf: a copy of ``a`` converted to the graph dtype."""
        return self._leaf(as_graph_array(a, self.dtype, "variable", "a", copy=True), True)

    def constant(self, a) -> NodeId:
        """A non-trainable leaf: a copy of ``a`` converted to the graph dtype."""
        return self._leaf(as_graph_array(a, self.dtype, "constant", "a", copy=True), False)

    def param(self, p) -> NodeId:
        """Bind a :class:`yscv.nn.Parameter` as a variable leaf, once per graph.

        The leaf's value shares memory with ``p.data`` (no copy), so in-place
        optimizer updates are seen by the graph. After ``backward`` the leaf's
        gradient contribution is accumulated into ``p.grad``.
        """
        key = id(p)
        entry = self._params.get(key)
        if entry is not None:
            nid, bound = entry
            if bound is p and nid.index < len(self._uids) and self._uids[nid.index] == nid.uid:
                return nid
        data = p.data
        if not isinstance(data, _ndarray):
            raise TypeError(f"param: Parameter.data must be a numpy array, got {type(data).__name__}")
        if data.dtype != self.dtype:
            raise TypeError(
                f"param: Parameter dtype {data.dtype} does not match the graph dtype "
                f"{self.dtype}; create the Graph with dtype={data.dtype} or convert the model"
            )
        nid = self._leaf(data.view(), True)
        self._params[key] = (nid, p)
        self._param_of[nid.index] = p
        return nid

    def _operand(self, x, opname: str, argname: str):
        """(index or -1, value, requires_grad) of a NodeId or array-like operand."""
        if type(x) is NodeId:
            i = self._index(x)
            v = self._values[i]
            if v is None:
                v = self._recompute_value(i)
            return i, v, self._rg[i]
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
        return self._finish(opcode, idx, vals, value, saved, attrs, tuple(needs))

    def _apply2(self, op: Op, a, b, attrs=None) -> NodeId:
        """Fast path of :meth:`_apply` for two operands; NumPy broadcasting
        failures become a ShapeError naming the op and both shapes.

        This and :meth:`_apply1` are the per-node hot path (the scalar-chain
        benchmark): id checks and the append are inlined on purpose.
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
            try:
                value, saved = _FORWARD[op](attrs, va, vb)
            except ValueError as exc:
                raise self._binary_shape_error(op, va, vb, exc) from None
            if type(value) is not _ndarray:
                value = np.asarray(value)
            if self.detect_anomaly:
                self._check_forward_finite(op, value)
            rgl = self._rg
            ra = rgl[i]
            rb = rgl[j]
            rg = (ra or rb) and self._grad_enabled
            k = len(uids)
            uid = _next_uid()
            values.append(value)
            self._ops.append(op)
            self._inputs.append((i, j))
            self._attrs.append(attrs)
            self._saved.append(saved if rg else None)
            rgl.append(rg)
            self._needs.append((ra, rb))
            uids.append(uid)
            nid = _new_object(_NodeIdBuilder)
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
        """Fast path of :meth:`_apply` for one NodeId input (see _apply2)."""
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
        value, saved = _FORWARD[op](attrs, v)
        if type(value) is not _ndarray:
            value = np.asarray(value)
        if self.detect_anomaly:
            self._check_forward_finite(op, value)
        rgl = self._rg
        r = rgl[i]
        rg = r and self._grad_enabled
        k = len(uids)
        uid = _next_uid()
        values.append(value)
        self._ops.append(op)
        self._inputs.append((i,))
        self._attrs.append(attrs)
        self._saved.append(saved if rg else None)
        rgl.append(rg)
        self._needs.append((r,))
        uids.append(uid)
        nid = _new_object(_NodeIdBuilder)
        nid.graph = self
        nid.index = k
        nid.uid = uid
        nid.__class__ = NodeId
        return nid

    def _finish(self, opcode, idx, vals, value, saved, attrs, needs) -> NodeId:
        if type(value) is not _ndarray:
            value = np.asarray(value)
        if self.detect_anomaly:
            self._check_forward_finite(opcode, value)
        for k, i in enumerate(idx):
            if i < 0:
                idx[k] = self._append(_LEAF, (), vals[k], None, None, False).index
        rg = self._grad_enabled and any(needs)
        return self._append(opcode, tuple(idx), value, saved, attrs, rg, needs)

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

    def set_value(self, leaf: NodeId, a) -> None:
        """Replace a leaf's value (same shape; converted to the graph dtype)."""
        i = self._index(leaf)
        if self._ops[i] != _LEAF:
            raise TypeError(
                f"set_value: node {i} is a {Op(self._ops[i]).name.lower()} node; "
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

    def op(self, n: NodeId) -> Op:
        """The node's :class:`Op`."""
        return Op(self._ops[self._index(n)])

    def inputs(self, n: NodeId) -> tuple:
        """The node's inputs as NodeIds."""
        return tuple(self._node_id(j) for j in self._inputs[self._index(n)])

    def requires_grad(self, n: NodeId) -> bool:
        return self._rg[self._index(n)]

    def grad(self, n: NodeId):
        """Accumulated gradient of a leaf or retained node, or None."""
        return self._grads.get(self._index(n))

    def set_grad(self, n: NodeId, a) -> None:
        """Set a node's stored gradient (None clears it); same shape as its value."""
        i = self._index(n)
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

    def retain_grad(self, n: NodeId) -> None:
        """Keep (and accumulate) the gradient of a non-leaf node on backward."""
        self._retained.add(self._index(n))

    def _shape(self, i: int) -> tuple:
        v = self._values[i]
        if v is None:
            v = self._recompute_value(i)
        return v.shape

    def truncate(self, k: int) -> None:
        """Drop every node with index >= k; their NodeIds become invalid."""
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise TypeError(f"truncate: k must be an int, got {type(k).__name__}")
        k = int(k)
        if k < 0 or k > len(self._uids):
            raise IndexError(f"truncate: k={k} outside [0, {len(self._uids)}]")
        for lst in (self._values, self._ops, self._inputs, self._attrs, self._saved,
                    self._rg, self._needs, self._uids):
            del lst[k:]
        for d in (self._hooks, self._post_hooks, self._param_of, self._grads):
            for i in [i for i in d if i >= k]:
                del d[i]
        self._retained = {i for i in self._retained if i < k}
        self._params = {key: e for key, e in self._params.items() if e[0].index < k}
        self._released_shape = {i: s for i, s in self._released_shape.items() if i < k}
        segs = []
        for seg in self._segments:
            if seg.start < k:
                seg.end = min(seg.end, k)
                segs.append(seg)
        self._segments = segs
        self._segment_starts = {}
        for seg in segs:
            self._segment_starts.setdefault(seg.start, []).append(seg)
        self._has_released = any(v is None for v in self._values)

    @contextlib.contextmanager
    def no_grad(self):
        """Within the block, recorded nodes do not require grad."""
        prev = self._grad_enabled
        self._grad_enabled = False
        try:
            yield
        finally:
            self._grad_enabled = prev

    # ---------------------------------------------------------------- hooks
    def register_hook(self, n: NodeId, fn) -> _HookHandle:
        """``fn(grad) -> grad | None`` runs when n's gradient is complete and
        may replace it (a returned array must have n's shape)."""
        if not callable(fn):
            raise TypeError("register_hook: fn must be callable")
        hooks = self._hooks.setdefault(self._index(n), [])
        hooks.append(fn)
        return _HookHandle(hooks, fn)

    def register_post_accumulate_hook(self, leaf: NodeId, fn) -> _HookHandle:
        """``fn(graph, leaf)`` runs after the leaf's gradient was accumulated."""
        if not callable(fn):
            raise TypeError("register_post_accumulate_hook: fn must be callable")
        i = self._index(leaf)
        if self._ops[i] != _LEAF:
            raise TypeError(f"register_post_accumulate_hook: node {i} is not a leaf")
        hooks = self._post_hooks.setdefault(i, [])
        hooks.append(fn)
        return _HookHandle(hooks, fn)

    def register_backward_end_hook(self, fn) -> _HookHandle:
        """Run ``fn(g)`` once after each successful ``g.backward`` on this graph,
        after every parameter's ``.grad`` was accumulated (e.g. to average
        gradients over data-parallel ranks). The graph holds ``fn``; ``fn``
        receives the graph as its argument, so it need not (and should not)
        hold a reference to it. Returns a handle whose ``remove()`` unregisters it."""
        if not callable(fn):
            raise TypeError("register_backward_end_hook: fn must be callable")
        self._end_hooks.append(fn)
        return _HookHandle(self._end_hooks, fn)

    # ------------------------------------------------------------- backward
    def backward(self, target: NodeId, grad=None, retain_graph: bool = True) -> None:
        """Accumulate d(target)/d(leaf) into every leaf that requires grad.

        With ``grad=None`` the target must hold exactly one element and is
        seeded with 1; otherwise ``grad`` (the target's shape) is the cotangent
        of a vector-Jacobian product. With ``retain_graph=False`` the values and
        saved data of the non-leaf nodes the walk went through are released as
        soon as they are consumed (reading or differentiating them again
        recomputes them from the leaves).
        """
        t = self._index(target)
        if not self._rg[t]:
            raise BackwardError(
                f"backward: target node {t} ({Op(self._ops[t]).name.lower()}) does not "
                "require grad; it depends on no variable, or was built under no_grad()",
                node=t,
            )
        shape = self._shape(t)
        if grad is None:
            if int(np.prod(shape)) != 1:
                raise NonScalarTargetError(
                    f"backward: target node {t} has shape {shape}; pass grad= of that "
                    "shape for a vector-Jacobian product, or reduce it to one element",
                    node=t,
                    got=shape,
                )
            seed = np.ones(shape, dtype=self.dtype)
            borrowed = False
        else:
            # no copy (a large cotangent's copy cost ~1 ms per 8 MB): backward
            # rules never write to g, and the walk copies a borrowed (read-only)
            # gradient before storing it as a leaf's or retained node's grad
            seed = as_graph_array(grad, self.dtype, "backward", "grad", copy=False)
            borrowed = not isinstance(grad, np.ndarray) or np.may_share_memory(seed, grad)
            if borrowed:
                seed = seed.view()
                seed.flags.writeable = False
            if seed.shape != shape:
                raise ShapeError(
                    f"backward: grad has shape {seed.shape}, target node {t} has {shape}",
                    op="backward",
                    node=t,
                    expected=shape,
                    got=seed.shape,
                )
        self._walk(t, seed, retain_graph, borrowed)
        if self._end_hooks:
            for fn in list(self._end_hooks):
                fn(self)

    def _walk(self, t: int, seed: np.ndarray, retain_graph: bool = True,
              borrowed: bool = False) -> None:
        """Reverse index walk from ``t`` to 0 (arena order is a topological order).

        ``borrowed``: ``seed`` is a read-only view of the caller's array; any
        read-only gradient (it, or a view of it passed through by a backward)
        is copied before it is stored as a grad, so stored grads never alias
        the caller's data."""
        pending = [None] * (t + 1)
        pending[t] = seed
        values, ops, inputs, attrs, saved, rg, needs = (
            self._values, self._ops, self._inputs, self._attrs, self._saved, self._rg,
            self._needs)
        hooks = self._hooks
        stored = self._grads
        param_of = self._param_of
        post_hooks = self._post_hooks
        retained = self._retained
        anomaly = self.detect_anomaly
        dtype = self.dtype
        seg_starts = self._segment_starts
        released = self._has_released
        backward = _BACKWARD
        ndarray = _ndarray
        for i in range(t, -1, -1):
            if seg_starts and i + 1 in seg_starts:
                for seg in seg_starts[i + 1]:  # the walk has left these segments
                    self._release_segment(seg)
            gi = pending[i]
            if gi is None:
                continue
            pending[i] = None
            if type(gi) is not ndarray:  # 0-d arithmetic yields NumPy scalars
                gi = np.asarray(gi)
            if hooks and i in hooks:
                gi = self._run_hooks(i, gi)
            ins = inputs[i]
            if borrowed and (not ins or (retained and i in retained)) \
                    and not gi.flags.writeable:
                gi = gi.copy()
            if not ins:
                if rg[i] and not (param_of or post_hooks):  # plain leaf: store or add
                    cur = stored.get(i)
                    stored[i] = gi if cur is None else np.asarray(cur + gi)
                else:
                    self._accumulate_leaf(i, gi)
                continue
            if retained and i in retained:
                self._accumulate_stored(i, gi)
            op = ops[i]
            if released:
                self._prepare_node_for_backward(i)
            # one- and two-input nodes (nearly all) are unrolled: no per-node
            # list comprehension frame or zip loop on this hot path
            n_in = len(ins)
            if n_in == 1:
                j = ins[0]
                vj = values[j]
                gj = backward[op](gi, (vj,), values[i], attrs[i], saved[i], needs[i])[0]
                if gj is not None and rg[j]:
                    if (type(gj) is not ndarray or (gj.dtype is not dtype and gj.dtype != dtype)
                            or gj.shape != vj.shape or anomaly):
                        gj = self._conform_grad(gj, vj.shape, op, i, j)
                    cur = pending[j]
                    pending[j] = gj if cur is None else cur + gj
            elif n_in == 2:
                j, k = ins
                vj = values[j]
                vk = values[k]
                gj, gk = backward[op](gi, (vj, vk), values[i], attrs[i], saved[i], needs[i])
                if gj is not None and rg[j]:
                    if (type(gj) is not ndarray or (gj.dtype is not dtype and gj.dtype != dtype)
                            or gj.shape != vj.shape or anomaly):
                        gj = self._conform_grad(gj, vj.shape, op, i, j)
                    cur = pending[j]
                    pending[j] = gj if cur is None else cur + gj
                if gk is not None and rg[k]:
                    if (type(gk) is not ndarray or (gk.dtype is not dtype and gk.dtype != dtype)
                            or gk.shape != vk.shape or anomaly):
                        gk = self._conform_grad(gk, vk.shape, op, i, k)
                    cur = pending[k]
                    pending[k] = gk if cur is None else cur + gk
            else:
                in_vals = tuple([values[j] for j in ins])
                grads = backward[op](gi, in_vals, values[i], attrs[i], saved[i], needs[i])
                for j, gj, vj in zip(ins, grads, in_vals):
                    if gj is None or not rg[j]:
                        continue
                    if (type(gj) is not ndarray or (gj.dtype is not dtype and gj.dtype != dtype)
                            or gj.shape != vj.shape or anomaly):
                        gj = self._conform_grad(gj, vj.shape, op, i, j)
                    cur = pending[j]
                    pending[j] = gj if cur is None else cur + gj
            if not retain_graph:
                self._release(i)
        if seg_starts and 0 in seg_starts:
            for seg in seg_starts[0]:
                self._release_segment(seg)

    def _conform_grad(self, gj, shape: tuple, op: int, i: int, j: int) -> np.ndarray:
        """The walk's slow path for one input gradient: make it an ndarray,
        sum broadcast axes to ``shape``, and check dtype (and finiteness in
        anomaly mode)."""
        if type(gj) is not _ndarray:
            gj = np.asarray(gj)
        if gj.dtype != self.dtype:
            name = Op(op).name.lower()
            raise BackwardError(
                f"backward of {name} (node {i}) returned a {gj.dtype} gradient for "
                f"node {j}; graph dtype is {self.dtype}",
                op=name, node=i, expected=self.dtype, got=gj.dtype)
        if gj.shape != shape:
            gj = _unbroadcast(gj, shape, op, i, j)
        if self.detect_anomaly and not np.all(np.isfinite(gj)):
            name = Op(op).name.lower()
            raise AnomalyError(
                f"anomaly: backward of {name} (node {i}) produced a NaN or Inf "
                f"gradient for its input node {j}",
                op=name, node=i)
        return gj

    def _run_hooks(self, i: int, gi):
        shape = gi.shape
        for fn in list(self._hooks[i]):
            res = fn(gi)
            if res is not None:
                res = as_graph_array(res, self.dtype, "hook", "return value", copy=False)
                if res.shape != shape:
                    raise ShapeError(
                        f"hook on node {i} returned shape {res.shape}, expected {shape}",
                        op="hook", node=i, expected=shape, got=res.shape)
                gi = res
        return gi

    def _accumulate_stored(self, i: int, gi) -> None:
        cur = self._grads.get(i)
        self._grads[i] = gi if cur is None else np.asarray(cur + gi)

    def _accumulate_leaf(self, i: int, gi) -> None:
        if not self._rg[i]:
            return
        self._accumulate_stored(i, gi)
        p = self._param_of.get(i) if self._param_of else None
        if p is not None:
            p.grad = gi.copy() if p.grad is None else p.grad + gi
        post = self._post_hooks.get(i) if self._post_hooks else None
        if post:
            nid = self._node_id(i)
            for fn in list(post):
                fn(self, nid)

    # ------------------------------------------------------- grad clipping
    def clip_grad_norm(self, nodes, max_norm: float, norm_type: float = 2.0) -> float:
        """Scale the grads of ``nodes`` so their joint norm is at most ``max_norm``.

        Returns the total norm before clipping (as torch.nn.utils.clip_grad_norm_).
        """
        if max_norm < 0:
            raise ValueError(f"clip_grad_norm: max_norm must be >= 0, got {max_norm}")
        idx = [self._index(n) for n in nodes]
        grads = [self._grads[i] for i in idx if self._grads.get(i) is not None]
        if not grads:
            return 0.0
        if norm_type == float("inf"):
            total = max(float(np.max(np.abs(g))) for g in grads)
        else:
            total = float(sum(float(np.sum(np.abs(g.astype(np.float64)) ** norm_type))
                              for g in grads) ** (1.0 / norm_type))
        coef = max_norm / (total + 1e-6)
        if coef < 1.0:
            for i in idx:
                if self._grads.get(i) is not None:
                    self._grads[i] = self._grads[i] * self.dtype.type(coef)
        return total

    def clip_grad_value(self, nodes, max_value: float) -> None:
        """Clamp the grads of ``nodes`` to [-max_value, max_value]."""
        if max_value < 0:
            raise ValueError(f"clip_grad_value: max_value must be >= 0, got {max_value}")
        for n in nodes:
            i = self._index(n)
            if self._grads.get(i) is not None:
                self._grads[i] = np.clip(self._grads[i], -max_value, max_value).astype(self.dtype)


def _unbroadcast(grad: np.ndarray, shape: tuple, op: int, node: int, inp: int) -> np.ndarray:
    """Sum ``grad`` over broadcast axes so it has ``shape``; ShapeError if impossible."""
    extra = grad.ndim - len(shape)
    gshape = grad.shape
    if extra == 1 and gshape[1:] == shape:  # a bias [C] added to rows [N, C]
        return np.add.reduce(grad, axis=0)
    ok = extra >= 0 and all(s == 1 or s == gs for s, gs in zip(shape, gshape[extra:]))
    if not ok:
        name = Op(op).name.lower()
        raise ShapeError(
            f"backward of {name} (node {node}) returned a gradient of shape {gshape} "
            f"for input node {inp} of shape {shape}",
            op=name, node=node, expected=shape, got=gshape)
    axes = tuple(range(extra)) + tuple(
        extra + k for k, s in enumerate(shape) if s == 1 and gshape[extra + k] != 1)
    if axes:
        grad = np.add.reduce(grad, axis=axes)
    return grad.reshape(shape)


class Graph(_GraphCore, IntrospectionMixin, CheckpointMixin, *OP_MIXINS):
    """An append-only arena of nodes with eager forward and reverse-walk backward.

    Args:
        dtype: np.float32 (default) or np.float64; every value and grad has it.
        detect_anomaly: raise :class:`AnomalyError` at the first NaN/Inf.
    """
