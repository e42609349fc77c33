"""``Op.VJP``: one input's gradient of a fused op, as a node.

A fused op with a composite (``registry.COMPOSITES``: its forward restated in
primitive ops) records each input gradient under ``create_graph=True`` as one
VJP node: its value is the array rule's (so the first-order bits are those of
a plain walk), its own derivative is the composite's second derivative.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import registry
from ...compute.arrays import sum_to_shape
from ...node import Op
from . import ARRAY   # defined before this module is imported


class VjpAttrs(NamedTuple):
    """A fused op's gradient for its input ``k`` as a node: the op, its
    attributes and saved data, and which of its inputs require grad. The
    node's inputs are ``(grad, out, *op_inputs)``."""

    op: int
    k: int
    attrs: object
    saved: object
    needs: tuple


def _vjp_forward(at: VjpAttrs, g, y, *xs):
    needs = tuple(j == at.k for j in range(len(xs)))
    grads = registry.BACKWARD[at.op](ARRAY, g, xs, y, at.attrs, at.saved, needs)
    gk = grads[at.k]
    shape = xs[at.k].shape
    if gk is None:
        return np.zeros(shape, dtype=g.dtype), None
    return sum_to_shape(np.asarray(gk), shape), None


registry.register_forward(Op.VJP)(_vjp_forward)


def _double_vjp(G, c, g, xs, at: VjpAttrs, needs):
    """On graph ``G``: the gradients of ``<c, d<g, f(xs)>/dx_k>`` with
    respect to ``g`` and each of ``xs`` (``needs`` per one of them), with
    ``f`` the op's composite."""
    build = registry.COMPOSITES[at.op]
    onehot = tuple(j == at.k for j in range(len(xs)))

    def first(G2, g2, *zs):
        gk = G2._recorded_vjp(lambda G3, *ws: build(G3, *ws, at.attrs), zs, g2, onehot)[at.k]
        if gk is None:   # the composite does not depend on x_k here
            gk = G2.constant(np.zeros(G2._shape(zs[at.k].index), dtype=G2.dtype))
        return gk

    return G._recorded_vjp(first, (g,) + tuple(xs), c, needs)


@registry.register_rule(Op.VJP)
def vjp_rule(ns, c, ins, out, at, saved, needs):
    """The VJP node's derivative is the composite's second derivative: on
    the graph it is recorded (so any order follows), on arrays it is
    evaluated on a scratch graph."""
    g, xs = ins[0], ins[2:]   # ins[1] is the op's output (its value only)
    need = (needs[0],) + tuple(needs[2:])
    if ns.is_graph:
        grads = _double_vjp(ns.G, c, g, xs, at, need)
        return (grads[0], None) + tuple(grads[1:])
    from . import scratch_graph

    G = scratch_graph(c.dtype)
    nodes = [G.variable(a) if r else G.constant(a) for a, r in zip((g,) + tuple(xs), need)]
    grads = _double_vjp(G, G.constant(c), nodes[0], nodes[1:], at, need)
    vals = tuple(None if n is None else np.array(G._values[n.index]) for n in grads)
    return (vals[0], None) + vals[1:]
