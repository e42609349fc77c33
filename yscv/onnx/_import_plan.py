"""From decoded ONNX nodes to an ``OnnxModule``: load-time rewrites, checks
and the placement of initializers.

1. Fuse the exporters' erf-GELU, x * 0.5 * (1 + erf(x / sqrt(2))), into one
   node (yscv has GELU, not erf).
2. Untie initializer aliases (``Identity`` of an initializer: PyTorch's
   exporter writes equal-valued parameters once) and resolve
   BatchNormalization's running statistics to per-node buffers.
3. Drop nodes whose outputs nothing reads.
4. Check every node (``check_node``): unsupported operators fail here.
5. Float initializers that feed data become Parameters (conv weights in
   yscv's layout when only convolutions read them), the rest constants.
6. Record what the forward reads and which children are layer calls (the
   module's Guard: what an assignment may replace).

``select_outputs`` checks ``load(..., outputs=[...])``; step 3 then drops
the nodes those outputs do not need.
"""
from __future__ import annotations

import math

import numpy as np

from ._import_layout import to_yscv_layout
from ._import_modules import find_calls
from ._import_registry import OnnxImportError, OnnxNode, subgraphs
from ._import_table import STATIC_SLOTS, check_node
from ..nn.parameter import Parameter


def _producers(nodes):
    return {o: n for n in nodes for o in n.outputs if o}


def _consumers(nodes, skip=frozenset()):
    out = {}
    for n in nodes:
        for slot, name in enumerate(n.inputs):
            if name and (n.index, slot) not in skip:
                out.setdefault(name, []).append((n, slot))
        for sub in subgraphs(n):   # what a branch or loop body reads from outside
            for name in sub.outer:
                out.setdefault(name, []).append((n, None))
        if n.op == "ai.onnx.preview.training:Gradient" and isinstance(n.attrs.get("y"), str):
            out.setdefault(n.attrs["y"], []).append((n, None))   # differentiated, not an input
    return out


def _constant_value(name, producers, inits):
    if name in inits:
        return inits[name]
    p = producers.get(name)
    if p is not None and p.op == "Constant" and "value" in p.attrs:
        return np.asarray(p.attrs["value"])
    if p is not None and p.op == "Constant" and "value_float" in p.attrs:
        return np.asarray(p.attrs["value_float"])
    return None


def _is_scalar(name, value, producers, inits):
    v = _constant_value(name, producers, inits)
    return v is not None and v.size == 1 and abs(float(v.reshape(-1)[0]) - value) < 1e-4


def _other(node, name):
    """The other input of a binary node, or None if ``name`` is not an input."""
    if len(node.inputs) != 2 or name not in node.inputs:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def _fuse_gelu(nodes, inits, graph_outputs):
    """Replace every erf-GELU subgraph by one ``_GeluErf`` node."""
    producers = _producers(nodes)
    consumers = _consumers(nodes)

    def only(name):
        c = consumers.get(name, [])
        return c[0][0] if len(c) == 1 and name not in graph_outputs else None

    removed, fused = set(), {}
    for erf in nodes:
        if erf.op != "Erf":
            continue
        scale = producers.get(erf.inputs[0])
        if scale is None or only(erf.inputs[0]) is not erf:
            continue
        x = scale.inputs[0]
        if scale.op == "Div" and _is_scalar(scale.inputs[1], math.sqrt(2), producers, inits):
            pass
        elif scale.op == "Mul" and any(
                _is_scalar(c, 1 / math.sqrt(2), producers, inits) for c in scale.inputs):
            x = scale.inputs[1] if _is_scalar(scale.inputs[0], 1 / math.sqrt(2),
                                              producers, inits) else scale.inputs[0]
        else:
            continue
        add = only(erf.outputs[0])
        if add is None or add.op != "Add" or not _is_scalar(
                _other(add, erf.outputs[0]), 1.0, producers, inits):
            continue
        mul1 = only(add.outputs[0])
        if mul1 is None or mul1.op != "Mul":
            continue
        partner = _other(mul1, add.outputs[0])
        half = producers.get(partner)
        if partner == x:               # (x * (1 + erf)) * 0.5
            mul2 = only(mul1.outputs[0])
            if mul2 is None or mul2.op != "Mul" or not _is_scalar(
                    _other(mul2, mul1.outputs[0]), 0.5, producers, inits):
                continue
            group, last = [scale, erf, add, mul1, mul2], mul2
        elif (half is not None and half.op == "Mul" and only(partner) is mul1
              and _other(half, x) is not None
              and _is_scalar(_other(half, x), 0.5, producers, inits)):  # (x * 0.5) * (1 + erf)
            group, last = [half, scale, erf, add, mul1], mul1
        else:
            continue
        removed.update(n.index for n in group)
        fused[last.index] = OnnxNode("_GeluErf", erf.name, last.index, (x,), last.outputs,
                                      {"_fused": True})
    return [fused.get(n.index, n) for n in nodes
            if n.index not in removed or n.index in fused]


def _untie_aliases(nodes, inits):
    """``Identity`` nodes reading a float initializer become initializers of
    their own (copies). PyTorch's exporter writes parameters with equal values
    (e.g. two LayerNorms' ones) once and aliases the others through Identity;
    a parameter the model really shares is written once and read twice, with
    no Identity. Untying keeps the original model's parameters apart, so
    fine-tuning updates them as the original would."""
    kept = []
    for n in nodes:
        src = n.inputs[0] if n.op == "Identity" and n.inputs else None
        if src in inits and inits[src].dtype.kind == "f" and n.outputs[0] not in inits:
            inits[n.outputs[0]] = inits[src].copy()
        else:
            kept.append(n)
    return kept


def _bn_statistics(nodes, inits):
    """(node index, slot) -> (name, array) for BatchNormalization mean (3) and
    var (4) inputs that are initializers or constants, through Identity."""
    producers = _producers(nodes)
    stats = {}
    for n in nodes:
        if n.op != "BatchNormalization":
            continue
        for slot in (3, 4):
            name = n.inputs[slot]
            src = name
            while src in producers and producers[src].op == "Identity":
                src = producers[src].inputs[0]
            value = _constant_value(src, producers, inits)
            if value is not None:
                stats[(n.index, slot)] = (name, value)
    return stats


def _prune(nodes, graph_outputs, skip):
    """Nodes whose outputs something reads (graph outputs included), to a fixpoint."""
    while True:
        consumers = _consumers(nodes, skip)
        keep = [n for n in nodes
                if any(o and (o in consumers or o in graph_outputs) for o in n.outputs)]
        if len(keep) == len(nodes):
            return nodes, consumers
        nodes = keep


def select_outputs(names, nodes, inputs, inits, graph_outputs) -> list:
    """The model's outputs: the file's graph outputs (``names`` None), or the
    values ``names`` lists (node outputs, graph inputs or initializers),
    which cut the graph there: nodes they do not need are pruned later."""
    if names is None:
        return list(graph_outputs)
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise TypeError(f"onnx.load: outputs must be a list of value names, got {names!r}")
    names = list(names)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"onnx.load: outputs must be value names (str), got {bad[0]!r}")
    if not names:
        raise ValueError("onnx.load: outputs is empty; name at least one value")
    if len(set(names)) != len(names):
        raise ValueError(f"onnx.load: outputs lists a value twice: {names}")
    known = [o for n in nodes for o in n.outputs if o]
    known += [name for name, _, _ in inputs] + list(inits)
    unknown = [n for n in names if n not in set(known)]
    if unknown:
        import difflib
        close = difflib.get_close_matches(unknown[0], known, n=3)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise OnnxImportError(
            f"onnx.load: outputs: the model has no value named {unknown[0]!r} (outputs "
            f"name node outputs, graph inputs or initializers){hint}")
    return names


def _param_dtype(a):
    return np.float64 if a.dtype == np.float64 else np.float32


def plan_module(cls, nodes, opset, inputs, outputs, inits, frozen=frozenset()):
    """Build the module: rewrite, check, place initializers (``frozen``: names
    to keep as constants whatever reads them)."""
    from onnx.helper import tensor_dtype_to_np_dtype
    graph_outputs = set(outputs)
    inits = dict(inits)
    nodes = _untie_aliases(nodes, inits)
    nodes = _fuse_gelu(nodes, inits, graph_outputs)
    stats = _bn_statistics(nodes, inits)
    nodes, consumers = _prune(nodes, graph_outputs, set(stats))
    used = set(consumers) | graph_outputs
    for n in nodes:
        check_node(n, opset, used, inits, lambda t: np.dtype(tensor_dtype_to_np_dtype(t)))
    produced = {o for n in nodes for o in n.outputs} | {name for name, _, _ in inputs}
    missing = [name for name in used if name not in produced and name not in inits]
    if missing:
        raise ValueError(f"onnx.load: value(s) {sorted(missing)} are read but never produced")
    statics, params = {}, []
    for name, a in inits.items():
        uses = consumers.get(name, [])
        if not uses and name not in graph_outputs:
            continue
        if a.dtype.kind != "f" or name in frozen or not uses \
                or all(slot in STATIC_SLOTS.get(n.op, ()) for n, slot in uses):
            statics[name] = a
            continue
        tag = "conv" if a.ndim >= 3 and all(n.op in ("Conv", "DeformConv") and slot == 1
                                            for n, slot in uses) else None
        params.append((name, a, tag))
    m = cls(nodes, opset, inputs, outputs, statics)
    owners = {}
    for name, a, tag in params:
        p = Parameter(to_yscv_layout(a, tag), dtype=_param_dtype(a))
        owner, attr = m._place(name, p, "param")
        m._params[name] = (owner._path + (attr,), tag)
        owners[name] = owner
    for (index, slot), (name, a) in stats.items():
        buf = np.array(a, dtype=_param_dtype(a), copy=True).reshape(-1)
        # looked up by name at each call: Module.to() replaces buffer arrays
        m._bn_stats[(index, slot)] = m._place(name, buf, "buffer")
    _guard(m, nodes, consumers, graph_outputs, owners)
    return m.eval()


def _guard(m, nodes, consumers, graph_outputs, owners):
    """Fill the module's Guard: the layer calls (the children a new module
    may replace) and, for every imported parameter and buffer, its path and
    the nodes that read it (what an assignment must not take away)."""
    guard = m._guard

    def owner(node, slot):
        where = m._bn_stats.get((node.index, slot))
        return where[0] if where is not None else owners.get(node.inputs[slot])

    def read(path, node):
        for i in range(1, len(path) + 1):
            guard.readers.setdefault(path[:i], {})[node.index] = (
                node.where(), node.inputs[0] if node.inputs else None)

    for name, (path, _) in m._params.items():
        guard.params.add(path)
        for node, _ in consumers.get(name, ()):
            read(path, node)
    by_index = {n.index: n for n in nodes}
    for (index, _), (holder, attr) in m._bn_stats.items():
        path = holder._path + (attr,)
        guard.buffers.add(path)
        read(path, by_index[index])
    guard.readers = {p: [r for _, r in sorted(v.items())] for p, v in guard.readers.items()}
    guard.calls = find_calls(nodes, consumers, graph_outputs, owner)
    guard.by_index = {c.index: c for c in guard.calls.values()}
    guard.active = True
