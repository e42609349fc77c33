"""``yscv.onnx.load``: an ONNX model as a yscv module, to run and fine-tune.

``m = yscv.onnx.load(path)`` reads a file (or bytes, or an ``onnx.ModelProto``)
written by ``torch.onnx.export``, ``onnx.helper`` or ``yscv.onnx.export`` and
returns an `OnnxModule`. Calling ``m(g, *inputs)`` replays the ONNX
nodes in order as ordinary Graph ops, so the result is differentiable and the
module's Parameters train with ``yscv.optim`` like any layer's.

- Float initializers that feed data become Parameters; integer initializers,
  ``Constant`` nodes, float initializers used only as static arguments
  (shapes, clip bounds, pad widths) and those a file from
  ``yscv.onnx.export`` lists as buffers (metadata ``yscv.buffers``: e.g. the
  running statistics of a float64 batch norm written as elementwise ops)
  are constants. BatchNormalization's
  running statistics become buffers (one pair per node).
- Parameter and buffer names are the initializer names; a dotted name nests
  sub-modules (``fc.weight`` is parameter ``weight`` of child ``fc``), and
  characters other than letters, digits and ``_`` become ``_``:
  ``m.onnx_names`` maps each state-dict key to its initializer name.
- Conv weights are converted once, here, from ONNX's [O, I/groups, ``*K``] to
  yscv's [``*K``, I/groups, O] (the Parameter holds the yscv layout; an
  initializer that also feeds another op keeps the file's layout and is
  converted in the graph). Every other initializer keeps the file's layout.
  ``m.initializers()`` gives the current values in the file's layouts.
- Layouts: the module takes and returns the file's layouts (an NCHW model
  takes NCHW inputs); NCHW ops run channel-last inside, with transposes only
  where a channel-first value is needed.
- The module is returned in eval mode (BatchNormalization uses the running
  statistics, Dropout is the identity), as the file would run in ONNX
  Runtime; ``m.train()`` switches to batch statistics (updating the running
  statistics with the file's momentum) and active dropout.
- Shape plumbing (Shape, Gather, ConstantOfShape, Concat, Unsqueeze, Slice,
  Squeeze, Reshape, Cast, Range ...) on shapes and constants is evaluated
  with NumPy at call time; the same operators on data record graph ops.
- An operator (or an attribute value) the importer does not support raises
  `OnnxImportError` here, at load, naming the operator and its node;
  so does a model that is not valid ONNX (``_import_checks``) and external
  data that cannot be resolved safely (``_import_source``).
- ``load(src, outputs=[name, ...])`` cuts the graph: the model returns
  those tensors (a backbone's features) and drops what they do not need.
  A child one node alone reads (``fc`` of a Gemm) can be replaced by any
  module, which the forward then calls; other replacements of what the
  nodes read are refused at assignment (``yscv.onnx._import_modules``).
"""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np

from ..nn.module import Module
from ..nn.parameter import Parameter
from ._import_checks import check_model, check_nodes, decode_tensor
from ._import_modules import Container, Guard, GuardedMixin
from ._import_registry import OnnxImportError, OnnxNode, Subgraph, _Unsupported
from ._import_source import read_model

__all__ = ["load", "OnnxImportError", "OnnxModule"]


def _import_onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:  # pragma: no cover - exercised only without onnx
        raise ImportError(
            'yscv.onnx.load needs the onnx package: pip install onnx (from yscv\'s checkout: '
            'pip install -e ".[onnx]")') from exc
    return onnx, numpy_helper


def _decode_nodes(onnx, numpy_helper, graph, prefix=""):
    """The graph's nodes as `OnnxNode` (a subgraph's indexed ``prefix/k``)."""
    nodes = []
    for i, n in enumerate(graph.node):
        op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
        index = f"{prefix}/{i}" if prefix else i
        where = f"operator {op!r} (node {n.name or f'#{index}'!r}, index {index})"
        attrs = {a.name: _attr_value(onnx, numpy_helper, a, where, index) for a in n.attribute}
        nodes.append(OnnxNode(op, n.name or f"#{index}", index, n.input, n.output, attrs))
    return nodes


def _subgraph(onnx, numpy_helper, g, where, index):
    """A graph attribute as a `Subgraph` (nodes checked as the main graph's)."""
    if len(g.sparse_initializer):
        raise OnnxImportError(f"onnx.load: {where}: sparse initializers are not supported")
    statics = OrderedDict((t.name, decode_tensor(onnx, numpy_helper, t, f"initializer {t.name!r} "
                                                 f"of {where}")) for t in g.initializer)
    nodes = _decode_nodes(onnx, numpy_helper, g, str(index))
    check_nodes(nodes, statics)
    return Subgraph(g.name, nodes, [vi.name for vi in g.input], [vi.name for vi in g.output],
                    statics)


def _attr_value(onnx, numpy_helper, a, where, index=0):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, onnx.TensorProto):
        return decode_tensor(onnx, numpy_helper, v, f"attribute {a.name!r} of {where}")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode("utf-8") for s in v]
    if isinstance(v, onnx.GraphProto):
        return _subgraph(onnx, numpy_helper, v, where, index)
    if isinstance(v, onnx.SparseTensorProto) or (
            isinstance(v, list) and v and isinstance(v[0], onnx.GraphProto)):
        return _Unsupported(a.name)
    return v


_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def _key_parts(onnx_name: str) -> list:
    parts = [_NAME_CHARS.sub("_", p) or "_" for p in onnx_name.split(".")]
    return parts


def _free(owner, name: str) -> bool:
    """No parameter, buffer, module or attribute (``forward``, ``training``
    ...) of ``owner`` is called ``name``."""
    return not (name in owner._parameters or name in owner._buffers
                or name in owner._modules or hasattr(owner, name))


class OnnxModule(GuardedMixin, Module):
    """An imported ONNX graph: ``m(g, *inputs)`` replays its nodes on ``g``.

    Inputs are NodeIds (or arrays, taken as constants) in the order and
    layouts of the file's graph inputs; integer inputs (token ids) are NumPy
    integer arrays. Returns one NodeId, or a tuple for several outputs.

    A child that one node alone reads (``fc`` for a Gemm, ``features[0]``
    for a Conv) can be replaced by any module (``m.fc = nn.Linear(128, 10)``):
    the forward then calls it on that node's data input (channel-last for
    convolutions and norms, as yscv's layers take it). Replacing what several
    nodes read is refused at assignment; cut the graph with
    ``load(src, outputs=[...])`` instead.

    Attributes:
        input_names, output_names: the file's graph inputs and outputs.
        onnx_names: state-dict key -> initializer name.
        opset: the model's default-domain opset.
    """

    def __init__(self, nodes, opset, inputs, outputs, statics):
        super().__init__()
        d = self.__dict__
        d["_nodes"] = nodes
        d["opset"] = opset
        d["_inputs"] = inputs          # [(name, np dtype kind, rank or None)]
        d["input_names"] = [n for n, _, _ in inputs]
        d["output_names"] = list(outputs)
        d["_statics"] = statics        # name -> ndarray (constants)
        d["_path"] = ()
        d["_guard"] = Guard()          # what may replace what (yscv.onnx._import_modules)
        d["_params"] = {}              # onnx name -> (state-dict key parts, layout tag or None)
        d["_bn_stats"] = {}            # (node index, slot) -> (owner module, buffer name)
        d["onnx_names"] = OrderedDict()

    # ------------------------------------------------------------- building
    def _place(self, onnx_name: str, value, kind: str):
        """Register ``value`` (Parameter or ndarray buffer) under a key derived
        from ``onnx_name`` (nested at its dots when that clashes with nothing,
        else flat); returns (owner module, attribute name)."""
        parts = _key_parts(onnx_name)
        if not self._nests(parts):
            base = "_".join(parts)
            name, n = base, 1
            while not _free(self, name):
                name, n = f"{base}_{n}", n + 1
            parts = [name]
        owner = self
        for p in parts[:-1]:
            child = owner._modules.get(p)
            if child is None:
                child = Container(owner._path + (p,), self._guard)
                owner.add_module(p, child)
            owner = child
        if kind == "param":
            owner.register_parameter(parts[-1], value)
        else:
            owner.register_buffer(parts[-1], value)
        self.onnx_names[".".join(parts)] = onnx_name
        return owner, parts[-1]

    def _nests(self, parts) -> bool:
        """Whether ``parts`` can be placed as nested modules without clashing
        with a parameter, buffer, module or attribute of the same name."""
        owner = self
        for i, p in enumerate(parts):
            if i == len(parts) - 1:
                return _free(owner, p)
            child = owner._modules.get(p)
            if child is None:
                return _free(owner, p)
            if not isinstance(child, Container):
                return False
            owner = child
        return True

    # ------------------------------------------------------------- calling
    def forward(self, g, *inputs):
        from ._import_run import run_graph
        return run_graph(self, g, inputs)

    def initializers(self) -> "OrderedDict[str, np.ndarray]":
        """Initializer name -> a copy of the current value in the FILE's
        layout (conv weights converted back): what a fine-tuned model would
        write into the ONNX file."""
        from ._import_layout import to_file_layout
        out = OrderedDict()
        for name, (_, tag) in self._params.items():
            p = self._current(name)
            if p is not None:  # None: its sub-module was replaced
                out[name] = to_file_layout(p.data, tag)
        return out

    def file_layout(self, onnx_name: str, array) -> np.ndarray:
        """``array`` (e.g. a gradient) shaped like the Parameter of
        initializer ``onnx_name``, converted to the file's layout."""
        from ._import_layout import to_file_layout
        return to_file_layout(np.asarray(array), self._params[onnx_name][1])

    def parameter(self, onnx_name: str) -> Parameter:
        """The Parameter holding initializer ``onnx_name`` (the one now at its
        key, if a Parameter was assigned there)."""
        p = self._current(onnx_name)
        if p is None:
            raise KeyError(f"OnnxModule.parameter: initializer {onnx_name!r} is no longer "
                           f"in the model (the sub-module holding it was replaced)")
        return p

    def _current(self, onnx_name: str):
        """The Parameter now at initializer ``onnx_name``'s key, or None when
        a replaced sub-module took it out of the tree."""
        parts = self._params[onnx_name][0]
        owner = self
        for part in parts[:-1]:
            owner = owner._modules.get(part)
            if not isinstance(owner, Container):
                return None
        return owner._parameters.get(parts[-1])

    def extra_repr(self) -> str:
        return (f"inputs={self.input_names}, outputs={self.output_names}, "
                f"nodes={len(self._nodes)}, opset={self.opset}")


def _default_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def load(src, outputs=None) -> OnnxModule:
    """Read an ONNX model and return it as an `OnnxModule` (eval mode).

    Args:
        src: a file path, the file's bytes, or an ``onnx.ModelProto``.
        outputs: value names (node outputs, e.g. a backbone's features) the
            model returns instead of the file's graph outputs, in this order;
            the nodes they do not need, and their initializers, are dropped.
            The inputs stay the file's.

    Raises:
        ImportError: the ``onnx`` package is missing (``pip install onnx``).
        OnnxImportError: an operator, attribute value or graph feature the
            importer does not support; names the operator and its node. Also
            a model that is not valid ONNX (data that does not decode, a model
            the ONNX checker refuses, an opset outside 1 .. the newest the
            onnx package knows, attribute values or constant inputs no
            runtime could run with), and external data that cannot be
            resolved: bytes and ModelProtos have no folder to resolve it
            against, and from a path only files inside the model's folder
            are read. Also a name in ``outputs`` the model has no value for.
        TypeError, ValueError: ``outputs`` is not a list of names, is empty
            or lists a name twice.
    """
    onnx, numpy_helper = _import_onnx()
    model = read_model(onnx, src)
    check_model(onnx, model)
    graph = model.graph
    opset = _default_opset(model)
    if len(graph.sparse_initializer):
        raise OnnxImportError("onnx.load: sparse initializers are not supported "
                              f"({graph.sparse_initializer[0].values.name!r})")
    inits = OrderedDict((t.name, decode_tensor(onnx, numpy_helper, t, f"initializer {t.name!r}"))
                        for t in graph.initializer)
    nodes = _decode_nodes(onnx, numpy_helper, graph)
    check_nodes(nodes, inits)
    inputs = []
    for vi in graph.input:
        if vi.name in inits:
            continue  # an initializer listed as an input (older exporters)
        tt = vi.type.tensor_type
        kind = "f"
        if tt.elem_type:
            kind = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).kind
        rank = len(tt.shape.dim) if tt.HasField("shape") else None
        inputs.append((vi.name, kind, rank))
    from ._import_plan import plan_module, select_outputs
    outputs = select_outputs(outputs, nodes, inputs, inits, [o.name for o in graph.output])
    # initializers yscv.onnx.export marked as buffers: constants, not Parameters
    buffers = {p.value for p in model.metadata_props if p.key == "yscv.buffers"}
    frozen = {name for v in buffers for name in v.split(",") if name}
    return plan_module(OnnxModule, nodes, opset, inputs, outputs, inits, frozen)
