"""One-line backward rules for trivial ops (as autograd's ``defvjp`` and JAX's
``defjvp`` / ``deflinear``).

Every rule has one signature, ``rule(ns, g, xs, y, attrs, saved, needs) ->
tuple`` (yscv/engine/namespace/__init__.py); these helpers build and register a rule of
that signature around a small formula written like the math:

* ``unary(Op.EXP, lambda ns, g, x, y, a: ns.mul(g, y))`` -- one input ``x``,
  output ``y``, attributes ``a``; the lambda returns the input's gradient.
* ``binary(Op.MUL, lambda ns, g, a, b, y, at: ns.mul(g, b), lambda ns, g, a, b,
  y, at: ns.mul(g, a))`` -- two inputs; each lambda runs only when its input
  needs a gradient.
* ``linear(Op.SUB, 1, -1)`` -- output = sum of +-inputs: the gradient is ``g``
  or ``-g`` (no call at all; ``-g`` only when needed).

Each built rule calls the formula once, so the per-node cost stays that of a
hand-written rule plus one Python call. Rules needing ``saved`` or one fused
pass for several inputs are written out in full with ``@register_rule``.
"""
from __future__ import annotations

from ..registry import register_rule

__all__ = ["unary", "binary", "linear"]


def _register(op, rule, array=None):
    rule.__name__ = rule.__qualname__ = f"{op.name.lower()}_rule"
    register_rule(op, array=array)(rule)
    return rule


def unary(op, fn):
    """Register ``fn(ns, g, x, y, attrs) -> gx`` as the rule of one-input ``op``."""

    def rule(ns, g, inputs, out, attrs, saved, needs):
        return (fn(ns, g, inputs[0], out, attrs),)

    return _register(op, rule)


def binary(op, fa, fb):
    """Register ``fa(ns, g, a, b, y, attrs) -> ga`` and ``fb(...) -> gb`` as the
    rule of two-input ``op``; each runs only when its input needs a gradient."""

    def rule(ns, g, inputs, out, attrs, saved, needs):
        a, b = inputs
        return (fa(ns, g, a, b, out, attrs) if needs[0] else None,
                fb(ns, g, a, b, out, attrs) if needs[1] else None)

    return _register(op, rule)


def linear(op, *signs):
    """Register the rule of ``op`` whose output is the sum of its inputs
    times ``signs`` (each +1 or -1): ``g`` or ``-g`` per input."""
    if signs == (1, 1):
        def rule(ns, g, inputs, out, attrs, saved, needs):
            return g, g
    elif signs == (1, -1):
        def rule(ns, g, inputs, out, attrs, saved, needs):
            return g, (ns.neg(g) if needs[1] else None)
    elif signs == (-1,):
        def rule(ns, g, inputs, out, attrs, saved, needs):
            return (ns.neg(g),)
    else:
        raise ValueError(f"linear: unsupported signs {signs} for {op!r}")
    return _register(op, rule)
