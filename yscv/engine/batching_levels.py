"""The vmap levels of a graph and its nodes' tags (yscv/engine/batching.py
describes the interpreter): which levels are active, which leading axes of
a node's value are batch axes, the views one level out (`outside`) and with
none (`physical`), tagging a rule's result, and lifting a shared node to
the batch (`lift`)."""
from __future__ import annotations

import contextlib
import itertools
import threading

from ..compute.shape import ReshapeAttrs
from ..batching import BatchedInts
from ..node import NodeId, N_SHAPE, Op
from .storage import _GraphCore

__all__ = ["BatchedInts", "active_levels", "level_size", "level_entry", "active_tag",
           "is_batched", "top_level", "enter_level", "exit_level", "outside", "physical", "tag",
           "lift", "variable_like", "set_class_factory"]

_LEVELS = itertools.count(1)
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
    """The active levels' numbers, outermost first (kept by `_set_class`,
    which every change of the stack calls)."""
    return g.__dict__.get("_vmap_active", ())


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
    d = g.__dict__
    tags = d.get("_vmap_tags")
    t = tags.get(i) if tags else None
    if not t:
        return ()
    act = d.get("_vmap_active", ())
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


#: ``factory(base_class) -> class``: the interpreter's class for a graph class
#: (yscv/engine/batching.py registers `batching_class`)
_CLASS_FACTORY = [None]


def set_class_factory(factory) -> None:
    _CLASS_FACTORY[0] = factory


def _set_class(g) -> None:
    """The graph's class and its cached active levels, after the stack changed."""
    st = _stack(g)
    g.__dict__["_vmap_active"] = tuple(e.level for e in st)
    base = getattr(g.__class__, "_base_class", None) or g.__class__
    g.__class__ = _CLASS_FACTORY[0](base) if st else base


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


class outside:
    """``with outside(g, level):`` within the block, ``level`` and every
    level inside it are inactive: ops see ``level``'s axis as an ordinary
    leading axis (a batching rule's view of its operands). A class rather
    than a generator: every batched op enters one or more."""

    __slots__ = ("g", "level", "saved")

    def __init__(self, g, level: int):
        self.g, self.level, self.saved = g, level, None

    def __enter__(self):
        g, level = self.g, self.level
        st = _stack(g)
        for k, e in enumerate(st):
            if e.level == level:
                break
        else:
            raise KeyError(level)
        self.saved = st[k:]
        del st[k:]
        _set_class(g)
        return None

    def __exit__(self, *exc) -> None:
        self.g.__dict__["_vmap_stack"].extend(self.saved)
        _set_class(self.g)


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
    act = active_levels(g)
    inside = act[:act.index(level)]   # the levels active one level out
    t = tags.get(node.index, ())
    tags[node.index] = tuple(lv for lv in t if lv in inside) + (level,)
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
