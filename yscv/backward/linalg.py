"""Linear algebra (backward): matmul, transpose, einsum, and the matrix
functions inv, solve, det, slogdet, cholesky, eigh (torch.linalg's rules).

Gradients for broadcast batch axes of matmul are returned at the broadcast
shape; the walk sums them down. 1-D matmul operands get their gradient
shaped here (the walk cannot know which axis NumPy inserted).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..compute.linalg import dot, einsum, stacked_matmul_grads
from ..errors import BackwardError
from ..node import Op
from ..registry import register_backward, register_recorded
from ._recorded import recorded_unary
from ._legacy_rules import unary


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


def _einsum_operand_plan(spec, k: int, shape: tuple):
    """Operand k's index bookkeeping, shared by the array and recorded rules:
    ``(own, unique, kept, terms)``: its size per distinct index, those indices
    in order, the ones the gradient einsum produces (they occur elsewhere at
    the full size), and the einsum's input terms (the output's, then the
    other operands')."""
    labels = spec.inputs[k]
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
    return own, unique, kept, terms


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
    sizes = spec.sizes
    own, unique, kept, terms = _einsum_operand_plan(spec, k, shape)
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


# ------------------------------------------------------- matrix functions
def _mT(a):
    return np.swapaxes(a, -1, -2)


unary(Op.INV, lambda g, a, y, at: -(_mT(y) @ g @ _mT(y)))


@register_backward(Op.SOLVE)
def solve_backward(g, inputs, x, vector, saved, needs):
    """gb = solve(a^T, g), ga = -gb x^T (batch axes broadcast: the walk sums)."""
    a = inputs[0]
    gm, xm = (g[..., None], x[..., None]) if vector else (g, x)
    gb = np.linalg.solve(_mT(a), gm)
    ga = -(gb @ _mT(xm)) if needs[0] else None
    return ga, ((gb[..., 0] if vector else gb) if needs[1] else None)


def _cofactors(a):
    """The cofactor matrix of each matrix of a (det(a) inv(a)^T where a is
    invertible), from the SVD a = U S V^T: det(U V^T) U diag(prod_{j!=i} s_j) V^T,
    so a singular matrix of rank n-1 gets its non-zero cofactors, as torch."""
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return (u * (others * sign[..., None])[..., None, :]) @ vt


@register_backward(Op.DET)
def det_backward(g, inputs, y, attrs, saved, needs):
    a = inputs[0]
    gg = g[..., None, None]
    try:
        if np.all(y != 0):
            return (gg * y[..., None, None] * _mT(np.linalg.inv(a)),)
    except np.linalg.LinAlgError:
        pass
    return (gg * _cofactors(a),)


def _singular_logabsdet(y, where: str):
    """BackwardError naming slogdet and the first singular matrix (its
    logabsdet -inf) unless there is none: torch's gradient there is inf or
    NaN (inv(a) does not exist), not a number to return."""
    bad = np.isneginf(y)
    if np.any(bad):
        idx = tuple(int(k) for k in np.argwhere(bad)[0]) if np.ndim(y) else ()
        raise BackwardError(
            f"slogdet: {where}the gradient of logabsdet at a singular matrix is not defined "
            f"(logabsdet is -inf; it needs inv(a)); batch index {idx}", op="slogdet")


@register_backward(Op.SLOGDET)
def slogdet_backward(g, inputs, y, attrs, saved, needs):
    """g inv(a)^T; a singular matrix raises BackwardError naming slogdet."""
    _singular_logabsdet(y, "")
    try:
        inv = np.linalg.inv(inputs[0])
    except np.linalg.LinAlgError:   # LAPACK's LU saw a zero pivot slogdet's did not
        _singular_logabsdet(np.full(y.shape, -np.inf), "")
    return (g[..., None, None] * _mT(inv),)


def _tril(n, k, dtype):
    return np.tril(np.ones((n, n), dtype=dtype), k)


@register_backward(Op.CHOLESKY)
def cholesky_backward(g, inputs, y, upper, saved, needs):
    """torch's: P = tril(L^T gL), Phi = (P + tril(P, -1)^T) / 2,
    ga = L^-T Phi L^-1 (Iain Murray, arXiv 1602.07527)."""
    low, gl = (_mT(y), _mT(g)) if upper else (y, g)
    p = np.tril(_mT(low) @ gl)
    phi = 0.5 * (p + _mT(np.tril(p, -1)))
    linv = np.linalg.inv(low)
    return (_mT(linv) @ phi @ linv,)


@register_backward(Op.EIGH)
def eigh_backward(g, inputs, y, attrs, saved, needs):
    """V (diag(gL) + skew(V^T gV) / E) V^T with E_ij = L_j - L_i (torch's
    rule: infinite for repeated eigenvalues, finite for distinct ones).

    A matrix whose eigenvector cotangent gV is all zero (the vectors unused,
    torch's undefined gV) gets V diag(gL) V^T: the quotient term is left out
    rather than computed as 0 / 0 where eigenvalues repeat."""
    values, vectors = y[..., 0, :], y[..., 1:, :]
    gl, gv = g[..., 0, :], g[..., 1:, :]
    vg = _mT(vectors) @ gv
    skew = 0.5 * (vg - _mT(vg))
    inner = np.divide(skew, _gaps(values), out=np.zeros_like(skew),
                      where=_vectors_used(gv))
    n = values.shape[-1]
    inner[..., np.arange(n), np.arange(n)] = gl
    return (vectors @ inner @ _mT(vectors),)


def _vectors_used(gv):
    """[..., 1, 1]: whether each matrix's eigenvector cotangent has a
    nonzero (or NaN) entry."""
    return np.any(gv != 0, axis=(-2, -1), keepdims=True)


def _gaps(values):
    """E_ij = L_j - L_i with ones on the diagonal."""
    e = values[..., None, :] - values[..., :, None]
    n = values.shape[-1]
    e[..., np.arange(n), np.arange(n)] = 1
    return e


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
    own, unique, kept, terms = _einsum_operand_plan(spec, k, shape)
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


# ------------------------------------------------- matrix functions, recorded
# The same rules in graph ops; the matrix functions inside them (inv, solve,
# eigh's packed value) are nodes, so each rule is differentiable again.
def _unsq2(G, x):
    return G.unsqueeze(G.unsqueeze(x, -1), -1)


@register_recorded(Op.INV)
def inv_recorded(G, gy, xs, y, attrs, saved, needs):
    yt = _swap(G, y)
    return (G.neg(G.matmul(G.matmul(yt, gy), yt)),)


@register_recorded(Op.SOLVE)
def solve_recorded(G, gy, xs, x, vector, saved, needs):
    a = xs[0]
    gb = G.solve(_swap(G, a), gy)
    ga = None
    if needs[0]:
        gm, xm = (G.unsqueeze(gb, -1), G.unsqueeze(x, -1)) if vector else (gb, x)
        ga = G.neg(G.matmul(gm, _swap(G, xm)))
    return ga, (gb if needs[1] else None)


@register_recorded(Op.DET)
def det_recorded(G, gy, xs, y, attrs, saved, needs):
    """g det(a) inv(a)^T; where a matrix of the batch is singular, g times the
    cofactors from the minors' determinants (finite, as torch's)."""
    if np.any(G.value(y) == 0):
        return (G.mul(_unsq2(G, gy), _cofactors_recorded(G, xs[0])),)
    return (G.mul(_unsq2(G, G.mul(gy, y)), _swap(G, G.inv(xs[0]))),)


def _cofactors_recorded(G, a):
    """[..., n, n]: C_ij = (-1)^(i+j) det(a without row i and column j), the
    gradient of det(a) at any a (the SVD of the array rule has no graph op).
    The minors come from one einsum with constant row/column selections and
    their determinants are DET nodes, so the result is differentiable again."""
    n = a.shape[-1]
    if n == 1:
        return G.constant(np.ones(a.shape, dtype=G.dtype))
    keep = np.array([[k for k in range(n) if k != i] for i in range(n)])    # [n, n-1]
    select = np.zeros((n, n - 1, n), dtype=G.dtype)    # select[i] drops row i
    select[np.arange(n)[:, None], np.arange(n - 1)[None, :], keep] = 1
    minors = G.einsum("ipk,...kl,jql->...ijpq", select, a, select)
    signs = (-1.0) ** np.add.outer(np.arange(n), np.arange(n))
    return G.mul(G.det(minors), signs.astype(G.dtype))


@register_recorded(Op.SLOGDET)
def slogdet_recorded(G, gy, xs, y, attrs, saved, needs):
    _singular_logabsdet(G.value(y), "create_graph=True: ")
    return (G.mul(_unsq2(G, gy), _swap(G, G.inv(xs[0]))),)


@register_recorded(Op.CHOLESKY)
def cholesky_recorded(G, gy, xs, y, upper, saved, needs):
    low, gl = (_swap(G, y), _swap(G, gy)) if upper else (y, gy)
    n = y.shape[-1]
    p = G.mul(G.matmul(_swap(G, low), gl), _tril(n, 0, G.dtype))
    phi = G.mul(G.add(p, _swap(G, G.mul(p, _tril(n, -1, G.dtype)))), 0.5)
    linv = G.inv(low)
    return (G.matmul(G.matmul(_swap(G, linv), phi), linv),)


@register_recorded(Op.EIGH)
def eigh_recorded(G, gy, xs, y, attrs, saved, needs):
    nd = len(y.shape)
    n = y.shape[-1]
    values, vectors = G.select(y, nd - 2, 0), G.narrow(y, nd - 2, 1, n)
    gl, gv = G.select(gy, nd - 2, 0), G.narrow(gy, nd - 2, 1, n)
    vg = G.matmul(_swap(G, vectors), gv)
    skew = G.mul(G.sub(vg, _swap(G, vg)), 0.5)
    eye = np.eye(n, dtype=G.dtype)
    gaps = G.add(G.sub(G.unsqueeze(values, -2), G.unsqueeze(values, -1)), eye)
    quot = G.div(skew, gaps)
    # the array rule's zero quotient where gV is all zero, taken only where
    # an eigenvalue repeats (0 / 0); the where keeps that entry's derivative
    # undefined, as torch's double backward at repeated eigenvalues
    hole = (G.value(gaps) == 0) & ~_vectors_used(G.value(gv))
    if hole.any():
        quot = G.where(hole, np.zeros((), G.dtype), quot)
    inner = G.add(quot, G.mul(G.unsqueeze(gl, -2), eye))
    return (G.matmul(G.matmul(vectors, inner), _swap(G, vectors)),)
