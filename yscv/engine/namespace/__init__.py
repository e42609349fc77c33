"""The two interpreters of a backward rule: arrays and the graph.

Every op's backward is one rule (``registry.RULES``)::

    rule(ns, g, xs, y, attrs, saved, needs) -> one gradient (or None) per input

written against ``ns``, a small namespace named like the Graph's own ops
(``ns.mul``, ``ns.where``, ``ns.sum``, ``ns.tanh_backward``,
``ns.conv_grad_input`` ...), plus three words of its own:

* ``ns.const(a)``: an array that is constant for differentiation (a kink's
  mask, an argmax, a dropout mask): itself for arrays, a constant node for
  the graph;
* ``ns.value(x)``: the array behind ``x`` (to compute such a mask);
* ``ns.is_graph``: False for arrays, True for the graph.

`ARRAY` (``ArrayNS``) runs a rule on values: the first-order walks
(yscv/engine/walk.py, yscv/engine/walk_parallel.py). ``GraphNS(G)`` runs the same rule on
NodeIds of ``G``, so the gradients it returns are nodes, differentiable again
(``create_graph=True``, yscv/engine/walk_recorded.py). Because a graph op's value is
its forward on the operands' values, and ArrayNS computes each name with
that same forward (directly for the common names, through a scratch graph
for the rest), the first-order bits of a rule do not depend on which
interpreter ran it (tests/test_rule_flags.py).

A fused op with a composite (``registry.COMPOSITES``: its forward restated in
primitive ops) records each input gradient as one ``Op.VJP`` node: its value
is the array rule's, its own derivative that of the composite (`vjp_rule`).
"""
from __future__ import annotations


import collections

import numpy as np


from .array_elementwise import ArrayElementwise
from .array_activation import ArrayActivation
from .array_reduce import ArrayReduce
from .array_linalg import ArrayLinalg
from .array_shape import ArrayShape
from .array_indexing import ArrayIndexing
from .array_conv import ArrayConv
from .array_pool import ArrayPool
from .array_norm import ArrayNorm
from .array_recurrent import ArrayRecurrent
from .array_attention import ArrayAttention
from .array_loss import ArrayLoss

__all__ = ["ARRAY", "ArrayNS", "GraphNS"]


#: how often each name ran through the scratch graph (`ArrayNS.__getattr__`):
#: tests/test_rule_flags.py checks that no built-in rule's first-order walk
#: takes that slow way
FALLBACK_NAMES: collections.Counter = collections.Counter()


class ArrayNS(ArrayElementwise, ArrayActivation, ArrayReduce, ArrayLinalg, ArrayShape, ArrayIndexing, ArrayConv, ArrayPool, ArrayNorm, ArrayRecurrent, ArrayAttention, ArrayLoss):
    """The array interpreter: each name computes what the Graph op of that
    name computes on values, with the op's own forward. Names not written
    here run the Graph op on a scratch graph of the operands' dtype (the same
    forward, so the same bits; slower, for rules off the hot path)."""

    is_graph = False

    # the names of each category's ops: yscv/engine/namespace/array_<category>.py

    @staticmethod
    def const(a):
        return a

    @staticmethod
    def value(x):
        return x

    @staticmethod
    def zeros_like(x):
        return np.zeros(x.shape, dtype=x.dtype)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        def through_graph(*args, **kwargs):
            FALLBACK_NAMES[name] += 1
            G = scratch_graph(_float_dtype(args, kwargs, name))
            out = getattr(G, name)(*args, **kwargs)
            if isinstance(out, tuple):
                return tuple(G._values[o.index] for o in out)
            return G._values[out.index]

        through_graph.__name__ = name
        return through_graph


#: the Graph class: set by yscv/engine/graph.py where it is defined (the graph
#: imports this package, never the reverse), for `scratch_graph`
GRAPH_CLASS = None


def scratch_graph(dtype):
    """A new, empty Graph of ``dtype``: the array interpreter's fallback and
    the VJP rule's array branch evaluate graph ops on one."""
    return GRAPH_CLASS(dtype=dtype)


def _float_dtype(args, kwargs, name):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            return a.dtype
    raise TypeError(f"ns.{name}: no floating-point array operand to take the dtype from")


#: the array interpreter (stateless: one instance for every walk and thread)
ARRAY = ArrayNS()


class GraphNS:
    """The graph interpreter: each name is the Graph op of that name on
    ``G``, so a rule run through it appends its gradients as nodes."""

    is_graph = True

    def __init__(self, G):
        self.G = G

    def const(self, a):
        return self.G.constant(a)

    def value(self, x):
        return self.G.value(x)

    def zeros_like(self, x):
        G = self.G
        return G.constant(np.zeros(G._shape(x.index), dtype=G.dtype))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        fn = getattr(self.G, name)
        setattr(self, name, fn)   # bound once per walk
        return fn



from .vjp import VjpAttrs  # noqa: E402,F401  (registers Op.VJP)
