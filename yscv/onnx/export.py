"""``yscv.onnx.export``: a yscv model (an ``nn.Module`` or ``f(g, *nodes)``)
recorded once on example inputs and written as an ONNX file.

The model runs in eval mode under ``g.no_grad()`` on a fresh graph of the
model's dtype; every node the outputs depend on is mapped to ONNX operators
by the table of `yscv.onnx._optable`; parameters and buffers become
initializers named by their module paths. Training flags are restored
afterwards; running statistics and ``Parameter.grad`` are never touched
(no backward runs, and batch norm in eval mode updates nothing).

The ``onnx`` package is imported here, lazily: ``import yscv`` never needs it.
"""
from __future__ import annotations

import numbers
import os

import numpy as np

from ..errors import AutogradError
from ..node import N_ATTRS, NodeId, Op

__all__ = ["export", "ExportError"]

_LEAF = int(Op.LEAF)


class ExportError(AutogradError, ValueError):
    """A recorded op has no ONNX form (or none at the requested opset); the
    message and the ``op`` / ``node`` fields name it."""


def _import_onnx():
    try:
        import onnx
    except ImportError as exc:
        raise ImportError(
            "yscv.onnx.export needs the onnx package: pip install onnx (from yscv's checkout: "
            "pip install -e \".[onnx]\")") from exc
    return onnx


# ------------------------------------------------------------ arguments
def _example_arrays(example_inputs):
    if isinstance(example_inputs, (list, tuple)):
        items = list(example_inputs)
    else:
        items = [example_inputs]
    if not items:
        raise ValueError("export: example_inputs is empty; give at least one array")
    out = []
    for k, a in enumerate(items):
        if isinstance(a, NodeId):
            raise TypeError(f"export: example_inputs[{k}] is a NodeId; give NumPy arrays "
                            "(the model is recorded on a fresh graph)")
        arr = np.asarray(a)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"export: example_inputs[{k}] has dtype {arr.dtype}; expected "
                            "a float array (or an integer index array)")
        out.append(arr)
    return out


def _model_dtype(model, arrays):
    params = getattr(model, "parameters", None)
    if callable(params):
        for p in model.parameters():
            return np.dtype(p.data.dtype)
        for b in model.buffers():
            if np.asarray(b).dtype.kind == "f":
                return np.dtype(np.asarray(b).dtype)
    for a in arrays:
        if a.dtype in (np.float32, np.float64):
            return np.dtype(a.dtype)
    return np.dtype(np.float32)


def _names(given, count, default, what):
    if given is None:
        return [default] if count == 1 else [f"{default}{k}" for k in range(count)]
    names = list(given)
    if len(names) != count or not all(isinstance(s, str) and s for s in names):
        raise ValueError(f"export: {what} must be {count} non-empty strings, got {given!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"export: {what} {names!r} repeat a name")
    return names


def _dynamic_axes(dynamic_axes, input_names, output_names, arrays):
    """{name: {axis: symbol}} from torch.onnx.export's dict form (axes as a
    list get the symbol ``"{name}_dim{axis}"``)."""
    if dynamic_axes is None:
        return {}
    if not isinstance(dynamic_axes, dict):
        raise TypeError(f"export: dynamic_axes must be a dict, got {type(dynamic_axes).__name__}")
    known = {n: len(a.shape) for n, a in zip(input_names, arrays)}
    out = {}
    for name, axes in dynamic_axes.items():
        if name not in known and name not in output_names:
            raise ValueError(f"export: dynamic_axes names {name!r}, which is neither an input "
                             f"{input_names} nor an output {output_names}")
        if isinstance(axes, dict):
            items = dict(axes)
        elif isinstance(axes, (list, tuple)):
            items = {a: f"{name}_dim{a}" for a in axes}
        else:
            raise TypeError(f"export: dynamic_axes[{name!r}] must be a dict or a list of axes")
        norm = {}
        for a, sym in items.items():
            if isinstance(a, bool) or not isinstance(a, numbers.Integral):
                raise TypeError(f"export: dynamic_axes[{name!r}] axis {a!r} is not an int")
            if name in known:
                nd = known[name]
                if not -nd <= a < nd:
                    raise ValueError(f"export: dynamic_axes[{name!r}] axis {a} is out of "
                                     f"range for a {nd}-d input")
                a %= nd
            norm[int(a)] = str(sym)
        out[name] = norm
    return out


# ---------------------------------------------------------------- tracing
def _flatten_outputs(out, path="output"):
    if isinstance(out, NodeId):
        return [out]
    if isinstance(out, (list, tuple)):
        res = []
        for k, o in enumerate(out):
            res += _flatten_outputs(o, f"{path}[{k}]")
        return res
    raise TypeError(f"export: the model returned {type(out).__name__} at {path}; expected "
                    "a NodeId or a (nested) tuple of NodeIds")


def _record(model, arrays, dtype):
    """Run the model once on a fresh graph: (graph, input indices, output ids)."""
    from ..engine.graph import Graph

    g = Graph(dtype)
    args = []
    for a in arrays:
        args.append(g.constant(a) if a.dtype.kind == "f" else np.asarray(a, dtype=np.int64))
    with g.no_grad():
        out = model(g, *args)
    outs = _flatten_outputs(out)
    for o in outs:
        if o.graph is not g:
            raise ValueError("export: the model returned a node of another graph")
    inputs = {a.index: k for k, a in enumerate(args) if isinstance(a, NodeId)}
    return g, inputs, outs


def _leaf_names(model, g):
    """Arena index -> module path of every bound parameter and buffer."""
    names = {}
    if not callable(getattr(model, "named_parameters", None)):
        return names
    by_id = {}
    for name, p in model.named_parameters():
        by_id.setdefault(id(p.data), name)
        by_id.setdefault(id(p), name)
    for name, b in model.named_buffers():
        by_id.setdefault(id(b), name)
    for i, p in g._param_of.items():
        name = by_id.get(id(p))
        if name:
            names[i] = name
    for key, (i, uid, obj) in g._buffers.items():
        name = by_id.get(id(obj))
        if name and i not in names:
            names[i] = name
    seen = set()
    for i in sorted(names):
        if names[i] in seen:
            del names[i]
        seen.add(names.get(i))
    return names


def _reachable(g, outs):
    need = set()
    stack = [o.index for o in outs]
    while stack:
        i = stack.pop()
        if i in need:
            continue
        need.add(i)
        stack.extend(g._inputs[i])
    return sorted(need)


# ----------------------------------------------------------------- export
def export(model, example_inputs, path, input_names=None, output_names=None,
           dynamic_axes=None, opset=17):
    """Write ``model`` as an ONNX file at ``path``; returns the ``onnx.ModelProto``.

    Args:
        model: a `yscv.nn.Module` or a function ``f(g, *nodes) -> NodeId``
            (or a nested tuple of NodeIds). It runs once, in eval mode and
            without gradients, on ``example_inputs``.
        example_inputs: an array or a tuple of arrays (float arrays become the
            graph's inputs in the model's dtype; integer arrays are index
            inputs, e.g. of an embedding).
        path: the file to write (str or os.PathLike).
        input_names, output_names: names of the graph's inputs and outputs
            (default ``input`` / ``output``, numbered when several).
        dynamic_axes: as ``torch.onnx.export``'s: ``{name: {axis: "batch"}}``
            or ``{name: [axis, ...]}``; those axes are free in the file.
        opset: the ONNX opset (>= 17; ``DeformConv`` needs 19).

    The file keeps yscv's layouts at its edges (channel-last) and the model's
    dtype (float32 or float64), and passes ``onnx.checker.check_model(...,
    full_check=True)``. An op with no ONNX form raises `ExportError`
    naming the op and the node; the model is left untouched either way.
    """
    onnx = _import_onnx()
    from onnx import helper

    from ._builder import Builder, Symbol
    from ._optable import EXPORTS, NO_ONNX, N
    from ._passes import simplify

    if isinstance(opset, bool) or not isinstance(opset, numbers.Integral):
        raise TypeError(f"export: opset must be an int, got {opset!r}")
    top = onnx.defs.onnx_opset_version()
    if not 17 <= opset <= top:
        raise ValueError(f"export: opset={opset} must be in [17, {top}]")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"export: path must be a str or os.PathLike, got {type(path).__name__}")
    if not callable(model):
        raise TypeError(f"export: model must be an nn.Module or a function f(g, *nodes), "
                        f"got {type(model).__name__}")
    arrays = _example_arrays(example_inputs)
    in_names = _names(input_names, len(arrays), "input", "input_names")
    dtype = _model_dtype(model, arrays)

    modules = list(model.modules()) if callable(getattr(model, "modules", None)) else []
    flags = [(m, m.training) for m in modules]
    try:
        if modules:
            model.eval()
        g, inputs, outs = _record(model, arrays, dtype)
        out_names = _names(output_names, len(outs), "output", "output_names")
        if set(out_names) & set(in_names):
            raise ValueError(f"export: output_names {out_names} and input_names {in_names} "
                             "share a name; ONNX names each tensor once")
        dyn = _dynamic_axes(dynamic_axes, in_names, out_names, arrays)
        symbols, traces = [], [g]
        for name in dict.fromkeys(s for k in in_names for s in dyn.get(k, {}).values()):
            where = [(p, a) for p, k in enumerate(in_names)
                     for a, s in dyn.get(k, {}).items() if s == name]
            p0, a0 = where[0]
            sym = Symbol(name, p0, a0, arrays[p0].shape[a0], len(traces))
            resized = list(arrays)
            for p, a in where:
                size = arrays[p].shape[a]
                resized[p] = np.take(arrays[p], np.arange(2 * size) % size, axis=a)
            try:
                g2, _, outs2 = _record(model, resized, dtype)
            except Exception as exc:
                raise ValueError(
                    f"export: dynamic_axes: the model fails when {name!r} changes size "
                    f"({sym.size} -> {2 * sym.size}): {exc}") from exc
            if (g2._ops != g._ops or len(outs2) != len(outs)
                    or any(len(g._shape(i)) != len(g2._shape(i)) for i in range(len(g)))):
                raise ValueError(
                    f"export: dynamic_axes: the model records a different graph when "
                    f"{name!r} changes size; it cannot be exported with that axis free")
            symbols.append(sym)
            traces.append(g2)
    finally:
        for m, flag in flags:
            m.training = flag

    input_map = {i: in_names[k] for i, k in inputs.items()}
    int_inputs = [(in_names[k], np.asarray(a, np.int64)) for k, a in enumerate(arrays)
                  if a.dtype.kind != "f"]
    b = Builder(onnx, traces, int(opset), input_map, int_inputs, _leaf_names(model, g),
                symbols, in_names)
    for i in _reachable(g, outs):
        op = g._ops[i]
        if op == _LEAF or i in input_map:
            continue
        n = N(b, i)
        form = EXPORTS.get(n.op)
        if form is None:
            why = NO_ONNX.get(n.op, "no mapping")
            name = n.name
            if n.op == Op.CUSTOM:   # a user's op: name it
                name = f"custom op {g._nodes[i][N_ATTRS].op.name!r}"
            raise ExportError(f"export: {name} (node {i}) has no ONNX form ({why})",
                              op=name, node=i)
        if opset < form.min_opset:
            raise ExportError(
                f"export: {n.name} (node {i}) needs opset >= {form.min_opset} "
                f"({form.onnx_ops}); got opset={opset}", op=n.name, node=i,
                expected=form.min_opset, got=opset)
        b.set_tensor(i, form.emit(b, n))

    outputs = []
    for k, (o, name) in enumerate(zip(outs, out_names)):
        b.nodes.append(helper.make_node("Identity", [b.tensor(o.index)], [name],
                                        name=f"output_{k}"))
        outputs.append(_value_info(helper, name, b, o.index, dyn.get(name, {}), traces,
                                   symbols, prefix=name))
    graph_inputs = []
    for k, (a, name) in enumerate(zip(arrays, in_names)):
        syms = dyn.get(name, {})
        shape = [syms.get(ax, d) for ax, d in enumerate(a.shape)]
        et = b.elem_type if a.dtype.kind == "f" else onnx.TensorProto.INT64
        graph_inputs.append(helper.make_tensor_value_info(name, et, shape))
    nodes = simplify(helper, b.nodes, set(out_names),
                     {v.name for v in graph_inputs} | {t.name for t in b.initializers})
    used = {t for nd in nodes for t in nd.input}
    inits = [t for t in b.initializers if t.name in used]
    graph = helper.make_graph(nodes, "yscv", graph_inputs, outputs, inits)
    model_proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", int(opset))],
        producer_name="yscv", producer_version=_version())
    buffers = _buffer_names(model, inits)
    if buffers:   # what yscv.onnx.load must not train (the file has no such flag)
        helper.set_model_props(model_proto, {BUFFERS_KEY: ",".join(buffers)})
    model_proto.ir_version = min(model_proto.ir_version, _max_ir(onnx, opset))
    onnx.checker.check_model(model_proto, full_check=True)
    onnx.save(model_proto, os.fspath(path))
    return model_proto


#: the file's metadata key listing the initializers that hold buffers
#: (running statistics ...), which yscv.onnx.load keeps as constants
BUFFERS_KEY = "yscv.buffers"


def _buffer_names(model, inits) -> list:
    """Initializers holding a module's buffers (its name, or a re-laid-out
    copy ``name.<layout>``), sorted."""
    if not callable(getattr(model, "named_buffers", None)):
        return []
    names = {name for name, _ in model.named_buffers()}
    return sorted(t.name for t in inits
                  if t.name in names or t.name.rsplit(".", 1)[0] in names)


def _value_info(helper, name, b, idx, syms, traces, symbols, prefix):
    """An output's type: dims named in dynamic_axes, dims that change with a
    symbol named ``{output}_dim{k}``, the others fixed."""
    shape = list(b.shape(idx))
    changed = b.dynamic_axes_of(idx)
    dims = []
    for k, d in enumerate(shape):
        if k in syms:
            dims.append(syms[k])
        elif k in changed:
            dims.append(f"{prefix}_dim{k}")
        else:
            dims.append(d)
    return helper.make_tensor_value_info(name, b.elem_type, dims)


def _max_ir(onnx, opset):
    """The IR version that goes with ``opset`` (runtimes refuse newer IRs)."""
    try:
        table = onnx.helper.VERSION_TABLE
        irs = [row[1] for row in table if row[2] == opset]
        if irs:
            return max(irs)
    except Exception:
        pass
    return onnx.IR_VERSION


def _version():
    from .. import __version__
    return __version__
