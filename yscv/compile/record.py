"""What `yscv.compile` records: one eager run of ``fn`` on a watching graph.

The first call for a key runs ``fn(g, *args)`` on a `RecordingGraph`, an
ordinary `yscv.Graph` whose public methods (and the array entries of the
NodeId operators, ``_apply`` / ``_apply1`` / ``_apply2``) note the calls a
replay must repeat. What the record keeps (`Record`):

* the arena: every node record ``(op, inputs, attrs, saved, rg, needs,
  plain, shape)`` and every value, as the eager run left them;
* where leaves come from: a parameter (``g.param(p)``: on replay a view of
  ``p.data`` as it is then), a buffer (``g.buffer(arr)``: a view of
  ``arr``), or a constant (kept, frozen);
* the actions of the step, in the order the eager run took them
  (`Record.actions`): calls that consumed an input array (``g.constant(xb)``,
  ``g.cross_entropy(logits, yb)``: replayed by calling the same method again
  on a scratch graph with the new array, so validation and attributes are
  exactly the eager ones), draws from yscv's generator (a dropout seed, a
  ``randn_like`` leaf: drawn again in the same order), batch-norm
  running-statistics updates, and each ``g.backward`` (its `Schedule`, its
  seed);
* the returned NodeIds (and arrays ``g.value`` / ``g.grad`` returned), and
  the integer module buffers ``fn`` advanced (``num_batches_tracked``).

Whatever a replay could not repeat is refused here, with a `CompileError`
naming it, before anything is cached: see `FORBIDDEN` and `finish`.
"""
from __future__ import annotations

import threading

import numpy as np

from ..engine.graph import Graph
from ..engine.schedule import Schedule
from ..errors import CompileError
from ..node import N_ATTRS, N_OP, N_SAVED, NodeId, Op, with_saved
from . import higher as _higher
from .watch import DrawWatch, ParamWatch

_LEAF = int(Op.LEAF)
_DROPOUT = int(Op.DROPOUT)
_BATCH_NORM = int(Op.BATCH_NORM)

#: Graph methods a compiled function may not call: each changes state a
#: replay does not model (or runs Python a replay would skip); the reason
#: goes into the error
FORBIDDEN = {
    "zero_grads": "g.zero_grads inside the compiled function",
    "set_value": "g.set_value inside the compiled function",
    "set_grad": "g.set_grad inside the compiled function",
    "truncate": "g.truncate inside the compiled function",
    "retain_grad": "g.retain_grad is not supported yet",
    "register_hook": "a gradient hook (g.register_hook) runs Python a replay would skip",
    "register_post_accumulate_hook":
        "a post-accumulate hook runs Python a replay would skip",
    "register_backward_end_hook": "a backward-end hook runs Python a replay would skip",
    "clip_grad_norm": "gradient clipping inside the compiled function is not supported yet",
    "clip_grad_value": "gradient clipping inside the compiled function is not supported yet",
}

#: graph methods that make checkpointed segments: they run with the graph
#: calls inside them recorded, then each new segment's release is noted
_SEGMENT_CALLS = frozenset(("checkpoint", "checkpoint_sequential", "backward_with_checkpoints"))

#: one record at a time: a record swaps yscv.random's draw functions and
#: Parameter's attributes for watching versions while ``fn`` runs
_RECORD_LOCK = threading.RLock()

#: private entries through which arrays enter from the NodeId operators
_PRIVATE_ENTRIES = ("_apply", "_apply1", "_apply2")


class TracedInput(np.ndarray):
    """An array argument of ``fn`` during the record: a view of the
    caller's array (same values) that knows which argument it is
    (``_arg``) and marks the arrays NumPy derives from it (views, slices,
    arithmetic: ``_arg`` set, ``_root`` False). A graph call given the
    argument itself is replayed with the new array; one given a derived
    array is refused (its values would be frozen)."""

    def __array_finalize__(self, obj):
        self._arg = getattr(obj, "_arg", None)
        self._root = False


def traced(arr: np.ndarray, k: int) -> TracedInput:
    t = arr.view(TracedInput)
    t._arg = k
    t._root = True
    return t


class Record:
    """One recorded step (see the module docstring); replayed by
    yscv/compile/replay.py."""

    __slots__ = ("dtype", "nodes", "values", "params", "buffers", "actions", "outputs",
                 "int_buffers", "fresh", "plan", "n_args", "pre_bn", "attrs")

    def __init__(self):
        self.dtype = None
        self.nodes = None       # the node records
        self.values = None      # the recorded values (constants are read from here)
        self.params = []        # (leaf index, Parameter)
        self.buffers = []       # (leaf index, array)
        self.actions = []       # see the module docstring; resolved by `finish`
        self.outputs = None     # the returned structure, NodeIds as ("node", i)
        self.int_buffers = []   # (array, delta): integer buffers fn advanced
        self.fresh = []         # (leaf, value before the record's update): constants
        #                         a batch-norm update writes, fresh per replay
        self.pre_bn = {}        # leaf index -> its value before the first update
        self.plan = None        # built by yscv/compile/replay.py
        self.attrs = None       # every node's attributes (a replay copies the list)
        self.n_args = 0


class _Recorder:
    """The state a `RecordingGraph` writes while ``fn`` runs."""

    __slots__ = ("depth", "record", "inputs", "draws_at", "param_writes", "in_backward",
                 "rule_depth", "read_value", "value_ids", "segments", "recorded_walk",
                 "in_segment")

    def __init__(self, record: Record, inputs: dict):
        self.depth = 0
        self.record = record
        self.inputs = inputs    # id(TracedInput) -> argument position
        self.draws_at = None
        self.param_writes = []
        self.in_backward = False
        self.rule_depth = 0      # inside a recorded walk's rule (yscv/compile/higher.py)
        self.read_value = False  # that rule read a value
        self.value_ids = {}      # id(array g.value returned) -> (array, node index)
        self.segments = {}       # id(checkpoint segment) -> segment, once noted
        self.recorded_walk = False   # inside backward / gradients with create_graph=True
        self.in_segment = False      # inside g.checkpoint and the like


def _template(rec: _Recorder, g, a, found: list):
    """An argument of a graph call as replay data: an input ("in", k),
    a node of g ("node", index), a list/tuple of those, or a literal. A
    derived input array is refused."""
    if type(a) is TracedInput:
        if a._root and id(a) in rec.inputs:
            found.append(a._arg)
            return ("in", a._arg)
        which = "an input argument" if a._arg is None else f"input argument {a._arg}"
        raise CompileError(
            f"yscv.compile: an array computed with NumPy from {which} "
            "reached the graph; its values would be frozen at record time. Pass the "
            "argument itself to the graph (g.constant(x)) and compute on nodes")
    if type(a) is NodeId and a.graph is g:
        return ("node", a.index)
    if type(a) is np.ndarray and id(a) in rec.value_ids and rec.value_ids[id(a)][0] is a:
        found.append(None)   # a node's value fed back (g.variable(g.value(n))): read afresh
        return ("val", rec.value_ids[id(a)][1])
    if isinstance(a, (list, tuple)):
        return ("seq", type(a), tuple(_template(rec, g, x, found) for x in a))
    return ("lit", a)


def _watch(name: str, meth):
    """The RecordingGraph's version of Graph method ``name``."""

    def method(self, *args, **kwargs):
        rec = self.__dict__["_recorder"]
        if rec.depth:
            if rec.rule_depth and name == "value":
                rec.read_value = True
            return meth(self, *args, **kwargs)
        if name == "truncate" and rec.in_segment:   # a failing checkpoint undoing itself
            return meth(self, *args, **kwargs)
        if name in FORBIDDEN:
            raise CompileError(f"yscv.compile: {FORBIDDEN[name]}; call it outside the "
                               "compiled function", op=name)
        if name == "backward":
            return _record_backward(self, rec, meth, *args, **kwargs)
        if name == "gradients":
            return _record_gradients(self, rec, meth, *args, **kwargs)
        if name in _SEGMENT_CALLS:
            return _record_segments(self, rec, meth, *args, **kwargs)
        found: list = []
        template = (tuple(_template(rec, self, a, found) for a in args),
                    {k: _template(rec, self, v, found) for k, v in kwargs.items()})
        start = len(self._uids)
        n_actions = len(rec.record.actions)
        rec.depth = 1
        try:
            out = meth(self, *args, **kwargs)
        finally:
            rec.depth = 0
        end = len(self._uids)
        if found and end > start:
            actions = rec.record.actions
            inner = actions[n_actions:]
            if any(a[0] == "bn" for a in inner):
                raise CompileError(
                    f"yscv.compile: g.{name} normalises an input array directly with "
                    "running statistics; pass g.constant(x) instead", op=name)
            del actions[n_actions:]   # the call's own draws: it redraws them itself
            actions.append(("call", start, end, meth, template))
        elif name == "param":
            rec.record.params.append((out.index, args[0] if args else kwargs["p"]))
        elif name == "buffer":
            rec.record.buffers.append((out.index, args[0] if args else kwargs["arr"]))
        elif name == "value":
            rec.value_ids[id(out)] = (out, self._index(args[0] if args else kwargs["n"]))
        return out

    method.__name__ = name
    method.__qualname__ = f"RecordingGraph.{name}"
    method.__doc__ = meth.__doc__
    return method


def _record_backward(g, rec: _Recorder, meth, target, grad=None, retain_graph=True,
                     workers=1, create_graph=False):
    """``g.backward`` during the record: refused for what a replay does
    not repeat yet; otherwise its plan and seed are noted, then it runs
    (with the caller's ``workers``; the replay walks serially, the same bits)."""
    t = g._index(target)
    if create_graph:   # the walk appends nodes: replayed as nodes (yscv/compile/higher.py)
        _higher.refuse_input_seed(grad, TracedInput, "backward")
        rec.in_backward = rec.recorded_walk = True
        rec.depth = 1
        try:
            meth(g, target, grad, retain_graph=retain_graph, workers=workers,
                 create_graph=True)
        finally:
            rec.depth = 0
            rec.in_backward = rec.recorded_walk = False
        return
    if grad is None:
        seed = ("ones", g._shape(t))
    elif type(grad) is NodeId:
        seed = ("node", g._index(grad))
    else:
        found: list = []
        tpl = _template(rec, g, grad, found)
        seed = tpl if found else ("lit", np.array(grad, dtype=g.dtype, copy=True))
    sched = Schedule(g, t)
    rec.in_backward = True
    rec.depth = 1
    try:
        # any workers: the threaded walk gives the serial walk's bits, which
        # the replay runs
        meth(g, target, grad, retain_graph=retain_graph, workers=workers)
    finally:
        rec.depth = 0
        rec.in_backward = False
    rec.record.actions.append(("backward", len(g._uids), t, sched, seed))


def _record_segments(g, rec: _Recorder, meth, *args, **kwargs):
    """``g.checkpoint`` and the like during the record: run with the graph
    calls inside watched, then each new segment noted as a ``release``
    action (yscv/compile/segments.py) where the eager graph released it."""
    outer = rec.in_segment
    rec.in_segment = True
    try:
        out = meth(g, *args, **kwargs)
    finally:
        rec.in_segment = outer
    noted = rec.segments
    for seg in g._segments:
        if id(seg) not in noted:
            noted[id(seg)] = seg
            rec.record.actions.append(("release", len(g._uids), seg.start, seg.end,
                                       seg.keep))
    return out


def _record_gradients(g, rec: _Recorder, meth, target, inputs, grad=None,
                      create_graph=False):
    """``g.gradients`` during the record: with ``create_graph=True`` its
    nodes are replayed as nodes; the arrays of a plain call are refused."""
    if not create_graph:
        raise CompileError(
            "yscv.compile: g.gradients without create_graph=True returns arrays the record "
            "would freeze; pass create_graph=True (its NodeIds are replayed)", op="gradients")
    _higher.refuse_input_seed(grad, TracedInput, "gradients")
    rec.depth = 1
    rec.recorded_walk = True
    try:
        return meth(g, target, inputs, grad=grad, create_graph=True)
    finally:
        rec.depth = 0
        rec.recorded_walk = False


def _record_bn_update(self, out, i_mean, i_var, momentum, n):
    rec = self.__dict__["_recorder"]
    for i in (i_mean, i_var):
        rec.record.pre_bn.setdefault(i, np.array(self._values[i], copy=True))
    Graph._update_running_stats(self, out, i_mean, i_var, momentum, n)
    rec.record.actions.append(("bn", out.index + 1, out.index, i_mean, i_var, momentum, n))


def _record_prepare(self, i):
    """A recorded walk (``create_graph``) recomputing node i's released
    value and inputs: noted (a ``prep`` action) for the replay to repeat."""
    rec = self.__dict__["_recorder"]
    if rec.recorded_walk and not rec.rule_depth:
        rec.record.actions.append(("prep", len(self._uids), i))
    Graph._prepare_node_for_backward(self, i)


def _record_operand(self, x, opname, argname):
    """``Graph._operand`` called from outside the graph's methods (a user
    op converting its inputs): an input array would become a plain,
    frozen array there, so it is refused."""
    if not self.__dict__["_recorder"].depth and type(x) is TracedInput:
        raise CompileError(
            f"yscv.compile: {opname} converts an input array itself; its values would be "
            "frozen at record time. Pass g.constant(x) instead", op=opname)
    return Graph._operand(self, x, opname, argname)


def _build_class():
    ns = {"__doc__": "A Graph that records what `yscv.compile` replays "
                     "(yscv/compile/record.py).",
          "_update_running_stats": _record_bn_update,
          "_prepare_node_for_backward": _record_prepare,
          "_operand": _record_operand}
    for name in dir(Graph):
        if name.startswith("_") and name not in _PRIVATE_ENTRIES:
            continue
        attr = getattr(Graph, name)
        if not callable(attr) or isinstance(attr, type) or name in ("no_grad",):
            continue
        if isinstance(Graph.__dict__.get(name), (staticmethod, classmethod)):
            continue
        ns[name] = _watch(name, attr)
    return type("RecordingGraph", (Graph,), ns)


RecordingGraph = _build_class()


def record(fn, dtype, args, array_pos, modules) -> tuple:
    """Run ``fn`` once, eagerly, on a RecordingGraph; returns ``(record,
    outputs)`` with the outputs as the eager call returns them (NodeIds as
    array copies)."""
    rec_obj = Record()
    rec_obj.dtype = np.dtype(dtype)
    rec_obj.n_args = len(args)
    call_args = list(args)
    inputs = {}
    for k in array_pos:
        t = traced(args[k], k)
        call_args[k] = t
        inputs[id(t)] = k
    for root in modules:
        for m in root.modules():
            if m.__dict__.get("_forward_hooks") or m.__dict__.get("_forward_pre_hooks"):
                raise CompileError(
                    f"yscv.compile: {type(m).__name__} has forward hooks; they run Python a "
                    "replay would skip (not supported yet)")
    rec = _Recorder(rec_obj, inputs)
    g = RecordingGraph(dtype=dtype)
    g.__dict__["_recorder"] = rec
    before = _module_state(modules)
    with _RECORD_LOCK, DrawWatch(g, rec_obj), ParamWatch(rec), _higher.watching(g, rec):
        out = fn(g, *call_args)
    finish(g, rec, out, modules, before)
    return rec_obj, g, out


def _module_state(modules) -> tuple:
    """Copies of the reachable modules' buffers and parameter values."""
    bufs, params, seen = [], [], set()
    for root in modules:
        for m in root.modules():
            for name, b in m._buffers.items():
                if b is not None and id(b) not in seen:
                    seen.add(id(b))
                    bufs.append((m, name, b, b.copy()))
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    params.append((m, name, p, p.data, p.data.copy()))
    return bufs, params


def finish(g, rec: _Recorder, out, modules, before) -> None:
    """Refuse what the replay would not repeat; resolve the actions; keep
    the arena and the returned structure."""
    r = rec.record
    if rec.param_writes:
        raise CompileError(
            f"yscv.compile: the compiled function assigned Parameter.{rec.param_writes[0]} "
            "(an optimizer step or zero_grad inside it?); a replay would not repeat it. "
            "Call opt.step() / opt.zero_grad() outside the compiled function")
    for what, table in (("gradient hooks", g._hooks), ("post-accumulate hooks", g._post_hooks),
                        ("backward-end hooks", g._end_hooks)):
        if any(table.values()) if isinstance(table, dict) else table:
            raise CompileError(f"yscv.compile: {what} are not supported yet")
    if g.detect_anomaly:
        raise CompileError("yscv.compile: anomaly mode is not supported")
    bufs, params = before
    bn_leaves = set()
    for a in r.actions:
        if a[0] == "bn":
            bn_leaves.update((a[3], a[4]))
    bound_arrays = {id(arr): i for i, arr in r.buffers}
    for m, key, p, data, copy in params:
        name = f"{type(m).__name__}.{key}"
        if m._parameters.get(key) is not p or p.data is not data \
                or not np.array_equal(p.data, copy, equal_nan=True):
            raise CompileError(
                f"yscv.compile: the compiled function changed {name} (an optimizer step "
                "inside it?); a replay would not repeat it. Call opt.step() outside the "
                "compiled function")
    for m, key, b, copy in bufs:
        name = f"{type(m).__name__}.{key}"
        if m._buffers.get(key) is not b:
            raise CompileError(
                f"yscv.compile: the compiled function replaced the buffer {name}; a replay "
                "would not repeat it (update it in place, or outside the function)")
        if np.array_equal(b, copy, equal_nan=True):
            continue
        if b.dtype.kind in "iu" and b.shape == copy.shape:
            r.int_buffers.append((b, b - copy))
            continue
        if bound_arrays.get(id(b)) in bn_leaves:
            continue
        raise CompileError(
            f"yscv.compile: the compiled function changed the buffer {name} outside graph "
            "ops; a replay would not repeat it")
    # resolve the draws: a dropout seed names its node, a drawn array its leaf
    nodes = g._nodes
    resolved = []
    for a in r.actions:
        if a[0] == "seed":
            _, pos, s = a
            k = next((k for k in range(pos, len(nodes)) if nodes[k][N_OP] == _DROPOUT
                      and nodes[k][N_ATTRS].seed == s), None)
            if k is None:
                raise CompileError("yscv.compile: a seed was drawn from yscv's generator "
                                   "that no dropout node uses; a replay cannot repeat it")
            resolved.append(("seed", k, k))
        elif a[0] == "draw":
            _, pos, fn = a
            if pos >= len(nodes) or nodes[pos][N_OP] != _LEAF:
                raise CompileError("yscv.compile: an array was drawn from yscv's "
                                   "generator outside g.randn_like / g.rand_like")
            resolved.append(("draw", pos, fn))
        else:
            resolved.append(a)
    r.actions = resolved
    consts = {i for i, _ in r.params} | {i for i, _ in r.buffers}
    r.fresh = [(i, r.pre_bn[i]) for i in sorted(bn_leaves) if i not in consts]
    r.pre_bn = None
    # the replay computes its own saved data: the record keeps none
    r.nodes = [x if x[N_SAVED] is None else with_saved(x, None) for x in nodes]
    r.values = list(g._values)
    for i, v in enumerate(r.values):
        if v is None:   # released (retain_graph=False): the forward rebuilds it anyway
            continue
        if nodes[i][N_OP] == _LEAF and v.flags.writeable:
            v.flags.writeable = False
    r.outputs = _out_template(g, out)


def _out_template(g, out):
    """The returned structure with NodeIds (and arrays g.value / g.grad
    returned) as references the replay fills in."""
    if out is None:
        return ("lit", None)
    if type(out) is NodeId:
        if out.graph is not g:
            raise CompileError("yscv.compile: the compiled function returned a NodeId of "
                               "another graph")
        return ("node", out.index)
    if isinstance(out, np.ndarray):
        for i, v in enumerate(g._values):
            if v is out:
                return ("node", i)
        for i, gr in g._grads.items():
            if gr is out:
                return ("grad", i)
        raise CompileError(
            "yscv.compile: the compiled function returned an array that is not a node's "
            "value or gradient; it would be frozen at record time. Return the NodeId")
    if isinstance(out, (tuple, list)):
        return ("seq", type(out), tuple(_out_template(g, x) for x in out))
    if isinstance(out, dict):
        return ("dict", tuple((k, _out_template(g, v)) for k, v in out.items()))
    raise CompileError(
        f"yscv.compile: the compiled function returned a {type(out).__name__}; it would be "
        "frozen at record time. Return NodeIds (they come back as arrays), or tuples, "
        "lists and dicts of them")
