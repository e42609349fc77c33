"""Reading the source of ``yscv.onnx.load`` (a path, the file's bytes or an
``onnx.ModelProto``) into a self-contained ``ModelProto``.

- Bytes or a file that are not an ONNX model (truncated, random) raise
  `OnnxImportError` rather than protobuf's ``DecodeError``; an empty
  model (no graph, IR version or opsets) is refused too.
- External data (a tensor whose bytes live in another file, ``location``
  naming it) is read only for a model loaded from a path, relative to the
  model file's folder; a location that is absolute or leaves that folder
  (``"../x"``) is refused, as onnx's checker does. Bytes and ModelProtos
  have no folder to resolve against: a tensor with external data is refused,
  naming it (reading the location against the current folder would load
  whatever file of that name happens to be there into the weights).
"""
from __future__ import annotations

import os

from ._import_registry import OnnxImportError

__all__ = ["read_model"]


def _subgraphs(attr):
    if attr.HasField("g"):
        yield attr.g
    yield from attr.graphs


def _tensors(graph):
    """(tensor, description) for every tensor ``graph`` holds: initializers,
    sparse initializers, tensor attributes of its nodes and of their subgraphs."""
    for t in graph.initializer:
        yield t, f"initializer {t.name!r}"
    for s in graph.sparse_initializer:
        yield s.values, f"sparse initializer {s.values.name!r}"
        yield s.indices, f"sparse initializer {s.values.name!r} (indices)"
    for k, node in enumerate(graph.node):
        where = f"node {node.name or '#' + str(k)!r} ({node.op_type})"
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t, f"attribute {a.name!r} of {where}"
            for t in a.tensors:
                yield t, f"attribute {a.name!r} of {where}"
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values, f"attribute {a.name!r} of {where}"
            for sub in _subgraphs(a):
                yield from _tensors(sub)


def _location(t) -> str:
    for entry in t.external_data:
        if entry.key == "location":
            return entry.value
    return ""


def _external(onnx, model):
    ext = onnx.TensorProto.EXTERNAL
    return [(t, where) for t, where in _tensors(model.graph) if t.data_location == ext]


def _inside(location: str) -> bool:
    """``location`` is relative and, normalised, stays inside its folder."""
    if not location or os.path.isabs(location) or location.startswith(("/", "\\")):
        return False
    parts = os.path.normpath(location).replace("\\", "/").split("/")
    return parts[0] != os.pardir


def _parse(onnx, read, what: str):
    from google.protobuf.message import DecodeError
    try:
        model = read()
    except DecodeError as exc:
        raise OnnxImportError(f"onnx.load: {what} is not an ONNX model (truncated or "
                              f"corrupt: {exc})") from exc
    if model.ByteSize() == 0:
        raise OnnxImportError(f"onnx.load: {what} is an empty model (no graph, IR version "
                              "or opset)")
    return model


def _load_external(onnx, model, folder: str) -> None:
    """Read every external tensor of ``model`` from ``folder`` into its raw data."""
    from onnx.external_data_helper import load_external_data_for_tensor
    for t, where in _external(onnx, model):
        loc = _location(t)
        if not _inside(loc):
            raise OnnxImportError(
                f"onnx.load: {where} keeps its data at {loc!r}, which is not a file inside "
                f"the model's folder {folder!r} (an absolute location or one that leaves "
                "the folder is refused)")
        try:
            load_external_data_for_tensor(t, folder)
        except Exception as exc:
            raise OnnxImportError(f"onnx.load: {where}: its external data {loc!r} cannot be "
                                  f"read from {folder!r}: {exc}") from exc


def _refuse_external(onnx, model, what: str) -> None:
    found = _external(onnx, model)
    if found:
        t, where = found[0]
        raise OnnxImportError(
            f"onnx.load: {where} keeps its data in an external file ({_location(t)!r}), and "
            f"{what} has no folder to find it in: load the model from its path, or call "
            "onnx.load_external_data_for_model(model, folder) first")


def read_model(onnx, src):
    """``src`` as a ModelProto with no external data left (see the module
    docstring). A ModelProto given is returned as it is (not copied)."""
    if isinstance(src, onnx.ModelProto):
        _parse(onnx, lambda: src, "the ModelProto")
        _refuse_external(onnx, src, "a ModelProto")
        return src
    if isinstance(src, (bytes, bytearray, memoryview)):
        data = bytes(src)
        model = _parse(onnx, lambda: onnx.load_from_string(data),
                       f"the data ({len(data)} bytes)")
        _refuse_external(onnx, model, "a model given as bytes")
        return model
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        model = _parse(onnx, lambda: onnx.load(path, load_external_data=False),
                       f"the file {path!r}")
        _load_external(onnx, model, os.path.dirname(os.path.abspath(path)))
        return model
    raise TypeError("onnx.load: expected a path, bytes or an onnx.ModelProto, "
                    f"got {type(src).__name__}")
