"""Linear algebra: NumPy forward reference, float64 gradcheck, bad arguments,
plus 1-D shapes, the optimised einsum path and BLAS-path gradients."""

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_second_order,
                          followed_by_square, make_op_tests, make_second_order_tests)


def _ein(sub):
    return lambda g, *xs: g.einsum(sub, *xs)


def _torch_ein(sub):
    return lambda t, *xs: t.einsum(sub, *xs)


def _np_ein(sub):
    return lambda *xs: np.einsum(sub, *xs)


CASES = [
    # matmul: every NumPy rank combination
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(5,), (5,)], np.matmul, name="matmul_1d_1d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(4,), (4, 3)], np.matmul, name="matmul_1d_2d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(3, 4), (4,)], np.matmul, name="matmul_2d_1d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(3, 4), (4, 5)], np.matmul, name="matmul_2d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: a @ b, [(3, 4), (4, 2)], np.matmul, name="matmul_operator", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 3, 4), (4, 5)], np.matmul,
           name="matmul_3d_2d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(3, 4), (2, 4, 5)], np.matmul,
           name="matmul_2d_3d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 3, 4), (2, 4, 2)], np.matmul,
           name="matmul_batched", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 1, 3, 4), (5, 4, 2)], np.matmul,
           name="matmul_broadcast_batch", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(4,), (2, 4, 3)], np.matmul,
           name="matmul_1d_3d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 3, 4), (4,)], np.matmul,
           name="matmul_3d_1d", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(g.transpose(a, (0, 2, 1)), b), [(2, 4, 3), (4, 2)],
           lambda a, b: np.matmul(a.transpose(0, 2, 1), b), name="matmul_3d_2d_noncontiguous", torch_build=lambda t, a, b: t.matmul(a.transpose(1, 2), b)),
    OpCase(Op.MATMUL, lambda g, a: g.matmul(a, np.arange(12.0).reshape(4, 3)), [(2, 4)],
           lambda a: a @ np.arange(12.0).reshape(4, 3), name="matmul_array_operand", torch_build=lambda t, a: a @ t.arange(12.0, dtype=t.float64).reshape(4, 3)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul_2d(a, b), [(3, 4), (4, 2)], np.matmul,
           name="matmul_2d_alias", torch_build=lambda t, a, b: t.matmul(a, b)),
    # zero-sized dimensions with a batched operand (issue 12.7): NumPy gives
    # zeros / empty results; gradients are zeros of each operand's shape
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 3, 0), (0, 4)], np.matmul,
           name="matmul_3d_2d_zero_inner", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 3, 4), (4, 0)], np.matmul,
           name="matmul_3d_2d_zero_output_cols", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(1, 3, 0), (0, 5)], np.matmul,
           name="matmul_3d_2d_zero_inner_batch1", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(2, 3, 0), (2, 0, 4)], np.matmul,
           name="matmul_batched_zero_inner", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(3, 0), (2, 0, 4)], np.matmul,
           name="matmul_2d_3d_zero_inner", torch_build=lambda t, a, b: t.matmul(a, b)),
    OpCase(Op.MATMUL, lambda g, a, b: g.matmul(a, b), [(0, 3, 4), (4, 5)], np.matmul,
           name="matmul_3d_2d_zero_batch", torch_build=lambda t, a, b: t.matmul(a, b)),
    # transpose
    OpCase(Op.TRANSPOSE, lambda g, x: g.transpose(x), [(2, 3, 4)], np.transpose,
           name="transpose_reverse", torch_build=lambda t, x: x.permute(2, 1, 0)),
    OpCase(Op.TRANSPOSE, lambda g, x: g.transpose(x, (1, 2, 0)), [(2, 3, 4)],
           lambda x: np.transpose(x, (1, 2, 0)), name="transpose_permutation", torch_build=lambda t, x: x.permute(1, 2, 0)),
    OpCase(Op.TRANSPOSE, lambda g, x: g.transpose(x, [-1, 0, 1]), [(2, 3, 4)],
           lambda x: np.transpose(x, (2, 0, 1)), name="transpose_negative_axes", torch_build=lambda t, x: x.permute(2, 0, 1)),
    OpCase(Op.TRANSPOSE, lambda g, x: g.transpose(x), [(5,)], lambda x: x, name="transpose_1d", torch_build=lambda t, x: x.permute(0)),
    OpCase(Op.TRANSPOSE, lambda g, x: g.transpose_2d(x), [(3, 5)], lambda x: x.T,
           name="transpose_2d_alias", torch_build=lambda t, x: x.T),
    # einsum
    OpCase(Op.EINSUM, _ein("ij,jk->ik"), [(3, 4), (4, 2)], _np_ein("ij,jk->ik"), name="einsum_matmul", torch_build=_torch_ein("ij,jk->ik")),
    OpCase(Op.EINSUM, _ein("bij,bjk->bik"), [(2, 3, 4), (2, 4, 2)], _np_ein("bij,bjk->bik"),
           name="einsum_batched", torch_build=_torch_ein("bij,bjk->bik")),
    OpCase(Op.EINSUM, _ein("ii->i"), [(4, 4)], _np_ein("ii->i"), name="einsum_diagonal", torch_build=_torch_ein("ii->i")),
    OpCase(Op.EINSUM, _ein("ii"), [(4, 4)], _np_ein("ii"), name="einsum_trace_implicit", torch_build=_torch_ein("ii")),
    OpCase(Op.EINSUM, _ein("i,i"), [(5,), (5,)], _np_ein("i,i"), name="einsum_dot_implicit", torch_build=_torch_ein("i,i")),
    OpCase(Op.EINSUM, _ein("ij->"), [(3, 4)], _np_ein("ij->"), name="einsum_sum_all", torch_build=_torch_ein("ij->")),
    OpCase(Op.EINSUM, _ein("...ij,...jk->...ik"), [(2, 1, 3, 4), (5, 4, 2)],
           _np_ein("...ij,...jk->...ik"), name="einsum_ellipsis_broadcast", torch_build=_torch_ein("...ij,...jk->...ik")),
    OpCase(Op.EINSUM, _ein("ij,ij->ij"), [(3, 4), (3, 4)], _np_ein("ij,ij->ij"),
           name="einsum_hadamard", torch_build=_torch_ein("ij,ij->ij")),
    OpCase(Op.EINSUM, _ein("i,j->ij"), [(3,), (4,)], _np_ein("i,j->ij"), name="einsum_outer", torch_build=_torch_ein("i,j->ij")),
    OpCase(Op.EINSUM, _ein("ij,jk"), [(3, 4), (4, 2)], _np_ein("ij,jk"), name="einsum_implicit", torch_build=_torch_ein("ij,jk")),
    OpCase(Op.EINSUM, _ein("ij->ji"), [(3, 4)], _np_ein("ij->ji"), name="einsum_transpose", torch_build=_torch_ein("ij->ji")),
    OpCase(Op.EINSUM, _ein("ij,k->i"), [(3, 4), (2,)], _np_ein("ij,k->i"),
           name="einsum_summed_only_indices", torch_build=_torch_ein("ij,k->i")),
    OpCase(Op.EINSUM, _ein("ij,ij->ij"), [(3, 1), (3, 4)], _np_ein("ij,ij->ij"),
           name="einsum_size1_broadcast", torch_build=_torch_ein("ij,ij->ij")),
    OpCase(Op.EINSUM, _ein("ii,i->i"), [(3, 3), (3,)], _np_ein("ii,i->i"),
           name="einsum_diagonal_times_vector", torch_build=_torch_ein("ii,i->i")),
    OpCase(Op.EINSUM, _ein("iji->j"), [(3, 2, 3)], _np_ein("iji->j"), name="einsum_diagonal_3d", torch_build=_torch_ein("iji->j")),
    OpCase(Op.EINSUM, _ein("ij,jk,kl->il"), [(2, 3), (3, 4), (4, 2)], _np_ein("ij,jk,kl->il"),
           name="einsum_three_operands", torch_build=_torch_ein("ij,jk,kl->il")),
    OpCase(Op.EINSUM, _ein("i...->..."), [(3, 2, 2)], _np_ein("i...->..."),
           name="einsum_ellipsis_last", torch_build=_torch_ein("i...->...")),
    OpCase(Op.EINSUM, _ein("...i,i"), [(2, 3, 4), (4,)], _np_ein("...i,i"),
           name="einsum_ellipsis_implicit", torch_build=_torch_ein("...i,i")),
    OpCase(Op.EINSUM, _ein("Ab, bC -> CA"), [(2, 3), (3, 4)], _np_ein("Ab,bC->CA"),
           name="einsum_uppercase_spaces", torch_build=_torch_ein("Ab, bC -> CA")),
    OpCase(Op.EINSUM, _ein("i->i"), [(4,)], _np_ein("i->i"), name="einsum_identity", torch_build=_torch_ein("i->i")),
    OpCase(Op.EINSUM, _ein(",i->i"), [(), (3,)], _np_ein(",i->i"), name="einsum_0d_operand", torch_build=_torch_ein(",i->i")),
    OpCase(Op.EINSUM, _ein("ij,j->ij"), [(2, 1), (3,)], _np_ein("ij,j->ij"),
           name="einsum_size1_index_against_full", torch_build=_torch_ein("ij,j->ij")),
    OpCase(Op.EINSUM, _ein("a...b,b...->a..."), [(2, 3, 2), (2, 3)], _np_ein("a...b,b...->a..."),
           name="einsum_ellipsis_middle", torch_build=_torch_ein("a...b,b...->a...")),
]


def _leaves(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.MATMUL, "matmul_inner_mismatch", _leaves((3, 4), (5, 2)),
            lambda g, a, b: g.matmul(a, b), yscv.ShapeError, r"matmul: .*\(3, 4\).*\(5, 2\)"),
    BadCase(Op.MATMUL, "matmul_1d_mismatch", _leaves((3,), (4,)), lambda g, a, b: a @ b,
            yscv.ShapeError, "matmul: inner dimensions"),
    BadCase(Op.MATMUL, "matmul_0d", _leaves((), (3,)), lambda g, a, b: g.matmul(a, b),
            yscv.ShapeError, "matmul: operands must be at least 1-d"),
    BadCase(Op.MATMUL, "matmul_batch_mismatch", _leaves((2, 3, 4), (3, 4, 5)),
            lambda g, a, b: g.matmul(a, b), yscv.ShapeError, "matmul: batch dimensions"),
    BadCase(Op.MATMUL, "matmul_complex_operand", _leaves((2, 2)),
            lambda g, a: g.matmul(a, np.eye(2) * 1j), TypeError, "matmul"),
    BadCase(Op.MATMUL, "matmul_2d_alias_3d", _leaves((2, 3, 4), (4, 5)),
            lambda g, a, b: g.matmul_2d(a, b), yscv.ShapeError, "matmul_2d: operands must be 2-d"),
    BadCase(Op.MATMUL, "matmul_2d_alias_mismatch", _leaves((3, 4), (3, 4)),
            lambda g, a, b: g.matmul_2d(a, b), yscv.ShapeError, "matmul_2d: inner"),
    BadCase(Op.TRANSPOSE, "transpose_not_permutation", _leaves((2, 3, 4)),
            lambda g, x: g.transpose(x, (0, 0, 1)), ValueError, "transpose: axes.*not a permutation"),
    BadCase(Op.TRANSPOSE, "transpose_wrong_length", _leaves((2, 3, 4)),
            lambda g, x: g.transpose(x, (1, 0)), ValueError, "transpose: axes"),
    BadCase(Op.TRANSPOSE, "transpose_out_of_range", _leaves((2, 3)),
            lambda g, x: g.transpose(x, (0, 2)), ValueError, "transpose: .*out of range"),
    BadCase(Op.TRANSPOSE, "transpose_float_axes", _leaves((2, 3)),
            lambda g, x: g.transpose(x, (0.0, 1.0)), TypeError, "transpose: axes"),
    BadCase(Op.TRANSPOSE, "transpose_2d_alias_3d", _leaves((2, 3, 4)),
            lambda g, x: g.transpose_2d(x), yscv.ShapeError, "transpose_2d: x must be 2-d"),
    BadCase(Op.EINSUM, "einsum_operand_count", _leaves((2, 3)),
            lambda g, a: g.einsum("ij,jk->ik", a), ValueError, "einsum: .*2 operand"),
    BadCase(Op.EINSUM, "einsum_dimension_mismatch", _leaves((2, 3), (4, 5)),
            lambda g, a, b: g.einsum("ij,jk->ik", a, b), yscv.ShapeError, "einsum: index 'j'"),
    BadCase(Op.EINSUM, "einsum_diagonal_mismatch", _leaves((2, 3)),
            lambda g, a: g.einsum("ii->i", a), yscv.ShapeError, "einsum: operand 0 repeats"),
    BadCase(Op.EINSUM, "einsum_too_many_subscripts", _leaves((3,)),
            lambda g, a: g.einsum("ij->i", a), yscv.ShapeError, "einsum: operand 0"),
    BadCase(Op.EINSUM, "einsum_bad_character", _leaves((3,)),
            lambda g, a: g.einsum("i1->i", a), ValueError, "einsum: invalid subscript"),
    BadCase(Op.EINSUM, "einsum_unknown_output_index", _leaves((3,)),
            lambda g, a: g.einsum("i->j", a), ValueError, "einsum: output index 'j'"),
    BadCase(Op.EINSUM, "einsum_repeated_output_index", _leaves((3,)),
            lambda g, a: g.einsum("i->ii", a), ValueError, "einsum: output .*repeat"),
    BadCase(Op.EINSUM, "einsum_two_arrows", _leaves((3,)),
            lambda g, a: g.einsum("i->i->i", a), ValueError, "einsum: .*at most one"),
    BadCase(Op.EINSUM, "einsum_missing_output_ellipsis", _leaves((2, 3)),
            lambda g, a: g.einsum("...i->i", a), ValueError, r"einsum: .*must contain '\.\.\.'"),
    BadCase(Op.EINSUM, "einsum_ellipsis_broadcast_mismatch", _leaves((2, 3), (4, 3)),
            lambda g, a, b: g.einsum("...i,...i->...", a, b), yscv.ShapeError, "einsum: the '...'"),
    BadCase(Op.EINSUM, "einsum_not_a_string", _leaves((3,)),
            lambda g, a: g.einsum(["i"], a), TypeError, "einsum: subscripts"),
    BadCase(Op.EINSUM, "einsum_no_operands", lambda g: (),
            lambda g: g.einsum("i->i"), ValueError, "einsum: at least one operand"),
]


# ------------------------------------- matrix functions (torch.linalg's rules)
def _wellcond(*shape):
    """Batches of well-conditioned matrices (diagonally dominant)."""
    n = shape[-1]
    return lambda rng: (rng.uniform(-1, 1, shape) + 3 * np.eye(n),)


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _spd(g, a):
    """a a^T + I: symmetric positive-definite, built in the graph."""
    nd = len(a.shape)
    return g.add(g.matmul(a, g.transpose(a, tuple(range(nd - 2)) + (nd - 1, nd - 2))),
                 np.eye(a.shape[-1]))


def _np_spd(a):
    return a @ _mT(a) + np.eye(a.shape[-1])


def _t_spd(t, a):
    return a @ a.mT + t.eye(a.shape[-1], dtype=a.dtype)


def _sym(g, a):
    nd = len(a.shape)
    return g.add(a, g.transpose(a, tuple(range(nd - 2)) + (nd - 1, nd - 2)))


def _np_eigh_packed(a):
    """NumPy's eigh of a + a^T, each eigenvector signed so its largest entry
    is positive, packed as the EIGH node: values in row 0, vectors below."""
    values, vectors = np.linalg.eigh(a + _mT(a))
    big = np.argmax(np.abs(vectors), axis=-2)[..., None, :]
    vectors = vectors * np.where(np.take_along_axis(vectors, big, axis=-2) < 0, -1.0, 1.0)
    return np.concatenate([values[..., None, :], vectors], axis=-2)


def _t_eigh_packed(t, a):
    values, vectors = t.linalg.eigh(a + a.mT)
    big = vectors.abs().argmax(dim=-2, keepdim=True)
    sign = t.where(t.gather(vectors, -2, big) < 0, -1.0, 1.0).to(vectors.dtype).detach()
    return t.cat([values.unsqueeze(-2), vectors * sign], dim=-2)


def _eigh_packed(g, a):
    """The EIGH node itself (values and vectors are views of it)."""
    values, _ = g.eigh(_sym(g, a))
    return g.inputs(values)[0]


CASES += [
    OpCase(Op.INV, lambda g, a: g.inv(a), inputs=_wellcond(3, 3), reference=np.linalg.inv,
           name="inv_2d", torch_build=lambda t, a: t.linalg.inv(a)),
    OpCase(Op.INV, lambda g, a: g.inv(a), inputs=_wellcond(2, 3, 3), reference=np.linalg.inv,
           name="inv_batched", torch_build=lambda t, a: t.linalg.inv(a)),
    OpCase(Op.SOLVE, lambda g, a, b: g.solve(a, b),
           inputs=lambda rng: _wellcond(2, 3, 3)(rng) + (rng.uniform(-1, 1, (2, 3, 2)),),
           reference=np.linalg.solve, name="solve_batched_matrix_rhs",
           torch_build=lambda t, a, b: t.linalg.solve(a, b)),
    OpCase(Op.SOLVE, lambda g, a, b: g.solve(a, b),
           inputs=lambda rng: _wellcond(2, 3, 3)(rng) + (rng.uniform(-1, 1, (2, 3)),),
           reference=lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
           name="solve_batch_of_vectors", torch_build=lambda t, a, b: t.linalg.solve(a, b)),
    OpCase(Op.SOLVE, lambda g, a, b: g.solve(a, b),
           inputs=lambda rng: _wellcond(2, 3, 3)(rng) + (rng.uniform(-1, 1, (3,)),),
           reference=lambda a, b: np.linalg.solve(a, b[:, None])[..., 0] if a.ndim == 2 else
           np.linalg.solve(a, np.broadcast_to(b, a.shape[:-1])[..., None])[..., 0],
           name="solve_1d_rhs_broadcast", torch_build=lambda t, a, b: t.linalg.solve(a, b)),
    OpCase(Op.SOLVE, lambda g, a, b: g.solve(a, b),
           inputs=lambda rng: _wellcond(3, 3)(rng) + (rng.uniform(-1, 1, (2, 3, 2)),),
           reference=np.linalg.solve, name="solve_broadcast_a",
           torch_build=lambda t, a, b: t.linalg.solve(a, b)),
    OpCase(Op.DET, lambda g, a: g.det(a), inputs=_wellcond(3, 3), reference=np.linalg.det,
           name="det_2d", torch_build=lambda t, a: t.linalg.det(a)),
    OpCase(Op.DET, lambda g, a: g.det(a), [(2, 3, 3)], np.linalg.det, name="det_batched_random",
           torch_build=lambda t, a: t.linalg.det(a)),
    OpCase(Op.SLOGDET, lambda g, a: g.slogdet(a)[1], [(2, 3, 3)],
           lambda a: np.linalg.slogdet(a)[1], name="slogdet_logabsdet_batched",
           torch_build=lambda t, a: t.linalg.slogdet(a)[1]),
    OpCase(Op.SLOGDET, lambda g, a: g.slogdet(a)[1], inputs=_wellcond(4, 4),
           reference=lambda a: np.linalg.slogdet(a)[1], name="slogdet_logabsdet_2d",
           torch_build=lambda t, a: t.linalg.slogdet(a)[1]),
    OpCase(Op.CHOLESKY, lambda g, a: g.cholesky(_spd(g, a)), [(2, 3, 3)],
           lambda a: np.linalg.cholesky(_np_spd(a)), name="cholesky_lower_batched",
           torch_build=lambda t, a: t.linalg.cholesky(_t_spd(t, a))),
    OpCase(Op.CHOLESKY, lambda g, a: g.cholesky(_spd(g, a), upper=True), [(3, 3)],
           lambda a: _mT(np.linalg.cholesky(_np_spd(a))), name="cholesky_upper",
           torch_build=lambda t, a: t.linalg.cholesky(_t_spd(t, a), upper=True)),
    OpCase(Op.CHOLESKY, lambda g, a: g.cholesky(a), inputs=lambda rng: (_np_spd(
           rng.uniform(-1, 1, (3, 3))) + np.triu(rng.uniform(-1, 1, (3, 3)), 1),),
           reference=lambda a: np.linalg.cholesky(np.tril(a) + _mT(np.tril(a, -1))),
           name="cholesky_reads_the_lower_triangle", check_grad=False),
    OpCase(Op.EIGH, _eigh_packed, [(3, 3)], _np_eigh_packed, name="eigh_packed_2d",
           torch_build=_t_eigh_packed, fwd_rtol32=1e-3, fwd_atol32=1e-4),
    OpCase(Op.EIGH, _eigh_packed, [(2, 4, 4)], _np_eigh_packed, name="eigh_packed_batched",
           torch_build=_t_eigh_packed, fwd_rtol32=1e-3, fwd_atol32=1e-4),
]


def _arrays(*arrays):
    return lambda g: tuple(g.variable(a) for a in arrays)


_SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
_NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])

BAD += [
    BadCase(Op.INV, "inv_not_square", _leaves((2, 3)), lambda g, a: g.inv(a), yscv.ShapeError,
            r"inv: a must be a batch of square matrices .*\(2, 3\)"),
    BadCase(Op.INV, "inv_1d", _leaves((3,)), lambda g, a: g.inv(a), yscv.ShapeError, "inv: "),
    BadCase(Op.INV, "inv_singular", _arrays(np.stack([np.eye(2), _SINGULAR])),
            lambda g, a: g.inv(a), ValueError, r"inv: the input matrix is singular.*\(1,\)"),
    BadCase(Op.INV, "inv_complex", lambda g: (), lambda g: g.inv(np.eye(2) * 1j), TypeError,
            "inv: a has dtype complex"),
    BadCase(Op.SOLVE, "solve_a_not_square", _leaves((3, 2), (3,)), lambda g, a, b: g.solve(a, b),
            yscv.ShapeError, "solve: a must be a batch of square matrices"),
    BadCase(Op.SOLVE, "solve_b_rows_mismatch", _leaves((3, 3), (4, 2)),
            lambda g, a, b: g.solve(a, b), yscv.ShapeError, r"solve: b of shape \(4, 2\)"),
    BadCase(Op.SOLVE, "solve_b_vector_mismatch", _leaves((3, 3), (4,)),
            lambda g, a, b: g.solve(a, b), yscv.ShapeError, r"solve: b of shape \(4,\)"),
    BadCase(Op.SOLVE, "solve_b_0d", _leaves((3, 3), ()), lambda g, a, b: g.solve(a, b),
            yscv.ShapeError, r"solve: b of shape \(\)"),
    BadCase(Op.SOLVE, "solve_batch_mismatch", _leaves((2, 3, 3), (4, 3, 1)),
            lambda g, a, b: g.solve(a, b), yscv.ShapeError, "solve: batch dimensions"),
    BadCase(Op.SOLVE, "solve_singular", _arrays(_SINGULAR, np.ones(2)),
            lambda g, a, b: g.solve(a, b), ValueError, "solve: the input matrix is singular"),
    BadCase(Op.DET, "det_not_square", _leaves((2, 2, 3)), lambda g, a: g.det(a),
            yscv.ShapeError, r"det: .*\(2, 2, 3\)"),
    BadCase(Op.SLOGDET, "slogdet_not_square", _leaves((4,)), lambda g, a: g.slogdet(a),
            yscv.ShapeError, "slogdet: a must be a batch of square matrices"),
    BadCase(Op.CHOLESKY, "cholesky_not_square", _leaves((2, 3)), lambda g, a: g.cholesky(a),
            yscv.ShapeError, "cholesky: a must be a batch of square matrices"),
    BadCase(Op.CHOLESKY, "cholesky_not_positive_definite", _arrays(np.stack([np.eye(2), _NOT_PD])),
            lambda g, a: g.cholesky(a), ValueError,
            r"cholesky: the input is not positive-definite.*\(1,\)"),
    BadCase(Op.CHOLESKY, "cholesky_upper_not_bool", _leaves((2, 2)),
            lambda g, a: g.cholesky(a, upper=1), TypeError, "cholesky: upper must be a bool"),
    BadCase(Op.EIGH, "eigh_not_square", _leaves((3, 2)), lambda g, a: g.eigh(a),
            yscv.ShapeError, r"eigh: a must be a batch of square matrices .*\(3, 2\)"),
]


test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)




SQUARED = [followed_by_square(c) for c in CASES if c.torch_build is not None and c.op is Op.EINSUM]


@pytest.mark.parametrize("case", SQUARED, ids=[c.id for c in SQUARED])
def test_einsum_second_order_through_a_square_matches_pytorch(case):
    pytest.importorskip("torch")
    check_torch_second_order(case)


def test_matmul_1d_1d_is_0d_with_1d_gradients():
    g = yscv.Graph(np.float64)
    a = g.variable(np.array([1.0, 2.0, 3.0]))
    b = g.variable(np.array([4.0, 5.0, 6.0]))
    out = g.matmul(a, b)
    assert g.value(out).shape == () and isinstance(g.value(out), np.ndarray)
    g.backward(out)
    np.testing.assert_array_equal(g.grad(a), [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(g.grad(b), [1.0, 2.0, 3.0])


def test_matmul_gradient_skipped_for_constant():
    g = yscv.Graph(np.float64)
    x = g.constant(np.ones((2, 3)))
    w = g.variable(np.arange(6.0).reshape(3, 2))
    g.backward(g.sum(g.matmul(x, w)))
    assert g.grad(x) is None
    np.testing.assert_array_equal(g.grad(w), np.full((3, 2), 2.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((8, 5), (5, 3)), ((5,), (5, 3)), ((8, 5), (5,)),
                                    ((2, 4, 5), (5, 3)), ((2, 1, 4, 5), (3, 5, 2)), ((5,), (5,))])
def test_matmul_values_and_grads_keep_dtype_and_match_numpy(dtype, shapes):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s) for s in shapes)
    g = yscv.Graph(dtype)
    va, vb = g.variable(a), g.variable(b)
    out = g.matmul(va, vb)
    cot = rng.standard_normal(np.matmul(a, b).shape)
    g.backward(out, grad=cot)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g.value(out), np.matmul(a, b), rtol=tol, atol=tol)
    assert g.value(out).dtype == dtype
    for n, arr in ((va, a), (vb, b)):
        assert g.grad(n).dtype == dtype and g.grad(n).shape == arr.shape


ZERO_DIM_SHAPES = [((2, 3, 0), (0, 4)), ((2, 3, 4), (4, 0)), ((1, 3, 0), (0, 5)),
                   ((2, 0, 4), (4, 5)), ((3, 2, 3, 0), (0, 4)), ((2, 3, 0), (1, 0, 5)),
                   ((2, 3, 4), (2, 4, 0)), ((3, 0), (0, 4)), ((5, 0), (0,))]


def _check_zero_dim_matmul(dtype, sa, sb):
    rng = np.random.default_rng(8)
    a0 = rng.standard_normal(sa)
    b0 = rng.standard_normal(sb)
    want = np.matmul(a0, b0)
    g = yscv.Graph(dtype)
    a, b = g.variable(a0), g.variable(b0)
    y = g.matmul(a, b)
    assert g.value(y).shape == want.shape and g.value(y).dtype == dtype
    np.testing.assert_array_equal(g.value(y), want)   # zeros (k == 0) or empty
    g.backward(y, grad=rng.standard_normal(want.shape))
    # k == 0 or an empty output: nothing flows, gradients are zeros of each shape
    assert g.grad(a).shape == sa and g.grad(b).shape == sb
    assert g.grad(a).dtype == dtype and g.grad(b).dtype == dtype
    np.testing.assert_array_equal(g.grad(a), 0.0)
    np.testing.assert_array_equal(g.grad(b), 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb", ZERO_DIM_SHAPES)
def test_matmul_zero_sized_dims_match_numpy(dtype, sa, sb):
    """Issue 12.7: a zero-sized inner or output dimension with a batched
    operand used to fail with "cannot reshape array of size 0" (forward and
    backward). Values equal np.matmul, gradients are zeros of the operands'
    shapes."""
    _check_zero_dim_matmul(dtype, sa, sb)


def test_transpose_forward_is_a_view_and_backward_inverts_the_permutation():
    x = np.arange(24.0).reshape(2, 3, 4)
    g = yscv.Graph(np.float64)
    v = g.variable(x)
    t = g.transpose(v, (2, 0, 1))
    assert np.shares_memory(g.value(t), g.value(v))
    cot = np.arange(24.0).reshape(4, 2, 3)
    g.backward(t, grad=cot)
    np.testing.assert_array_equal(g.grad(v), np.transpose(cot, (1, 2, 0)))


def test_einsum_large_contraction_uses_blas_path_and_matches_matmul_grads():
    # big enough (40*40*50 multiply-adds) for the cached optimize path
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 40)), rng.standard_normal((40, 50))
    cot = rng.standard_normal((40, 50))
    grads = []
    for build in (lambda g, x, y: g.einsum("ij,jk->ik", x, y), lambda g, x, y: g.matmul(x, y)):
        g = yscv.Graph(np.float64)
        x, y = g.variable(a), g.variable(b)
        g.backward(build(g, x, y), grad=cot)
        grads.append((g.grad(x), g.grad(y)))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12, atol=1e-12)


def test_einsum_trace_gradient_is_identity():
    g = yscv.Graph(np.float64)
    x = g.variable(np.arange(9.0).reshape(3, 3))
    out = g.einsum("ii", x)
    assert float(g.value(out)) == 12.0
    g.backward(out)
    np.testing.assert_array_equal(g.grad(x), np.eye(3))


def test_einsum_summed_only_index_broadcasts_gradient():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones((2, 3)))
    y = g.variable(np.array([1.0, 2.0]))
    g.backward(g.einsum("ij,k->i", x, y), grad=np.array([1.0, 10.0]))
    np.testing.assert_array_equal(g.grad(x), [[3.0] * 3, [30.0] * 3])  # sum(y) * cot_i
    np.testing.assert_array_equal(g.grad(y), [33.0, 33.0])  # sum_ij x * cot_i


def test_einsum_float32_keeps_dtype():
    g = yscv.Graph(np.float32)
    a = g.variable(np.ones((3, 4)))
    b = g.variable(np.ones((4,)))
    out = g.einsum("ij,j->i", a, b)
    g.backward(out, grad=np.ones(3))
    assert g.value(out).dtype == np.float32
    assert g.grad(a).dtype == np.float32 and g.grad(b).dtype == np.float32


def test_einsum_failure_leaves_graph_unchanged_with_array_operand():
    g = yscv.Graph()
    a = g.variable(np.ones((2, 3)))
    with pytest.raises(yscv.ShapeError, match="einsum"):
        g.einsum("ij,jk->ik", a, np.ones((4, 2)))
    assert len(g) == 1


# ------------------------------------------- 2-d products on yscv's tiles
# float32 products above a size run on yscv's GEMM tiles where the CPU has
# AVX-512 (yscv/compute/gemm.py); these tests force that path on any CPU.
from yscv import runtime  # noqa: E402
from yscv.compute import gemm as _gemm  # noqa: E402


@pytest.fixture
def tiles(monkeypatch):
    monkeypatch.setattr(runtime.gemm, "_gemm", "tiles")
    monkeypatch.setattr(_gemm, "MIN_WORK", 1)


def _layouts(rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    at = np.ascontiguousarray(a.T).T          # the transpose of a C-contiguous array
    bt = np.ascontiguousarray(b.T).T
    return a, b, {"NN": (a, b), "NT": (a, bt), "TN": (at, b), "TT": (at, bt)}


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (9, 33, 70), (37, 130, 65),
                                   (64, 64, 64), (130, 17, 200)])
def test_tile_products_match_float64_in_every_layout(tiles, shape):
    a, b, forms = _layouts(np.random.default_rng(sum(shape)), *shape)
    want = a.astype(np.float64) @ b
    for name, (x, y) in forms.items():
        got = _gemm.dot(x, y)
        assert got.dtype == np.float32 and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max(),
                                   err_msg=name)


def test_tile_products_are_the_same_bits_on_one_thread_or_two(tiles, monkeypatch):
    a, b, forms = _layouts(np.random.default_rng(5), 200, 96, 150)
    monkeypatch.setattr(runtime.threads, "_num_threads", 0 + 1)
    one = {k: _gemm.dot(*v) for k, v in forms.items()}
    monkeypatch.setattr(runtime.threads, "_num_threads", 1 + 1)
    for _ in range(3):
        for k, v in forms.items():
            assert np.array_equal(_gemm.dot(*v), one[k]), k


def test_matmul_graph_on_tiles_forward_backward(tiles):
    """Forward, both gradients and the stacked-rows path ([B, S, K] @ [K, N])
    through the graph, against float64 NumPy."""
    rng = np.random.default_rng(6)
    for ashape in ((48, 40), (3, 16, 40)):
        a0 = rng.standard_normal(ashape).astype(np.float32)
        b0 = rng.standard_normal((40, 72)).astype(np.float32)
        cot = rng.standard_normal(ashape[:-1] + (72,)).astype(np.float32)
        g = yscv.Graph()
        a, b = g.variable(a0), g.variable(b0)
        y = g.matmul(a, b)
        g.backward(y, grad=cot)
        a64, b64, c64 = (v.astype(np.float64) for v in (a0, b0, cot))
        tol = dict(rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(g.value(y), a64 @ b64, **tol)
        np.testing.assert_allclose(g.grad(a), c64 @ b64.T, **tol)
        np.testing.assert_allclose(g.grad(b), (a64.reshape(-1, 40).T @ c64.reshape(-1, 72)), **tol)


@pytest.mark.parametrize("sa,sb", ZERO_DIM_SHAPES)
def test_matmul_zero_sized_dims_with_tiles_forced(tiles, sa, sb):
    """The GEMM dispatch (yscv/compute/gemm.py) is on the float32 2-d and
    stacked-rows paths: with the tiles forced on, empty products still give
    NumPy's zeros (no work, so np.dot)."""
    _check_zero_dim_matmul(np.float32, sa, sb)
    for m, k, n in ((0, 4, 5), (4, 0, 5), (4, 5, 0)):
        a = np.ones((m, k), np.float32)
        b = np.ones((k, n), np.float32)
        np.testing.assert_array_equal(_gemm.dot(a, b), np.zeros((m, n), np.float32))


def test_tiles_off_or_other_dtypes_use_numpy_dot(monkeypatch):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    monkeypatch.setattr(runtime.gemm, "_gemm", "blas")
    assert np.array_equal(_gemm.dot(a, b), np.dot(a, b))
    monkeypatch.setattr(runtime.gemm, "_gemm", "tiles")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(_gemm.dot(a64, b64), np.dot(a64, b64))   # float64: BLAS
    small = a[:8, :8], b[:8, :8]
    assert np.array_equal(_gemm.dot(*small), np.dot(*small))        # below MIN_WORK


def test_yscv_gemm_environment_switch():
    import os
    import subprocess
    import sys

    code = "import yscv.compute.gemm as m; print(m.tiles_enabled())"
    for value, want in (("0", "False"), ("1", "True")):
        env = {**os.environ, "YSCV_GEMM": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        assert out.stdout.strip() == want


@pytest.mark.parametrize("sub, shapes", [("ii,ij->j", [(3, 3), (3, 4)]),
                                         ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)])])
def test_einsum_third_derivative_matches_pytorch(sub, shapes):
    """sum(einsum(a, b)^2 * w) differentiated three times (diagonals: the
    scatter_add's own recorded rule, a gather, runs at the third order)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    a, b = (rng.uniform(-1, 1, s) for s in shapes)
    g = yscv.Graph(np.float64)
    an, bn = g.variable(a), g.variable(b)
    y = g.einsum(sub, an, bn)
    w = rng.uniform(-1, 1, g.value(y).shape)
    d1 = g.gradients(g.sum(g.mul(g.mul(y, y), w)), [an, bn], create_graph=True)
    d2 = g.gradients(g.add(g.sum(g.mul(d1[0], d1[0])), g.sum(g.mul(d1[1], d1[1]))), [an, bn],
                     create_graph=True)
    d3 = g.gradients(g.add(g.sum(g.mul(d2[0], d2[0])), g.sum(g.mul(d2[1], d2[1]))), [an, bn])
    at, bt = (torch.tensor(v, requires_grad=True) for v in (a, b))
    yt = torch.einsum(sub, at, bt)
    t1 = torch.autograd.grad((yt * yt * torch.tensor(w)).sum(), [at, bt], create_graph=True)
    t2 = torch.autograd.grad((t1[0] ** 2).sum() + (t1[1] ** 2).sum(), [at, bt], create_graph=True)
    t3 = torch.autograd.grad((t2[0] ** 2).sum() + (t2[1] ** 2).sum(), [at, bt])
    for k in range(2):
        np.testing.assert_allclose(g.value(d2[k]), t2[k].detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(d3[k], t3[k].numpy(), rtol=1e-10, atol=1e-10)


# ------------------------------------------------ matrix functions, direct
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_slogdet_sign_is_an_array_and_matches_pytorch(dtype):
    torch = pytest.importorskip("torch")
    # the singular one has a zero column: exactly singular in any elimination
    # order (torch's LU leaves 3e-16 of [[1, 2, 3], [2, 4, 6], [0, 1, 1]])
    a = np.stack([np.diag([2.0, -3.0, 1.0]), np.diag([1.0, 1.0, 0.5]),
                  np.array([[1.0, 0.0, 3.0], [2.0, 0.0, 6.0], [0.0, 0.0, 1.0]])])
    g = yscv.Graph(dtype)
    sign, logabs = g.slogdet(g.variable(a))
    ts, tl = torch.linalg.slogdet(torch.tensor(a))
    assert type(sign) is np.ndarray and sign.dtype == dtype
    np.testing.assert_array_equal(sign, ts.numpy())
    assert g.value(logabs).dtype == dtype
    np.testing.assert_allclose(g.value(logabs), tl.numpy(), rtol=1e-6)
    assert g.value(logabs)[2] == -np.inf and sign[2] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eigh_values_and_vectors_match_pytorch(dtype):
    """Values equal torch's; vectors equal torch's up to each column's sign,
    which yscv fixes (largest entry positive); V diag(L) V^T rebuilds a."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 4))
    a = x + _mT(x)
    g = yscv.Graph(dtype)
    values, vectors = g.eigh(g.variable(a))
    L, V = g.value(values), g.value(vectors)
    tl, tv = (t.numpy() for t in torch.linalg.eigh(torch.tensor(a)))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    assert L.dtype == dtype and V.dtype == dtype and L.shape == (2, 4) and V.shape == (2, 4, 4)
    np.testing.assert_allclose(L, tl, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.abs(V), np.abs(tv), rtol=tol * 10, atol=tol * 10)
    big = np.take_along_axis(V, np.argmax(np.abs(V), axis=-2)[..., None, :], axis=-2)
    assert np.all(big > 0)
    np.testing.assert_allclose((V * L[..., None, :]) @ _mT(V), a, atol=tol * 100)


def test_eigh_reads_only_the_lower_triangle_as_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 3))
    g = yscv.Graph(np.float64)
    values, _ = g.eigh(g.variable(a))
    np.testing.assert_allclose(g.value(values), torch.linalg.eigh(torch.tensor(a))[0].numpy(),
                               rtol=1e-12)


def test_det_gradient_of_a_singular_matrix_matches_pytorch():
    """The cofactors through the SVD where inv(a) does not exist, as torch's
    create_graph path (its first-order-only path returns zeros there); the
    recorded rule is in tests/ops/test_linalg_edge.py."""
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, -1.0]])
    g = yscv.Graph(np.float64)
    v = g.variable(a)
    d = g.det(v)
    g.backward(d, grad=np.array(1.5))
    t = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.det(t) * 1.5, [t], create_graph=True)
    assert g.value(d) == 0.0
    np.testing.assert_allclose(g.grad(v), tg.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_eigh_third_derivative_matches_pytorch():
    """sum(w * eigh(a + a^T).vectors^2) + sum(values^3), differentiated three
    times: the recorded rule's own eigh node is differentiated again."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    a = rng.uniform(-1, 1, (3, 3))
    w = rng.uniform(-1, 1, (3, 3))

    def ours():
        g = yscv.Graph(np.float64)
        x = g.variable(a)
        values, vectors = g.eigh(_sym(g, x))
        y = g.add(g.sum(g.mul(g.mul(vectors, vectors), w)), g.sum(g.mul(values, g.mul(values, values))))
        (d1,) = g.gradients(y, [x], create_graph=True)
        (d2,) = g.gradients(g.sum(g.mul(d1, d1)), [x], create_graph=True)
        (d3,) = g.gradients(g.sum(g.mul(d2, d2)), [x])
        return g.value(d2), d3

    t = torch.tensor(a, requires_grad=True)
    tl, tv = torch.linalg.eigh(t + t.mT)
    ty = (tv * tv * torch.tensor(w)).sum() + (tl ** 3).sum()
    (t1,) = torch.autograd.grad(ty, [t], create_graph=True)
    (t2,) = torch.autograd.grad((t1 * t1).sum(), [t], create_graph=True)
    (t3,) = torch.autograd.grad((t2 * t2).sum(), [t])
    d2, d3 = ours()
    np.testing.assert_allclose(d2, t2.detach().numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(d3, t3.numpy(), rtol=1e-8, atol=1e-9)
