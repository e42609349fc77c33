"""Helpers for recorded backward rules (``create_graph=True``).

A recorded rule says an op's backward in the graph's own ops, so the walk
(yscv/walk_recorded.py) can append it and differentiate it again. It has the
signature ``rule(G, gy, xs, y, attrs, saved, needs) -> tuple`` of NodeIds (or
None): ``G`` the graph, ``gy`` the output's gradient node, ``xs`` the input
NodeIds, ``y`` the output NodeId. Array-valued facts that are constant for
differentiation (a kink's mask, pooling's argmax, dropout's mask) enter as
``G.constant`` nodes, exactly as PyTorch's double backward treats them.

* ``recorded_unary(Op.EXP, lambda G, gy, x, y, a: G.mul(gy, y))``
* ``recorded_binary(Op.MUL, fa, fb)``: each runs only when its input needs it.
* ``composite(Op.LAYER_NORM, build)``: for a fused op, ``build(G, *xs, attrs)``
  recomputes its output from primitive ops; the recorded backward is that
  composite's own recorded walk against ``gy`` (exact, at the composite's
  cost, paid only with ``create_graph=True``).
"""
from __future__ import annotations

from ..registry import register_composite, register_recorded

__all__ = ["recorded_unary", "recorded_binary", "recorded_linear", "composite"]


def _register(op, rule):
    rule.__name__ = rule.__qualname__ = f"{op.name.lower()}_recorded"
    register_recorded(op)(rule)
    return rule


def recorded_unary(op, fn):
    """Register ``fn(G, gy, x, y, attrs) -> gx`` as ``op``'s recorded backward."""

    def rule(G, gy, xs, y, attrs, saved, needs):
        return (fn(G, gy, xs[0], y, attrs),)

    return _register(op, rule)


def recorded_binary(op, fa, fb):
    """Register ``fa(G, gy, a, b, y, attrs)`` / ``fb(...)`` for two-input ``op``."""

    def rule(G, gy, xs, y, attrs, saved, needs):
        a, b = xs
        return (fa(G, gy, a, b, y, attrs) if needs[0] else None,
                fb(G, gy, a, b, y, attrs) if needs[1] else None)

    return _register(op, rule)


def recorded_linear(op, *signs):
    """``op``'s output is the sum of its inputs times ``signs`` (+1 or -1)."""

    def rule(G, gy, xs, y, attrs, saved, needs):
        return tuple((gy if s > 0 else G.neg(gy)) if need else None
                     for s, need in zip(signs, needs))

    return _register(op, rule)


def composite(op, build):
    """Declare ``build(G, *xs, attrs) -> NodeId`` fused ``op``'s forward
    written with primitive ops (registry.COMPOSITES)."""
    register_composite(op, build)
    return build
