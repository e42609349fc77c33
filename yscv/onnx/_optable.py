"""yscv Op -> ONNX operators: one mapping function per Op member.

``EXPORTS[op]`` is an `OnnxForm`: the ONNX operators the op becomes
(what docs/onnx.md's table shows; a test keeps the two equal), the lowest
opset it needs, and ``emit(b, n) -> tensor name``, which appends the ONNX
nodes for arena node ``n`` through the `Builder`
``b``. ``NO_ONNX[op]`` says why an op has no ONNX form; exporting it raises
`yscv.onnx.ExportError` naming the op and the node.

Float attributes (LeakyRelu's alpha, the normalizations' epsilon) are
float32 in ONNX: float64 models spell those ops with float64 constants
instead, so that they stay exact.

Layouts: yscv is channel-last and its weights input-major. Where ONNX wants
NCHW (Conv, pooling, BatchNormalization, DepthToSpace) the mapping wraps the
operator in Transposes; adjacent transposes that cancel are folded after the
whole graph is emitted (`yscv.onnx._passes`). Weights that are leaves
are re-laid out in NumPy (initializers already in ONNX's layout).

The forms live in the ``_forms_*`` modules beside this one, one per
category (`yscv.onnx._forms_tensor`: elementwise, activations,
reductions, linear algebra, shape, indexing; `yscv.onnx._forms_layers`:
convolution, pooling, normalization, recurrent, attention, losses; and one
per group of the further ops). To add an op: write ``@onnx_form(Op.X,
"OnnxOp, ...")`` above a function ``_x(b, n)`` returning the output's tensor
name in the module of its category, add a row to the export test table
(tests/onnx/test_export.py) and regenerate the docs table
(`markdown_table`; a test compares it with docs/onnx.md).
"""
from __future__ import annotations

from ..node import Op
from . import (_forms_activation, _forms_layers, _forms_linpool, _forms_loss,  # noqa: F401
               _forms_math, _forms_scan, _forms_shapeidx, _forms_tensor)  # (fill EXPORTS)
from ._registry import EXPORTS, NO_ONNX, N, OnnxForm, onnx_form

__all__ = ["EXPORTS", "NO_ONNX", "N", "OnnxForm", "onnx_form", "markdown_table"]


# -------------------------------------------------------------- docs table
def markdown_table() -> str:
    """The op table of docs/onnx.md (a test keeps the page equal to it)."""
    rows = ["| yscv op | ONNX operators | opset |", "|---|---|---|"]
    for op in Op:
        if op is Op.LEAF:
            continue
        form = EXPORTS.get(op)
        if form is None:
            rows.append(f"| `{op.name.lower()}` | no ONNX form: {NO_ONNX[op]} | |")
        else:
            rows.append(f"| `{op.name.lower()}` | {form.onnx_ops} | {form.min_opset} |")
    return "\n".join(rows)
