"""A module's parameters and buffers replaced by given values for one call:
the machinery under `yscv.func.functional_call`.

Parameters: ``Module.param`` (`bind_param`) returns the given value's node
instead of binding the Parameter (a NodeId of the graph as it is, so
gradients flow to it; an array as a constant). The Parameter itself, its
``data`` and its ``grad`` are never touched.

Buffers: the module's buffer attribute (and ``_buffers`` entry) is the given
array for the duration of the call, so what a layer does to its buffer
happens to the given array instead, as in ``torch.func.functional_call``:
batch norm in training mode updates the given running statistics in place
and counts in the given ``num_batches_tracked``. A buffer given as a NodeId
enters as that node (`bind_buffer`), and the layer's own updates go to a
scratch copy. Everything is put back when the call ends, also when it raises.

Tied entries (one Parameter, or one module, under two paths) are one object:
a value given under either key serves both; two different values for them
are a ValueError, as torch's ``tie_weights=True``.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..node import NodeId
from ._binding import SUBSTITUTES
from .parameter import Parameter

__all__ = ["Substitute", "state_entries", "substituted"]


class Substitute:
    """The value given for one parameter or buffer (``owner``): ``bind(g)``
    is its node on ``g`` (the NodeId itself, or a constant of the array,
    made once per graph)."""

    __slots__ = ("owner", "value", "node")

    def __init__(self, owner, value):
        self.owner, self.value, self.node = owner, value, None

    def bind(self, g):
        if type(self.value) is NodeId:
            return self.value
        n = self.node
        if n is None or n.graph is not g:
            n = self.node = g.constant(self.value)
        return n


def state_entries(module):
    """``(key, owner_module, name, kind, obj)`` for every path of every
    parameter and buffer (persistent or not): the keys of ``state_dict``
    plus the non-persistent buffers; a tied object appears under each path."""
    for mname, m in module._module_paths():
        pre = f"{mname}." if mname else ""
        for name, p in m._parameters.items():
            if p is not None:
                yield pre + name, m, name, "parameter", p
        for name, b in m._buffers.items():
            if b is not None:
                yield pre + name, m, name, "buffer", b


def _tied_groups(entries) -> dict:
    """id(object) -> every key of it (one object under several paths: tied)."""
    groups = {}
    for key, e in entries.items():
        groups.setdefault(id(e[4]), []).append(key)
    return groups


def _check_keys(module, entries, groups, values, strict: bool, fname: str) -> dict:
    """``values`` extended to every tied key of a given one (ValueError for
    unknown keys, different values for tied keys, missing keys if ``strict``)."""
    unknown = [k for k in values if k not in entries]
    if unknown:
        known = ", ".join(repr(k) for k in list(entries)[:8]) + (", ..." if len(entries) > 8 else "")
        raise ValueError(f"{fname}: {type(module).__name__} has no parameter or buffer named "
                         + ", ".join(repr(k) for k in unknown) + f" (its keys: {known or 'none'})")
    full, missing = {}, []
    for keys in groups.values():
        given = [k for k in keys if k in values]
        if len({id(values[k]) for k in given}) > 1:
            raise ValueError(f"{fname}: different values given for the keys {sorted(given)}, "
                             f"which are tied (one object in {type(module).__name__})")
        if given:
            full.update((k, values[given[0]]) for k in keys)
        else:
            missing += keys
    if strict and missing:
        raise ValueError(f"{fname}: strict=True and no value given for "
                         + ", ".join(repr(k) for k in missing))
    return full


def _as_value(key, v, kind, g, fname: str):
    """The given value checked: a NodeId of ``g``, or an array (a Parameter
    gives its ``data``; a buffer keeps the very array, so updates land in it)."""
    if type(v) is NodeId:
        if v.graph is not g:
            raise ValueError(f"{fname}: the value for {key!r} is a NodeId of another graph")
        return v
    if isinstance(v, Parameter):
        v = v.data
    if kind == "buffer" and isinstance(v, np.ndarray):
        if v.dtype.kind == "f" and v.dtype != g.dtype:
            raise TypeError(f"{fname}: the buffer {key!r} is {v.dtype}, the graph is {g.dtype}; "
                            "a buffer is used (and updated) as it is, so give it the graph dtype")
        return v
    a = np.asarray(v)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{fname}: the value for {key!r} must be an array or a NodeId, "
                        f"got {type(v).__name__}")
    return a


class SubstitutedCall:
    """What `substituted` yields: ``parameters`` maps id(Parameter) to its
    keys for every substituted parameter (to tell a layer that bound one with
    ``g.param`` itself); ``reassigned`` ``{key: array}``, filled when the
    block ends, holds the buffers given as arrays that the module REASSIGNED
    during the call (``self.b = new``): the caller writes them back into its
    dicts, as torch does."""

    __slots__ = ("parameters", "reassigned")

    def __init__(self, parameters: dict):
        self.parameters, self.reassigned = parameters, {}


@contextlib.contextmanager
def substituted(module, values: dict, g, strict: bool = False, fname: str = "functional_call"):
    """Within the block, ``module``'s parameters and buffers named in
    ``values`` (state-dict keys) are replaced by them (see the module
    docstring); yields a `SubstitutedCall`. Unknown keys, different values
    for tied keys and (``strict``) missing keys are a ValueError raised
    before anything changes."""
    entries = {e[0]: e for e in state_entries(module)}
    full = _check_keys(module, entries, _tied_groups(entries), values, strict, fname)
    subs, swaps = {}, []   # swaps: (module, name, original, substitute, key)
    checked, parameters = {}, {}
    for key, v in full.items():
        _, m, name, kind, obj = entries[key]
        if id(v) not in checked:
            checked[id(v)] = _as_value(key, v, kind, g, fname)
        v = checked[id(v)]
        if kind == "parameter":
            subs[id(obj)] = Substitute(obj, v)
            parameters.setdefault(id(obj), []).append(key)
            continue
        if type(v) is NodeId:   # the layer's own updates go to a scratch copy
            scratch = np.array(g.value(v), copy=True)
            subs[id(scratch)] = Substitute(scratch, v)
            v = scratch
        swaps.append((m, name, m._buffers[name], v, key))
    outer = SUBSTITUTES.get()
    token = SUBSTITUTES.set({**outer, **subs} if outer else subs)
    call = SubstitutedCall(parameters)
    try:
        for m, name, _, new, _ in swaps:
            m._buffers[name] = new
            object.__setattr__(m, name, new)
        yield call
    finally:
        SUBSTITUTES.reset(token)
        for m, name, orig, new, key in reversed(swaps):
            now = m._buffers.get(name)
            if now is not new and now is not None and isinstance(values.get(key), np.ndarray):
                call.reassigned[key] = now
            m._buffers[name] = orig
            object.__setattr__(m, name, orig)
