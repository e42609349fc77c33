"""Linear algebra (backward): matmul, transpose, einsum, and the matrix
functions inv, solve, det, slogdet, cholesky, eigh (torch.linalg's rules),
one rule per op against the namespace ``ns`` (yscv/engine/namespace/__init__.py),
run on arrays by the first-order walks and on the graph by
``create_graph=True``. The matrix functions inside the rules (inv, solve,
det) are ``ns`` names, so on the graph each rule is differentiable again.

Gradients for broadcast batch axes of matmul are returned at the broadcast
shape; the walk sums them down. A batch of matrices times one matrix
((..., m, k) @ (k, n), the transformer's layers) gets its weight gradient
as one GEMM over the stacked rows, the batch summed inside it. 1-D matmul
operands get their gradient shaped here (the walk cannot know which axis
NumPy inserted).
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..compute.linalg import dot, stacked_matmul_grads
from ..errors import BackwardError
from ..node import Op
from ..registry import register_rule
from ._rules import unary


def _mT(ns, x):
    """The last two axes of x swapped."""
    nd = len(x.shape)
    perm = list(range(nd))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return ns.transpose(x, tuple(perm))


def matmul_array(ns, g, inputs, out, attrs, saved, needs):
    """`matmul_rule` written out for arrays on the hot paths (2-d @ 2-d, and
    a batch of matrices @ one matrix): the same GEMMs on transposed views,
    without the namespace's calls; tests/test_rule_flags.py holds it to the
    rule's bits. Other shapes run the rule."""
    a, b = inputs
    if b.ndim == 2:
        if a.ndim == 2:  # the MLP path: yscv's tiles or np.dot (yscv/compute/gemm.py)
            return (dot(g, b.T) if needs[0] else None), (dot(a.T, g) if needs[1] else None)
        if a.ndim > 2:
            return stacked_matmul_grads(g, a, b, needs[0], needs[1])
    return matmul_rule(ns, g, inputs, out, attrs, saved, needs)


@register_rule(Op.MATMUL, array=matmul_array)
def matmul_rule(ns, g, inputs, out, attrs, saved, needs):
    """``g @ b^T`` and ``a^T @ g``, case by case of NumPy's matmul."""
    a, b = inputs
    sa, sb = a.shape, b.shape
    na, nb = len(sa), len(sb)
    ga = gb = None
    if na == 1 and nb == 1:  # dot product, g is 0-d
        ga = ns.mul(b, g) if needs[0] else None
        gb = ns.mul(a, g) if needs[1] else None
    elif na == 1:  # a (k,) acted as a row: b (..., k, n), g (..., n)
        if needs[0]:
            ga = (ns.matmul(b, g) if nb == 2 else
                  ns.reshape(ns.matmul(b, ns.reshape(g, g.shape + (1,))), g.shape[:-1] + sa))
        if needs[1]:
            gb = ns.mul(ns.reshape(a, sa + (1,)), ns.reshape(g, g.shape[:-1] + (1, sb[-1])))
    elif nb == 1:  # b (k,) acted as a column: a (..., m, k), g (..., m)
        if needs[0]:
            ga = ns.mul(ns.reshape(g, g.shape + (1,)), b)
        if needs[1]:   # the batch summed inside one matrix-vector product
            rows = math.prod(sa[:-1])
            a2 = a if na == 2 else ns.reshape(a, (rows, sa[-1]))
            gb = ns.matmul(ns.transpose(a2), g if na == 2 else ns.reshape(g, (rows,)))
    elif nb == 2 and na > 2:  # (..., m, k) @ (k, n): the batch stacked into rows
        rows = math.prod(sa[:-1])
        g2 = ns.reshape(g, (rows, sb[1]))
        if needs[0]:
            ga = ns.reshape(ns.matmul(g2, ns.transpose(b)), sa)
        if needs[1]:
            gb = ns.matmul(ns.transpose(ns.reshape(a, (rows, sb[0]))), g2)
    elif na == 2 and nb == 2:
        ga = ns.matmul(g, ns.transpose(b)) if needs[0] else None
        gb = ns.matmul(ns.transpose(a), g) if needs[1] else None
    else:
        ga = ns.matmul(g, _mT(ns, b)) if needs[0] else None
        gb = ns.matmul(_mT(ns, a), g) if needs[1] else None
    return ga, gb


unary(Op.TRANSPOSE, lambda ns, g, x, y, a: ns.transpose(g, a.inverse))


def _einsum_operand_plan(spec, k: int, shape: tuple):
    """Operand k's index bookkeeping: ``(own, unique, kept, terms)``: its
    size per distinct index, those indices in order, the ones the gradient
    einsum produces (they occur elsewhere at the full size), and the
    einsum's input terms (the output's, then the other operands')."""
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


@register_rule(Op.EINSUM)
def einsum_rule(ns, g, inputs, out, spec, saved, needs):
    return tuple(_einsum_operand_grad(ns, g, inputs, spec, k) if needs[k] else None
                 for k in range(len(inputs)))


def _einsum_operand_grad(ns, g, xs, spec, k):
    """Gradient of operand k: an einsum of g with the other operands onto
    k's distinct indices that occur elsewhere; size-1 axes put back for the
    indices of k that were only summed over, then broadcast along them.
    Repeated indices of k (diagonals) are scattered (added into zeros) at
    the flat positions they name."""
    labels = spec.inputs[k]
    shape = xs[k].shape
    own, unique, kept, terms = _einsum_operand_plan(spec, k, shape)
    others = [x for j, x in enumerate(xs) if j != k]
    r = ns.einsum(",".join(terms) + "->" + kept, g, *others)
    ushape = tuple(own[c] for c in unique)
    if kept != unique:
        rest = "".join(c for c in unique if c not in kept)
        r = ns.reshape(r, r.shape + (1,) * len(rest))
        order = kept + rest
        perm = tuple(order.index(c) for c in unique)
        if perm != tuple(range(len(perm))):
            r = ns.transpose(r, perm)
    if r.shape != ushape:
        r = ns.expand(r, ushape)
    if len(unique) == len(labels):
        return r
    size = math.prod(shape)
    flat = np.arange(size, dtype=np.int64).reshape(shape)
    strides = [0] * len(unique)
    for ax, c in enumerate(labels):
        strides[unique.index(c)] += flat.strides[ax]
    positions = as_strided(flat, shape=ushape, strides=strides)
    zeros = np.zeros(size, dtype=ns.value(g).dtype)
    z = ns.scatter_add(zeros, 0, np.ascontiguousarray(positions).ravel(),
                       ns.reshape(r, (math.prod(ushape),)))
    return ns.reshape(z, shape)


# ------------------------------------------------------- matrix functions
def _batch_matrix(ns, x):
    """x [...] as [..., 1, 1], to scale whole matrices."""
    return ns.reshape(x, tuple(x.shape) + (1, 1))


unary(Op.INV, lambda ns, g, a, y, at: ns.neg(ns.matmul(ns.matmul(_mT(ns, y), g), _mT(ns, y))))


@register_rule(Op.SOLVE)
def solve_rule(ns, g, inputs, x, vector, saved, needs):
    """gb = solve(a^T, g), ga = -gb x^T (batch axes broadcast: the walk sums)."""
    a = inputs[0]
    gb = ns.solve(_mT(ns, a), g)
    ga = None
    if needs[0]:
        if vector:
            gm = ns.reshape(gb, tuple(gb.shape) + (1,))
            xm = ns.reshape(x, tuple(x.shape[:-1]) + (1, x.shape[-1]))
        else:
            gm, xm = gb, _mT(ns, x)
        ga = ns.neg(ns.matmul(gm, xm))
    return ga, (gb if needs[1] else None)


@register_rule(Op.DET)
def det_rule(ns, g, inputs, y, attrs, saved, needs):
    """g det(a) inv(a)^T; where a matrix of the batch is singular (det 0),
    g times the cofactors from the minors' determinants (finite, as torch's)."""
    a = inputs[0]
    if not np.any(ns.value(y) == 0):
        try:
            inv = ns.inv(a)
        except ValueError:   # LAPACK's LU saw a zero pivot det's did not
            inv = None
        if inv is not None:
            return (ns.mul(_batch_matrix(ns, ns.mul(g, y)), _mT(ns, inv)),)
    return (ns.mul(_batch_matrix(ns, g), _cofactors(ns, a)),)


def _cofactors(ns, a):
    """[..., n, n]: C_ij = (-1)^(i+j) det(a without row i and column j), the
    gradient of det(a) at any a. The minors come from one einsum with
    constant row/column selections, their determinants are ``ns.det``."""
    n = a.shape[-1]
    dtype = ns.value(a).dtype
    if n == 1:
        return ns.const(np.ones(a.shape, dtype=dtype))
    keep = np.array([[k for k in range(n) if k != i] for i in range(n)])    # [n, n-1]
    select = np.zeros((n, n - 1, n), dtype=dtype)    # select[i] drops row i
    select[np.arange(n)[:, None], np.arange(n - 1)[None, :], keep] = 1
    sel = ns.const(select)
    minors = ns.einsum("ipk,...kl,jql->...ijpq", sel, a, sel)
    signs = ((-1.0) ** np.add.outer(np.arange(n), np.arange(n))).astype(dtype)
    return ns.mul(ns.det(minors), ns.const(signs))


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


@register_rule(Op.SLOGDET)
def slogdet_rule(ns, g, inputs, y, attrs, saved, needs):
    """g inv(a)^T; a singular matrix raises BackwardError naming slogdet."""
    where = "create_graph=True: " if ns.is_graph else ""
    _singular_logabsdet(ns.value(y), where)
    try:
        inv = ns.inv(inputs[0])
    except ValueError:   # LAPACK's LU saw a zero pivot slogdet's did not
        _singular_logabsdet(np.full(ns.value(y).shape, -np.inf), where)
        raise
    return (ns.mul(_batch_matrix(ns, g), _mT(ns, inv)),)


def _tril(n, k, dtype):
    return np.tril(np.ones((n, n), dtype=dtype), k)


@register_rule(Op.CHOLESKY)
def cholesky_rule(ns, g, inputs, y, upper, saved, needs):
    """torch's: P = tril(L^T gL), Phi = (P + tril(P, -1)^T) / 2,
    ga = L^-T Phi L^-1 (Iain Murray, arXiv 1602.07527); the triangles are
    constant masks."""
    low, gl = (_mT(ns, y), _mT(ns, g)) if upper else (y, g)
    n = y.shape[-1]
    dtype = ns.value(y).dtype
    p = ns.mul(ns.matmul(_mT(ns, low), gl), ns.const(_tril(n, 0, dtype)))
    phi = ns.mul(ns.add(p, _mT(ns, ns.mul(p, ns.const(_tril(n, -1, dtype))))), 0.5)
    linv = ns.inv(low)
    return (ns.matmul(ns.matmul(_mT(ns, linv), phi), linv),)


@register_rule(Op.EIGH)
def eigh_rule(ns, g, inputs, y, attrs, saved, needs):
    """V (diag(gL) + skew(V^T gV) / E) V^T with E_ij = L_j - L_i (torch's
    rule: infinite for repeated eigenvalues, finite for distinct ones).

    A matrix whose eigenvector cotangent gV is all zero (the vectors unused,
    torch's undefined gV) gets V diag(gL) V^T: the quotient is taken as 0
    where an eigenvalue repeats (0 / 0); the where keeps that entry's
    derivative undefined, as torch's double backward there."""
    nd = len(y.shape)
    n = y.shape[-1]
    dtype = ns.value(y).dtype
    values, vectors = ns.select(y, nd - 2, 0), ns.narrow(y, nd - 2, 1, n)
    gl, gv = ns.select(g, nd - 2, 0), ns.narrow(g, nd - 2, 1, n)
    vg = ns.matmul(_mT(ns, vectors), gv)
    skew = ns.mul(ns.sub(vg, _mT(ns, vg)), 0.5)
    eye = np.eye(n, dtype=dtype)
    lead = tuple(values.shape[:-1])
    gaps = ns.add(ns.sub(ns.reshape(values, lead + (1, n)), ns.reshape(values, lead + (n, 1))),
                  ns.const(eye))
    with np.errstate(invalid="ignore", divide="ignore"):
        quot = ns.div(skew, gaps)
    hole = (ns.value(gaps) == 0) & ~_vectors_used(ns.value(gv))
    if hole.any():
        quot = ns.where(hole, 0.0, quot)
    inner = ns.add(quot, ns.mul(ns.reshape(gl, lead + (1, n)), ns.const(eye)))
    return (ns.matmul(ns.matmul(vectors, inner), _mT(ns, vectors)),)


def _vectors_used(gv):
    """[..., 1, 1]: whether each matrix's eigenvector cotangent has a
    nonzero (or NaN) entry."""
    return np.any(gv != 0, axis=(-2, -1), keepdims=True)
