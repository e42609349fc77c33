"""Function transforms, composable as in ``torch.func`` and JAX (docs/higher_order.md).

A function is ``f(g, *args) -> NodeId`` (the form `yscv.gradcheck`
takes), or ``-> (NodeId, aux)`` with ``has_aux=True``. Every transform
returns a function callable in two forms:

* inside a graph, ``F(g, *nodes)``: the result is recorded on ``g``
  (``create_graph=True`` underneath), so transforms compose:
  ``grad(grad(f))``, ``jacfwd(jacrev(f))``;
* with arrays alone, ``F(*arrays)``: a fresh graph in the arrays' float
  dtype (float64 if any argument is float64, else float32), results as
  arrays.

``argnums`` is an int (one result) or a tuple of ints (a tuple of results).
Jacobians have torch.func's shapes: ``out.shape + in.shape`` (empty ones
too). A function of the wrong arity is a TypeError naming it, raised before
anything is recorded.

Each transform differentiates with respect to its own identity node of each
differentiated argument (JAX's tracer levels): a node ``f`` closes over is
never taken for the argument, even when it is the node passed in, so inner
transforms may close over an outer transform's argument.

Forward mode (`jvp`, `jacfwd`) is the transpose of reverse mode:
the recorded vector-Jacobian product ``u -> J^T u`` is linear in ``u``, so
its own gradient against a tangent ``t`` is ``J t``. It is exact, reuses the
recorded backward rules of every op (no second rule table to keep in step),
and costs one recorded backward plus one more reverse walk over it.
"""
from __future__ import annotations

import inspect

import numpy as np

from .errors import NonScalarTargetError
from .engine.graph import Graph
from .node import NodeId

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp"]


# ------------------------------------------------------------------ plumbing
def _check_argnums(argnums, nargs: int, fname: str) -> tuple:
    """argnums as a tuple of valid positions (ValueError otherwise)."""
    items = (argnums,) if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool) \
        else argnums
    if not isinstance(items, tuple) or not items or any(
            isinstance(a, bool) or not isinstance(a, (int, np.integer)) for a in items):
        raise ValueError(f"{fname}: argnums must be an int or a non-empty tuple of ints, "
                         f"got {argnums!r}")
    out = []
    for a in items:
        k = int(a) + nargs if int(a) < 0 else int(a)
        if not 0 <= k < nargs:
            raise ValueError(f"{fname}: argnums {a} is out of range for {nargs} argument(s)")
        out.append(k)
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}: argnums {argnums!r} repeats an argument")
    return tuple(out)


def _graph_dtype(arrays) -> np.dtype:
    for a in arrays:
        if np.asarray(a).dtype == np.float64:
            return np.dtype(np.float64)
    return np.dtype(np.float32)


def _to_arrays(x):
    """NodeIds (possibly nested in tuples, named tuples, lists and dicts) to
    fresh arrays; the containers keep their kind and keys."""
    if type(x) is NodeId:
        return np.array(x.graph.value(x), copy=True)
    if isinstance(x, tuple):
        items = [_to_arrays(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, list):
        return [_to_arrays(v) for v in x]
    if isinstance(x, dict):
        return {k: _to_arrays(v) for k, v in x.items()}
    return x


def _signature(f, fname: str):
    """f's signature, to check its arity before a graph is touched (None for
    a callable without one, a builtin say: its own error speaks then)."""
    if not callable(f):
        raise TypeError(f"{fname}: f must be a function f(g, *nodes) -> NodeId, "
                        f"got {type(f).__name__}")
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):
        return None


def _check_arity(f, sig, nargs: int, fname: str, forms: str) -> None:
    """TypeError naming ``f`` and the calling forms unless ``f(g, *nargs
    nodes)`` binds: a function written without its graph parameter, or a
    transformed function called with the wrong number of arguments."""
    if sig is None:
        return
    try:
        sig.bind(*range(nargs + 1))
    except TypeError as exc:
        name = getattr(f, "__qualname__", None) or repr(f)
        raise TypeError(
            f"{fname}: f = {name}{sig} cannot be called with the graph and {nargs} "
            f"argument(s) ({exc}); a function to transform takes the graph first, "
            "f(g, *nodes) -> NodeId (or -> (NodeId, aux) with has_aux=True), and the "
            f"transformed function is called {forms}") from None


_DUAL_FORMS = "F(g, *nodes) inside a graph or F(*arrays)"


def _dual_form(body, f, fname: str):
    """A transformed function callable as ``F(g, *nodes)`` (recorded on g)
    or ``F(*arrays)`` (its own graph, arrays out). ``body(g, nodes)`` does
    the work on a graph; ``f``'s arity is checked first (TypeError), before
    anything is appended."""
    sig = _signature(f, fname)

    def transformed(*args):
        graph_form = bool(args) and isinstance(args[0], Graph)
        _check_arity(f, sig, len(args) - graph_form, fname, _DUAL_FORMS)
        if graph_form:
            g, nodes = args[0], args[1:]
            for k, n in enumerate(nodes):
                if type(n) is not NodeId:
                    nodes = tuple(x if type(x) is NodeId else g.constant(x) for x in nodes)
                    break
            return body(g, nodes)
        g = Graph(dtype=_graph_dtype(args))
        nodes = tuple(g.variable(np.asarray(a)) for a in args)
        return _to_arrays(body(g, nodes))

    return transformed


def _wrt(g, nodes, positions):
    """The argument nodes to differentiate, each one this transform's own
    perturbation (a JAX tracer level, torch.func's wrapper level).

    A node that requires grad is aliased by a fresh identity node (a
    reshape to its own shape) and ``f`` sees the alias: the transform then
    differentiates with respect to the alias alone, so a node ``f`` closes
    over is not mistaken for the argument even when it is the very node
    passed in (an outer transform's argument, say: ``d/dx [D_y (x*y)]_{y=x}``
    is 1, not 2), and an argument passed twice gets each position's own
    gradient. The alias depends on the node, so the result stays
    differentiable with respect to it. A node that does not require grad (a
    constant) is replaced by a variable holding its value, so the transform
    differentiates with respect to it as torch.func does."""
    nodes = list(nodes)
    for k in positions:
        n = nodes[k]
        nodes[k] = g.reshape(n, n.shape) if g.requires_grad(n) else g.variable(g.value(n))
    return tuple(nodes)


def _call(f, g, nodes, has_aux: bool, fname: str):
    res = f(g, *nodes)
    if has_aux:
        if not (isinstance(res, tuple) and len(res) == 2):
            raise ValueError(f"{fname}: with has_aux=True, f must return (output, aux)")
        out, aux = res
    else:
        out, aux = res, None
    if type(out) is not NodeId:
        raise TypeError(f"{fname}: f must return a NodeId, got {type(out).__name__}")
    return out, aux


def _grads(g, out, wrt, grad=None):
    """Recorded gradients of ``out`` (zeros where it requires no grad)."""
    if not g.requires_grad(out):
        return tuple(g.constant(np.zeros(n.shape, dtype=g.dtype)) for n in wrt)
    return g.gradients(out, wrt, grad=grad, create_graph=True)


def _pick(items, argnums):
    return items[0] if isinstance(argnums, (int, np.integer)) else tuple(items)


def _scalar(out, fname):
    if int(np.prod(out.shape)) != 1:
        raise NonScalarTargetError(
            f"{fname}: f must return one element, got shape {out.shape}; "
            "use jacrev or vjp for other outputs", got=out.shape)


def _contract(g, parts, directions):
    """sum_k <parts_k, directions_k> as one node (None if no part)."""
    total = None
    for p, d in zip(parts, directions):
        term = g.sum(g.mul(p, d))
        total = term if total is None else g.add(total, term)
    return total


# ---------------------------------------------------------------- transforms
def value_and_grad(f, argnums=0, has_aux: bool = False):
    """``F(...) -> (value, grad)``, or ``((value, aux), grad)`` with
    ``has_aux`` (JAX's shape). ``f`` must return one element."""

    def body(g, nodes):
        pos = _check_argnums(argnums, len(nodes), "value_and_grad")
        nodes = _wrt(g, nodes, pos)
        out, aux = _call(f, g, nodes, has_aux, "value_and_grad")
        _scalar(out, "value_and_grad")
        gr = _pick(_grads(g, out, [nodes[k] for k in pos]), argnums)
        return ((out, aux), gr) if has_aux else (out, gr)

    return _dual_form(body, f, "value_and_grad")


def grad(f, argnums=0, has_aux: bool = False):
    """``F(...) -> grad`` (or ``(grad, aux)`` with ``has_aux``): the gradient
    of ``f``'s one-element output with respect to argument ``argnums``."""

    def body(g, nodes):
        pos = _check_argnums(argnums, len(nodes), "grad")
        nodes = _wrt(g, nodes, pos)
        out, aux = _call(f, g, nodes, has_aux, "grad")
        _scalar(out, "grad")
        gr = _pick(_grads(g, out, [nodes[k] for k in pos]), argnums)
        return (gr, aux) if has_aux else gr

    return _dual_form(body, f, "grad")


def jacrev(f, argnums=0, has_aux: bool = False):
    """The Jacobian by reverse mode, one recorded VJP per output element:
    shape ``out.shape + in.shape`` (a tuple of them for a tuple argnums)."""
    return _jacrev(f, argnums, has_aux, "jacrev")


def _jacrev(f, argnums, has_aux: bool, fname: str):
    def body(g, nodes):
        pos = _check_argnums(argnums, len(nodes), fname)
        nodes = _wrt(g, nodes, pos)
        out, aux = _call(f, g, nodes, has_aux, fname)
        wrt = [nodes[k] for k in pos]
        oshape = out.shape
        m = int(np.prod(oshape))
        rows = [[] for _ in wrt]
        for e in range(m):
            seed = np.zeros(m, dtype=g.dtype)
            seed[e] = 1
            gs = _grads(g, out, wrt, grad=seed.reshape(oshape))
            for k, gk in enumerate(gs):
                rows[k].append(gk)
        jacs = [_assemble(g, r, oshape, n.shape) for r, n in zip(rows, wrt)]
        res = _pick(jacs, argnums)
        return (res, aux) if has_aux else res

    return _dual_form(body, f, fname)


def _assemble(g, parts, oshape, ishape):
    """Stack per-element rows into a node of shape oshape + ishape (a
    constant of zeros when there is no row: an empty output)."""
    if not parts:
        return g.constant(np.zeros(tuple(oshape) + tuple(ishape), dtype=g.dtype))
    if len(parts) == 1:
        return g.reshape(parts[0], tuple(oshape) + tuple(ishape))
    return g.reshape(g.stack(parts, 0), tuple(oshape) + tuple(ishape))


def _linear_vjp(g, out, wrt):
    """The recorded VJP ``u -> J^T u`` with ``u`` a variable (its value is
    immaterial: the VJP is linear in it) and the recorded ``J^T u``."""
    u = g.variable(np.zeros(out.shape, dtype=g.dtype))
    if not g.requires_grad(out):
        return u, None
    return u, g.gradients(out, wrt, grad=u, create_graph=True)


def _jvp_nodes(g, out, wrt, tangents):
    """``J t`` as a recorded node: the gradient of ``<J^T u, t>`` in ``u``."""
    u, vjps = _linear_vjp(g, out, wrt)
    if vjps is None:
        return g.constant(np.zeros(out.shape, dtype=g.dtype))
    s = _contract(g, vjps, tangents)
    if not g.requires_grad(s):
        return g.constant(np.zeros(out.shape, dtype=g.dtype))
    (jt,) = g.gradients(s, [u], create_graph=True)
    return jt


def jacfwd(f, argnums=0, has_aux: bool = False):
    """The Jacobian by forward mode (one JVP per input element through the
    transpose of the recorded VJP): shape ``out.shape + in.shape``."""
    return _jacfwd(f, argnums, has_aux, "jacfwd")


def _jacfwd(f, argnums, has_aux: bool, fname: str):
    def body(g, nodes):
        pos = _check_argnums(argnums, len(nodes), fname)
        nodes = _wrt(g, nodes, pos)
        out, aux = _call(f, g, nodes, has_aux, fname)
        wrt = [nodes[k] for k in pos]
        u, vjps = _linear_vjp(g, out, wrt)
        jacs = []
        for k, n in enumerate(wrt):
            size = int(np.prod(n.shape))
            if size == 0 or vjps is None or not g.requires_grad(vjps[k]):
                jacs.append(g.constant(np.zeros(tuple(out.shape) + tuple(n.shape), dtype=g.dtype)))
                continue
            cols = []
            for e in range(size):
                t = np.zeros(size, dtype=g.dtype)
                t[e] = 1
                s = g.sum(g.mul(vjps[k], t.reshape(n.shape)))
                (col,) = g.gradients(s, [u], create_graph=True)
                cols.append(col)
            # columns are d out / d x_e: stack on a trailing axis
            jac = g.stack(cols, len(out.shape)) if len(cols) > 1 else g.unsqueeze(cols[0], -1)
            jacs.append(g.reshape(jac, tuple(out.shape) + tuple(n.shape)))
        res = _pick(jacs, argnums)
        return (res, aux) if has_aux else res

    return _dual_form(body, f, fname)


def hessian(f, argnums=0):
    """``jacfwd(jacrev(f))``: shape ``in.shape + in.shape`` for a one-element
    output (``out.shape + in.shape + in.shape`` in general)."""
    return _jacfwd(_jacrev(f, argnums, False, "hessian"), argnums, False, "hessian")


# ------------------------------------------------ primals and tangents forms
def _primal_graph(f, primals, fname, forms):
    """(graph, nodes, arrays_out): the graph form when primals[0] is a Graph.
    ``f``'s arity is checked first (TypeError naming the calling ``forms``)."""
    graph_form = bool(primals) and isinstance(primals[0], Graph)
    _check_arity(f, _signature(f, fname), len(primals) - graph_form, fname, forms)
    if graph_form:
        g = primals[0]
        nodes = tuple(x if type(x) is NodeId else g.constant(x) for x in primals[1:])
        return g, _wrt(g, nodes, range(len(nodes))), False
    if not primals:
        raise ValueError(f"{fname}: give at least one primal")
    g = Graph(dtype=_graph_dtype(primals))
    return g, tuple(g.variable(np.asarray(a)) for a in primals), True


def vjp(f, *primals, has_aux: bool = False):
    """``(out, vjp_fn)`` as torch.func.vjp: ``vjp_fn(cotangent)`` returns a
    tuple with one gradient per primal. Arrays in, arrays out; or
    ``vjp(f, g, *nodes)`` on a graph, where ``vjp_fn`` returns recorded nodes
    (and accepts a NodeId cotangent)."""
    g, nodes, arrays = _primal_graph(f, primals, "vjp", "vjp(f, *arrays) or vjp(f, g, *nodes)")
    out, aux = _call(f, g, nodes, has_aux, "vjp")

    def vjp_fn(cotangent):
        if not g.requires_grad(out):
            res = tuple(g.constant(np.zeros(n.shape, dtype=g.dtype)) for n in nodes)
        elif arrays:
            return tuple(g.gradients(out, nodes, grad=cotangent))
        else:
            res = g.gradients(out, nodes, grad=cotangent, create_graph=True)
        return _to_arrays(res) if arrays else res

    first = _to_arrays(out) if arrays else out
    if has_aux:
        return first, vjp_fn, (_to_arrays(aux) if arrays else aux)
    return first, vjp_fn


def _tangent_nodes(g, tangents, nodes, fname):
    if not isinstance(tangents, (tuple, list)) or len(tangents) != len(nodes):
        raise ValueError(f"{fname}: tangents must be a tuple with one entry per primal "
                         f"({len(nodes)}), got {type(tangents).__name__}")
    out = []
    for k, (t, n) in enumerate(zip(tangents, nodes)):
        tn = t if type(t) is NodeId else g.constant(t)
        if tuple(tn.shape) != tuple(n.shape):
            raise ValueError(f"{fname}: tangent {k} has shape {tuple(tn.shape)}, "
                             f"primal {k} has {tuple(n.shape)}")
        out.append(tn)
    return out


def jvp(f, primals, tangents, has_aux: bool = False):
    """``(out, tangent_out)`` as torch.func.jvp: ``tangent_out = J t``
    (forward mode, through the transpose of the recorded VJP). ``primals``
    and ``tangents`` are tuples of arrays; or ``primals = (g, *nodes)``."""
    if not isinstance(primals, (tuple, list)):
        raise ValueError(f"jvp: primals must be a tuple, got {type(primals).__name__}")
    g, nodes, arrays = _primal_graph(
        f, tuple(primals), "jvp", "jvp(f, arrays, tangents) or jvp(f, (g, *nodes), tangents)")
    tn = _tangent_nodes(g, tangents, nodes, "jvp")
    out, aux = _call(f, g, nodes, has_aux, "jvp")
    jt = _jvp_nodes(g, out, nodes, tn)
    res = (out, jt) if not has_aux else (out, jt, aux)
    return _to_arrays(res) if arrays else res


def hvp(f, primals, tangents):
    """``(out, hvp_out)``: the Hessian of the one-element ``f`` times the
    tangents (one per primal), by reverse over reverse."""
    if not isinstance(primals, (tuple, list)):
        raise ValueError(f"hvp: primals must be a tuple, got {type(primals).__name__}")
    g, nodes, arrays = _primal_graph(
        f, tuple(primals), "hvp", "hvp(f, arrays, tangents) or hvp(f, (g, *nodes), tangents)")
    tn = _tangent_nodes(g, tangents, nodes, "hvp")
    out, _ = _call(f, g, nodes, False, "hvp")
    _scalar(out, "hvp")
    firsts = _grads(g, out, nodes)
    s = _contract(g, firsts, tn)
    if arrays:
        res = g.gradients(s, nodes) if g.requires_grad(s) else \
            tuple(np.zeros(n.shape, dtype=g.dtype) for n in nodes)
        return _to_arrays(out), tuple(res)
    res = _grads(g, s, nodes)
    return out, tuple(res)
