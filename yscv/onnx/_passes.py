"""Clean-ups on the emitted ONNX node list, run until nothing changes:

- a Transpose whose only consumer is a unary elementwise node moves after
  it (``Relu(Transpose(x)) -> Transpose(Relu(x))``), so that the NCHW
  round trips around Conv / pooling / BatchNormalization meet;
- two consecutive Transposes compose into one, or vanish when they cancel;
- Identity nodes are bypassed (kept only where a graph output needs a name);
- nodes whose outputs nobody reads are dropped.

Graph input, output and initializer names never change.
"""
from __future__ import annotations

#: unary elementwise operators a Transpose commutes with
_UNARY = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf",
          "Identity", "Elu", "Softsign", "Softplus"}


def _perm(node):
    for a in node.attribute:
        if a.name == "perm":
            return list(a.ints)
    return None


def _consumers(nodes):
    out = {}
    for k, nd in enumerate(nodes):
        for t in nd.input:
            out.setdefault(t, []).append(k)
    return out


def _producers(nodes):
    return {t: k for k, nd in enumerate(nodes) for t in nd.output}


def _rename_input(node, old, new):
    for j, t in enumerate(node.input):
        if t == old:
            node.input[j] = new


def _sink_transposes(nodes, outputs) -> bool:
    cons = _consumers(nodes)
    for k, t in enumerate(nodes):
        if t.op_type != "Transpose" or t.output[0] in outputs:
            continue
        users = cons.get(t.output[0], [])
        if len(users) != 1:
            continue
        u = nodes[users[0]]
        if u.op_type not in _UNARY or len(u.input) != 1 or len(u.output) != 1:
            continue
        # t: x -> a, u: a -> y   becomes   u: x -> a, t: a -> y
        x, a, y = t.input[0], t.output[0], u.output[0]
        u.input[0] = x
        u.output[0] = a
        t.input[0] = a
        t.output[0] = y
        nodes[k], nodes[users[0]] = u, t
        return True
    return False


def _fold_transposes(helper, nodes, outputs) -> bool:
    prod = _producers(nodes)
    for k, t2 in enumerate(nodes):
        if t2.op_type != "Transpose":
            continue
        j = prod.get(t2.input[0])
        if j is None or nodes[j].op_type != "Transpose":
            continue
        t1 = nodes[j]
        p1, p2 = _perm(t1), _perm(t2)
        if p1 is None or p2 is None:
            continue
        composed = [p1[i] for i in p2]
        if composed == list(range(len(composed))):
            nodes[k] = helper.make_node("Identity", [t1.input[0]], [t2.output[0]],
                                        name=t2.name)
        else:
            nodes[k] = helper.make_node("Transpose", [t1.input[0]], [t2.output[0]],
                                        name=t2.name, perm=composed)
        return True
    return False


def _bypass_identities(nodes, outputs, graph_names) -> bool:
    prod = _producers(nodes)
    cons = _consumers(nodes)
    for k, nd in enumerate(nodes):
        if nd.op_type != "Identity":
            continue
        x, y = nd.input[0], nd.output[0]
        if y not in outputs:
            for u in cons.get(y, []):
                _rename_input(nodes[u], y, x)
            del nodes[k]
            return True
        j = prod.get(x)
        if (j is not None and x not in outputs and x not in graph_names
                and cons.get(x, []) == [k]):
            p = nodes[j]
            for q, t in enumerate(p.output):
                if t == x:
                    p.output[q] = y
            del nodes[k]
            return True
    return False


def _drop_dead(nodes, outputs) -> bool:
    cons = _consumers(nodes)
    for k in range(len(nodes) - 1, -1, -1):
        nd = nodes[k]
        if not any(t in outputs or cons.get(t) for t in nd.output if t):
            del nodes[k]
            return True
    return False


def simplify(helper, nodes: list, outputs: set, graph_names: set) -> list:
    """The clean-ups above on ``nodes`` (a list of NodeProto, in order)."""
    nodes = list(nodes)
    while (_sink_transposes(nodes, outputs) or _fold_transposes(helper, nodes, outputs)
           or _bypass_identities(nodes, outputs, graph_names) or _drop_dead(nodes, outputs)):
        pass
    return nodes
