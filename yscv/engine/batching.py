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

import numpy as np

from .. import registry
from ..errors import BatchingError, NonScalarTargetError
from ..node import NodeId, N_SHAPE, Op
from .batching_levels import (BatchedInts, active_levels, active_tag, enter_level, exit_level,
                              is_batched, level_entry, level_size, lift, outside, physical,
                              set_class_factory, tag, top_level, variable_like, _alias, _tags)

__all__ = ["BatchingGraph", "BatchedInts", "batching_class", "enter_level", "exit_level",
           "active_levels", "active_tag", "top_level", "lift", "outside", "physical",
           "level_size", "level_entry", "tag", "is_batched", "variable_like"]

_BATCHING = registry.BATCHING
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

    def gradient_constants(self, target, inputs, grad=None):
        """`gradients` by the first-order (array) walk, each result a constant
        node batched as its input: for a transform whose results are never
        differentiated (`yscv.func.calling.FINAL`)."""
        return self.gradients(target, inputs, grad, create_graph=True, _constants=True)

    def gradients(self, target, inputs, grad=None, create_graph: bool = False,
                  _constants: bool = False):
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
                if _constants:
                    if type(seed) is NodeId:
                        seed = np.array(self._values[seed.index])
                    # the walk's arrays are fresh (it copies what it must):
                    # constant leaves holding them, not copies
                    res = tuple(self._leaf(a, False) for a in
                                base.gradients(self, target, ins, grad=seed))
                else:
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


set_class_factory(batching_class)
