"""The recorded backward walk (``create_graph=True``).

The same reverse index walk as `yscv.walk`, but every gradient is a node
of the graph: each visited node's recorded rule (``registry.RECORDED[op]``)
appends the backward's computation with the graph's public ops and returns
one NodeId per input. Contributions are summed with ``add`` and broadcast
gradients are reduced with ``sum``/``reshape`` nodes, so the gradients it
produces are ordinary nodes, differentiable again to any order.

New nodes are appended past the end of the arena, above the node being
visited, so the walk over indices ``t .. 0`` never meets them. The walk is
serial: with ``create_graph=True`` the ``workers`` of `Graph.backward`
change nothing (the same bits as ``workers=1`` by construction). Values are
never released here (``create_graph`` keeps every value the recorded
gradients need).
"""
from __future__ import annotations

import contextlib

import numpy as np

from . import registry
from .errors import AnomalyError, BackwardError, ShapeError
from .namespace import GraphNS, VjpAttrs
from .node import N_INPUTS, N_RG, NodeId, Op

_RULES = registry.RULES
_COMPOSITES = registry.COMPOSITES
_LEGACY = registry.LEGACY_RECORDED
_VJP = Op.VJP


def _name(op: int) -> str:
    return Op(op).name.lower()


@contextlib.contextmanager
def dropped_on_error(graph):
    """A recorded walk that raises (a rule's BackwardError, an anomaly, a
    hook's error) leaves no node of its own behind: the nodes appended
    inside the block are dropped again (``truncate``) before the error
    propagates. Leaf gradients already accumulated stay, as after a failed
    plain backward."""
    n0 = len(graph._uids)
    try:
        yield
    except BaseException:
        if len(graph._uids) > n0:
            graph.truncate(n0)
        raise


def seed_node(graph, t: int, grad, fname: str) -> NodeId:
    """The walk's seed for target t as a node: ones for ``grad=None``, a
    constant for an array, or the given NodeId (a cotangent that is itself a
    graph value)."""
    if type(grad) is NodeId:
        j = graph._index(grad)
        shape = graph._shape(t)
        if graph._shape(j) != shape:
            raise ShapeError(
                f"{fname}: grad node {j} has shape {graph._shape(j)}, target node {t} "
                f"has {shape}", op=fname, node=t, expected=shape, got=graph._shape(j))
        return grad
    seed, _ = graph._seed(t, grad, fname)
    return graph.constant(seed)


def unbroadcast_node(graph, gj: NodeId, shape: tuple, op: int, i: int, j: int) -> NodeId:
    """``gj`` summed over its broadcast axes down to ``shape``, as nodes."""
    gshape = graph._shape(gj.index)
    if gshape == shape:
        return gj
    extra = len(gshape) - len(shape)
    ok = extra >= 0 and all(s == 1 or s == gs for s, gs in zip(shape, gshape[extra:]))
    if not ok:
        raise ShapeError(
            f"recorded backward of {_name(op)} (node {i}) returned a gradient of shape "
            f"{gshape} for input node {j} of shape {shape}",
            op=_name(op), node=i, expected=shape, got=gshape)
    if extra:
        gj = graph.sum(gj, axis=tuple(range(extra)))
    keep = tuple(k for k, s in enumerate(shape) if s == 1 and gshape[extra + k] != 1)
    if keep:
        gj = graph.sum(gj, axis=keep, keepdims=True)
    if graph._shape(gj.index) != shape:
        gj = graph.reshape(gj, shape)
    return gj


def recorded_walk(graph, t: int, seed: NodeId, capture=None, run_hooks: bool = True) -> None:
    """Walk from node ``t`` down, recording every backward rule as nodes.

    ``capture`` (functional mode): a dict whose keys are the indices to
    differentiate; each gets its complete gradient NodeId (a leaf's after its
    hooks, another node's before them, as `Graph._walk`), and nothing is
    stored. Otherwise leaves (and retained nodes) accumulate: their stored
    array grows by the gradient's value and `Graph.grad_node` gives the
    node. ``run_hooks=False`` skips ``register_hook`` hooks (a composite's
    inner walk, `Graph._recorded_vjp`)."""
    stop = min(capture) - 1 if capture else -1
    pending = [None] * (t + 1)
    pending[t] = seed
    nodes = graph._nodes
    hooks = graph._hooks if run_hooks else {}
    retained = graph._retained if capture is None else ()
    node_id = graph._node_id
    ns = GraphNS(graph)
    for i in range(t, stop, -1):
        gi = pending[i]
        if gi is None:
            continue
        pending[i] = None
        ins = nodes[i][N_INPUTS]
        if capture is not None and ins and i in capture:
            capture[i] = gi
        if hooks and i in hooks:
            gi = _run_hooks_recorded(graph, i, gi)
        if not ins:
            if capture is not None:
                if i in capture:
                    capture[i] = gi
            elif nodes[i][N_RG]:
                _accumulate_node(graph, i, gi)
            continue
        if retained and i in retained:
            _accumulate_node(graph, i, gi, leaf=False)
        if graph._has_released:
            graph._prepare_node_for_backward(i)
        op, _, attrs, saved, _, needs, _, _ = nodes[i]  # after any recompute
        in_nodes = tuple(node_id(j) for j in ins)
        if _COMPOSITES[op] is not None:
            y = node_id(i)
            grads = tuple(graph._apply(_VJP, (gi, y) + in_nodes, VjpAttrs(op, k, attrs, saved, needs))
                          if need else None for k, need in enumerate(needs))
        elif _LEGACY[op] is not None:
            grads = _LEGACY[op](graph, gi, in_nodes, node_id(i), attrs, saved, needs)
        else:
            grads = _RULES[op](ns, gi, in_nodes, node_id(i), attrs, saved, needs)
        if len(grads) != len(ins):
            raise BackwardError(
                f"recorded backward of {_name(op)} (node {i}) returned {len(grads)} "
                f"gradients for {len(ins)} inputs", op=_name(op), node=i)
        for j, gj, r in zip(ins, grads, needs):
            if gj is None or not r:
                continue
            if type(gj) is not NodeId:
                raise BackwardError(
                    f"recorded backward of {_name(op)} (node {i}) returned a "
                    f"{type(gj).__name__} for input node {j}, not a NodeId: the "
                    "gradient would be detached from the graph", op=_name(op), node=i)
            gj = unbroadcast_node(graph, gj, graph._shape(j), op, i, j)
            if graph.detect_anomaly and not np.all(np.isfinite(graph._values[gj.index])):
                raise AnomalyError(
                    f"anomaly: backward of {_name(op)} (node {i}) produced a NaN or Inf "
                    f"gradient for its input node {j}", op=_name(op), node=i)
            cur = pending[j]
            pending[j] = gj if cur is None else graph.add(cur, gj)


def _run_hooks_recorded(graph, i: int, gi: NodeId) -> NodeId:
    """Hooks see the gradient's array (read-only, as every graph value); a
    replacement enters the recorded graph as a constant."""
    arr = graph.value(gi)
    out = graph._run_hooks(i, arr)
    if out is arr:
        return gi
    return graph.constant(out)


def _accumulate_node(graph, i: int, gi: NodeId, leaf: bool = True) -> None:
    """Add the recorded gradient ``gi`` into node i: the stored array (and a
    bound parameter's ``.grad``, post-accumulate hooks) as a plain backward
    would, and the gradient node, summed with an earlier recorded one."""
    value = np.array(graph._values[gi.index], copy=True)
    prev = graph._grad_nodes.get(i)
    if prev is not None and graph._is_live(prev):
        total = graph.add(prev, gi)
    elif i in graph._grads:
        total = graph.add(graph.constant(graph._grads[i]), gi)
    else:
        total = gi
    graph._grad_nodes[i] = total
    if leaf:
        graph._accumulate_leaf(i, value)
    else:
        graph._accumulate_stored(i, value)
