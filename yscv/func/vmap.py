"""`vmap`: ``f`` written for one sample, run on a batch.

``vmap(f)(g, *nodes)`` records on ``g`` and returns NodeIds (differentiable);
``vmap(f)(*arrays)`` builds its own graph and returns arrays. ``f`` runs once
(per chunk) on per-sample views of its arguments: ``NodeId.shape`` inside it
is the per-sample shape, and each op it calls runs once on the whole batch
through the op's batching rule (yscv/engine/batching.py,
`yscv.registry.BATCHING`). Composes with every `yscv.func` transform, in both
orders and to any depth.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..engine import batching as B
from ..engine.graph import Graph
from ..node import NodeId
from . import pytree
from .calling import FINAL, _final, _graph_dtype, _passes_through

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def _is_axis(a) -> bool:
    return a is None or (isinstance(a, numbers.Integral) and not isinstance(a, bool))


def _check_axes_spec(spec, what: str) -> None:
    """``in_axes``/``out_axes``: ints/None, or pytrees of them."""
    leaves, _ = pytree.flatten(spec)
    for a in leaves:
        if not _is_axis(a):
            raise ValueError(f"vmap: {what} must hold ints or None, got {a!r} "
                             f"({type(a).__name__})")


def vmap(f, in_axes=0, out_axes=0, randomness: str = "error", chunk_size=None):
    """``F(...)``: ``f`` mapped over axis ``in_axes`` of its arguments (see
    module docstring and docs/vmap.md).

    Args:
        f: ``f(g, *args) -> NodeId`` or a tuple/list/dict of NodeIds.
        in_axes: an int or None for every argument, or one entry per
            positional argument (an int, negative from the end; None for an
            argument every sample shares; a pytree matching the argument).
        out_axes: where the batch axis goes in each output (an int, or a
            prefix pytree of the outputs; None for an output that depends on
            no batched input).
        randomness: dropout inside ``f``: 'error' (raise `BatchingError`),
            'different' (a mask per sample), 'same' (one mask for all).
        chunk_size: run ``f`` on at most this many samples at a time.
    """
    if not callable(f):
        raise TypeError(f"vmap: f must be callable, got {type(f).__name__}")
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, got {randomness!r}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(
            chunk_size, numbers.Integral) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}")
    if not (_is_axis(in_axes) or isinstance(in_axes, (tuple, list))):
        raise ValueError(f"vmap: in_axes must be an int, None or a tuple/list with one entry "
                         f"per argument, got {in_axes!r}")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")

    def vmapped(*args):
        graph_form = bool(args) and isinstance(args[0], Graph)
        if graph_form:
            g, args = args[0], args[1:]
            final = _final(g) and final_ok
            return _run(g, f, args, in_axes, out_axes, randomness, chunk_size, final)
        g = Graph(dtype=_graph_dtype(pytree.flatten(args)[0]))
        nodes = tuple(pytree.tree_map(
            lambda x: x if type(x) is NodeId or _passes_through(x) else g.constant(np.asarray(x)),
            a) for a in args)
        return pytree.take_arrays(_run(g, f, nodes, in_axes, out_axes, randomness, chunk_size,
                                       final_ok))

    # the arrays form's graph is private: nothing differentiates what f
    # returns, so a gradient transform f may take its gradients first-order
    final_ok = bool(getattr(f, "final_ok", False))
    vmapped.final_ok = final_ok
    vmapped.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    vmapped.__doc__ = getattr(f, "__doc__", None)
    return vmapped


def _per_argument(in_axes, args) -> list:
    if _is_axis(in_axes):
        return [in_axes] * len(args)
    if len(in_axes) != len(args):
        raise ValueError(f"vmap: in_axes has {len(in_axes)} entries for {len(args)} "
                         "positional argument(s)")
    return list(in_axes)


def _broadcast_spec(axes, tree, what: str):
    """One axis per leaf of ``tree``: ``axes`` (an int/None, or a prefix
    pytree of ``tree``) spread over it."""
    if _is_axis(axes):
        return [axes] * len(pytree.flatten(tree)[0])
    if isinstance(axes, dict) and isinstance(tree, dict):
        if set(axes) != set(tree):
            raise ValueError(f"vmap: {what} has keys {sorted(map(str, axes))}, the argument "
                             f"{sorted(map(str, tree))}")
        out = []
        for k in tree:
            out += _broadcast_spec(axes[k], tree[k], what)
        return out
    if isinstance(axes, (tuple, list)) and isinstance(tree, (tuple, list)) \
            and not isinstance(axes, dict):
        if len(axes) != len(tree):
            raise ValueError(f"vmap: {what} has {len(axes)} entries, the argument "
                             f"{len(tree)}")
        out = []
        for a, t in zip(axes, tree):
            out += _broadcast_spec(a, t, what)
        return out
    raise ValueError(f"vmap: {what} = {axes!r} does not match the argument's structure "
                     f"({pytree.describe(pytree.flatten(tree)[1])})")


def _leaf_shape(x):
    if type(x) is NodeId:
        return tuple(x.shape)
    if type(x) is B.BatchedInts:
        return x.shape
    return np.shape(x)


def _sizes(args, axes_per_arg):
    """Every batched leaf with its normalised axis, and the batch size."""
    plan, sizes = [], {}
    for k, (a, axes) in enumerate(zip(args, axes_per_arg)):
        leaves, spec = pytree.flatten(a)
        leaf_axes = _broadcast_spec(axes, a, f"in_axes[{k}]")
        paths = pytree.leaf_paths(spec)
        fixed = []
        for path, x, ax in zip(paths, leaves, leaf_axes):
            if ax is None or x is None:
                fixed.append(None)
                continue
            shape = _leaf_shape(x)
            nd = len(shape)
            if not -nd <= ax < nd:
                raise ValueError(f"vmap: in_axes {ax} is out of range for argument {k}{path} "
                                 f"of shape {shape}")
            ax = ax % nd
            sizes.setdefault(shape[ax], f"argument {k}{path}")
            fixed.append(ax)
        plan.append((leaves, spec, fixed))
    if not sizes:
        raise ValueError("vmap: no argument is batched (every in_axes entry is None or the "
                         "arguments hold no arrays)")
    if len(sizes) > 1:
        raise ValueError("vmap: batched arguments have different sizes along their vmap "
                         "axes: " + ", ".join(f"{v} has {s}" for s, v in sizes.items()))
    return plan, next(iter(sizes))


def _run(g, f, args, in_axes, out_axes, randomness, chunk_size, final=False):
    axes_per_arg = _per_argument(in_axes, args)
    plan, size = _sizes(args, axes_per_arg)
    if chunk_size is not None and chunk_size < size:
        return _chunked(g, f, plan, size, out_axes, randomness, chunk_size, final)
    return _one_level(g, f, plan, size, out_axes, randomness, final=final)


def _chunked(g, f, plan, size, out_axes, randomness, chunk, final=False):
    start = len(g)
    try:
        parts = []
        for lo in range(0, size, chunk):
            n = min(chunk, size - lo)
            sub = []
            for leaves, spec, fixed in plan:
                new = [x if ax is None else _narrow(g, x, ax, lo, n) for x, ax in zip(leaves, fixed)]
                sub.append((new, spec, fixed))
            parts.append(_one_level(g, f, sub, n, out_axes, randomness, keep_spec=True,
                                    final=final))
        spec = parts[0][1]
        flat_axes = parts[0][2]
        outs = []
        for k, ax in enumerate(flat_axes):
            pieces = [p[0][k] for p in parts]
            outs.append(pieces[0] if ax is None else g.cat(pieces, ax))
        return pytree.unflatten(spec, outs)
    except BaseException:
        g.truncate(start)
        raise


def _narrow(g, x, ax, lo, n):
    if type(x) is NodeId:
        return g.narrow(x, ax, lo, n)
    if type(x) is B.BatchedInts:
        pos = len(x.levels) + ax
        return B.BatchedInts(np.take(x.physical, np.arange(lo, lo + n), axis=pos), x.levels)
    return np.take(np.asarray(x), np.arange(lo, lo + n), axis=ax)


def _movedim(g, x, src: int, dst: int):
    perm = [k for k in range(len(x.shape)) if k != src]
    perm.insert(dst, src)
    return g.transpose(x, tuple(perm))


def _enter(g, x, ax, level):
    """Leaf ``x`` batched along its axis ``ax`` as seen by ``f``: the axis moved
    first (outside the new level) and tagged with it."""
    if type(x) is NodeId:
        start = len(g)
        with B.outside(g, level):
            y = _movedim(g, x, ax, 0) if ax != 0 else x
        return B.tag(g, y, level, start)
    if type(x) is B.BatchedInts:
        pos = len(x.levels) + ax
        k = len(x.levels)
        return B.BatchedInts(np.moveaxis(x.physical, pos, k), x.levels + (level,))
    arr = np.asarray(x)
    if arr.dtype.kind in "iub":
        arr = np.moveaxis(arr, ax, 0)
        arr.flags.writeable = False
        return B.BatchedInts(arr, (level,))
    start = len(g)
    with B.outside(g, level):
        y = g.constant(np.ascontiguousarray(np.moveaxis(arr, ax, 0)))
    return B.tag(g, y, level, start)


def _one_level(g, f, plan, size, out_axes, randomness, keep_spec=False, final=False):
    start = len(g)
    level = B.enter_level(g, size, randomness)
    try:
        args = []
        for leaves, spec, fixed in plan:
            new = [x if ax is None or x is None else _enter(g, x, ax, level)
                   for x, ax in zip(leaves, fixed)]
            args.append(pytree.unflatten(spec, new))
        if final:
            g.__dict__[FINAL] = True
        try:
            res = f(g, *args)
        finally:
            g.__dict__.pop(FINAL, None)
        leaves, spec = pytree.flatten(res)
        for path, o in zip(pytree.leaf_paths(spec), leaves):
            if type(o) is not NodeId:
                raise TypeError(f"vmap: f must return NodeIds (or tuples/lists/dicts of "
                                f"them), got {type(o).__name__} at output{path}")
        batched = [level in B.active_tag(g, o.index) for o in leaves]
        oaxes = _broadcast_spec(out_axes, res, "out_axes")
    except BaseException:
        B.exit_level(g, level)
        g.truncate(start)
        raise
    B.exit_level(g, level)
    try:
        outs, norm = [], []
        for path, o, b, ax in zip(pytree.leaf_paths(spec), leaves, batched, oaxes):
            if ax is None:
                norm.append(None)
                if b:
                    raise ValueError(f"vmap: out_axes is None for output{path}, which is "
                                     "batched (it depends on a batched input)")
                outs.append(o)
                continue
            nd = len(o.shape) + (0 if b else 1)
            if not -nd <= ax < nd:
                raise ValueError(f"vmap: out_axes {ax} is out of range for output{path} "
                                 f"with {nd} axes")
            ax = ax % nd
            norm.append(ax)
            if not b:  # depends on no batched input: the same for every sample
                shape = tuple(o.shape)
                o = g.expand(g.unsqueeze(o, ax), shape[:ax] + (size,) + shape[ax:])
            elif ax != 0:
                o = _movedim(g, o, 0, ax)
            outs.append(o)
    except BaseException:
        g.truncate(start)
        raise
    if keep_spec:
        return outs, spec, norm
    return pytree.unflatten(spec, outs)

