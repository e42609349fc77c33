"""Handlers of ONNX's sequence operators inside a graph: SequenceEmpty,
SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
SequenceLength, ConcatFromSequence, SplitToSequence and SequenceMap.

A sequence value is a Python list of tensor values (static arrays or
NodeIds) in the importer's environment; graph inputs and outputs that are
sequences stay refused at load. Splitting and concatenating data record
``narrow`` / ``squeeze`` / ``cat`` / ``stack``, so gradients flow through
the elements; SequenceMap replays its body once per element
(`yscv.onnx._import_run.run_body`).
"""
from __future__ import annotations

import numpy as np

from ._import_registry import handler
from ._import_run import run_body

__all__: list = []


def _seq(run, node, slot=0) -> list:
    v = run.raw(node.inputs[slot])
    if not isinstance(v, list):
        raise node.fail(f"input {slot} ({node.inputs[slot]!r}) is not a sequence")
    return v


def _position(run, node, slot, size, default, insert=False):
    if not run.has(node, slot):
        return default
    p = int(np.asarray(run.arr(node.inputs[slot])).reshape(-1)[0])
    top = size if insert else size - 1
    if not -size <= p <= top:
        raise node.fail(f"position {p} is out of range for a sequence of {size} tensors")
    return p + size if p < 0 else p


def _element(run, name):
    v = run.raw(name)
    return v if isinstance(v, np.ndarray) else run.node(name)


@handler("SequenceEmpty")
def _sequence_empty(run, node):
    return [[]]


@handler("SequenceConstruct")
def _sequence_construct(run, node):
    return [[_element(run, n) for n in node.inputs if n]]


@handler("SequenceInsert")
def _sequence_insert(run, node):
    """A new sequence with the tensor inserted at ``position`` (default: the end)."""
    seq = list(_seq(run, node))
    pos = _position(run, node, 2, len(seq), len(seq), insert=True)
    seq.insert(pos, _element(run, node.inputs[1]))
    return [seq]


@handler("SequenceAt")
def _sequence_at(run, node):
    seq = _seq(run, node)
    return [seq[_position(run, node, 1, len(seq), 0) if run.has(node, 1) else 0]]


@handler("SequenceErase")
def _sequence_erase(run, node):
    """A new sequence without the tensor at ``position`` (default: the last)."""
    seq = list(_seq(run, node))
    if not seq:
        raise node.fail("the sequence is empty")
    del seq[_position(run, node, 1, len(seq), len(seq) - 1)]
    return [seq]


@handler("SequenceLength")
def _sequence_length(run, node):
    return [np.array(len(_seq(run, node)), np.int64)]


@handler("ConcatFromSequence")
def _concat_from_sequence(run, node):
    """The tensors joined along ``axis`` (``new_axis=1``: stacked on a new axis)."""
    seq = _seq(run, node)
    if not seq:
        raise node.fail("the sequence is empty")
    new = bool(node.attrs.get("new_axis", 0))
    rank = len(seq[0].shape) + new
    axis = int(node.attrs["axis"])
    if not -rank <= axis < rank:
        raise node.fail(f"axis={axis} is out of range for rank {rank}")
    axis %= rank
    if all(isinstance(v, np.ndarray) for v in seq):
        return [np.stack(seq, axis) if new else np.concatenate(seq, axis)]
    g = run.g
    nodes = [g.constant(v.astype(g.dtype)) if isinstance(v, np.ndarray) else v for v in seq]
    return [g.stack(nodes, axis) if new else g.cat(nodes, axis)]


@handler("SplitToSequence")
def _split_to_sequence(run, node):
    """The input split along ``axis``: into pieces of the sizes of ``split``
    (a 1-D input), of ``split`` each (a scalar; the last may be shorter), or
    into single slices (no ``split``; squeezed unless ``keepdims=1``)."""
    name = node.inputs[0]
    shape = run.shape(name)
    axis = int(node.attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        raise node.fail(f"axis={axis} is out of range for an input of rank {len(shape)}")
    axis %= len(shape)
    n = shape[axis]
    squeeze = False
    if run.has(node, 1):
        split = np.asarray(run.arr(node.inputs[1])).astype(np.int64)
        if split.ndim == 0 or split.size == 1 and split.ndim == 0:
            k = int(split)
            if k < 1:
                raise node.fail(f"split={k} must be positive")
            sizes = [k] * (n // k) + ([n % k] if n % k else [])
        else:
            sizes = [int(s) for s in split.reshape(-1)]
            if sum(sizes) != n or min(sizes, default=0) < 0:
                raise node.fail(f"split {sizes} does not add up to axis {axis} of size {n}")
    else:
        sizes = [1] * n
        squeeze = not int(node.attrs.get("keepdims", 1))
    starts = np.cumsum([0] + sizes[:-1])
    if run.is_static(name):
        a = run.arr(name)
        parts = [np.take(a, np.arange(s, s + k), axis) for s, k in zip(starts, sizes)]
        return [[np.squeeze(p, axis) for p in parts] if squeeze else parts]
    g, x = run.g, run.node(name)
    parts = [g.narrow(x, axis, int(s), k) for s, k in zip(starts, sizes)]
    return [[g.squeeze(p, axis) for p in parts] if squeeze else parts]


@handler("SequenceMap")
def _sequence_map(run, node):
    """The body run on the i-th element of every sequence input (a tensor
    input is passed whole each time); each body output becomes a sequence."""
    body = node.attrs["body"]
    first = _seq(run, node, 0)
    values = [run.raw(n) for n in node.inputs]
    for slot, v in enumerate(values):
        if isinstance(v, list) and len(v) != len(first):
            raise node.fail(f"sequence input {slot} has {len(v)} tensors, input 0 has "
                            f"{len(first)}")
    if len(body.inputs) != len(values):
        raise node.fail(f"the body takes {len(body.inputs)} inputs for {len(values)}")
    outs = [[] for _ in body.outputs]
    for i in range(len(first)):
        bound = {b: v[i] if isinstance(v, list) else _element(run, n)
                 for b, v, n in zip(body.inputs, values, node.inputs)}
        for acc, v in zip(outs, run_body(run, body, bound)):
            acc.append(v)
    return outs
