"""The batching interpreter behind `yscv.func.vmap`.

Inside ``vmap(f)`` the function ``f`` sees per-sample values, but the arena
holds whole batches: every node has one *physical* value, and a node made
inside a vmap level carries a *tag*, the levels whose batch axes lead its
value (outermost level first). While levels are active the graph's class is
`BatchingGraph`, which reads a node through them:

* ``NodeId.shape`` (and every op's argument check, `_shape`) is the
  *logical* shape: the physical one without the active levels' axes;
* an op with an operand batched at an active level does not run its
  forward on the physical values: the op's batching rule
  (`yscv.registry.BATCHING`) does, for the innermost such level ``L``, by
  calling ordinary graph ops on the operands seen one level out (``L``'s
  axis first), and the node it returns is tagged with ``L``.

The nodes the rules append are ordinary nodes with ordinary attributes: every
walk, the checkpointing replay and the introspection read them as they read
any node. A gradient taken inside ``f`` (`yscv.func.grad`, or
``g.gradients(..., create_graph=True)``) is therefore the gradient of the
physical graph, which is the stack of the per-sample gradients because the
samples never meet; an input not batched over the target's levels would get
the *sum* over the samples, so `BatchingGraph.gradients` refuses it (the
`yscv.func` transforms lift their differentiated arguments to every active
level first, `lift`).

Levels are process-unique numbers; a level is active only while its vmap
call runs, and tags of levels that are no longer active mean nothing, so a
vmap's result is its node as it is: outside, its level's axis is an
ordinary leading axis.
"""
from __future__ import annotations

import contextlib
import itertools
import threading

import numpy as np

from .. import registry
from ..errors import BatchingError
from ..node import NodeId, N_SHAPE, Op
from ..compute.shape import ReshapeAttrs
from ..batching import BatchedInts
from .storage import _GraphCore

__all__ = ["BatchingGraph", "BatchedInts", "batching_class", "enter_level", "exit_level",
           "active_tag", "top_level", "lift", "physical", "level_size", "tag", "is_batched"]

_LEVELS = itertools.count(1)
_BATCHING = registry.BATCHING
_RESHAPE = Op.RESHAPE


class _Level:
    """One active vmap call: its number, batch size and randomness mode."""

    __slots__ = ("level", "size", "randomness")

    def __init__(self, level: int, size: int, randomness: str):
        self.level, self.size, self.randomness = level, size, randomness

    def batched(self, g, x) -> bool:
        """Whether ``x`` (a NodeId or `BatchedInts`) carries this level's axis."""
        if type(x) is BatchedInts:
            return self.level in x.levels
        return type(x) is NodeId and self.level in g.__dict__.get("_vmap_tags", {}).get(
            x.index, ())


# --------------------------------------------------------------- levels
def _stack(g) -> list:
    return g.__dict__.setdefault("_vmap_stack", [])


def _tags(g) -> dict:
    return g.__dict__.setdefault("_vmap_tags", {})


def active_levels(g) -> tuple:
    return tuple(e.level for e in _stack(g))


def level_size(g, level: int) -> int:
    for e in _stack(g):
        if e.level == level:
            return e.size
    raise KeyError(level)


def level_entry(g, level: int) -> _Level:
    for e in _stack(g):
        if e.level == level:
            return e
    raise KeyError(level)


def active_tag(g, i: int) -> tuple:
    """The active levels node ``i`` is batched over (its leading axes)."""
    t = g.__dict__.get("_vmap_tags", {}).get(i)
    if not t:
        return ()
    act = active_levels(g)
    return tuple(lv for lv in t if lv in act)


def is_batched(g, x) -> bool:
    return type(x) is NodeId and bool(active_tag(g, x.index))


def top_level(g, xs) -> int:
    """The innermost active level any operand (NodeId or BatchedInts) is batched over (0: none)."""
    act = active_levels(g)
    if not act:
        return 0
    tags = g.__dict__.get("_vmap_tags", {})
    top = 0
    for x in xs:
        if type(x) is NodeId:
            t = tags.get(x.index)
        elif type(x) is BatchedInts:
            t = x.levels
        else:
            continue
        if t:
            for lv in t:
                if lv in act and lv > top:
                    top = lv
    return top


_CLASSES: dict = {}


def batching_class(base):
    """The `BatchingGraph` subclass of graph class ``base`` (made once): every
    op method is wrapped so that a `BatchedInts` argument reaches the
    method's batching rule (`registry.BATCHING_METHODS`, else a loop)."""
    if issubclass(base, BatchingGraph):
        return base
    cls = _CLASSES.get(base)
    if cls is None:
        from ..ops import OP_MIXINS
        from .batching_methods import method_wrapper
        ns = {"_base_class": base}
        for mixin in OP_MIXINS:
            for name, fn in vars(mixin).items():
                if not name.startswith("_") and callable(fn) and name not in vars(BatchingGraph):
                    ns[name] = method_wrapper(name, getattr(base, name))
        cls = type(f"Batching{base.__name__}", (BatchingGraph, base), ns)
        _CLASSES[base] = cls
    return cls


def _set_class(g) -> None:
    base = g.__class__._base_class if isinstance(g, BatchingGraph) else g.__class__
    g.__class__ = batching_class(base) if _stack(g) else base


# NodeId's binary dunders carry the two-node append inline (yscv/node.py);
# while any vmap level is active anywhere they are the plain calls of the
# graph's ``_apply2`` (which `BatchingGraph` intercepts), so that eager code
# outside vmap keeps its fast path at no cost
_DUNDERS = {name: op for name, op in (("__add__", Op.ADD), ("__sub__", Op.SUB),
                                      ("__mul__", Op.MUL), ("__truediv__", Op.DIV),
                                      ("__pow__", Op.POW))}
_FAST = {name: NodeId.__dict__[name] for name in _DUNDERS}
_active_count = [0]
_count_lock = threading.Lock()


def _plain_dunder(op):
    def dunder(a, b):
        return a.graph._apply2(op, a, b)
    return dunder


_PLAIN = {name: _plain_dunder(op) for name, op in _DUNDERS.items()}


def enter_level(g, size: int, randomness: str) -> int:
    """Push a new vmap level of batch ``size`` on ``g``; returns its number."""
    lv = next(_LEVELS)
    _stack(g).append(_Level(lv, int(size), randomness))
    _set_class(g)
    with _count_lock:
        _active_count[0] += 1
        if _active_count[0] == 1:
            for name, fn in _PLAIN.items():
                setattr(NodeId, name, fn)
    return lv


def exit_level(g, level: int) -> None:
    st = _stack(g)
    if not st or st[-1].level != level:
        raise RuntimeError("vmap levels exited out of order")
    st.pop()
    _set_class(g)
    with _count_lock:
        _active_count[0] -= 1
        if _active_count[0] == 0:
            for name, fn in _FAST.items():
                setattr(NodeId, name, fn)


@contextlib.contextmanager
def outside(g, level: int):
    """Within the block, ``level`` and every level inside it are inactive:
    ops see ``level``'s axis as an ordinary leading axis (a batching rule's
    view of its operands)."""
    st = _stack(g)
    k = next(j for j, e in enumerate(st) if e.level == level)
    saved = st[k:]
    del st[k:]
    _set_class(g)
    try:
        yield
    finally:
        st.extend(saved)
        _set_class(g)


@contextlib.contextmanager
def physical(g):
    """Within the block no level is active: the physical graph (the walks)."""
    st = _stack(g)
    if not st:
        yield
        return
    with outside(g, st[0].level):
        yield


def tag(g, node: NodeId, level: int, start: int) -> NodeId:
    """``node`` (seen one level out, ``level``'s axis first) as batched over
    ``level``: a node appended since arena position ``start`` is tagged in
    place, an older one through a fresh alias (its tag is not changed)."""
    if node.index < start:
        with outside(g, level):
            node = _alias(g, node)
    tags = _tags(g)
    with outside(g, level):
        outer = active_tag(g, node.index)
    tags[node.index] = outer + (level,)
    return node


def _alias(g, node: NodeId) -> NodeId:
    """A fresh node equal to ``node`` with its tag (a reshape to its own
    physical shape, appended without the batching interpreter)."""
    shape = g._nodes[node.index][N_SHAPE]
    alias = _GraphCore._apply(g, _RESHAPE, (node,), ReshapeAttrs(tuple(shape)))
    t = g.__dict__.get("_vmap_tags", {}).get(node.index)
    if t:
        _tags(g)[alias.index] = t
    return alias


def lift(g, node: NodeId, levels=None) -> NodeId:
    """``node`` batched over every active level (or those of ``levels``): an
    expand along the levels it lacks, a view of its value. What a transform
    differentiates inside vmap, so that each sample gets its own gradient
    rather than the sum over the samples."""
    act = active_levels(g)
    if type(node) is not NodeId or not act:
        return node
    want = act if levels is None else tuple(lv for lv in act if lv in levels)
    cur = node
    for e in list(_stack(g)):
        have = active_tag(g, cur.index)
        if e.level not in want or e.level in have:
            continue
        start = len(g)
        with outside(g, e.level):
            # ``cur`` seen with level e and those inside it inactive: its
            # leading axis is where level e's axis goes
            shape = tuple(cur.shape)
            new = g.expand(g.unsqueeze(cur, 0), (e.size,) + shape)
        if new.index < start:
            with outside(g, e.level):
                new = _alias(g, new)
        _tags(g)[new.index] = tuple(sorted(set(have) | {e.level}))
        cur = new
    return cur


def variable_like(g, n: NodeId) -> NodeId:
    """A variable (a leaf that requires grad) holding batched ``n``'s value,
    batched as ``n`` is."""
    with physical(g):
        v = g.variable(g.value(n))
    t = g.__dict__.get("_vmap_tags", {}).get(n.index)
    if t:
        _tags(g)[v.index] = t
    return v


# ------------------------------------------------------ the graph class
class BatchingGraph:
    """The interpreter while vmap levels are active (see module docstring);
    a mixin put in front of the graph's own class by `batching_class`."""

    _base_class = None

    def _shape(self, i: int) -> tuple:
        shape = self._nodes[i][N_SHAPE]
        n = len(active_tag(self, i))
        return shape[n:] if n else shape

    def _apply(self, op, operands, attrs=None):
        top = top_level(self, operands)
        if not top:
            return self._base_class._apply(self, op, operands, attrs)
        op = Op(op)
        rule = _BATCHING[int(op)]
        if rule is None:
            name = self._op_name(op, attrs)
            raise BatchingError(f"vmap: {name} has no batching rule "
                                "(register one with yscv.registry.register_batching)", op=name)
        entry = level_entry(self, top)
        bat = tuple((type(x) is NodeId and top in active_tag(self, x.index))
                    or (type(x) is BatchedInts and top in x.levels) for x in operands)
        start = len(self)
        try:
            with outside(self, top):
                out = rule(self, op, tuple(operands), bat, attrs, entry)
            return tag(self, out, top, start)
        except BaseException:
            self.truncate(start)
            raise

    @staticmethod
    def _op_name(op, attrs) -> str:
        if op is Op.CUSTOM and hasattr(attrs, "name"):
            return f"custom op {attrs.name!r}"
        return op.name.lower()

    def _apply1(self, op, x, attrs=None):
        if top_level(self, (x,)):
            return self._apply(op, (x,), attrs)
        return self._base_class._apply1(self, op, x, attrs)

    def _apply2(self, op, a, b, attrs=None):
        if top_level(self, (a, b)):
            return self._apply(op, (a, b), attrs)
        return self._base_class._apply2(self, op, a, b, attrs)

    def neg(self, x):
        return self._apply1(Op.NEG, x)

    def abs(self, x):
        return self._apply1(Op.ABS, x)

    def tanh(self, x):
        return self._apply1(Op.TANH, x)

    def _operand(self, x, opname: str, argname: str):
        """As the graph's, but a batched node's value is its first sample's
        (a view): what an op method reads to check shapes and dtypes, per
        sample; the batching rule computes from the whole batch."""
        i, v, r = self._base_class._operand(self, x, opname, argname)
        if i >= 0:
            n = len(active_tag(self, i))
            if n:
                v = v[(0,) * n]
        return i, v, r

    def value(self, n):
        i = self._index(n)
        if active_tag(self, i):
            raise BatchingError(
                f"vmap: g.value of node {i}, which is batched: inside vmap a value is the "
                "whole batch, not the sample f is written for (compute with graph ops, or "
                "return the node and read it after vmap)", node=i)
        return self._base_class.value(self, n)

    def truncate(self, k: int) -> None:
        tags = self.__dict__.get("_vmap_tags")
        if tags:
            for i in [i for i in tags if i >= k]:
                del tags[i]
        self._base_class.truncate(self, k)

    def backward(self, target, grad=None, retain_graph=True, workers=1, create_graph=False):
        raise BatchingError("vmap: g.backward inside a vmapped function (it would write one "
                            "gradient for the whole batch); use yscv.func.grad or "
                            "g.gradients(..., create_graph=True)", op="backward")

    def gradients(self, target, inputs, grad=None, create_graph: bool = False):
        """`Graph.gradients` of the per-sample ``target``: the physical graph's
        gradient, recorded (``create_graph=True`` is required inside vmap)."""
        base = self._base_class
        ins = [inputs] if type(inputs) is NodeId else list(inputs)
        t = self._index(target)
        ttag = active_tag(self, t)
        if not create_graph:
            raise BatchingError("vmap: g.gradients inside a vmapped function must record "
                                "(create_graph=True), or use yscv.func.grad", op="gradients")
        for k, n in enumerate(ins):
            if type(n) is NodeId and not set(ttag) <= set(active_tag(self, self._index(n))):
                raise BatchingError(
                    f"vmap: g.gradients with respect to input {k}, which is not batched over "
                    "the target's vmap axis: its gradient would be summed over the samples; "
                    "differentiate with yscv.func.grad (which gives each sample its own), or "
                    "pass a batched node", op="gradients")
        logical = self._shape(t)
        phys = self._nodes[t][N_SHAPE]
        start = len(self)
        if grad is None:
            if int(np.prod(logical)) != 1:
                from ..errors import NonScalarTargetError
                raise NonScalarTargetError(
                    f"gradients: target must hold one element per sample without grad, got "
                    f"shape {logical}", got=logical)
            seed = np.ones(phys, dtype=self.dtype)
        elif type(grad) is NodeId:
            seed = lift(self, grad, ttag) if ttag else grad
        else:
            arr = np.asarray(grad, dtype=self.dtype)
            seed = np.ascontiguousarray(np.broadcast_to(arr, phys)) if arr.shape == tuple(logical) \
                else arr
        try:
            with physical(self):
                res = base.gradients(self, target, ins, grad=seed, create_graph=True)
            out = []
            for n, r in zip(ins, res):
                ntag = active_tag(self, n.index)
                if ntag:
                    if r.index < start:
                        with physical(self):
                            r = _alias(self, r)
                    _tags(self)[r.index] = ntag
                out.append(r)
        except BaseException:
            self.truncate(start)
            raise
        return tuple(out)
