"""The importer's operator table and its load-time checks.

``HANDLERS`` maps an ONNX operator type to its handler (the table of
`yscv.onnx._import_registry`, filled by the handler modules this module
imports). ``check_node`` runs at load on every node:
an operator without a handler, or an attribute value the handler does not
implement, raises `OnnxImportError` naming the operator and the node,
before any call. ``STATIC_SLOTS`` lists the inputs that are static arguments
(shapes, bounds, widths): a float initializer feeding only those is a
constant, not a Parameter.
"""
from __future__ import annotations

from . import (_import_ops, _import_index, _import_nn, _import_rnn,  # noqa: F401
               _import_shape,  # (fill HANDLERS, in this order)
               _import_norms, _import_losses, _import_attention, _import_math, _import_select,
               _import_resize, _import_pad, _import_pool, _import_gridsample, _import_quant,
               _import_scatter, _import_deform, _import_rearrange, _import_sets,
               _import_integer, _import_signal, _import_decoder, _import_control,
               _import_sequence, _import_training, _import_random, _import_ml)
from ._import_registry import HANDLERS, _Unsupported, subgraphs
from ._import_gridsample import GRID_MODES, GRID_PADDING
from ._import_pad import PAD_MODES
from ._import_resize import check_resize
from ._import_scatter import REDUCTIONS

__all__ = ["HANDLERS", "STATIC_SLOTS", "check_node"]

STATIC_SLOTS = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4},
    "ConstantOfShape": {0}, "Clip": {1, 2}, "Pad": {1, 2, 3}, "Unsqueeze": {1},
    "Squeeze": {1}, "Split": {1}, "Dropout": {1, 2}, "Range": {0, 1, 2},
    "Gather": {1}, "BatchNormalization": {3, 4}, "LSTM": {4}, "GRU": {4}, "RNN": {4},
    "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1},
    "ReduceSumSquare": {1}, "ReduceLogSumExp": {1}, "ReduceProd": {1}, "ReduceL2": {1},
    "Where": {0}, "Shape": {0}, "Size": {0}, "CastLike": {1},
    "Resize": {1, 2, 3}, "Upsample": {1}, "GatherElements": {1}, "ScatterElements": {1},
    "CenterCropPad": {1}, "MaxUnpool": {1, 2}, "AffineGrid": {1}, "RoiAlign": {1, 2},
    "Scatter": {1}, "ScatterND": {1}, "IsInf": {0}, "IsNaN": {0},
    "SoftmaxCrossEntropyLoss": {2}, "NegativeLogLikelihoodLoss": {2}, "Attention": {3, 6},
}
STATIC_SLOTS.update(_import_math.STATIC_SLOTS)
STATIC_SLOTS.update(_import_select.STATIC_SLOTS)


def _kernel_rank(node, inits):
    if "kernel_shape" in node.attrs:
        return len(node.attrs["kernel_shape"])
    w = inits.get(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if w is None else w.ndim - 2


def _used_outputs(node, used):
    return [i for i, o in enumerate(node.outputs) if o and o in used]


def _check_recurrent(node, fail):
    at = node.attrs
    if at.get("clip") is not None:
        raise fail("the clip attribute is not supported")
    if at.get("input_forget", 0):
        raise fail("input_forget=1 is not supported")
    acts = [a.lower() for a in at.get("activations") or []]
    if node.op == "RNN":
        if acts and (acts[0] not in ("tanh", "relu") or len(set(acts)) > 1):
            raise fail(f"activations {at['activations']} are not supported (Tanh or Relu)")
    else:
        default = ["sigmoid", "tanh", "tanh"] if node.op == "LSTM" else ["sigmoid", "tanh"]
        if acts and acts != default * (len(acts) // len(default)):
            raise fail(f"activations {at['activations']} are not supported (the defaults)")


def check_node(node, opset, used, inits, np_dtype_of) -> None:
    """Raise ``OnnxImportError`` if ``node`` cannot be imported; decode the
    attributes the handlers read in NumPy form (Cast's ``to``)."""
    fail = node.fail
    if node.op not in HANDLERS or (node.op.startswith("_") and not node.attrs.get("_fused")):
        raise fail("this operator is not supported by yscv.onnx.load")
    for key, v in node.attrs.items():
        if isinstance(v, _Unsupported):
            raise fail(f"attribute {key!r} holds a list of graphs or a sparse tensor (not "
                       "supported)")
    for sub in subgraphs(node):   # every output of a body counts as read
        body_used = {o for n in sub.nodes for o in n.outputs} | set(sub.outputs)
        for n in sub.nodes:
            check_node(n, opset, body_used, {**inits, **sub.statics}, np_dtype_of)
    op, at = node.op, node.attrs
    outs = _used_outputs(node, used)
    if op == "BatchNormalization" and any(i > 2 for i in outs):
        raise fail(f"output {max(outs)} ({node.outputs[max(outs)]!r}) is not supported")
    if op == "BatchNormalization" and any(i > 0 for i in outs) and not at.get("training_mode"):
        raise fail(f"output {max(outs)} ({node.outputs[max(outs)]!r}) is given only with "
                   "training_mode=1")
    if op == "Conv" and _kernel_rank(node, inits) not in (None, 1, 2, 3):
        raise fail(f"{_kernel_rank(node, inits)}-D convolution is not supported")
    if op == "ConvTranspose" and _kernel_rank(node, inits) not in (None, 1, 2, 3):
        raise fail(f"{_kernel_rank(node, inits)}-D transposed convolution is not supported")
    if op in ("MaxPool", "AveragePool", "LpPool") and \
            len(at.get("kernel_shape", ())) not in (1, 2, 3):
        raise fail(f"kernel_shape {at.get('kernel_shape')} is not supported (1-D, 2-D or 3-D)")
    if op == "Pad" and at.get("mode", "constant") not in PAD_MODES:
        raise fail(f"mode {at['mode']!r} is not supported ({', '.join(PAD_MODES)})")
    if op in ("LSTM", "GRU", "RNN"):
        _check_recurrent(node, fail)
    if op == "GridSample" and (at.get("mode", "linear") not in GRID_MODES
                               or at.get("padding_mode", "zeros") not in GRID_PADDING):
        raise fail(f"mode {at.get('mode')!r} / padding_mode {at.get('padding_mode')!r} is not "
                   "supported")
    if op == "Gelu" and at.get("approximate", "none") not in ("none", "tanh"):
        raise fail(f"approximate={at['approximate']!r} is not supported")
    if op in ("Resize", "Upsample"):
        check_resize(node, opset, fail)
    if op in ("ScatterElements", "ScatterND") and at.get("reduction", "none") not in REDUCTIONS:
        raise fail(f"reduction={at['reduction']!r} is not supported ({', '.join(REDUCTIONS)})")
    if op == "Cast":
        at["_np_to"] = np_dtype_of(int(at["to"]))
    for module in (_import_math, _import_select, _import_quant, _import_rearrange, _import_sets,
                   _import_integer, _import_signal, _import_decoder, _import_control,
                   _import_training, _import_random, _import_ml):
        module.check(node, np_dtype_of)
