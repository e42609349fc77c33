"""Op methods under vmap given what an op's batching rule cannot see: a
batched integer array (`BatchedInts`: labels, indices), or a batched node
for a method that reads its operands' values to build the node (sort's
order, argmax's positions, slogdet's sign). Such a call goes to the
method's batching rule (`yscv.registry.BATCHING_METHODS`), else one call per
sample with the results stacked (yscv/engine/batching.py is the interpreter
these wrappers belong to)."""
from __future__ import annotations

import numpy as np

from .. import registry
from ..batching import BatchedInts
from ..errors import BatchingError
from ..node import NodeId
from .batching_levels import level_entry, outside, tag, top_level

__all__ = ["method_wrapper", "loop_method", "sample_of"]


#: op methods that read their operands' values to build the node (sort's
#: order, argmax's positions, slogdet's sign): batched, one call per sample
_VALUE_METHODS = frozenset({"argmax", "argmin", "topk", "sort", "slogdet"})


def method_wrapper(name: str, fn):
    """``fn`` (a Graph op method) taking `BatchedInts` arguments through its
    method batching rule, or one call per sample; a method of
    `_VALUE_METHODS` given a batched node, one call per sample."""
    reads_values = name in _VALUE_METHODS

    def method(self, *args, **kw):
        if any(type(a) is BatchedInts for a in args) or any(
                type(v) is BatchedInts for v in kw.values()) or (
                reads_values and top_level(self, tuple(args) + tuple(kw.values()))):
            return _int_call(self, name, fn, args, kw)
        return fn(self, *args, **kw)

    method.__name__ = name
    method.__doc__ = fn.__doc__
    return method


def _int_call(g, name, fn, args, kw):
    top = top_level(g, tuple(args) + tuple(kw.values()))
    if not top:
        raise BatchingError(f"vmap: {name} got an integer array batched by a vmap that has "
                            "returned", op=name)
    entry = level_entry(g, top)
    rule = registry.BATCHING_METHODS.get(name)
    start = len(g)
    try:
        with outside(g, top):
            out = rule(g, fn, args, kw, top, entry) if rule is not None else NotImplemented
            if out is NotImplemented:
                out = loop_method(g, fn, args, kw, top, entry)
        if isinstance(out, tuple):
            return tuple(tag(g, o, top, start) if type(o) is NodeId else o for o in out)
        return tag(g, out, top, start)
    except BaseException:
        g.truncate(start)
        raise


def sample_of(g, x, level: int, b: int):
    """Sample ``b`` of ``x`` along ``level`` (which is inactive: seen one level
    out, a batched NodeId has that axis first): a NodeId (a select), a
    `BatchedInts` with the level's axis taken, or ``x`` itself if unbatched."""
    if type(x) is BatchedInts:
        if level not in x.levels:
            return x
        pos = x.levels.index(level)
        rest = tuple(lv for lv in x.levels if lv != level)
        arr = np.take(x.physical, b, axis=pos)
        return BatchedInts(arr, rest) if rest else arr
    if type(x) is NodeId and level in g.__dict__.get("_vmap_tags", {}).get(x.index, ()):
        return g.select(x, 0, b)
    return x


def loop_method(g, fn, args, kw, level: int, entry):
    """A method call batched by looping over the samples of ``level`` and
    stacking each output (the batching of last resort: always right)."""
    outs = []
    for b in range(entry.size):
        a_b = [sample_of(g, a, level, b) for a in args]
        k_b = {k: sample_of(g, v, level, b) for k, v in kw.items()}
        outs.append(fn(g, *a_b, **k_b))
    if isinstance(outs[0], tuple):
        return tuple(_stack_outputs(g, [o[k] for o in outs], level, fn)
                     for k in range(len(outs[0])))
    return _stack_outputs(g, outs, level, fn)


def _stack_outputs(g, outs, level, fn):
    """Per-sample results stacked: nodes as a node, integer arrays as
    `BatchedInts` of ``level``, other arrays as an array."""
    if type(outs[0]) is NodeId:
        return g.stack(outs, 0)
    if isinstance(outs[0], (np.ndarray, np.generic)):
        arr = np.stack([np.asarray(o) for o in outs])
        if arr.dtype.kind in "iu":
            arr.flags.writeable = False
            return BatchedInts(arr, (level,))
        return arr
    raise BatchingError(f"vmap: cannot stack the per-sample results of {fn.__name__} "
                        f"({type(outs[0]).__name__})", op=fn.__name__)
