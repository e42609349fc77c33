"""``yscv.onnx.backend``: yscv as an ONNX backend (``onnx.backend.base.Backend``).

ONNX's conformance material (``onnx.backend.test``) runs a backend through
four calls: ``prepare(model)`` returns a handle whose ``run(inputs)`` gives
the outputs, ``run_model`` does both, ``run_node`` runs one node, and
``supports_device`` says which devices exist. Here a prepared model is
``yscv.onnx.load``'s module (refusals happen at ``prepare``, as an
``OnnxImportError`` naming the operator and node), run on a fresh
graph per call without gradients.

Data types, at the edges: the graph computes in float64 when the model
holds a double tensor (an input, an output, an initializer or a Cast to
DOUBLE) and in float32 otherwise; float16 inputs are computed in float32
and float outputs are returned in the float type the model declares for
them (float16 outputs as float16). Integer and bool outputs are returned as
the importer computes them, never cast here: their dtype is the importer's
own (the type ONNX defines for each operator).

    import onnx, yscv.onnx.backend as backend
    rep = backend.prepare(onnx.load("model.onnx"))
    (y,) = rep.run([x])
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["YscvBackend", "YscvRep", "prepare", "run_model", "run_node", "supports_device"]


@functools.cache
def _classes():
    """(YscvBackend, YscvRep), built on first use: they subclass ONNX's
    ``Backend`` / ``BackendRep``, and importing this module must not import
    onnx (the package's floors: onnx is imported where it is used)."""
    import onnx
    from onnx.backend.base import Backend, BackendRep

    def _declared_dtype(value_info):
        """The numpy dtype a graph input/output declares, or None."""
        tt = value_info.type.tensor_type if value_info.type.HasField("tensor_type") else None
        if tt is None or not tt.elem_type:
            return None
        try:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, TypeError, ValueError):
            return None

    def _uses_double(model) -> bool:
        """Whether the model holds a double tensor: the graph then runs in float64."""
        double = onnx.TensorProto.DOUBLE
        g = model.graph
        for vi in list(g.input) + list(g.output):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == double:
                return True
        if any(t.data_type == double for t in g.initializer):
            return True
        for n in g.node:
            for a in n.attribute:
                if n.op_type == "Cast" and a.name == "to" and a.i == double:
                    return True
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == double:
                    return True
        return False


    class YscvRep(BackendRep):
        """A prepared model: ``run(inputs)`` -> tuple of NumPy arrays.

        ``inputs``: a list of arrays in the order of the model's graph inputs
        (initializers excluded), a dict by input name, or one array.
        """

        def __init__(self, module, dtype, out_dtypes):
            self.module = module
            self.dtype = dtype
            self._out_dtypes = out_dtypes

        def run(self, inputs, **kwargs):
            import yscv

            names = self.module.input_names
            if isinstance(inputs, dict):
                missing = [n for n in names if n not in inputs]
                if missing:
                    raise ValueError(f"yscv.onnx.backend: run: missing input {missing[0]!r} "
                                     f"(the model takes {names})")
                inputs = [inputs[n] for n in names]
            elif isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) != len(names):
                raise ValueError(f"yscv.onnx.backend: run: {len(inputs)} inputs given, the model "
                                 f"takes {len(names)} ({names})")
            arrays = []
            for a in inputs:
                a = np.asarray(a)
                if a.dtype == np.float16:
                    a = a.astype(np.float32)
                arrays.append(a)
            g = yscv.Graph(self.dtype)
            with g.no_grad():
                outs = self.module(g, *arrays)
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            result = []
            for out, want in zip(outs, self._out_dtypes):
                v = np.array(g.value(out)) if isinstance(out, yscv.NodeId) else np.array(out)
                if want is not None and v.dtype != want and v.dtype.kind == "f" and want.kind == "f":
                    v = v.astype(want)  # the graph's float dtype -> the declared one
                result.append(v)
            return tuple(result)


    class YscvBackend(Backend):
        """The ``onnx.backend.base.Backend`` interface over ``yscv.onnx.load``."""

        @classmethod
        def is_compatible(cls, model, device="CPU", **kwargs) -> bool:
            return cls.supports_device(device)

        @classmethod
        def prepare(cls, model, device="CPU", **kwargs) -> YscvRep:
            from .load import load

            if not cls.supports_device(device):
                raise ValueError(f"yscv.onnx.backend: device {device!r} is not supported (CPU only)")
            if not isinstance(model, onnx.ModelProto):
                model = onnx.load_from_string(bytes(model)) if isinstance(
                    model, (bytes, bytearray)) else onnx.load(model)
            module = load(model)
            dtype = np.float64 if _uses_double(model) else np.float32
            outs = [_declared_dtype(o) for o in model.graph.output]
            return YscvRep(module, dtype, outs)

        @classmethod
        def run_model(cls, model, inputs, device="CPU", **kwargs):
            return cls.prepare(model, device, **kwargs).run(inputs)

        @classmethod
        def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
            """One node run as a one-node model; ``inputs`` in the node's input
            order (empty names skipped)."""
            helper = onnx.helper
            names = [n for n in node.input if n]
            inputs = list(inputs)
            vis = [helper.make_tensor_value_info(
                n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.shape(a))
                for n, a in zip(names, inputs)]
            if outputs_info:
                outs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(dt), sh)
                        for n, (dt, sh) in zip(node.output, outputs_info)]
            opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
            ops = [helper.make_opsetid("", opset)]
            if not outputs_info:
                # the outputs' types as ONNX's shape inference gives them
                bare = helper.make_model(helper.make_graph([node], "node", vis, []),
                                         opset_imports=ops)
                known = {vi.name: vi for vi in
                         onnx.shape_inference.infer_shapes(bare).graph.value_info}
                outs = [known.get(n) or helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT,
                                                                      None)
                        for n in node.output if n]
            model = helper.make_model(helper.make_graph([node], "node", vis, outs),
                                      opset_imports=ops)
            return cls.run_model(model, inputs, device)

        @classmethod
        def supports_device(cls, device: str) -> bool:
            return str(device).upper() == "CPU"

    YscvBackend.__qualname__, YscvRep.__qualname__ = "YscvBackend", "YscvRep"
    return YscvBackend, YscvRep


def __getattr__(name):
    if name in ("YscvBackend", "YscvRep"):
        return _classes()[name == "YscvRep"]
    raise AttributeError(f"module 'yscv.onnx.backend' has no attribute {name!r}")


def prepare(model, device="CPU", **kwargs):
    """``YscvBackend.prepare``: the model loaded, a handle whose ``run(inputs)``
    gives the outputs."""
    return _classes()[0].prepare(model, device, **kwargs)


def run_model(model, inputs, device="CPU", **kwargs):
    return _classes()[0].run_model(model, inputs, device, **kwargs)


def run_node(node, inputs, device="CPU", outputs_info=None, **kwargs):
    return _classes()[0].run_node(node, inputs, device, outputs_info, **kwargs)


def supports_device(device: str) -> bool:
    return str(device).upper() == "CPU"
