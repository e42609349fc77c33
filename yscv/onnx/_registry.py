"""The registry of ONNX forms: ``EXPORTS[op]`` (an `OnnxForm`),
``NO_ONNX[op]`` (why an op has none), the ``onnx_form`` decorator that fills
the table next to each mapping function, and `N`, the arena node a
mapping function receives. The forms themselves are in ``_forms_tensor``,
``_forms_layers`` and the other ``_forms_*`` modules;
`yscv.onnx._optable` gathers them."""
from __future__ import annotations

from typing import Callable, NamedTuple

from ..node import Op


class OnnxForm(NamedTuple):
    onnx_ops: str       # the ONNX operators used, for the docs table
    min_opset: int
    emit: Callable


EXPORTS: dict = {}

#: ops that have no ONNX form, and why (a backward op, the CTC training loss)
NO_ONNX: dict = {}


def onnx_form(op: Op, onnx_ops: str, min_opset: int = 17):
    def deco(fn):
        EXPORTS[op] = OnnxForm(onnx_ops, min_opset, fn)
        return fn
    return deco


class N:
    """The arena node being exported: index, op, attributes, inputs."""

    __slots__ = ("b", "index", "op", "attrs", "inputs")

    def __init__(self, b, index: int):
        g = b.g
        self.b = b
        self.index = index
        self.op = Op(g._ops[index])
        self.attrs = g._attrs[index]
        self.inputs = g._inputs[index]

    @property
    def name(self) -> str:
        return self.op.name.lower()

    def x(self, k: int = 0) -> str:
        return self.b.tensor(self.inputs[k])

    def in_shape(self, k: int = 0) -> tuple:
        return self.b.shape(self.inputs[k])

    @property
    def shape(self) -> tuple:
        return self.b.shape(self.index)
