"""``yscv.compile``: record a training step once, replay it without per-node
Python (docs/compile.md).

``step = yscv.compile(fn)`` wraps ``fn(g, *args)``, a function that builds
a step on the graph it is given (and usually calls ``g.backward``). The
first call for a key runs ``fn`` eagerly on a fresh graph while
yscv/compile/record.py watches it; later calls with the same key replay the
record (yscv/compile/replay.py) with the new arrays and the parameters'
current values. The key (`Compiled.key`):

* each array argument's shape and dtype (its values are the replay's data);
* each other argument by value (``static_argnums`` say so explicitly, and
  admit arrays, keyed by their bytes): a new value records again;
* the training flag of every module and the ``requires_grad`` flag, dtype
  and shape of every parameter of the `yscv.nn.Module` objects ``fn`` can
  reach: those passed as arguments, ``fn`` itself or the object it is a
  method of, the closure cells of ``fn`` and the globals its code names;
* whether gradients are enabled (``yscv.no_grad()``).
"""
from __future__ import annotations

import inspect
import sys
from collections import OrderedDict

import numpy as np

from .. import random as _random
from ..engine.graph import Graph
from ..engine.grad_mode import is_grad_enabled
from ..errors import CompileMismatchError
from ..node import N_OP, Op
from . import record as _record
from . import replay as _replay

__all__ = ["compile", "Compiled"]

_ndarray = np.ndarray


def _reachable_modules(fn, args) -> list:
    """The `yscv.nn.Module` objects named in the module docstring."""
    mod = sys.modules.get("yscv.nn.module")
    if mod is None:   # yscv.nn never imported: no module exists
        return []
    Module = mod.Module
    found: list = []

    def add(obj):
        if isinstance(obj, Module) and not any(obj is m for m in found):
            found.append(obj)

    for a in args:
        add(a)
    add(fn)
    f = fn
    if inspect.ismethod(f):
        add(f.__self__)
        f = f.__func__
    for cell in getattr(f, "__closure__", None) or ():
        try:
            add(cell.cell_contents)
        except ValueError:   # an empty cell
            pass
    code = getattr(f, "__code__", None)
    glb = getattr(f, "__globals__", None)
    if code is not None and glb is not None:
        for name in code.co_names:
            add(glb.get(name))
    return found


def _infer_dtype(modules):
    for root in modules:
        for p in root.parameters():
            return p.data.dtype
    return np.dtype(np.float32)


class Compiled:
    """The callable `compile` returns: ``fn``'s arguments without ``g``.

    Attributes:
        records: the cached records, least recently used first (an
            OrderedDict key -> record), at most ``cache_size``.
        recordings: how many times ``fn`` was recorded.
    """

    def __init__(self, fn, static_argnums=(), cache_size: int = 8, check: bool = False,
                 dtype=None):
        if not callable(fn):
            raise TypeError(f"yscv.compile: fn must be callable, got {type(fn).__name__}")
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        static = tuple(static_argnums)
        for k in static:
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                raise ValueError(f"yscv.compile: static_argnums must be non-negative ints "
                                 f"(positions in fn's arguments after g), got {k!r}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"yscv.compile: cache_size must be a positive int, got "
                             f"{cache_size!r}")
        if dtype is not None and np.dtype(dtype) not in (np.float32, np.float64):
            raise TypeError(f"yscv.compile: dtype must be float32 or float64, got {dtype!r}")
        self.fn = fn
        self.static_argnums = frozenset(static)
        self.cache_size = cache_size
        self.check = bool(check)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.records: OrderedDict = OrderedDict()
        self.recordings = 0
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = getattr(fn, "__name__", "compiled")

    def key(self, args, modules) -> tuple:
        """The cache key of a call (see the module docstring)."""
        parts = []
        static = self.static_argnums
        for k, a in enumerate(args):
            if k in static:
                if isinstance(a, _ndarray):
                    parts.append(("s", a.shape, a.dtype.str, a.tobytes()))
                else:
                    try:
                        hash(a)
                    except TypeError:
                        raise TypeError(f"yscv.compile: static argument {k} "
                                        f"({type(a).__name__}) is not hashable") from None
                    parts.append(("s", type(a), a))
            elif type(a) is _ndarray:
                parts.append(("a", a.shape, a.dtype.str))
            else:
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(
                        f"yscv.compile: argument {k} is a {type(a).__name__}: pass arrays "
                        "as np.ndarray arguments (traced) or hashable values (keyed by "
                        "value, as static arguments)") from None
                parts.append(("v", type(a), a))
        flags = tuple((id(root), tuple(m.training for m in root.modules()),
                       tuple((p.requires_grad, p.data.dtype.char, p.data.shape)
                             for p in root.parameters()))
                      for root in modules)
        return (tuple(parts), flags, is_grad_enabled())

    def __call__(self, *args):
        modules = _reachable_modules(self.fn, args)
        key = self.key(args, modules)
        rec = self.records.get(key)
        if rec is None:
            return self._record(key, args, modules)
        self.records.move_to_end(key)
        if self.check:
            return self._checked(rec, args, modules)
        values, grads = _replay.replay(rec, args)
        return _replay.outputs(rec.outputs, values, grads)

    def _record(self, key, args, modules):
        dtype = self.dtype or _infer_dtype(modules)
        array_pos = [k for k, a in enumerate(args)
                     if type(a) is _ndarray and k not in self.static_argnums]
        rec, g, _ = _record.record(self.fn, dtype, args, array_pos, modules)
        self.recordings += 1
        values = list(g._values)
        for i, v in enumerate(values):
            if v is None and rec.nodes[i][N_OP] != _LEAF:   # released by retain_graph=False
                values[i] = g._recompute_value(i)
        out = _replay.outputs(rec.outputs, values, g._grads)
        rec.plan = _replay.build_plan(rec)
        # only the constant leaves' values are read again
        for i, r in enumerate(rec.nodes):
            if r[N_OP] != _LEAF:
                rec.values[i] = None
        for i, _ in rec.params + rec.buffers:
            rec.values[i] = None
        self.records[key] = rec
        while len(self.records) > self.cache_size:
            self.records.popitem(last=False)
        return out

    def _checked(self, rec, args, modules):
        """Replay, then run ``fn`` eagerly from the same state and compare
        node by node (`CompileMismatchError` at the first difference)."""
        state = _snapshot(rec)
        values, grads = _replay.replay(rec, args)
        out = _replay.outputs(rec.outputs, values, grads)
        _restore(state)
        g = Graph(dtype=rec.dtype)
        self.fn(g, *args)
        nodes = rec.nodes
        for i in range(max(len(nodes), len(g._nodes))):
            if i >= len(nodes) or i >= len(g._nodes) or g._nodes[i][N_OP] != nodes[i][N_OP]:
                have = "nothing" if i >= len(g._nodes) else Op(g._nodes[i][N_OP]).name.lower()
                want = "nothing" if i >= len(nodes) else Op(nodes[i][N_OP]).name.lower()
                raise CompileMismatchError(
                    f"yscv.compile(check=True): node {i} is {have} in the eager run but "
                    f"{want} in the record: fn built a different graph for these inputs "
                    "(Python control flow on values is frozen at record time)",
                    op=have, node=i, expected=want, got=have)
            a, b = g._values[i], values[i]
            if a is None or b is None:
                continue
            if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
                name = Op(nodes[i][N_OP]).name.lower()
                raise CompileMismatchError(
                    f"yscv.compile(check=True): node {i} ({name}) has a different value in "
                    "the eager run than in the replay (a value frozen at record time: "
                    "Python control flow on values, g.value(...) fed back, ...)",
                    op=name, node=i)
        return out


_LEAF = int(Op.LEAF)


def _snapshot(rec):
    """What a replay changes: generator state, Parameter.grad, buffers."""
    params = [(p, p.grad, None if getattr(p, "grad_slot", None) is None else p.grad_slot.copy())
              for _, p in rec.params]
    arrays = [arr for _, arr in rec.buffers] + [b for b, _ in rec.int_buffers]
    return (_random.get_rng_state(), params, [(a, a.copy()) for a in arrays])


def _restore(state) -> None:
    rng, params, arrays = state
    _random.set_rng_state(rng)
    for p, grad, slot in params:
        if slot is not None:
            np.copyto(p.grad_slot, slot)
        p.grad = grad
    for a, copy in arrays:
        np.copyto(a, copy)


def compile(fn=None, static_argnums=(), cache_size: int = 8, check: bool = False, dtype=None):
    """Record ``fn(g, *args)`` once per key and replay it (docs/compile.md).

    Args:
        fn: builds a step on the graph ``g`` it is given (ops, ``g.backward``)
            and returns NodeIds (they come back as arrays), tuples, lists or
            dicts of them, or None. Usable as ``@yscv.compile`` or
            ``@yscv.compile(static_argnums=..., ...)``.
        static_argnums: positions (in the arguments after ``g``) keyed by
            value; an array there is keyed by its bytes and frozen into the
            record.
        cache_size: records kept; the least recently used is dropped past it.
        check: every call also runs ``fn`` eagerly from the same state and
            raises `yscv.CompileMismatchError` at the first node whose value
            differs from the replay's.
        dtype: the graph dtype; None takes the first reachable parameter's
            (float32 without one).

    Returns:
        A `Compiled` callable taking ``fn``'s arguments without ``g``.
    """
    if fn is None:
        return lambda f: Compiled(f, static_argnums, cache_size, check, dtype)
    return Compiled(fn, static_argnums, cache_size, check, dtype)
