"""Batching rules of the shape and indexing ops: a shape gains the batch
axis, axes move by one, a slicing key gains a leading full slice, operands
to join are expanded to the batch."""
from __future__ import annotations

import inspect

from ..op import Op
from ..registry import BATCHING_METHODS, register_batching
from ._rules import BatchedInts, align, batched, loop, register_all


@register_batching(Op.RESHAPE)
@register_batching(Op.FLATTEN)
@register_batching(Op.UNSQUEEZE)
@register_batching(Op.SQUEEZE)
def _reshape(g, op, xs, bat, attrs, e):
    return g._apply(op, xs, attrs._replace(shape=(e.size,) + tuple(attrs.shape)))


@register_batching(Op.EXPAND)
def _expand(g, op, xs, bat, attrs, e):
    x = align(g, xs[0], len(attrs.shape))
    return g._apply(op, (x,), attrs._replace(shape=(e.size,) + tuple(attrs.shape)))


@register_batching(Op.TRANSPOSE)
def _transpose(g, op, xs, bat, attrs, e):
    return g._apply(op, xs, attrs._replace(perm=(0,) + tuple(p + 1 for p in attrs.perm),
                                           inverse=(0,) + tuple(p + 1 for p in attrs.inverse)))


@register_batching(Op.CAT)
def _cat(g, op, xs, bat, attrs, e):
    ys = [batched(g, x, b, e.size) for x, b in zip(xs, bat)]
    return g._apply(op, ys, attrs._replace(axis=attrs.axis + 1))


@register_batching(Op.STACK)
def _stack(g, op, xs, bat, attrs, e):
    ys = [batched(g, x, b, e.size) for x, b in zip(xs, bat)]
    return g._apply(op, ys, attrs._replace(axis=attrs.axis + 1))


@register_batching(Op.SELECT)
@register_batching(Op.NARROW)
@register_batching(Op.GETITEM)
def _index(g, op, xs, bat, attrs, e):
    return g._apply(op, xs, attrs._replace(key=(slice(None),) + tuple(attrs.key)))


@register_batching(Op.FLIP)
def _flip(g, op, xs, bat, attrs, e):
    return g._apply(op, xs, attrs._replace(axes=tuple(a + 1 for a in attrs.axes)))


@register_batching(Op.PAD)
def _pad(g, op, xs, bat, attrs, e):
    return g._apply(op, xs, attrs._replace(widths=((0, 0),) + tuple(attrs.widths)))


@register_batching(Op.REPEAT)
def _repeat(g, op, xs, bat, attrs, e):
    x = align(g, xs[0], len(attrs.reps))
    return g._apply(op, (x,), attrs._replace(reps=(1,) + tuple(attrs.reps)))


@register_batching(Op.ROLL)
def _roll(g, op, xs, bat, attrs, e):
    if attrs.axes is None:  # a roll of the flattened sample
        return loop(g, op, xs, bat, attrs, e)
    return g._apply(op, xs, attrs._replace(axes=tuple(a + 1 for a in attrs.axes)))


@register_batching(Op.DIAGONAL)
def _diagonal(g, op, xs, bat, attrs, e):
    return g._apply(op, xs, attrs._replace(axis1=attrs.axis1 + 1, axis2=attrs.axis2 + 1))


@register_batching(Op.TRIL)
@register_batching(Op.TRIU)
def _triangle(g, op, xs, bat, attrs, e):
    # the last two axes; leading axes are a batch of matrices
    return g._apply(op, xs, attrs)


# the attributes fix per-sample shapes or positions (an index array, a
# window table, a flattened layout): one call per sample
register_all((Op.OUTER, Op.GATHER, Op.SCATTER_ADD, Op.SCATTER, Op.EMBEDDING, Op.INDEX_SELECT),
             loop, "loop")

def _embedding_rows(g, fn, args, kw, level, entry):
    """``g.embedding(weight, indices)`` with per-sample indices and a shared
    weight: one lookup of every sample's indices."""
    bound = inspect.signature(fn).bind(g, *args, **kw)
    a = bound.arguments
    names = list(a)
    weight, idx = a[names[1]], a[names[2]]
    if type(idx) is not BatchedInts or idx.levels != (level,) or entry.batched(g, weight):
        return NotImplemented
    return fn(g, weight, idx.physical)


BATCHING_METHODS["embedding"] = _embedding_rows
