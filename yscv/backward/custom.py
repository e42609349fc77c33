"""Ops that users define (backward): ``Op.CUSTOM``'s rule is the user's
rule, against the same namespace as every built-in rule, so it runs on
arrays and on the graph (any order)."""
from __future__ import annotations

import numpy as np

from ..compute.arrays import broadcasts_to
from ..errors import ShapeError
from ..node import NodeId, Op
from ..registry import register_rule


@register_rule(Op.CUSTOM)
def custom_rule(ns, g, xs, y, attrs, saved, needs):
    """The user's rule (attrs.op.rule) with its attributes as a dict,
    checked: one gradient per input, nodes under the graph interpreter, shapes
    that sum back to the inputs'."""
    op = attrs.op
    grads = op.rule(ns, g, xs, y, attrs.kwargs, saved, needs)
    if not isinstance(grads, (tuple, list)) or len(grads) != len(xs):
        got = (f"{len(grads)} of them" if isinstance(grads, (tuple, list))
               else f"a {type(grads).__name__}")
        raise TypeError(f"{op.name}: rule must return a tuple of {len(xs)} gradients "
                        f"(one per input, or None), got {got}")
    graph = ns.is_graph
    for k, gk in enumerate(grads):
        if gk is None:
            continue
        if graph and type(gk) is not NodeId:
            raise TypeError(
                f"{op.name}: rule returned a {type(gk).__name__} for input {k} under "
                "create_graph=True; build every gradient with ns.<op>(...) (NumPy on "
                "ns.value(x) gives a constant the second derivative cannot see)")
        shape = ns.G._shape(gk.index) if graph else np.shape(gk)
        want = ns.G._shape(xs[k].index) if graph else xs[k].shape
        if shape != want and not broadcasts_to(shape, want):
            raise ShapeError(
                f"{op.name}: rule returned a gradient of shape {shape} for input {k} of "
                f"shape {want} (the input's shape, or one that broadcasts from it)",
                op=op.name, expected=want, got=shape)
    return tuple(grads)
