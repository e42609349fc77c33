"""What every transform of `yscv.func` shares: the two calling forms, the
argument checks, the pytree arguments and each transform's own copy of the
arguments it differentiates."""
from __future__ import annotations

import inspect

import numpy as np

from ..engine import batching as _batching
from ..engine.graph import Graph
from ..errors import NonScalarTargetError
from ..node import NodeId
from . import pytree

__all__ = []


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


def _passes_through(x) -> bool:
    """Leaves that reach ``f`` as they are, never as nodes: None and integer
    or boolean arrays (labels, indices, counters), which the index-taking ops
    accept and which are never differentiated."""
    return x is None or type(x) is _batching.BatchedInts or (
        isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "iub")


def _graph_dtype(leaves) -> np.dtype:
    for a in leaves:
        if type(a) is not NodeId and not _passes_through(a) and np.asarray(a).dtype == np.float64:
            return np.dtype(np.float64)
    return np.dtype(np.float32)


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


def _as_nodes(g, args, make):
    """``args`` (pytrees) with every leaf but NodeIds and the pass-through
    ones (`_passes_through`) entered into ``g`` by ``make`` (``g.constant``
    or ``g.variable``)."""
    def enter(x):
        if type(x) is NodeId or _passes_through(x):
            return x
        return make(np.asarray(x))
    return tuple(a if type(a) is NodeId else pytree.tree_map(enter, a) for a in args)


def _enter_arrays(args):
    """(graph, nodes) for the arrays form: a fresh graph in the arrays' float
    dtype (float64 if any is float64, else float32), every float leaf a variable."""
    leaves = pytree.flatten(args)[0]
    g = Graph(dtype=_graph_dtype(leaves))
    return g, _as_nodes(g, args, g.variable)


#: the graph attribute a caller sets when the result of the transform it
#: calls next is never differentiated (vmap's arrays form over a gradient
#: transform): that transform's own gradients may then be first-order
FINAL = "_yscv_final_gradients"


def _final(g) -> bool:
    """Whether the gradients of the transform now running on ``g`` are final
    (never differentiated: see `FINAL`); the flag is taken, so the
    transforms ``f`` calls record as usual."""
    return bool(g.__dict__.pop(FINAL, False))


def _dual_form(body, f, fname: str):
    """A transformed function callable as ``F(g, *nodes)`` (recorded on g)
    or ``F(*arrays)`` (its own graph, arrays out). Arguments are pytrees
    (`yscv.func.pytree`). ``body(g, args)`` does the work on a graph;
    ``f``'s arity is checked first (TypeError), before anything is appended."""
    sig = _signature(f, fname)

    def transformed(*args):
        graph_form = bool(args) and isinstance(args[0], Graph)
        _check_arity(f, sig, len(args) - graph_form, fname, _DUAL_FORMS)
        if graph_form:
            g = args[0]
            return body(g, _as_nodes(g, args[1:], g.constant))
        g, nodes = _enter_arrays(args)
        return pytree.to_arrays(body(g, nodes))

    transformed.final_ok = getattr(body, "final_ok", False)
    return transformed


class _Wrt:
    """The leaves a transform differentiates, argument by argument: ``flat``
    (all of them, in order) and how to rebuild one pytree per argument."""

    __slots__ = ("flat", "specs", "counts")

    def __init__(self):
        self.flat, self.specs, self.counts = [], [], []

    def add(self, leaves, spec) -> None:
        self.flat += leaves
        self.specs.append(spec)
        self.counts.append(len(leaves))

    def split(self, items) -> list:
        """One pytree per argument from one item per leaf (``flat``'s order)."""
        out, start = [], 0
        for spec, n in zip(self.specs, self.counts):
            out.append(pytree.unflatten(spec, items[start:start + n]))
            start += n
        return out


def _wrt(g, args, positions, fname: str):
    """``(args, wrt)``: the arguments with every leaf to differentiate made
    this transform's own perturbation (a JAX tracer level, torch.func's
    wrapper level), and those leaves (`_Wrt`).

    A node that requires grad is aliased by a fresh identity node (a
    reshape to its own shape) and ``f`` sees the alias: the transform then
    differentiates with respect to the alias alone, so a node ``f`` closes
    over is not mistaken for the argument even when it is the very node
    passed in (an outer transform's argument, say: ``d/dx [D_y (x*y)]_{y=x}``
    is 1, not 2), and an argument passed twice gets each position's own
    gradient. The alias depends on the node, so the result stays
    differentiable with respect to it. A node that does not require grad (a
    constant) is replaced by a variable holding its value, so the transform
    differentiates with respect to it as torch.func does. An integer array
    or None among them is a TypeError naming where it sits."""
    args = list(args)
    wrt = _Wrt()
    for k, (leaves, spec) in zip(positions, _wrt_leaves(args, positions, fname)):
        fresh = [_lift(g, g.reshape(n, n.shape) if g.requires_grad(n) else _variable_of(g, n))
                 for n in leaves]
        args[k] = pytree.unflatten(spec, fresh)
        wrt.add(fresh, spec)
    return tuple(args), wrt


def _wrt_leaves(args, positions, fname: str) -> list:
    """``(leaves, spec)`` of each argument to differentiate, as given (no
    copy made); a leaf that is not a NodeId is a TypeError naming where it sits."""
    out = []
    for k in positions:
        leaves, spec = pytree.flatten(args[k])
        for path, n in zip(pytree.leaf_paths(spec), leaves):
            if type(n) is not NodeId:
                what = "None" if n is None else f"an array of dtype {np.asarray(n).dtype}"
                raise TypeError(
                    f"{fname}: argument {k}{path} is {what}; only floating-point "
                    "arrays and NodeIds can be differentiated (leave it out of argnums)")
        out.append((leaves, spec))
    return out


def _lift(g, n, like=None):
    """Inside vmap, ``n`` batched over every active level (or those of the
    node ``like``), so that each sample is differentiated on its own
    (yscv/engine/batching.py `lift`); ``n`` itself outside vmap."""
    if not isinstance(g, _batching.BatchingGraph):
        return n
    levels = None if like is None else _batching.active_tag(g, like.index)
    return _batching.lift(g, n, levels)


def _variable_of(g, n):
    """A variable holding constant ``n``'s value (batched as ``n`` is)."""
    if not isinstance(g, _batching.BatchingGraph) or not _batching.active_tag(g, n.index):
        return g.variable(g.value(n))
    return _batching.variable_like(g, n)


def _call(f, g, args, has_aux: bool, fname: str):
    res = f(g, *args)
    if has_aux:
        if not (isinstance(res, tuple) and len(res) == 2):
            raise ValueError(f"{fname}: with has_aux=True, f must return (output, aux)")
        out, aux = res
    else:
        out, aux = res, None
    if type(out) is not NodeId:
        raise TypeError(f"{fname}: f must return a NodeId, got {type(out).__name__}")
    return out, aux


def _zeros(g, shape):
    return g.constant(np.zeros(shape, dtype=g.dtype))


def _grads(g, out, wrt, grad=None, final: bool = False):
    """Recorded gradients of ``out`` (zeros where it requires no grad); with
    ``final`` (`FINAL`) the first-order walk's, as constant nodes."""
    if not wrt:
        return ()
    if not g.requires_grad(out):
        return tuple(_zeros(g, n.shape) for n in wrt)
    if final:
        return g.gradient_constants(out, wrt, grad=grad)
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
