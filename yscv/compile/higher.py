"""Recorded backward walks (``create_graph=True``) inside a compiled step.

``g.backward(loss, create_graph=True)``, ``g.gradients(..., create_graph=True)``
and the `yscv.func` transforms built on them append the backward's
computation to the arena as ordinary nodes (yscv/engine/walk_recorded.py):
`Op.VJP` nodes, ``sum_to`` and ``add`` nodes, and whatever each backward
rule records with the graph's ops. A replay runs those nodes as it runs the
forward's. Three things of such a walk are not plain nodes, and this module
records them (while ``fn`` runs) and replays them:

* a rule that builds its nodes from data (``registry.RULES[op]`` reading a
  value, making a constant such as a ReLU mask, using the node's saved data
  or attributes a replay renews: a dropout seed, the attributes a graph call
  rebuilt from a new input array): noted as a ``("rule", start, end, op, i,
  g, ins, needs, dependent)`` action; when ``dependent`` (or the node's
  attributes are renewed) the replay calls the rule again on a scratch graph
  with the replay's values (`replay_rule`), as the eager walk calls it;
* an ``Op.VJP`` node carries the forward node's attributes and saved data:
  the replay renews them from its own (`renew_vjp`);
* ``backward(create_graph=True)`` accumulates every reached leaf's gradient
  (``schedule.accumulate_node``): noted as ``("acc", at, leaf, grad_node,
  const)`` and repeated in order (`replay_acc`); ``const`` is the constant
  leaf the walk makes of a gradient stored earlier in the step, renewed.

`watching` installs the watchers for one record (under the record lock).
"""
from __future__ import annotations

import contextlib

import numpy as np

from .. import registry
from ..engine import walk_recorded as _walk_recorded
from ..engine.graph import Graph
from ..engine.namespace import GraphNS
from ..engine.schedule import add_param_grad
from ..errors import CompileError
from ..node import N_ATTRS, N_OP, N_RG, N_SAVED, Op

_LEAF = int(Op.LEAF)
_VJP = int(Op.VJP)
#: ops whose attributes a replay renews (a dropout seed, a VJP's forward data)
_RENEWED = frozenset((int(Op.DROPOUT), _VJP))


class _RuleTable:
    """`registry.RULES` as the recorded walk reads it during a record: each
    top-level rule call on the recording graph is noted (see the module
    docstring); calls on other graphs pass through."""

    def __init__(self, rules, g, rec):
        self.rules, self.g, self.rec = rules, g, rec

    def __getitem__(self, op):
        rule = self.rules[op]
        if rule is None:
            return None
        g, rec = self.g, self.rec

        def watched(ns, gi, ins, y, attrs, saved, needs):
            if getattr(ns, "G", None) is not g or rec.rule_depth:
                return rule(ns, gi, ins, y, attrs, saved, needs)
            start = len(g._uids)
            rec.rule_depth = 1
            rec.read_value = False
            try:
                out = rule(ns, gi, ins, y, attrs, saved, needs)
            finally:
                rec.rule_depth = 0
            end = len(g._uids)
            if end > start:
                nodes = g._nodes
                dependent = (rec.read_value or saved is not None or int(op) in _RENEWED
                             or any(nodes[k][N_OP] == _LEAF for k in range(start, end)))
                rec.record.actions.append(
                    ("rule", start, end, int(op), y.index, gi.index,
                     tuple(n.index for n in ins), needs, dependent))
            return out

        return watched


@contextlib.contextmanager
def watching(g, rec):
    """The recorded walk's rule table and leaf accumulation, watched for
    the record of ``g`` (see the module docstring)."""
    rules, acc = _walk_recorded._RULES, _walk_recorded.accumulate_node

    def accumulate(graph, i, gi, leaf=True):
        if graph is not g or rec.rule_depth:
            return acc(graph, i, gi, leaf)
        if not leaf:
            raise CompileError("yscv.compile: a retained gradient in a recorded backward is "
                               "not supported yet", op="backward")
        pos = len(graph._uids)
        acc(graph, i, gi, leaf)
        nodes = graph._nodes
        const = next((k for k in range(pos, len(graph._uids)) if nodes[k][N_OP] == _LEAF),
                     None)
        rec.record.actions.append(("acc", pos, i, gi.index, const))

    _walk_recorded._RULES = _RuleTable(rules, g, rec)
    _walk_recorded.accumulate_node = accumulate
    try:
        yield
    finally:
        _walk_recorded._RULES, _walk_recorded.accumulate_node = rules, acc


def refuse_input_seed(grad, traced_type, name: str) -> None:
    """A recorded walk seeded with an input array would make it a frozen
    constant: refused."""
    if type(grad) is traced_type:
        raise CompileError(
            f"yscv.compile: {name}(create_graph=True) seeded with an input array would "
            "freeze it at record time; pass grad=g.constant(v) instead", op=name)


def renew_vjp(at, attrs, saved, y):
    """`VjpAttrs` ``at`` with node ``y``'s attributes and saved data of the replay."""
    return at._replace(attrs=attrs[y], saved=saved[y])


def replay_rule(record, step, values, attrs, saved) -> None:
    """Call node i's backward rule again on a scratch graph whose leaves
    hold the replay's values of its gradient, inputs and output; copy the
    nodes it appends (values, attributes, saved data) over the recorded ones."""
    _, start, end, op, i, gi, ins, needs, _ = step
    nodes = record.nodes
    scratch = Graph(dtype=record.dtype)
    memo: dict = {}

    def leaf(j):
        nid = memo.get(j)
        if nid is None:
            nid = memo[j] = scratch._append(_LEAF, (), values[j], None, None,
                                            nodes[j][N_RG], ())
        return nid

    g_n, y_n = leaf(gi), leaf(i)
    in_n = tuple(leaf(j) for j in ins)
    m = len(scratch._uids)
    registry.RULES[op](GraphNS(scratch), g_n, in_n, y_n, attrs[i], saved[i], needs)
    made = scratch._nodes[m:]
    if len(made) != end - start or any(r[N_OP] != nodes[start + q][N_OP]
                                       for q, r in enumerate(made)):
        name = Op(op).name.lower()
        raise CompileError(
            f"yscv.compile: the recorded backward of {name} (node {i}) built different "
            f"nodes (from node {start}) for the new values than at record time; the "
            "recorded step does not fit them", node=start, op=name)
    svals = scratch._values
    for q, r in enumerate(made):
        values[start + q] = svals[m + q]
        attrs[start + q] = r[N_ATTRS]
        saved[start + q] = r[N_SAVED]


def replay_acc(step, values, stored, params) -> None:
    """``schedule.accumulate_node`` of a recorded backward, on the replay's
    arrays: the constant of an earlier stored gradient renewed, then the
    leaf's stored gradient and its parameter's ``.grad``."""
    _, _, i, gi, const = step
    if const is not None:
        values[const] = np.array(stored[i], copy=True)
    value = np.array(values[gi], copy=True)
    cur = stored.get(i)
    stored[i] = value if cur is None else np.asarray(cur + value)
    p = params.get(i)
    if p is not None:
        add_param_grad(p, value)
