"""Pytrees: nests of tuples, named tuples, lists and dicts whose leaves are
arrays, NodeIds or other values (torch.utils._pytree's and JAX's containers).

The transforms of `yscv.func` take pytree arguments: ``grad(f)(params, x)``
with ``params`` a dict of arrays gives a dict of gradients with the same
keys, in the same order (insertion order, as torch's pytrees). A tree is
flattened into its list of leaves and a description of its containers
(``flatten``), and rebuilt around new leaves (``unflatten``).
"""
from __future__ import annotations

import numpy as np

from ..node import NodeId

__all__ = ["flatten", "unflatten", "tree_map", "leaf_paths", "to_arrays", "take_arrays"]

_LEAF = None  # the description of a leaf


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def flatten(tree):
    """``(leaves, spec)``: the leaves in order (dict values in key order) and
    the containers around them."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves):
    if isinstance(x, dict):
        return (dict, tuple(x.keys()), tuple(_flatten(v, leaves) for v in x.values()))
    if isinstance(x, (tuple, list)):
        kind = type(x) if (_is_namedtuple(x) or isinstance(x, list)) else tuple
        return (kind, len(x), tuple(_flatten(v, leaves) for v in x))
    leaves.append(x)
    return _LEAF


def unflatten(spec, leaves):
    """The tree ``spec`` describes, with ``leaves`` (a sequence) in its leaves' places."""
    it = iter(leaves)
    out = _unflatten(spec, it)
    if next(it, it) is not it:
        raise ValueError("unflatten: more leaves than the tree has")
    return out


def _unflatten(spec, it):
    if spec is _LEAF:
        return next(it)
    kind, meta, children = spec
    items = [_unflatten(c, it) for c in children]
    if kind is dict:
        return dict(zip(meta, items))
    if kind is tuple:
        return tuple(items)
    if kind is list or issubclass(kind, list):
        return kind(items)
    return kind(*items)  # a named tuple


def tree_map(fn, tree):
    """``tree`` with ``fn(leaf)`` in place of every leaf."""
    leaves, spec = flatten(tree)
    return unflatten(spec, [fn(v) for v in leaves])


def leaf_paths(spec, prefix: str = "") -> list:
    """Where each leaf sits, in ``flatten``'s order: ``"['fc.weight']"``,
    ``"[1][0]"`` ("" for a tree that is one leaf), for error messages."""
    if spec is _LEAF:
        return [prefix]
    kind, meta, children = spec
    keys = meta if kind is dict else range(len(children))
    out = []
    for k, c in zip(keys, children):
        out += leaf_paths(c, f"{prefix}[{k!r}]")
    return out


def describe(spec) -> str:
    """A short description of a tree's structure, for error messages."""
    if spec is _LEAF:
        return "*"
    kind, meta, children = spec
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {describe(c)}" for k, c in zip(meta, children)) + "}"
    inner = ", ".join(describe(c) for c in children)
    if kind is tuple:
        return "(" + inner + ("," if len(children) == 1 else "") + ")"
    if kind is list:
        return "[" + inner + "]"
    return f"{kind.__name__}({inner})"


def to_arrays(x):
    """NodeIds (possibly nested in tuples, named tuples, lists and dicts) to
    fresh arrays; the containers keep their kind and keys, other leaves stay."""
    if type(x) is NodeId:
        return np.array(x.graph.value(x), copy=True)
    if isinstance(x, (tuple, list, dict)):
        return tree_map(lambda v: np.array(v.graph.value(v), copy=True)
                        if type(v) is NodeId else v, x)
    return x


def take_arrays(x):
    """`to_arrays` for the outputs of a graph that is dropped afterwards (a
    transform's own graph): a value that owns its memory, shared with no
    other output, is handed out as it is (writeable) instead of copied."""
    leaves, spec = flatten(x)
    out = []
    for v in leaves:
        if type(v) is not NodeId:
            out.append(v)
            continue
        a = v.graph.value(v)
        if a.base is None and not any(np.may_share_memory(a, o) for o in out
                                      if isinstance(o, np.ndarray)):
            a.flags.writeable = True
        else:
            a = np.array(a, copy=True)
        out.append(a)
    return unflatten(spec, out)
