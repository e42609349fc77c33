"""The recorded backward walk (``create_graph=True``).

The same reverse index walk as `yscv.walk`, but every gradient is a node
of the graph: each visited node's one rule (``registry.RULES[op]``) runs
through the graph interpreter (``GraphNS``), so it appends the backward's
computation with the graph's public ops and returns one NodeId per input (a
fused op with a composite records one ``Op.VJP`` node per input instead;
an unconverted op, its transitional recorded twin). Contributions are summed with ``add`` and broadcast
gradients are reduced with ``sum_to`` nodes (whose forward is the array
walk's own sum, `yscv.compute.arrays.sum_to_shape`), so the gradients it
produces are ordinary nodes, differentiable again to any order, with the
first-order walk's bits. It visits the nodes of a `yscv.schedule.Schedule`
and shares the walk's seeding, hooks, checks and accumulation (yscv/engine/schedule.py).

New nodes are appended past the end of the arena, above the node being
visited, so the walk over indices ``t .. 0`` never meets them. The walk is
serial: with ``create_graph=True`` the ``workers`` of `Graph.backward`
change nothing (the same bits as ``workers=1`` by construction). Values are
never released here (``create_graph`` keeps every value the recorded
gradients need).
"""
from __future__ import annotations

import contextlib

from .. import registry
from ..errors import BackwardError
from .namespace import GraphNS, VjpAttrs
from ..node import N_INPUTS, N_RG, NodeId, Op
from .schedule import Schedule, accumulate_node, conform_node, run_hooks_node

_RULES = registry.RULES
_COMPOSITES = registry.COMPOSITES
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


def recorded_walk(graph, t: int, seed: NodeId, capture=None, run_hooks: bool = True) -> None:
    """Walk from node ``t`` down, recording every backward rule as nodes.

    ``capture`` (functional mode): a dict whose keys are the indices to
    differentiate; each gets its complete gradient NodeId (a leaf's after its
    hooks, another node's before them, as `Graph._walk`), and nothing is
    stored. Otherwise leaves (and retained nodes) accumulate: their stored
    array grows by the gradient's value and `Graph.grad_node` gives the
    node. ``run_hooks=False`` skips ``register_hook`` hooks (a composite's
    inner walk, `Graph._recorded_vjp`)."""
    plan = Schedule(graph, t, capture)
    pending = [None] * (t + 1)
    pending[t] = seed
    nodes = graph._nodes
    hooks = graph._hooks if run_hooks else {}
    retained = graph._retained if capture is None else ()
    node_id = graph._node_id
    terminal = plan.terminal
    ns = GraphNS(graph)
    for i in plan.visit:
        gi = pending[i]
        if gi is None:
            continue
        pending[i] = None
        ins = nodes[i][N_INPUTS]
        if capture is not None and ins and i in capture:
            capture[i] = gi
        if hooks and i in hooks:
            gi = run_hooks_node(graph, i, gi)
        if ins and i in terminal:
            continue
        if not ins:
            if capture is not None:
                if i in capture:
                    capture[i] = gi
            elif nodes[i][N_RG]:
                accumulate_node(graph, i, gi)
            continue
        if retained and i in retained:
            accumulate_node(graph, i, gi, leaf=False)
        if graph._has_released:
            graph._prepare_node_for_backward(i)
        op, _, attrs, saved, _, needs, _, _ = nodes[i]  # after any recompute
        in_nodes = tuple(node_id(j) for j in ins)
        if _COMPOSITES[op] is not None:
            y = node_id(i)
            grads = tuple(graph._apply(_VJP, (gi, y) + in_nodes, VjpAttrs(op, k, attrs, saved, needs))
                          if need else None for k, need in enumerate(needs))
        else:
            rule = _RULES[op]
            if rule is None:
                raise BackwardError(f"{_name(op)} (node {i}) has no backward rule to record",
                                    op=_name(op), node=i)
            grads = rule(ns, gi, in_nodes, node_id(i), attrs, saved, needs)
        if len(grads) != len(ins):
            raise BackwardError(
                f"recorded backward of {_name(op)} (node {i}) returned {len(grads)} "
                f"gradients for {len(ins)} inputs", op=_name(op), node=i)
        for j, gj, r in zip(ins, grads, needs):
            if gj is None or not r:
                continue
            gj = conform_node(graph, gj, graph._shape(j), op, i, j)
            cur = pending[j]
            pending[j] = gj if cur is None else graph.add(cur, gj)
