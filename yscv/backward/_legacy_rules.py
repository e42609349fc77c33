"""One-line backward rules for trivial ops (as autograd's ``defvjp`` and JAX's
``defjvp`` / ``deflinear``).

The dispatch table keeps one signature, ``backward(grad, inputs, value, attrs,
saved, needs) -> tuple``; these helpers build and register a function of that
signature around a small rule written like the math:

* ``unary(Op.EXP, lambda g, x, y, a: g * y)`` -- one input ``x``, output ``y``,
  attributes ``a``; the lambda returns the input's gradient.
* ``binary(Op.MUL, lambda g, a, b, y, at: g * b, lambda g, a, b, y, at: g * a)``
  -- two inputs; each lambda runs only when its input needs a gradient.
* ``linear(Op.SUB, 1, -1)`` -- output = sum of +-inputs: the gradient is ``g``
  or ``-g`` (no call at all; ``-g`` only when needed).

Each built function calls the rule once, so the per-node cost stays that of
a hand-written rule plus one Python call. Rules needing
``saved`` or one fused pass for several inputs are written out in full with
``@register_backward``, and so are the hottest ones (mul, tanh, sigmoid,
relu), where that one call measured ~2% of a scalar chain.
"""
from __future__ import annotations

import numpy as np

from ..registry import register_backward

__all__ = ["unary", "binary", "linear"]


def _register(op, rule):
    rule.__name__ = rule.__qualname__ = f"{op.name.lower()}_backward"
    register_backward(op)(rule)
    return rule


def unary(op, fn):
    """Register ``fn(g, x, y, attrs) -> gx`` as the backward of one-input ``op``."""

    def rule(g, inputs, out, attrs, saved, needs):
        return (fn(g, inputs[0], out, attrs),)

    return _register(op, rule)


def binary(op, fa, fb):
    """Register ``fa(g, a, b, y, attrs) -> ga`` and ``fb(...) -> gb`` as the
    backward of two-input ``op``; each runs only when its input needs a gradient."""

    def rule(g, inputs, out, attrs, saved, needs):
        a, b = inputs
        return (fa(g, a, b, out, attrs) if needs[0] else None,
                fb(g, a, b, out, attrs) if needs[1] else None)

    return _register(op, rule)


def linear(op, *signs):
    """Register the backward of ``op`` whose output is the sum of its inputs
    times ``signs`` (each +1 or -1): ``g`` or ``-g`` per input."""
    neg = np.negative
    if signs == (1, 1):
        def rule(g, inputs, out, attrs, saved, needs):
            return g, g
    elif signs == (1, -1):
        def rule(g, inputs, out, attrs, saved, needs):
            return g, (neg(g) if needs[1] else None)
    elif signs == (-1,):
        def rule(g, inputs, out, attrs, saved, needs):
            return (neg(g),)
    else:
        raise ValueError(f"linear: unsupported signs {signs} for {op!r}")
    return _register(op, rule)
