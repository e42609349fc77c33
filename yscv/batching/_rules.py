"""What the batching rules share: the operands' logical ranks, aligning a
batched operand to a rank, expanding an unbatched one to the batch, the
generic rules (``same``, ``elementwise``, ``loop``) and the registration of
one rule for many ops.

A rule runs with its vmap level inactive (yscv/engine/batching.py): a
batched operand ``x`` is then a node whose ``x.shape`` starts with the batch
axis; an unbatched one is a node or an array-like of the per-sample shape.
"""
from __future__ import annotations

import numpy as np

from ..errors import BatchingError as _BatchingError
from ..node import NodeId
from ..registry import register_batching

__all__ = ["BatchedInts", "logical_ndim", "align", "batched", "same", "elementwise", "loop", "register_all",
           "reduce_after"]


class BatchedInts:
    """An integer array (labels, indices) batched by vmap: ``physical`` holds
    the batch axes of ``levels`` first; index-taking ops accept it inside
    ``f`` and see its per-sample ``shape``."""

    __slots__ = ("physical", "levels")

    def __init__(self, physical: np.ndarray, levels: tuple):
        self.physical = physical
        self.levels = levels

    @property
    def shape(self) -> tuple:
        return self.physical.shape[len(self.levels):]

    @property
    def ndim(self) -> int:
        return self.physical.ndim - len(self.levels)

    @property
    def dtype(self):
        return self.physical.dtype

    def __array__(self, dtype=None, copy=None):
        raise _BatchingError("vmap: a batched integer array reached an op as a plain array "
                            "(its values are the whole batch); this op takes it through its "
                            "batching rule only")

    def __repr__(self) -> str:
        return f"BatchedInts(shape={self.shape}, batch levels={self.levels})"



def _shape(x) -> tuple:
    return tuple(x.shape) if type(x) is NodeId else np.shape(x)


def logical_ndim(x, is_batched: bool) -> int:
    return len(_shape(x)) - (1 if is_batched else 0)


def align(g, x, rank: int):
    """Batched ``x`` with singleton axes after the batch axis up to ``rank``
    per-sample axes (NumPy's broadcasting then pairs per-sample axes with
    per-sample axes)."""
    shape = _shape(x)
    m = len(shape) - 1
    if m >= rank:
        return x
    return g.reshape(x, (shape[0],) + (1,) * (rank - m) + tuple(shape[1:]))


def batched(g, x, is_batched: bool, size: int):
    """``x`` with the batch axis first: itself when batched, else expanded
    (a view for a node; a broadcast constant for an array)."""
    if is_batched:
        return x
    shape = _shape(x)
    if type(x) is NodeId:
        return g.expand(g.unsqueeze(x, 0), (size,) + shape)
    return np.broadcast_to(np.asarray(x), (size,) + shape)


def same(g, op, xs, bat, attrs, e):
    """The op itself on the batched operands: ops that act elementwise or on
    trailing axes and take any leading axes."""
    return g._apply(op, xs, attrs)


def elementwise(g, op, xs, bat, attrs, e, extra_rank: int = 0):
    """A broadcasting op: batched operands aligned to the largest per-sample
    rank, then the op once."""
    rank = max([logical_ndim(x, b) for x, b in zip(xs, bat)] + [extra_rank])
    ys = [align(g, x, rank) if b else x for x, b in zip(xs, bat)]
    return g._apply(op, ys, attrs)


def loop(g, op, xs, bat, attrs, e):
    """One call per sample (the op with its own attributes on each sample's
    operands) and the results stacked: always right, for ops whose
    attributes fix per-sample shapes or which mix their leading axis."""
    outs = []
    for b in range(e.size):
        ys = [g.select(x, 0, b) if k else x for x, k in zip(xs, bat)]
        outs.append(g._apply(op, ys, attrs))
    return g.stack(outs, 0)


def reduce_after(g, out, reduction: str):
    """A per-element loss ``out`` [B, ...] reduced per sample as ``reduction``."""
    shape = _shape(out)
    if reduction == "none" or len(shape) == 1:
        return out
    axes = tuple(range(1, len(shape)))
    return g.mean(out, axes) if reduction == "mean" else g.sum(out, axes)


def register_all(ops, rule, how: str = "fold") -> None:
    for op in ops:
        register_batching(op, how)(rule)
