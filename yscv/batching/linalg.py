"""Batching rules of the linear-algebra ops: matmul as a batched product
(1-d operands made matrices and back; a batched vector times a shared matrix
is already a product of rows), the decompositions on a leading
batch of matrices."""
from __future__ import annotations

from ..op import Op
from ..registry import register_batching
from ._rules import align, logical_ndim, loop, register_all, same


@register_batching(Op.MATMUL)
def _matmul(g, op, xs, bat, attrs, e):
    a, b = xs
    ba, bb = bat
    na, nb = logical_ndim(a, ba), logical_ndim(b, bb)
    if na == 1 and nb == 2 and ba and not bb:  # rows [B, k] @ [k, n]: one product as it is
        return g._apply(op, (a, b), attrs)
    if na == 1:  # a vector: a [1, k] row, dropped after
        a = g.unsqueeze(a, 1 if ba else 0)
    if nb == 1:  # a vector: a [k, 1] column
        b = g.unsqueeze(b, -1)
    rank = max(logical_ndim(a, ba), logical_ndim(b, bb))
    a = align(g, a, rank) if ba else a
    b = align(g, b, rank) if bb else b
    out = g._apply(op, (a, b), attrs)
    if na == 1 or nb == 1:
        shape = tuple(out.shape)
        drop = {len(shape) - 1} if nb == 1 else set()
        if na == 1:
            drop.add(len(shape) - 2 if nb != 1 else len(shape) - 2)
        out = g.reshape(out, tuple(s for k, s in enumerate(shape) if k not in drop))
    return out


# a leading batch of matrices: one call
register_all((Op.INV, Op.DET, Op.SLOGDET, Op.CHOLESKY, Op.EIGH), same)
register_all((Op.SOLVE, Op.EINSUM), loop, "loop")
