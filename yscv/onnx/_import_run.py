"""Replaying an imported ONNX graph on a yscv Graph (``OnnxModule.forward``).

Each ONNX value name maps to one of:

- an ``np.ndarray``: a static value (constants, shapes and everything
  computed from them), evaluated with NumPy;
- a ``NodeId``: data, in the file's layout;
- a `ChannelLast`: data whose logical layout is channel-first
  ([N, C, ``*S``]) held channel-last ([N, ``*S``, C]) after an NCHW op ran on yscv's
  channel-last ops; it is transposed back only where an op needs the file's
  layout, so chains of convolutions, norms and activations stay channel-last;
- a `Prepared`: a parameter stored in a yscv layout (conv weights).

Each node runs through its handler in ``HANDLERS``
(`yscv.onnx._import_registry`), which `yscv.onnx._import_table`
filled when the model was loaded; a node that is one layer call whose
container was replaced by a module (``m.fc = nn.Linear(...)``, see
``yscv.onnx._import_modules``) calls that module instead. Parameters
are read by their state-dict path at each call, so a Parameter assigned
over an imported one is the one used.
"""
from __future__ import annotations

import numpy as np

from ..nn._binding import bind_param
from ._import_layout import (channel_first_perm, channel_last_perm, graph_conv_weight)
from ._import_registry import HANDLERS, ChannelLast


class Prepared:
    __slots__ = ("node", "tag")

    def __init__(self, node, tag):
        self.node, self.tag = node, tag


class Run:
    """The state of one call: the graph, the value environment, the mode."""

    def __init__(self, module, g):
        self.m, self.g = module, g
        self.env = {}
        self._logical = {}
        self.training = module.training

    # ------------------------------------------------------------ reading
    def has(self, node, slot: int) -> bool:
        return slot < len(node.inputs) and node.inputs[slot] != ""

    def raw(self, name):
        return self.env[name]

    def is_static(self, name) -> bool:
        return isinstance(self.env[name], np.ndarray)

    def arr(self, name) -> np.ndarray:
        """The value as a NumPy array (static values as they are; data by value)."""
        v = self.env[name]
        if isinstance(v, np.ndarray):
            return v
        return np.asarray(self.g.value(self.node(name)))

    def node(self, name):
        """The value as a NodeId in the file's layout (statics become constants)."""
        v = self.env[name]
        if isinstance(v, ChannelLast):
            n = self._logical.get(name)
            if n is None:
                n = self._logical[name] = self.g.transpose(
                    v.node, channel_first_perm(len(v.node.shape)))
            return n
        if isinstance(v, Prepared):
            raise AssertionError(f"{name!r} is stored in a yscv layout")  # planned away
        if isinstance(v, np.ndarray):
            n = self._logical.get(name)
            if n is None:
                n = self._logical[name] = self.g.constant(v.astype(self.g.dtype, copy=False))
            return n
        return v

    def cl(self, name):
        """Channel-first data as a channel-last NodeId ([N, C, ``*S``] -> [N, ``*S``, C])."""
        v = self.env[name]
        if isinstance(v, ChannelLast):
            return v.node
        x = self.node(name)
        if len(x.shape) <= 2:
            return x
        return self.g.transpose(x, channel_last_perm(len(x.shape)))

    def conv_weight(self, name):
        v = self.env[name]
        if isinstance(v, Prepared):
            return v.node
        w = self.node(name)
        return graph_conv_weight(self.g, w, len(w.shape))

    def shape(self, name) -> tuple:
        v = self.env[name]
        if isinstance(v, ChannelLast):
            s = v.node.shape
            return (s[0], s[-1]) + tuple(s[1:-1])
        if isinstance(v, Prepared):
            raise AssertionError(name)
        return tuple(v.shape)

    def opt_node(self, node, slot: int):
        return self.node(node.inputs[slot]) if self.has(node, slot) else None


def _store(run, node, outs):
    for name, v in zip(node.outputs, outs):
        if name:
            # a NumPy scalar (np.take with a 0-d index, a 0-d ufunc) is a static value
            run.env[name] = np.asarray(v) if isinstance(v, np.generic) else v


def run_body(run, sub, bound) -> list:
    """The values of the `Subgraph` ``sub`` (a branch or loop body) run on
    ``run``'s graph: its inputs bound to ``bound`` (name -> value), every
    value of the enclosing scope visible; static values stay arrays,
    sequences lists, data comes back as NodeIds in the file's layout."""
    child = Run(run.m, run.g)
    child.training = run.training
    child.env = dict(run.env)
    child.env.update(sub.statics)
    child.env.update(bound)
    for node in sub.nodes:
        try:
            outs = HANDLERS[node.op](child, node)
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(f"while running ONNX {node.where()} in graph {sub.name!r}")
            raise
        _store(child, node, outs)
    return [child.env[o] if isinstance(child.env[o], (np.ndarray, list)) else child.node(o)
            for o in sub.outputs]


def _bind_inputs(m, g, run, inputs):
    if len(inputs) != len(m._inputs):
        raise TypeError(f"OnnxModule: the model takes {len(m._inputs)} input(s) "
                        f"{m.input_names}, got {len(inputs)}")
    for (name, kind, rank), x in zip(m._inputs, inputs):
        if kind != "f":
            if hasattr(x, "index") and hasattr(x, "shape") and not isinstance(x, np.ndarray):
                raise TypeError(f"OnnxModule: input {name!r} is an integer tensor in the "
                                "model; pass a NumPy integer array, not a NodeId")
            v = np.asarray(x)
            if v.dtype.kind not in "iub":
                raise TypeError(f"OnnxModule: input {name!r} must hold integers, got {v.dtype}")
        elif isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, list):
            v = g.constant(np.asarray(x))
        else:
            v = x
        if rank is not None and len(v.shape) != rank:
            raise ValueError(f"OnnxModule: input {name!r} must have {rank} axes, "
                             f"got shape {tuple(v.shape)}")
        run.env[name] = v


def call_layer(run, node, call, layer):
    """The module that replaced a layer call, on the node's data input:
    channel-last for convolutions and norms (as yscv's layers take them;
    a result with 3+ axes is taken as channel-last again), else in the
    file's layout."""
    if not call.channel_last:
        return layer(run.g, run.node(node.inputs[0]))
    y = layer(run.g, run.cl(node.inputs[0]))
    return ChannelLast(y) if len(y.shape) > 2 else y


def run_graph(m, g, inputs):
    """``m(g, *inputs)``: every node replayed on ``g``. On an error, the nodes
    this call appended are dropped again (the graph is as before)."""
    start = len(g)
    try:
        run = Run(m, g)
        run.env.update(m._statics)
        for name, (_, tag) in m._params.items():
            p = m._current(name)  # the Parameter now at its key
            if p is None:         # its sub-module was replaced: nothing reads it
                continue
            # a frozen Parameter (requires_grad False) enters as a constant view;
            # through bind_param, so yscv.func.functional_call can substitute it
            node = bind_param(g, p, name)
            run.env[name] = Prepared(node, tag) if tag else node
        _bind_inputs(m, g, run, inputs)
        calls, skip = m._guard.by_index, set()
        for node in m._nodes:
            if node.index in skip:
                continue
            call = calls.get(node.index)
            layer = call.current(m) if call is not None else None
            try:
                if layer is not None and layer is not call.original:
                    run.env[call.output] = call_layer(run, node, call, layer)
                    skip.add(call.tail)
                    continue
                outs = HANDLERS[node.op](run, node)
            except Exception as exc:
                if hasattr(exc, "add_note"):  # Python >= 3.11
                    where = (f" (calling {type(layer).__name__} at {'.'.join(call.path)!r} "
                             "in its place)" if call is not None and layer is not call.original
                             else "")
                    exc.add_note(f"while running ONNX {node.where()}{where}")
                raise
            _store(run, node, outs)
        results = []
        for name in m.output_names:
            v = run.env[name]
            results.append(v if isinstance(v, np.ndarray) else run.node(name))
    except BaseException:
        if len(g) > start:
            g.truncate(start)
        raise
    return results[0] if len(results) == 1 else tuple(results)

