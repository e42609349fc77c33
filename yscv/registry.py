"""The dispatch tables: one forward and one backward function per ``Op``.

How to add an op (the full checklist is docs/adding_an_op.md):

1. Add a member to `yscv.node.Op` in its category's value range.
2. In ``yscv/ops/<category>.py`` write the pure forward
   ``forward(attrs, *input_values) -> (value, saved)`` and register it with
   ``@register_forward(Op.X)``; add the Graph method to the category mixin:
   it validates arguments (raising before anything is appended) and calls
   ``self._apply(Op.X, inputs, attrs)``.
3. In ``yscv/backward/<category>.py`` write
   ``backward(grad, inputs, value, attrs, saved, needs) -> tuple`` returning
   one gradient (or None) per input, in the inputs' order (``needs[k]`` is
   False when input k does not require grad: skip that work), and register it with
   ``@register_backward(Op.X)``. Never accumulate or unbroadcast there: the
   walk in walk.py does that once, centrally.
4. Next to it, write the recorded backward (the same math in graph ops, so
   that ``create_graph=True`` can differentiate it again):
   ``recorded(G, grad, inputs, out, attrs, saved, needs) -> tuple`` of
   NodeIds (or None), built only with ``G``'s public op methods, registered
   with ``@register_recorded(Op.X)``. A fused op whose backward is not short
   in graph ops registers a composite instead (``backward/_recorded.py``).
   Optional: ``register_ufunc(Op.X, ufunc)`` when the forward is exactly
   that ufunc for operands of one ndim (see `UFUNC`); the rule must
   then return elementwise gradients (the walk does not check them).
5. Add an ``OpCase`` row in ``tests/ops/test_<category>.py`` (its second-
   order column runs ``gradgradcheck`` on the row).

Forward functions must be pure: the same input values and attrs give the same
value, because activation checkpointing replays them. Randomness (dropout) is
an attribute (its seed). ``saved`` is whatever the backward needs beyond the
input values and the output value (or None); it is released with the node.

The tables are lists indexed by ``int(op)`` so that dispatch in the backward
walk is one list index (hashing an Enum member is a Python-level call).
"""
from __future__ import annotations

from .node import Op

_TABLE_SIZE = max(int(op) for op in Op) + 1

#: int(op) -> forward(attrs, *input_values) -> (value, saved)
FORWARD: list = [None] * _TABLE_SIZE
#: int(op) -> backward(grad, input_values, value, attrs, saved, needs) -> tuple of grads
BACKWARD: list = [None] * _TABLE_SIZE
#: int(op) -> recorded(G, grad, inputs, out, attrs, saved, needs) -> tuple of NodeIds
#: (or None): the same backward said in graph ops of ``G``, appended to the
#: graph by the walk when ``create_graph=True`` (docs/higher_order.md)
RECORDED: list = [None] * _TABLE_SIZE
#: int(op) -> the NumPy ufunc that is op's whole forward for operands of one
#: ndim (no attributes, nothing saved), or None. The one- and two-input hot
#: paths (``Graph._apply1`` / ``_apply2``) call it directly, without the
#: forward's Python frame and its ``(value, saved)`` tuple; the forward in
#: `FORWARD` stays the definition (checkpointing replays it) and gives
#: the same bits (tests/test_graph.py checks every entry). The op's backward
#: rule must be elementwise: for inputs of the output's shape it returns
#: ndarrays of that shape and the graph dtype, which the walk then does not
#: check (the plain flag of the node record, ``yscv.node.N_PLAIN``).
UFUNC: list = [None] * _TABLE_SIZE


def register_forward(op: Op):
    """Decorator: register ``fn`` as the forward of ``op``."""

    def deco(fn):
        if FORWARD[int(op)] is not None:
            raise RuntimeError(f"forward for {op!r} registered twice")
        FORWARD[int(op)] = fn
        return fn

    return deco


def register_backward(op: Op):
    """Decorator: register ``fn`` as the backward of ``op``."""

    def deco(fn):
        if BACKWARD[int(op)] is not None:
            raise RuntimeError(f"backward for {op!r} registered twice")
        BACKWARD[int(op)] = fn
        return fn

    return deco


def register_ufunc(op: Op, ufunc) -> None:
    """Declare ``ufunc`` the whole forward of ``op`` for operands of one ndim
    (see `UFUNC`); ``op``'s forward must be registered already and take
    no attributes."""
    if FORWARD[int(op)] is None:
        raise RuntimeError(f"ufunc form for {op!r} registered before its forward")
    if UFUNC[int(op)] is not None:
        raise RuntimeError(f"ufunc form for {op!r} registered twice")
    UFUNC[int(op)] = ufunc


def register_recorded(op: Op):
    """Decorator: register ``fn`` as the recorded backward of ``op``:
    ``fn(G, grad, inputs, out, attrs, saved, needs)`` gets the graph ``G``,
    the gradient ``grad`` of the output and the NodeIds ``inputs`` and
    ``out``, and returns one NodeId (or None) per input, built with ``G``'s
    public ops so that it is differentiable again."""

    def deco(fn):
        if RECORDED[int(op)] is not None:
            raise RuntimeError(f"recorded backward for {op!r} registered twice")
        RECORDED[int(op)] = fn
        return fn

    return deco


def missing_recorded() -> list:
    """Op members (other than LEAF) lacking a recorded backward."""
    return [op for op in Op if op is not Op.LEAF and RECORDED[int(op)] is None]


def missing_ops() -> list:
    """Op members (other than LEAF) lacking a forward or a backward."""
    return [
        op
        for op in Op
        if op is not Op.LEAF and (FORWARD[int(op)] is None or BACKWARD[int(op)] is None)
    ]


def check_complete() -> None:
    """Raise ImportError unless every Op has a forward and a backward."""
    missing = missing_ops()
    if missing:
        names = ", ".join(op.name for op in missing)
        raise ImportError(f"yscv: ops without a registered forward/backward: {names}")
