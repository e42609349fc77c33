"""The transforms that take primals (and tangents) as torch.func does:
`vjp`, `jvp`, `hvp`. Primals and tangents are pytrees of arrays (or of
NodeIds in the graph form ``(g, *nodes)``)."""
from __future__ import annotations

import numpy as np

from ..engine.graph import Graph
from ..node import NodeId
from . import pytree
from .calling import (_lift, _as_nodes, _call, _check_arity, _contract, _enter_arrays, _grads, _scalar,
                      _signature, _Wrt, _wrt, _zeros)

__all__ = ["vjp", "jvp", "hvp"]


def _primal_graph(f, primals, fname, forms):
    """(graph, args, wrt, arrays_out): the graph form when primals[0] is a
    Graph. Every leaf of every primal is differentiated (`_Wrt`). ``f``'s
    arity is checked first (TypeError naming the calling ``forms``)."""
    graph_form = bool(primals) and isinstance(primals[0], Graph)
    _check_arity(f, _signature(f, fname), len(primals) - graph_form, fname, forms)
    if graph_form:
        g = primals[0]
        args = _as_nodes(g, primals[1:], g.constant)
        args, wrt = _wrt(g, args, range(len(args)), fname)
        return g, args, wrt, False
    if not primals:
        raise ValueError(f"{fname}: give at least one primal")
    g, args = _enter_arrays(primals)
    wrt = _Wrt()
    for k, a in enumerate(args):
        leaves, spec = pytree.flatten(a)
        for path, n in zip(pytree.leaf_paths(spec), leaves):
            if type(n) is not NodeId:
                raise TypeError(f"{fname}: primal {k}{path} is not a floating-point array "
                                f"({type(n).__name__}); every primal is differentiated")
        wrt.add(leaves, spec)
    return g, args, wrt, True


def vjp(f, *primals, has_aux: bool = False):
    """``(out, vjp_fn)`` as torch.func.vjp: ``vjp_fn(cotangent)`` returns a
    tuple with one gradient per primal (a pytree for a pytree primal).
    Arrays in, arrays out; or ``vjp(f, g, *nodes)`` on a graph, where
    ``vjp_fn`` returns recorded nodes (and accepts a NodeId cotangent)."""
    g, args, wrt, arrays = _primal_graph(f, primals, "vjp",
                                         "vjp(f, *arrays) or vjp(f, g, *nodes)")
    out, aux = _call(f, g, args, has_aux, "vjp")

    def vjp_fn(cotangent):
        if not wrt.flat:
            return tuple(wrt.split([]))
        if not g.requires_grad(out):
            res = tuple(_zeros(g, n.shape) for n in wrt.flat)
        elif arrays:
            return tuple(wrt.split(list(g.gradients(out, wrt.flat, grad=cotangent))))
        else:
            res = g.gradients(out, wrt.flat, grad=cotangent, create_graph=True)
        res = tuple(wrt.split(list(res)))
        return pytree.to_arrays(res) if arrays else res

    first = pytree.to_arrays(out) if arrays else out
    if has_aux:
        return first, vjp_fn, (pytree.to_arrays(aux) if arrays else aux)
    return first, vjp_fn


def _tangent_nodes(g, tangents, args, wrt, fname):
    """The tangents' leaves as nodes, in ``wrt.flat``'s order: one tangent
    per primal, of the primal's structure and shapes (ValueError otherwise)."""
    if not isinstance(tangents, (tuple, list)) or len(tangents) != len(args):
        raise ValueError(f"{fname}: tangents must be a tuple with one entry per primal "
                         f"({len(args)}), got {type(tangents).__name__}")
    out = []
    for k, (t, spec) in enumerate(zip(tangents, wrt.specs)):
        leaves, tspec = pytree.flatten(t)
        if tspec != spec:
            raise ValueError(f"{fname}: tangent {k} has structure {pytree.describe(tspec)}, "
                             f"primal {k} has {pytree.describe(spec)}")
        start = sum(wrt.counts[:k])
        for j, (path, tl) in enumerate(zip(pytree.leaf_paths(spec), leaves)):
            n = wrt.flat[start + j]
            tn = tl if type(tl) is NodeId else g.constant(tl)
            if tuple(tn.shape) != tuple(n.shape):
                raise ValueError(f"{fname}: tangent {k}{path} has shape {tuple(tn.shape)}, "
                                 f"primal {k}{path} has {tuple(n.shape)}")
            out.append(tn)
    return out


def _jvp_nodes(g, out, wrt, tangents):
    """``J t`` as a recorded node: the gradient of ``<J^T u, t>`` in ``u``."""
    u = _lift(g, g.variable(np.zeros(out.shape, dtype=g.dtype)), out)
    if not wrt or not g.requires_grad(out):
        return _zeros(g, out.shape)
    vjps = g.gradients(out, wrt, grad=u, create_graph=True)
    s = _contract(g, vjps, tangents)
    if not g.requires_grad(s):
        return _zeros(g, out.shape)
    (jt,) = g.gradients(s, [u], create_graph=True)
    return jt


def _check_primals(primals, fname):
    if not isinstance(primals, (tuple, list)):
        raise ValueError(f"{fname}: primals must be a tuple, got {type(primals).__name__}")
    return tuple(primals)


def jvp(f, primals, tangents, has_aux: bool = False):
    """``(out, tangent_out)`` as torch.func.jvp: ``tangent_out = J t``
    (forward mode, through the transpose of the recorded VJP). ``primals``
    and ``tangents`` are tuples of arrays (or pytrees of them, of matching
    structures); or ``primals = (g, *nodes)``."""
    primals = _check_primals(primals, "jvp")
    g, args, wrt, arrays = _primal_graph(
        f, primals, "jvp", "jvp(f, arrays, tangents) or jvp(f, (g, *nodes), tangents)")
    tn = _tangent_nodes(g, tangents, args, wrt, "jvp")
    out, aux = _call(f, g, args, has_aux, "jvp")
    jt = _jvp_nodes(g, out, wrt.flat, tn)
    res = (out, jt) if not has_aux else (out, jt, aux)
    return pytree.to_arrays(res) if arrays else res


def hvp(f, primals, tangents):
    """``(out, hvp_out)``: the Hessian of the one-element ``f`` times the
    tangents (one per primal, a pytree for a pytree primal), by reverse
    over reverse."""
    primals = _check_primals(primals, "hvp")
    g, args, wrt, arrays = _primal_graph(
        f, primals, "hvp", "hvp(f, arrays, tangents) or hvp(f, (g, *nodes), tangents)")
    tn = _tangent_nodes(g, tangents, args, wrt, "hvp")
    out, _ = _call(f, g, args, False, "hvp")
    _scalar(out, "hvp")
    s = _contract(g, _grads(g, out, wrt.flat), tn)
    if arrays:
        res = g.gradients(s, wrt.flat) if s is not None and g.requires_grad(s) else \
            tuple(np.zeros(n.shape, dtype=g.dtype) for n in wrt.flat)
        return pytree.to_arrays(out), tuple(wrt.split(list(res)))
    res = _grads(g, s, wrt.flat) if s is not None else ()
    return out, tuple(wrt.split(list(res)))
