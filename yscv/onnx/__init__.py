"""ONNX interchange: ``load`` imports an ONNX model as a trainable module."""
from .load import OnnxImportError, OnnxModule, load

__all__ = ["load", "OnnxImportError", "OnnxModule"]
