"""The registry of the ONNX importer: ``HANDLERS[op_type]`` (a handler) and
the ``handler`` decorator that fills it next to each handler, with what every
handler and the loader share: `OnnxNode` (the decoded node a handler
receives), `OnnxImportError`, `ChannelLast` (a value held
channel-last) and `bn_buffer`.

A handler is ``handler(run, node) -> list of output values``: ``run`` is the
call's state (`yscv.onnx._import_run.Run`), ``node`` an
`OnnxNode`. The handlers themselves are in the ``_import_<topic>``
modules that `yscv.onnx._import_table` imports (ops, index, nn, rnn,
shape, norms, losses, attention, math, select, resize, pad, pool,
gridsample, quant, scatter, lstm, gru, deform, rearrange, sets, integer,
signal, decoder, control, sequence, training, random, ml); the table
imports them (so that they register) and checks nodes against the table.
This module imports none of them. A graph attribute (a branch or loop
body) reaches its handler as a `Subgraph`.
"""
from __future__ import annotations

from ..errors import AutogradError

__all__ = ["HANDLERS", "handler", "ChannelLast", "bn_buffer", "OnnxNode",
           "OnnxImportError", "Subgraph"]


class OnnxImportError(AutogradError, ValueError):
    """An ONNX model the importer cannot represent: an unsupported operator,
    attribute value or graph feature. ``op`` is the operator type, ``node``
    the node's name (or ``#index`` when it has none)."""


OnnxImportError.__module__ = "yscv.onnx.load"  # its public home (re-exported there)

HANDLERS: dict = {}


def handler(*ops):
    def deco(fn):
        for op in ops:
            HANDLERS[op] = fn
        return fn
    return deco


class OnnxNode:
    """One ONNX node, decoded once at load: ``op`` (type), ``name`` (the node's
    name or ``#index``), ``inputs`` / ``outputs`` (value names, "" = absent),
    ``attrs`` (Python values: ints, floats, str, lists, ndarrays)."""

    __slots__ = ("op", "name", "index", "inputs", "outputs", "attrs")

    def __init__(self, op, name, index, inputs, outputs, attrs):
        self.op, self.name, self.index = op, name, index
        self.inputs, self.outputs, self.attrs = tuple(inputs), tuple(outputs), attrs

    def where(self) -> str:
        return f"operator {self.op!r} (node {self.name!r}, index {self.index})"

    def fail(self, why: str) -> OnnxImportError:
        return OnnxImportError(f"onnx.load: {self.where()}: {why}", op=self.op, node=self.name)


class Subgraph:
    """A graph attribute (If's branches, Loop's and Scan's body), decoded at
    load: ``nodes`` (`OnnxNode`, indexed ``"<parent index>/<k>"``),
    ``inputs`` / ``outputs`` (value names), ``statics`` (its initializers,
    constants) and ``outer``: the names it (or a graph nested in it) reads
    from the enclosing scopes, which count as read by the node holding it."""

    __slots__ = ("name", "nodes", "inputs", "outputs", "statics", "outer")

    def __init__(self, name, nodes, inputs, outputs, statics):
        self.name, self.nodes = name, list(nodes)
        self.inputs, self.outputs, self.statics = list(inputs), list(outputs), dict(statics)
        local = set(self.inputs) | set(self.statics) | {o for n in self.nodes for o in n.outputs}
        read = [i for n in self.nodes for i in n.inputs]
        read += [r for n in self.nodes for sub in subgraphs(n) for r in sub.outer]
        read += self.outputs
        self.outer = sorted({r for r in read if r and r not in local})


def subgraphs(node):
    """The `Subgraph` attributes of ``node``."""
    return [v for v in node.attrs.values() if isinstance(v, Subgraph)]


class _Unsupported:
    """Marks an attribute kind the importer cannot use (lists of graphs, sparse tensors)."""

    def __init__(self, name):
        self.name = name


class ChannelLast:
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node


def bn_buffer(run, node, slot: int):
    """The buffer holding a BatchNormalization node's running statistic."""
    where = run.m._bn_stats.get((node.index, slot))
    if where is None:
        return None
    owner, attr = where
    arr = owner._buffers[attr]
    return run.g.buffer(arr, f"{node.name}.{'mean' if slot == 3 else 'var'}")
