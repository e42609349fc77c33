"""Ops that users define: one forward on arrays and one backward rule.

``yscv.custom_op`` is yscv's ``torch.autograd.Function`` / ``jax.custom_vjp``
(docs/adding_an_op.md, "An op of your own"):

```python
def swish_forward(x, beta):                 # arrays in, an array out
    return x / (1 + np.exp(-beta * x))

def swish_rule(ns, g, xs, y, attrs, saved, needs):
    x, beta = xs                            # one gradient per input
    s = ns.sigmoid(ns.mul(beta, x))
    ...
swish = yscv.custom_op("swish", swish_forward, swish_rule)
y = swish(g, x, beta)                       # one node, Op.CUSTOM
```

The rule is written against the namespace ``ns`` of the built-in rules
(yscv/engine/namespace/__init__.py): the first-order walks run it on arrays, and
``create_graph=True`` runs it on the graph, so the op is differentiable to
any order, on the parallel walk, under checkpointing and in
`gradcheck`/`gradgradcheck`, with no second rule. The node records
``Op.CUSTOM``; its attributes (`CustomAttrs`) carry the op and the keyword
attributes of the call. ONNX export refuses it, naming it.
"""
from __future__ import annotations

import numbers

from .engine.graph import Graph
from .node import NodeId, Op
from .ops.custom import CustomAttrs

__all__ = ["custom_op", "CustomOp"]


class CustomOp:
    """A user-defined op (`custom_op` makes one); call it as
    ``op(g, *inputs, **attrs) -> NodeId``."""

    __slots__ = ("name", "forward", "rule", "saves", "__weakref__")

    def __init__(self, name: str, forward, rule, saves: bool = False):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"custom_op: name must be an identifier, got {name!r}")
        if not callable(forward):
            raise TypeError(f"custom_op {name}: forward must be callable, got "
                            f"{type(forward).__name__}")
        if not callable(rule):
            raise TypeError(f"custom_op {name}: rule must be callable, got "
                            f"{type(rule).__name__}")
        self.name = name
        self.forward = forward
        self.rule = rule
        self.saves = bool(saves)

    def __repr__(self) -> str:
        return f"yscv.custom_op({self.name!r})"

    def __call__(self, g, *inputs, **attrs) -> NodeId:
        """Apply the op to ``inputs`` (NodeIds of ``g`` or arrays, which become
        constants) with keyword attributes ``attrs`` (static: numbers,
        strings, tuples), appending one node."""
        if not isinstance(g, Graph):
            raise TypeError(f"{self.name}: the first argument must be the Graph, got "
                            f"{type(g).__name__}")
        if not inputs:
            raise TypeError(f"{self.name}: needs at least one input")
        for key, v in attrs.items():
            if not _static(v):
                raise TypeError(f"{self.name}: attribute {key}={v!r:.60} must be a number, "
                                "string, bool, None or a tuple of them (inputs that "
                                "carry gradients are positional)")
        # each input checked (and an array-like converted) here, so that an error
        # names this op rather than "custom"; nothing is appended before the forward
        operands = []
        for k, x in enumerate(inputs):
            i, v, _ = g._operand(x, self.name, f"input {k}")
            operands.append(x if i >= 0 else v)
        return g._apply(Op.CUSTOM, operands, CustomAttrs(self, tuple(sorted(attrs.items()))))


def _static(v) -> bool:
    if v is None or isinstance(v, (numbers.Number, str, bool)):
        return True
    return isinstance(v, tuple) and all(_static(e) for e in v)


def custom_op(name: str, forward, rule, *, saves: bool = False) -> CustomOp:
    """An op of your own, with its derivative (module docstring).

    Args:
        name: the op's name, in errors and in ``g.summary()``.
        forward: ``forward(*arrays, **attrs) -> array`` (with ``saves=True``:
            ``-> (array, saved)``), a pure function of the input values (it is
            replayed by checkpointing). It must return the inputs' dtype.
        rule: ``rule(ns, g, xs, y, attrs, saved, needs) -> tuple``, one
            gradient (or None) per input, built from ``ns`` (yscv/engine/namespace/__init__.py:
            ``ns.mul``, ``ns.sigmoid``, ``ns.const``, ...); ``attrs`` is the dict
            of keyword attributes; ``needs[k]`` is False when input k needs no
            gradient. Gradients may be at the broadcast shape: the walk sums
            them back to each input's shape.
        saves: whether ``forward`` returns ``(value, saved)``; ``saved`` is a
            constant for differentiation (a mask, an index), so values the
            second derivative must see are recomputed from ``xs`` in the rule.

    Raises (each message starts with the op's name; a failing call appends
    nothing): ValueError for a name that is not an identifier; TypeError for a
    non-callable forward or rule, an attribute that is not static, an input
    that is not numeric, a forward returning another dtype than its inputs', a
    rule returning the wrong number of gradients (or, under
    ``create_graph=True``, a NumPy array instead of a node); ShapeError for a
    gradient of a shape that does not sum back to its input's.
    """
    return CustomOp(name, forward, rule, saves)
