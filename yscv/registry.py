"""The dispatch tables: one forward and one backward function per ``Op``.

How to add an op (the full checklist is docs/adding_an_op.md):

1. Add a member to `yscv.node.Op` in its category's value range.
2. In ``yscv/ops/<category>.py`` write the pure forward
   ``forward(attrs, *input_values) -> (value, saved)`` and register it with
   ``@register_forward(Op.X)``; add the Graph method to the category mixin:
   it validates arguments (raising before anything is appended) and calls
   ``self._apply(Op.X, inputs, attrs)``.
3. In ``yscv/backward/<category>.py`` write its ONE rule,
   ``rule(ns, grad, inputs, out, attrs, saved, needs) -> tuple``, returning
   one gradient (or None) per input, in the inputs' order (``needs[k]`` is
   False when input k does not require grad: skip that work), built from the
   namespace ``ns`` (yscv/engine/namespace/__init__.py: ``ns.mul``, ``ns.where`` ...,
   ``ns.const`` for masks), and register it with ``@register_rule(Op.X)``
   (or the one-line helpers of backward/_rules.py). The first-order walks
   run it on arrays, ``create_graph=True`` on the graph. Never accumulate or
   unbroadcast there: the walk's schedule (yscv/engine/schedule.py) does that once.
4. A fused op whose rule calls a kernel instead registers a composite (its
   forward in primitive graph ops, `register_composite`); its recorded
   gradients are then `Op.VJP` nodes. Optional: ``register_ufunc(Op.X,
   ufunc)`` when the forward is exactly that ufunc for operands of one ndim
   (see `UFUNC`); the rule must then return elementwise gradients (the walk
   does not check them).
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

from .op import Op

_TABLE_SIZE = max(int(op) for op in Op) + 1

#: int(op) -> forward(attrs, *input_values) -> (value, saved)
FORWARD: list = [None] * _TABLE_SIZE
#: int(op) -> the op's one backward rule, ``rule(ns, grad, inputs, out,
#: attrs, saved, needs) -> tuple``: one gradient (or None) per input, written
#: against the namespace ``ns`` (yscv/engine/namespace/__init__.py) that two interpreters
#: implement -- arrays (``inputs`` and ``out`` are values) and the graph
#: (``create_graph=True``: NodeIds, the gradients recorded as nodes)
RULES: list = [None] * _TABLE_SIZE
#: int(op) -> what the array walks call, with the same signature: the rule
#: itself, or a written-out array copy of it on the per-node hot path
#: (`register_rule` ``array=``), held bit for bit to the rule by
#: tests/test_rule_flags.py
BACKWARD: list = [None] * _TABLE_SIZE
#: int(op) -> ``build(G, *inputs, attrs) -> NodeId``: a fused op's forward
#: restated with primitive graph ops. Its recorded backward is then not the
#: rule under the graph interpreter: each input gradient is one `Op.VJP`
#: node whose value is the array rule's (the same bits as a first-order
#: walk) and whose own derivative is the composite's
COMPOSITES: list = [None] * _TABLE_SIZE
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
#: int(op) -> the op's batching rule for `yscv.func.vmap`,
#: ``rule(g, op, inputs, batched, attrs, level) -> NodeId``: the op applied to
#: operands of which those with ``batched[k]`` carry the vmap axis first
#: (yscv/engine/batching.py), built from graph ops; the returned node has the
#: vmap axis first. ``rule.how`` says how ("fold": the axis moved into the
#: op's own batch, groups or leading axes, one call; "loop": one call per
#: sample, stacked). yscv/batching/ holds them.
BATCHING: list = [None] * _TABLE_SIZE


def register_forward(op: Op):
    """Decorator: register ``fn`` as the forward of ``op``."""

    def deco(fn):
        if FORWARD[int(op)] is not None:
            raise RuntimeError(f"forward for {op!r} registered twice")
        FORWARD[int(op)] = fn
        return fn

    return deco


def register_rule(op: Op, array=None):
    """Decorator: register ``rule(ns, grad, inputs, out, attrs, saved, needs)``
    as the one backward rule of ``op`` (see `RULES`). ``array``: a
    written-out copy of the rule for arrays only (the hottest ops), which the
    array walks call instead; it must give the rule's bits."""

    def deco(rule):
        if RULES[int(op)] is not None:
            raise RuntimeError(f"backward rule for {op!r} registered twice")
        RULES[int(op)] = rule
        BACKWARD[int(op)] = rule if array is None else array
        return rule

    return deco


def register_composite(op: Op, build=None):
    """Declare ``build(G, *inputs, attrs) -> NodeId`` the composite of fused
    ``op`` (see `COMPOSITES`); without ``build``, a decorator."""
    if build is None:
        def deco(fn):
            register_composite(op, fn)
            return fn
        return deco
    if COMPOSITES[int(op)] is not None:
        raise RuntimeError(f"composite for {op!r} registered twice")
    COMPOSITES[int(op)] = build
    return build


def register_batching(op: Op, how: str = "fold"):
    """Decorator: register ``rule(g, op, inputs, batched, attrs, level)`` as
    the batching rule of ``op`` (see `BATCHING`); ``how`` is "fold", "loop"
    or "refused"."""
    if how not in ("fold", "loop", "refused"):
        raise ValueError(f"register_batching: how must be 'fold', 'loop' or 'refused', "
                         f"got {how!r}")

    def deco(rule):
        if BATCHING[int(op)] is not None:
            raise RuntimeError(f"batching rule for {op!r} registered twice")
        BATCHING[int(op)] = rule
        BATCHING_HOW[int(op)] = how
        return rule

    return deco


#: int(op) -> "fold", "loop" (how its batching rule works) or "refused" (the
#: rule raises `BatchingError`: a user op), None without one
BATCHING_HOW: list = [None] * _TABLE_SIZE
#: Graph method name -> ``rule(g, method, args, kwargs, level, entry)``: the
#: batching of an op method given a batched integer array (labels, indices;
#: `yscv.engine.batching.BatchedInts`); a method without one loops
BATCHING_METHODS: dict = {}


def register_ufunc(op: Op, ufunc) -> None:
    """Declare ``ufunc`` the whole forward of ``op`` for operands of one ndim
    (see `UFUNC`); ``op``'s forward must be registered already and take
    no attributes."""
    if FORWARD[int(op)] is None:
        raise RuntimeError(f"ufunc form for {op!r} registered before its forward")
    if UFUNC[int(op)] is not None:
        raise RuntimeError(f"ufunc form for {op!r} registered twice")
    UFUNC[int(op)] = ufunc


def written_out() -> list:
    """Op members whose array walks call a written-out copy of the rule."""
    return [op for op in Op if RULES[int(op)] is not None and BACKWARD[int(op)] is not RULES[int(op)]]


def missing_ops() -> list:
    """Op members (other than LEAF) lacking a forward or a backward."""
    return [
        op
        for op in Op
        if op is not Op.LEAF and (FORWARD[int(op)] is None or RULES[int(op)] is None)
    ]


def check_complete() -> None:
    """Raise ImportError unless every Op has a forward and a backward."""
    missing = missing_ops()
    if missing:
        names = ", ".join(op.name for op in missing)
        raise ImportError(f"yscv: ops without a registered forward/backward: {names}")
