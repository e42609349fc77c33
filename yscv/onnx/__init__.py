"""ONNX: trained yscv models out to every runtime.

``yscv.onnx.export(model, example_inputs, path, ...)`` writes a model as an
ONNX file (the ``onnx`` package is needed only then: ``pip install
"yscv[onnx]"``). The op table is :data:`yscv.onnx._optable.EXPORTS`; see
docs/onnx.md.
"""
from .export import ExportError, export

__all__ = ["export", "ExportError"]
