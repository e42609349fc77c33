"""ONNX: trained yscv models out to every runtime, foreign models in.

``yscv.onnx.export(model, example_inputs, path, ...)`` writes a model as an
ONNX file; ``yscv.onnx.load(path)`` reads one as a trainable module. The
``onnx`` package is needed only then (``pip install onnx``, or ``pip install -e ".[onnx]"`` from the checkout). The
export op table is `yscv.onnx._optable.EXPORTS`; see docs/onnx.md.
"""
from .export import ExportError, export
from .load import OnnxImportError, OnnxModule, load

__all__ = ["export", "ExportError", "load", "OnnxImportError", "OnnxModule"]
