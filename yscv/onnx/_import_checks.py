"""Load-time validation of an ONNX model: what ``yscv.onnx.load`` refuses
before it builds anything, each as an `OnnxImportError` naming the
node, tensor or value.

- ``check_model``: the ONNX checker (``onnx.checker.check_model``: single
  assignment, unique names, topological order (so no cycles), each node's
  input and output counts and attribute types against its schema, IR
  version), then what the checker lets through: a default-domain opset
  outside 1 .. the newest the onnx package knows, graph inputs of a type
  yscv cannot hold, graph outputs that are not tensors or of a type no
  operator gives, two graph outputs of one name.
- ``decode_tensor``: an initializer or tensor attribute as a NumPy array of
  a type yscv holds (booleans, integers, floats; not complex or strings).
- ``check_nodes``: attribute values and static inputs the schema allows in
  type but not in value: ``auto_pad``, lengths and ranges of ``kernel_shape``
  / ``strides`` / ``dilations`` / ``pads``, a ``kernel_shape`` that
  disagrees with the weight, pooling pads that reach the kernel (a window
  of padding only), ``Cast`` to a type yscv cannot hold, ``Reshape`` shapes
  with several -1, a ``Constant`` of strings, and ``ConstantOfShape`` /
  ``Range`` that would materialise more than ``MAX_ELEMENTS`` elements.

The checker runs without ``full_check`` (strict shape inference): that needs
every weight serialised once more (a second copy of the model, and a 2 GiB
ceiling), and what it adds for the importer is covered here with messages
that name the node.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ._import_dtypes import NARROW_TYPES
from ._import_registry import OnnxImportError

__all__ = ["MAX_ELEMENTS", "check_model", "check_nodes", "decode_tensor", "check_elements"]

#: the most elements a static value built at load or call may hold
MAX_ELEMENTS = 2 ** 31

#: ONNX data types yscv holds (the rest: strings, complex, 8-bit and narrower floats)
_HELD_TYPES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
               7: "INT64", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64"}

_BIG = 1 << 20  # initializers above this many bytes reach the checker as one element


def _type_name(t: int) -> str:
    import onnx
    try:
        return onnx.TensorProto.DataType.Name(int(t))
    except ValueError:
        return f"{t} (not an ONNX data type)"


# ---------------------------------------------------------------- the model
def _copy_fields(src, dst, skip=()):
    for field, value in src.ListFields():
        if field.name in skip:
            continue
        if hasattr(value, "extend"):
            getattr(dst, field.name).extend(value)
        elif hasattr(value, "CopyFrom"):
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


def _for_checker(onnx, model):
    """What the checker reads of ``model``: large initializers reduced to
    one element (it checks their names and types; their sizes are checked
    when they are decoded) and graph inputs and outputs of unknown rank
    given a shape field, which the checker requires and ONNX Runtime does
    not (``make_tensor_value_info(name, type, None)`` writes none)."""
    graph = model.graph
    big = [t for t in graph.initializer if _reducible(t)]
    shapeless = [vi for vi in list(graph.input) + list(graph.output)
                 if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")]
    if not big and not shapeless:
        return model
    m = onnx.ModelProto()
    _copy_fields(model, m, skip=("graph",))
    _copy_fields(graph, m.graph, skip=("initializer",))
    for t in graph.initializer:
        if _reducible(t):
            stub = m.graph.initializer.add()
            _copy_fields(t, stub, skip=("raw_data", "dims"))
            item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
            stub.raw_data = t.raw_data[:item]
        else:
            m.graph.initializer.add().CopyFrom(t)
    for vi in list(m.graph.input) + list(m.graph.output):
        if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
            vi.type.tensor_type.shape.SetInParent()
    return m


def _reducible(t) -> bool:
    return len(t.raw_data) > _BIG and t.data_type in _HELD_TYPES


_WHERE = re.compile(r"[Nn]ame: ?(\S*) OpType: ?(\S+)")


def _run_checker(onnx, model) -> None:
    try:
        onnx.checker.check_model(_for_checker(onnx, model))
    except (onnx.checker.ValidationError, ValueError) as exc:
        msg = str(exc).strip()
        found = _WHERE.search(msg)
        op, node = (found.group(2), found.group(1)) if found else (None, None)
        raise OnnxImportError(f"onnx.load: the ONNX checker refuses the model: {msg}",
                              op=op, node=node) from exc


def _check_versions(onnx, model) -> None:
    latest = int(onnx.defs.onnx_opset_version())
    seen = [int(imp.version) for imp in model.opset_import if imp.domain in ("", "ai.onnx")]
    if len(seen) > 1:
        raise OnnxImportError(f"onnx.load: the model imports the default opset {len(seen)} "
                              f"times (versions {seen})")
    if seen and not 1 <= seen[0] <= latest:
        raise OnnxImportError(f"onnx.load: opset {seen[0]} of the default domain is not "
                              f"between 1 and {latest}, the newest the onnx package knows")


def _check_values(onnx, graph) -> None:
    for vi in graph.input:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None:
            raise OnnxImportError(f"onnx.load: graph input {vi.name!r} is not a tensor "
                                  "(sequences, maps and optionals are not supported)")
        if tt.elem_type and tt.elem_type not in _HELD_TYPES:
            raise OnnxImportError(f"onnx.load: graph input {vi.name!r} has type "
                                  f"{_type_name(tt.elem_type)}, which yscv cannot hold")
    for vi in graph.output:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None and vi.type.WhichOneof("value") is not None:
            raise OnnxImportError(f"onnx.load: graph output {vi.name!r} is not a tensor "
                                  "(sequences, maps and optionals are not supported)")
        if tt is not None and tt.elem_type and tt.elem_type not in _HELD_TYPES \
                and tt.elem_type not in NARROW_TYPES:
            raise OnnxImportError(f"onnx.load: graph output {vi.name!r} has type "
                                  f"{_type_name(tt.elem_type)}, which yscv cannot hold")
    names = [o.name for o in graph.output]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise OnnxImportError(f"onnx.load: graph output name(s) {twice} appear more than once")


def check_model(onnx, model) -> None:
    """Raise ``OnnxImportError`` for a model the ONNX checker refuses, or one
    with an opset, input type or output names the importer cannot take."""
    _run_checker(onnx, model)
    _check_versions(onnx, model)
    _check_values(onnx, model.graph)


def decode_tensor(onnx, numpy_helper, t, where: str) -> np.ndarray:
    """``t`` (a TensorProto) as an array; ``where`` names it in errors."""
    if t.data_type not in _HELD_TYPES:
        raise OnnxImportError(f"onnx.load: {where} has type {_type_name(t.data_type)}, "
                              "which yscv cannot hold (booleans, integers and floats only)")
    try:
        return numpy_helper.to_array(t)
    except Exception as exc:
        raise OnnxImportError(f"onnx.load: {where} cannot be decoded "
                              f"(dims {list(t.dims)}): {exc}") from exc


# ---------------------------------------------------------------- the nodes
def check_elements(node, count: int, what: str) -> None:
    """Refuse a static value of more than ``MAX_ELEMENTS`` elements."""
    if count > MAX_ELEMENTS:
        raise node.fail(f"{what} would hold {count} elements, more than the {MAX_ELEMENTS} "
                        "a static value may hold")


def _ints(node, key, v):
    """``v`` as a list of ints, refusing non-integral values (float pads)."""
    out = []
    for x in np.asarray(v).reshape(-1).tolist():
        if isinstance(x, float) and not x.is_integer():
            raise node.fail(f"{key} {np.asarray(v).tolist()} are not integers")
        out.append(int(x))
    return out


_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _check_window(node, consts) -> None:
    """Conv, ConvTranspose, DeformConv, MaxPool, AveragePool: the geometry
    attributes agree with each other and with a constant weight."""
    at = node.attrs
    auto = at.get("auto_pad", "NOTSET")
    if auto not in _AUTO_PAD:
        raise node.fail(f"auto_pad={auto!r} is not one of {', '.join(_AUTO_PAD)}")
    kernel = _ints(node, "kernel_shape", at["kernel_shape"]) if "kernel_shape" in at else None
    w = consts.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if node.op in ("Conv", "ConvTranspose", "DeformConv") and w is not None:
        if w.ndim < 3:
            raise node.fail(f"the weight {node.inputs[1]!r} has shape {list(w.shape)}: "
                            "it needs at least 3 axes")
        if kernel is not None and kernel != list(w.shape[2:]):
            raise node.fail(f"kernel_shape {kernel} disagrees with the weight "
                            f"{node.inputs[1]!r} of shape {list(w.shape)}")
        kernel = list(w.shape[2:])
        group = int(at.get("group", 1))
        if group < 1 or (node.op == "Conv" and w.shape[0] % group):
            raise node.fail(f"group={group} does not divide the weight's {w.shape[0]} "
                            "output channels" if group >= 1 else f"group={group} is below 1")
    if kernel is None:
        return
    k = len(kernel)
    if any(v < 1 for v in kernel):
        raise node.fail(f"kernel_shape {kernel} has a size below 1")
    for key, length, low in (("strides", k, 1), ("dilations", k, 1), ("pads", 2 * k, 0),
                             ("output_padding", k, 0)):
        if at.get(key) is None:
            continue
        v = _ints(node, key, at[key])
        if len(v) != length:
            raise node.fail(f"{key} {v} has {len(v)} values; the {k}-D kernel {kernel} "
                            f"needs {length}")
        if any(x < low for x in v):
            raise node.fail(f"{key} {v} has a value below {low}")
    if node.op in ("MaxPool", "AveragePool") and at.get("pads") is not None and auto == "NOTSET":
        pads = _ints(node, "pads", at["pads"])
        if any(pads[i] >= kernel[i] or pads[i + k] >= kernel[i] for i in range(k)):
            raise node.fail(f"pads {pads} are not all smaller than the kernel {kernel}: a "
                            "window could hold only padding (ONNX Runtime refuses it too)")


def _check_cast(node, consts) -> None:
    to = node.attrs.get("to")
    if to is None:
        raise node.fail("the 'to' attribute is missing")
    if int(to) not in _HELD_TYPES and int(to) not in NARROW_TYPES:
        raise node.fail(f"to={_type_name(to)} is not supported (booleans, integers, "
                        "floats, bfloat16 and the float8 / 4-bit / 2-bit types only)")


_CONSTANT_KEYS = ("value", "value_float", "value_int", "value_floats", "value_ints")


def _check_constant(node, consts) -> None:
    if not any(k in node.attrs for k in _CONSTANT_KEYS):
        raise node.fail(f"no supported value attribute among {sorted(node.attrs)} "
                        f"(strings are not supported; one of {', '.join(_CONSTANT_KEYS)})")


def _check_reshape(node, consts) -> None:
    shape = consts.get(node.inputs[1]) if len(node.inputs) > 1 else node.attrs.get("shape")
    if shape is None:
        return
    check_reshape_target(node, _ints(node, "shape", shape))


def check_reshape_target(node, shape) -> None:
    """A Reshape target: at most one -1, no value below -1, and no 0 next to
    a -1 when ``allowzero`` makes 0 a size."""
    if shape.count(-1) > 1:
        raise node.fail(f"shape {shape} has more than one -1")
    if any(s < -1 for s in shape):
        raise node.fail(f"shape {shape} has a value below -1")
    if node.attrs.get("allowzero", 0) and -1 in shape and 0 in shape:
        raise node.fail(f"shape {shape} has both 0 and -1 with allowzero=1")


def _check_constant_of_shape(node, consts) -> None:
    value = node.attrs.get("value")
    if value is not None and np.asarray(value).size != 1:
        raise node.fail(f"value holds {np.asarray(value).size} elements; it must hold one")
    shape = consts.get(node.inputs[0])
    if shape is not None:
        constant_of_shape_size(node, shape)


def constant_of_shape_size(node, shape) -> tuple:
    """The output shape of ConstantOfShape, checked: non-negative sizes and
    at most ``MAX_ELEMENTS`` elements."""
    dims = _ints(node, "shape", shape)
    if any(d < 0 for d in dims):
        raise node.fail(f"shape {dims} has a negative size")
    check_elements(node, math.prod(dims), f"the output of shape {dims}")
    return tuple(dims)


def _check_range(node, consts) -> None:
    vals = [consts.get(n) for n in node.inputs[:3]]
    if all(v is not None for v in vals):
        range_size(node, *vals)


def range_size(node, start, limit, delta) -> int:
    """The length of Range(start, limit, delta), checked: scalar operands, a
    delta other than 0 and at most ``MAX_ELEMENTS`` elements."""
    vals = []
    for name, v in zip(("start", "limit", "delta"), (start, limit, delta)):
        v = np.asarray(v)
        if v.size != 1:
            raise node.fail(f"{name} has shape {list(v.shape)}; it must be a scalar")
        x = v.reshape(()).item()
        if isinstance(x, float) and not math.isfinite(x):
            raise node.fail(f"{name} is {x}")
        vals.append(x)
    start, limit, delta = vals
    if delta == 0:
        raise node.fail("delta is 0")
    count = max(math.ceil((limit - start) / delta), 0)
    check_elements(node, count, f"Range({start}, {limit}, {delta})")
    return count


def _check_pad(node, consts) -> None:
    pads = consts.get(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] \
        else node.attrs.get("pads")
    if pads is None:
        return
    pads = _ints(node, "pads", pads)
    axes = consts.get(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    if len(pads) % 2 or (axes is not None and len(pads) != 2 * np.asarray(axes).size):
        want = "an even count" if axes is None else f"{2 * np.asarray(axes).size} (2 per axis)"
        raise node.fail(f"pads {pads} have {len(pads)} values; they need {want}")


def _check_resize(node, consts) -> None:
    """Scales or sizes given: inputs 2 or 3 (opset 11 on), input 1 (opset 10's two inputs)."""
    given = [s for s in range(1, 4) if len(node.inputs) > s and node.inputs[s]]
    if node.op == "Resize" and not (set(given) & {2, 3} or given == [1] == [len(node.inputs) - 1]) \
            and "scales" not in node.attrs:
        raise node.fail("neither scales nor sizes is given")


_NODE_CHECKS = {
    "Conv": _check_window, "ConvTranspose": _check_window, "DeformConv": _check_window,
    "MaxPool": _check_window, "AveragePool": _check_window, "LpPool": _check_window,
    "Cast": _check_cast,
    "Reshape": _check_reshape, "ConstantOfShape": _check_constant_of_shape,
    "Range": _check_range, "Pad": _check_pad, "Resize": _check_resize,
    "Constant": _check_constant,
}


def check_nodes(nodes, inits) -> None:
    """Raise ``OnnxImportError`` for a node whose attribute values or
    constant inputs (initializers, Constant outputs) it cannot run with."""
    consts = dict(inits)
    for node in nodes:
        if node.op == "Constant" and node.outputs:
            for key in ("value", "value_ints", "value_int"):
                if key in node.attrs:
                    consts[node.outputs[0]] = np.asarray(node.attrs[key])
        check = _NODE_CHECKS.get(node.op)
        if check is not None:
            check(node, consts)
