"""Linear algebra (backward): matmul, transpose, einsum.

Gradients for broadcast batch axes of matmul are returned at the broadcast
shape; the walk sums them down. 1-D matmul operands get their gradient
shaped here (the walk cannot know which axis NumPy inserted).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..compute.linalg import dot, einsum, stacked_matmul_grads
from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import recorded_unary
from ._rules import unary


@register_backward(Op.MATMUL)
def matmul_backward(g, inputs, out, attrs, saved, needs):
    a, b = inputs
    if a.ndim == 2 and b.ndim == 2:  # the MLP path: two GEMMs on transposed views
        # yscv's tiles or np.dot (yscv/compute/gemm.py)
        return (dot(g, b.T) if needs[0] else None), (dot(a.T, g) if needs[1] else None)
    return _matmul_backward_general(g, a, b, needs)


def _matmul_backward_general(g, a, b, needs):
    na, nb = a.ndim, b.ndim
    ga = gb = None
    if na == 1 and nb == 1:  # dot product, g is 0-d
        if needs[0]:
            ga = b * g
        if needs[1]:
            gb = a * g
    elif na == 1:  # a (k,) acted as a row: b (..., k, n), g (..., n)
        if needs[0]:
            ga = b @ g if nb == 2 else np.matmul(b, g[..., None])[..., 0]
        if needs[1]:
            gb = a[:, None] * g[..., None, :]
    elif nb == 1:  # b (k,) acted as a column: a (..., m, k), g (..., m)
        if needs[0]:
            ga = g[..., None] * b
        if needs[1]:
            lead = list(range(na - 1))
            gb = a.T @ g if na == 2 else np.tensordot(a, g, axes=(lead, lead))
    elif nb == 2:  # (..., m, k) @ (k, n): g @ b^T and the batch-summed a^T @ g
        ga, gb = stacked_matmul_grads(g, a, b, needs[0], needs[1])
    else:
        if needs[0]:
            ga = np.matmul(g, np.swapaxes(b, -1, -2))
        if needs[1]:
            gb = np.matmul(np.swapaxes(a, -1, -2), g)
    return ga, gb


unary(Op.TRANSPOSE, lambda g, x, y, a: np.transpose(g, a.inverse))


@register_backward(Op.EINSUM)
def einsum_backward(g, inputs, out, spec, saved, needs):
    return tuple(_einsum_operand_grad(g, inputs, spec, k) if needs[k] else None
                 for k in range(len(inputs)))


def _einsum_operand_grad(g, inputs, spec, k):
    """Gradient of operand k: einsum(g, other operands -> k's distinct indices).

    Indices of k that appear nowhere else were only summed over: the
    gradient is broadcast along them. Indices where k has size 1 but the
    einsum broadcast them are summed (kept at size 1). Repeated indices of
    k (diagonals) are scattered into a zero array through a strided view.
    """
    labels = spec.inputs[k]
    shape = inputs[k].shape
    own: dict = {}
    for c, n in zip(labels, shape):
        own.setdefault(c, n)
    unique = "".join(own)
    avail = set(spec.output)
    for j, lab in enumerate(spec.inputs):
        if j != k:
            avail.update(lab)
    sizes = spec.sizes
    kept = "".join(c for c in unique if c in avail and own[c] == sizes[c])
    terms = [spec.output] + [lab for j, lab in enumerate(spec.inputs) if j != k]
    others = [x for j, x in enumerate(inputs) if j != k]
    r = np.asarray(einsum(",".join(terms) + "->" + kept, sizes, g, *others))
    ushape = tuple(own[c] for c in unique)
    if kept != unique:
        rest = "".join(c for c in unique if c not in kept)
        r = r.reshape(r.shape + (1,) * len(rest))
        order = kept + rest
        r = r.transpose([order.index(c) for c in unique])
    if len(unique) == len(labels):
        return r if r.shape == ushape else np.broadcast_to(r, ushape).copy()
    z = np.zeros(shape, dtype=g.dtype)
    strides = [0] * len(unique)
    for ax, c in enumerate(labels):
        strides[unique.index(c)] += z.strides[ax]
    as_strided(z, shape=ushape, strides=strides)[...] = r
    return z


# --------------------------------------------------------------- recorded
def _swap(G, x):
    """The last two axes of node x swapped."""
    nd = len(x.shape)
    perm = list(range(nd))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return G.transpose(x, tuple(perm))


@register_recorded(Op.MATMUL)
def matmul_recorded(G, gy, xs, y, attrs, saved, needs):
    """The array rule's cases in graph ops (broadcast batch axes are summed by
    the walk; 1-D operands get their gradient shaped here)."""
    a, b = xs
    na, nb = len(a.shape), len(b.shape)
    ga = gb = None
    if na == 1 and nb == 1:
        ga = G.mul(b, gy) if needs[0] else None
        gb = G.mul(a, gy) if needs[1] else None
    elif na == 1:  # a (k,) as a row: b (..., k, n), g (..., n)
        if needs[0]:
            ga = G.squeeze(G.matmul(b, G.unsqueeze(gy, -1)), -1)
        if needs[1]:
            gb = G.mul(G.unsqueeze(a, -1), G.unsqueeze(gy, -2))
    elif nb == 1:  # b (k,) as a column: a (..., m, k), g (..., m)
        if needs[0]:
            ga = G.mul(G.unsqueeze(gy, -1), b)
        if needs[1]:
            gb = G.squeeze(G.matmul(G.unsqueeze(gy, -2), a), -2)
    else:
        ga = G.matmul(gy, _swap(G, b)) if needs[0] else None
        gb = G.matmul(_swap(G, a), gy) if needs[1] else None
    return ga, gb


recorded_unary(Op.TRANSPOSE, lambda G, gy, x, y, a: G.transpose(gy, a.inverse))


@register_recorded(Op.EINSUM)
def einsum_recorded(G, gy, xs, y, spec, saved, needs):
    return tuple(_einsum_operand_grad_recorded(G, gy, xs, spec, k) if needs[k] else None
                 for k in range(len(xs)))


def _einsum_operand_grad_recorded(G, gy, xs, spec, k):
    """The array rule's steps in graph ops: an einsum of g with the other
    operands onto k's distinct indices that occur elsewhere, size-1 axes put
    back for the rest, broadcast to k's sizes, and for repeated indices
    (diagonals) a scatter_add into zeros at the flat positions they name."""
    labels = spec.inputs[k]
    shape = xs[k].shape
    own: dict = {}
    for c, n in zip(labels, shape):
        own.setdefault(c, n)
    unique = "".join(own)
    avail = set(spec.output)
    for j, lab in enumerate(spec.inputs):
        if j != k:
            avail.update(lab)
    kept = "".join(c for c in unique if c in avail and own[c] == spec.sizes[c])
    terms = [spec.output] + [lab for j, lab in enumerate(spec.inputs) if j != k]
    others = [x for j, x in enumerate(xs) if j != k]
    r = G.einsum(",".join(terms) + "->" + kept, gy, *others)
    ushape = tuple(own[c] for c in unique)
    if kept != unique:
        rest = "".join(c for c in unique if c not in kept)
        r = G.reshape(r, r.shape + (1,) * len(rest))
        order = kept + rest
        r = G.transpose(r, tuple(order.index(c) for c in unique))
    if r.shape != ushape:
        r = G.expand(r, ushape)
    if len(unique) == len(labels):
        return r
    size = int(np.prod(shape))
    flat = np.arange(size, dtype=np.int64).reshape(shape)
    strides = [0] * len(unique)
    for ax, c in enumerate(labels):
        strides[unique.index(c)] += flat.strides[ax]
    positions = as_strided(flat, shape=ushape, strides=strides)
    z = G.scatter_add(np.zeros(size, dtype=G.dtype), 0, positions.ravel(), G.reshape(r, (-1,)))
    return G.reshape(z, shape)
