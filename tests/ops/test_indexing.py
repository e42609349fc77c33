"""Indexing ops: naive-loop forward references, float64 gradcheck, bad arguments."""
import itertools
import threading

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_second_order,
                          followed_by_square, make_op_tests, make_second_order_tests)


def gather_loops(x, axis, index):
    axis %= x.ndim
    out = np.empty(index.shape)
    for pos in itertools.product(*[range(n) for n in index.shape]):
        src = list(pos)
        src[axis] = index[pos]
        out[pos] = x[tuple(src)]
    return out


def scatter_add_loops(x, axis, index, src):
    axis %= x.ndim
    out = np.array(x, dtype=np.float64)
    for pos in itertools.product(*[range(n) for n in index.shape]):
        dst = list(pos)
        dst[axis] = index[pos]
        out[tuple(dst)] += src[pos]
    return out


def scatter_loops(x, indices, src):
    out = np.array(x, dtype=np.float64)
    for m, row in enumerate(indices):  # in order: the last write wins
        out[row] = src[m]
    return out


def embedding_loops(weight, indices):
    out = np.empty(indices.shape + weight.shape[1:])
    for pos in itertools.product(*[range(n) for n in indices.shape]):
        out[pos] = weight[indices[pos]]
    return out


def _torch_scatter(t, x, rows, src):
    """yscv's scatter in PyTorch: one index_copy per row, in order (the last
    write wins)."""
    out = x.clone()
    for m, row in enumerate(rows):
        out = out.index_copy(0, t.tensor([int(row)]), src[m:m + 1])
    return out


# repeated indices everywhere, so accumulation is exercised
I_AX0 = np.array([[0, 2, 2], [2, 0, 1]])           # into x (3, 4): index (2, 3) axis 0
I_AX1 = np.array([[3, 3, 0, 1, 3], [0, 0, 2, 2, 2]])  # into x (2, 4): index (2, 5) axis 1
I_LAST = np.array([[[1, 1], [0, 1]], [[2, 2], [2, 0]]])  # into x (2, 3, 3): axis -1, smaller dims
I_1D = np.array([4, 0, 4, 4])
ROWS = np.array([3, 0, 5])
ROWS_DUP = np.array([1, 4, 1, 0, 4])
E1 = np.array([2, 0, 2, 5])
E2 = np.array([[1, 4, 1], [0, 4, 4]])
E0 = np.array(3)

CASES = [
    # gather
    OpCase(Op.GATHER, lambda g, x: g.gather(x, 0, I_AX0), [(3, 4)],
           lambda x: gather_loops(x, 0, I_AX0), name="gather_axis0_repeated",
           torch_build=lambda t, x: t.gather(x, 0, t.tensor(I_AX0))),
    OpCase(Op.GATHER, lambda g, x: g.gather(x, 1, I_AX1), [(2, 4)],
           lambda x: gather_loops(x, 1, I_AX1), name="gather_axis1_longer_than_x",
           torch_build=lambda t, x: t.gather(x, 1, t.tensor(I_AX1))),
    OpCase(Op.GATHER, lambda g, x: g.gather(x, -1, I_LAST), [(3, 4, 3)],
           lambda x: gather_loops(x, -1, I_LAST), name="gather_axis_last_subblock",
           torch_build=lambda t, x: t.gather(x, -1, t.tensor(I_LAST))),
    OpCase(Op.GATHER, lambda g, x: g.gather(x, 0, I_1D), [(5,)],
           lambda x: gather_loops(x, 0, I_1D), name="gather_1d",
           torch_build=lambda t, x: t.gather(x, 0, t.tensor(I_1D))),
    OpCase(Op.GATHER, lambda g, x: g.gather(x, 1, np.zeros((2, 0), np.int64)), [(2, 3)],
           lambda x: np.zeros((2, 0)), name="gather_empty_index",
           torch_build=lambda t, x: t.gather(x, 1, t.zeros((2, 0), dtype=t.int64))),
    # scatter_add
    OpCase(Op.SCATTER_ADD, lambda g, x, s: g.scatter_add(x, 0, I_AX0, s), [(3, 4), (2, 3)],
           lambda x, s: scatter_add_loops(x, 0, I_AX0, s), name="scatter_add_axis0_repeated",
           torch_build=lambda t, x, s: x.scatter_add(0, t.tensor(I_AX0), s)),
    OpCase(Op.SCATTER_ADD, lambda g, x, s: g.scatter_add(x, 1, I_AX1, s), [(2, 4), (3, 6)],
           lambda x, s: scatter_add_loops(x, 1, I_AX1, s[:2, :5]),
           name="scatter_add_axis1_src_larger",
           # the leading block: PyTorch's backward rejects a src larger than index
           torch_build=lambda t, x, s: x.scatter_add(1, t.tensor(I_AX1), s[:2, :5])),
    OpCase(Op.SCATTER_ADD, lambda g, x, s: g.scatter_add(x, -1, I_LAST, s), [(3, 4, 3), (2, 2, 2)],
           lambda x, s: scatter_add_loops(x, -1, I_LAST, s), name="scatter_add_axis_last_subblock",
           torch_build=lambda t, x, s: x.scatter_add(-1, t.tensor(I_LAST), s)),
    OpCase(Op.SCATTER_ADD, lambda g, x, s: g.scatter_add(x, 0, I_1D, s), [(5,), (4,)],
           lambda x, s: scatter_add_loops(x, 0, I_1D, s), name="scatter_add_1d",
           torch_build=lambda t, x, s: x.scatter_add(0, t.tensor(I_1D), s)),
    OpCase(Op.SCATTER_ADD, lambda g, x: g.scatter_add(x, 0, I_AX0, np.ones((2, 3))), [(3, 4)],
           lambda x: scatter_add_loops(x, 0, I_AX0, np.ones((2, 3))),
           name="scatter_add_constant_src",
           torch_build=lambda t, x: x.scatter_add(0, t.tensor(I_AX0), t.ones((2, 3), dtype=t.float64))),
    # scatter
    OpCase(Op.SCATTER, lambda g, x, s: g.scatter(x, ROWS, s), [(6, 3), (3, 3)],
           lambda x, s: scatter_loops(x, ROWS, s), name="scatter_rows",
           torch_build=lambda t, x, s: _torch_scatter(t, x, ROWS, s)),
    OpCase(Op.SCATTER, lambda g, x, s: g.scatter(x, ROWS_DUP, s), [(5, 2), (5, 2)],
           lambda x, s: scatter_loops(x, ROWS_DUP, s), name="scatter_duplicates_last_wins",
           torch_build=lambda t, x, s: _torch_scatter(t, x, ROWS_DUP, s)),
    OpCase(Op.SCATTER, lambda g, x, s: g.scatter(x, [2, 0], s), [(3, 2, 2), (2, 2, 2)],
           lambda x, s: scatter_loops(x, [2, 0], s), name="scatter_nd_rows_list_indices",
           torch_build=lambda t, x, s: _torch_scatter(t, x, [2, 0], s)),
    OpCase(Op.SCATTER, lambda g, x, s: g.scatter(x, [], s), [(3, 2), (0, 2)],
           lambda x, s: x, name="scatter_no_rows",
           torch_build=lambda t, x, s: _torch_scatter(t, x, [], s)),
    # embedding
    OpCase(Op.EMBEDDING, lambda g, w: g.embedding(w, E1), [(6, 3)],
           lambda w: embedding_loops(w, E1), name="embedding_1d_repeated",
           torch_build=lambda t, w: t.nn.functional.embedding(t.tensor(E1), w)),
    OpCase(Op.EMBEDDING, lambda g, w: g.embedding(w, E2), [(5, 4)],
           lambda w: embedding_loops(w, E2), name="embedding_2d_repeated",
           torch_build=lambda t, w: t.nn.functional.embedding(t.tensor(E2), w)),
    OpCase(Op.EMBEDDING, lambda g, w: g.embedding(w, E0), [(4, 3)],
           lambda w: w[3], name="embedding_0d_index",
           torch_build=lambda t, w: t.nn.functional.embedding(t.tensor(E0), w)),
    OpCase(Op.EMBEDDING, lambda g, w: g.embedding(w, E2.astype(np.int32)), [(5, 2)],
           lambda w: embedding_loops(w, E2), name="embedding_int32_indices",
           torch_build=lambda t, w: t.nn.functional.embedding(t.tensor(E2.astype(np.int32)), w)),
]


def _leaf(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.GATHER, "gather_out_of_range", _leaf((3, 4)),
            lambda g, x: g.gather(x, 1, np.array([[0, 4]])), IndexError,
            r"gather: index holds 4 at position \(0, 1\), outside \[0, 4\)"),
    BadCase(Op.GATHER, "gather_negative", _leaf((3, 4)),
            lambda g, x: g.gather(x, 0, np.array([[0, -1]])), IndexError, "gather: index holds -1"),
    BadCase(Op.GATHER, "gather_float_index", _leaf((3, 4)),
            lambda g, x: g.gather(x, 0, np.zeros((1, 2))), TypeError, "gather: index must be an integer"),
    BadCase(Op.GATHER, "gather_bool_index", _leaf((3,)),
            lambda g, x: g.gather(x, 0, np.array([True])), TypeError, "gather"),
    BadCase(Op.GATHER, "gather_ndim", _leaf((3, 4)),
            lambda g, x: g.gather(x, 0, np.zeros(2, np.int64)), yscv.ShapeError, "gather: index must have"),
    BadCase(Op.GATHER, "gather_index_too_big_off_axis", _leaf((3, 4)),
            lambda g, x: g.gather(x, 0, np.zeros((2, 5), np.int64)), yscv.ShapeError,
            "gather: index shape"),
    BadCase(Op.GATHER, "gather_axis_range", _leaf((3, 4)),
            lambda g, x: g.gather(x, 2, np.zeros((1, 1), np.int64)), ValueError, "gather: axis=2"),
    BadCase(Op.GATHER, "gather_node_index", _leaf((3,), (2,)),
            lambda g, x, i: g.gather(x, 0, i), TypeError, "not a NodeId"),
    BadCase(Op.SCATTER_ADD, "scatter_add_out_of_range", _leaf((3, 4), (1, 2)),
            lambda g, x, s: g.scatter_add(x, 0, np.array([[3, 0]]), s), IndexError,
            "scatter_add: index holds 3"),
    BadCase(Op.SCATTER_ADD, "scatter_add_src_too_small", _leaf((3, 4), (1, 1)),
            lambda g, x, s: g.scatter_add(x, 0, np.array([[1, 0]]), s), yscv.ShapeError,
            "scatter_add: src shape"),
    BadCase(Op.SCATTER_ADD, "scatter_add_float_index", _leaf((3, 4), (1, 2)),
            lambda g, x, s: g.scatter_add(x, 0, np.array([[1.0, 0.0]]), s), TypeError, "scatter_add"),
    BadCase(Op.SCATTER_ADD, "scatter_add_axis_range", _leaf((3, 4), (1, 2)),
            lambda g, x, s: g.scatter_add(x, -3, np.array([[1, 0]]), s), ValueError,
            "scatter_add: axis=-3"),
    BadCase(Op.SCATTER, "scatter_out_of_range", _leaf((3, 2), (2, 2)),
            lambda g, x, s: g.scatter(x, np.array([0, 3]), s), IndexError,
            r"scatter: indices holds 3 at position \(1,\)"),
    BadCase(Op.SCATTER, "scatter_src_shape", _leaf((3, 2), (2, 3)),
            lambda g, x, s: g.scatter(x, np.array([0, 1]), s), yscv.ShapeError, "scatter: src has shape"),
    BadCase(Op.SCATTER, "scatter_2d_indices", _leaf((3, 2), (2, 2)),
            lambda g, x, s: g.scatter(x, np.array([[0, 1]]), s), yscv.ShapeError, "scatter: indices"),
    BadCase(Op.SCATTER, "scatter_float_indices", _leaf((3, 2), (2, 2)),
            lambda g, x, s: g.scatter(x, np.array([0.0, 1.0]), s), TypeError, "scatter"),
    BadCase(Op.EMBEDDING, "embedding_out_of_range", _leaf((10, 4)),
            lambda g, w: g.embedding(w, np.array([[1, 2], [10, 3]])), IndexError,
            r"embedding: indices holds 10 at position \(1, 0\), outside \[0, 10\)"),
    BadCase(Op.EMBEDDING, "embedding_negative", _leaf((10, 4)),
            lambda g, w: g.embedding(w, np.array([-1, 2])), IndexError, "embedding: indices holds -1"),
    BadCase(Op.EMBEDDING, "embedding_float_indices", _leaf((10, 4)),
            lambda g, w: g.embedding(w, np.array([1.0, 2.0])), TypeError,
            "embedding: indices must be an integer array"),
    BadCase(Op.EMBEDDING, "embedding_ragged_indices", _leaf((10, 4)),
            lambda g, w: g.embedding(w, [[1, 2], [3]]), TypeError, "embedding: indices"),
    BadCase(Op.EMBEDDING, "embedding_weight_not_2d", _leaf((10,)),
            lambda g, w: g.embedding(w, np.array([1])), yscv.ShapeError, "embedding: weight must be 2-d"),
    BadCase(Op.EMBEDDING, "embedding_complex_weight", lambda g: (np.ones((2, 2)) * 1j,),
            lambda g, w: g.embedding(w, np.array([1])), TypeError, "embedding"),
]


# --------------------------------------------- SPEC section 11: indexing ops
MASK_ROW = np.array([True, False, True])
MASK_BIG = np.array([[[False, True, False]], [[True, True, False]]])   # (2, 1, 3)
SEL = np.array([3, 0, 3, 1])


def _mask_loops(x, mask, value):
    xb, mb = np.broadcast_arrays(x, mask)
    out = np.array(xb, dtype=np.float64)
    for pos in itertools.product(*[range(n) for n in out.shape]):
        if mb[pos]:
            out[pos] = value
    return out


def _index_select_loops(x, axis, index):
    out = np.empty(x.shape[:axis] + (len(index),) + x.shape[axis + 1:])
    for k, i in enumerate(index):
        out[(slice(None),) * axis + (k,)] = x[(slice(None),) * axis + (i,)]
    return out


CASES += [
    OpCase(Op.MASKED_FILL, lambda g, x: g.masked_fill(x, MASK_ROW, -7.5), [(2, 3)],
           lambda x: _mask_loops(x, MASK_ROW, -7.5), name="masked_fill_row_mask",
           torch_build=lambda t, x: x.masked_fill(t.tensor(MASK_ROW), -7.5)),
    OpCase(Op.MASKED_FILL, lambda g, x: g.masked_fill(x, MASK_BIG, 2.0), [(2, 3)],
           lambda x: _mask_loops(x, MASK_BIG, 2.0), name="masked_fill_mask_broadcasts_x",
           torch_build=lambda t, x: t.masked_fill(x, t.tensor(MASK_BIG), 2.0)),
    OpCase(Op.MASKED_FILL, lambda g, x: g.masked_fill(x, np.array(True), 0.0), [(3,)],
           lambda x: np.zeros(3), name="masked_fill_all",
           torch_build=lambda t, x: x.masked_fill(t.tensor(True), 0.0)),
    OpCase(Op.INDEX_SELECT, lambda g, x: g.index_select(x, 0, SEL), [(4, 3)],
           lambda x: _index_select_loops(x, 0, SEL), name="index_select_axis0_repeated",
           torch_build=lambda t, x: t.index_select(x, 0, t.tensor(SEL))),
    OpCase(Op.INDEX_SELECT, lambda g, x: g.index_select(x, 1, SEL[:3]), [(2, 4, 2)],
           lambda x: _index_select_loops(x, 1, SEL[:3]), name="index_select_middle_axis",
           torch_build=lambda t, x: t.index_select(x, 1, t.tensor(SEL[:3]))),
    OpCase(Op.INDEX_SELECT, lambda g, x: g.index_select(x, -1, np.array(2)), [(2, 3)],
           lambda x: x[:, 2:3], name="index_select_0d_index",
           torch_build=lambda t, x: t.index_select(x, -1, t.tensor(2))),
    OpCase(Op.INDEX_SELECT, lambda g, x: g.index_select(x, 0, np.zeros(0, np.int64)), [(2, 3)],
           lambda x: np.zeros((0, 3)), name="index_select_empty",
           torch_build=lambda t, x: t.index_select(x, 0, t.zeros(0, dtype=t.int64))),
]

BAD += [
    BadCase(Op.MASKED_FILL, "masked_fill_int_mask", _leaf((2, 3)),
            lambda g, x: g.masked_fill(x, np.array([1, 0, 1]), 0.0), TypeError,
            "masked_fill: mask must be a boolean array"),
    BadCase(Op.MASKED_FILL, "masked_fill_shape", _leaf((2, 3)),
            lambda g, x: g.masked_fill(x, np.array([True, False]), 0.0), yscv.ShapeError,
            r"masked_fill: mask of shape \(2,\) does not broadcast"),
    BadCase(Op.MASKED_FILL, "masked_fill_value_not_a_number", _leaf((2, 3)),
            lambda g, x: g.masked_fill(x, MASK_ROW, "0"), TypeError, "masked_fill: value"),
    BadCase(Op.MASKED_FILL, "masked_fill_node_mask", _leaf((2, 3), (3,)),
            lambda g, x, m: g.masked_fill(x, m, 0.0), TypeError, "masked_fill: mask"),
    BadCase(Op.INDEX_SELECT, "index_select_out_of_range", _leaf((4, 3)),
            lambda g, x: g.index_select(x, 1, np.array([0, 3])), IndexError,
            r"index_select: index holds 3 at position \(1,\), outside \[0, 3\)"),
    BadCase(Op.INDEX_SELECT, "index_select_negative", _leaf((4, 3)),
            lambda g, x: g.index_select(x, 0, np.array([-1])), IndexError,
            "index_select: index holds -1"),
    BadCase(Op.INDEX_SELECT, "index_select_2d_index", _leaf((4, 3)),
            lambda g, x: g.index_select(x, 0, np.zeros((1, 2), np.int64)), yscv.ShapeError,
            "index_select: index must be 1-d"),
    BadCase(Op.INDEX_SELECT, "index_select_float_index", _leaf((4, 3)),
            lambda g, x: g.index_select(x, 0, np.array([0.0])), TypeError,
            "index_select: index must be an integer"),
    BadCase(Op.INDEX_SELECT, "index_select_axis_range", _leaf((4, 3)),
            lambda g, x: g.index_select(x, 2, np.array([0])), ValueError, "index_select: axis=2"),
    BadCase(Op.INDEX_SELECT, "index_select_0d_x", _leaf(()),
            lambda g, x: g.index_select(x, 0, np.array([0])), yscv.ShapeError, "index_select"),
]


test_forward, test_gradcheck, test_bad_arguments = make_op_tests(CASES, BAD)
test_second_order = make_second_order_tests(CASES)
_GRAD_ROWS = [c for c in CASES if c.check_grad]


@pytest.mark.parametrize("case", _GRAD_ROWS, ids=[c.id for c in _GRAD_ROWS])
def test_second_order_keeps_float32(case):
    check_second_order_float32(case)




SQUARED = [followed_by_square(c) for c in CASES if c.torch_build is not None]


@pytest.mark.parametrize("case", SQUARED, ids=[c.id for c in SQUARED])
def test_second_order_through_a_square_matches_pytorch(case):
    pytest.importorskip("torch")
    check_torch_second_order(case)


def test_third_derivative_through_gather_and_scatter_add_matches_pytorch():
    """gather's recorded rule is a scatter_add whose recorded rule is a
    gather: the third derivative of sum(gather(x)^3 w) runs through both."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, w = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, I_AX0.shape)
    g = yscv.Graph(np.float64)
    xn = g.variable(x)
    y = g.gather(xn, 0, I_AX0)
    (d1,) = g.gradients(g.sum(g.mul(g.mul(g.mul(y, y), y), w)), [xn], create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(d1, d1)), [xn], create_graph=True)
    (d3,) = g.gradients(g.sum(g.mul(d2, d2)), [xn])
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.gather(xt, 0, torch.tensor(I_AX0))
    (t1,) = torch.autograd.grad((yt ** 3 * torch.tensor(w)).sum(), xt, create_graph=True)
    (t2,) = torch.autograd.grad((t1 * t1).sum(), xt, create_graph=True)
    (t3,) = torch.autograd.grad((t2 * t2).sum(), xt)
    np.testing.assert_allclose(g.value(d2), t2.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d3, t3.numpy(), rtol=1e-10, atol=1e-12)


def test_scatter_duplicates_gradient_goes_to_the_winner_only():
    g = yscv.Graph(np.float64)
    x = g.variable(np.zeros((3, 1)))
    src = g.variable(np.array([[1.0], [2.0], [3.0]]))
    y = g.scatter(x, np.array([1, 1, 2]), src)
    np.testing.assert_array_equal(g.value(y)[:, 0], [0.0, 2.0, 3.0])
    g.backward(y, grad=np.array([[10.0], [20.0], [30.0]]))
    np.testing.assert_array_equal(g.grad(src)[:, 0], [0.0, 20.0, 30.0])
    np.testing.assert_array_equal(g.grad(x)[:, 0], [10.0, 0.0, 0.0])


def test_index_arrays_are_copied_and_read_only():
    g = yscv.Graph(np.float64)
    w = g.variable(np.arange(12.0).reshape(4, 3))
    idx = np.array([0, 3])
    e = g.embedding(w, idx)
    idx[0] = 2  # the caller's array may change afterwards
    np.testing.assert_array_equal(g.value(e), [[0, 1, 2], [9, 10, 11]])
    g.backward(e, grad=np.ones((2, 3)))
    np.testing.assert_array_equal(g.grad(w).sum(axis=1), [3.0, 0.0, 0.0, 3.0])
    kept = g._attrs[e.index]
    assert kept.dtype.kind == "i" and not kept.flags.writeable


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_backward_matches_add_at_at_scale(dtype):
    rng = np.random.default_rng(1)
    v, d, m = 500, 16, 3000  # many repeats
    idx = rng.integers(0, v, size=(60, 50))
    g = yscv.Graph(dtype)
    w = g.variable(rng.standard_normal((v, d)))
    e = g.embedding(w, idx)
    cot = rng.standard_normal((60, 50, d)).astype(dtype)
    g.backward(e, grad=cot)
    expect = np.zeros((v, d))
    np.add.at(expect, idx.reshape(-1), cot.reshape(m, d).astype(np.float64))
    assert g.grad(w).dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g.grad(w), expect, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_scatter_add_at_scale_keep_dtype(dtype, axis):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 7, 8))
    ishape = [5, 6, 7]
    ishape[axis] = 20
    idx = rng.integers(0, x.shape[axis], size=ishape)
    src = rng.standard_normal(ishape)
    g = yscv.Graph(dtype)
    xn = g.variable(x)
    sn = g.variable(src)
    y = g.scatter_add(xn, axis, idx, sn)
    z = g.gather(y, axis, idx)
    assert g.value(y).dtype == dtype and g.value(z).dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g.value(y), scatter_add_loops(x, axis, idx, src), rtol=tol, atol=tol)
    np.testing.assert_allclose(g.value(z), gather_loops(g.value(y), axis, idx), rtol=tol, atol=tol)
    cot = rng.standard_normal(ishape)
    g.backward(z, grad=cot)
    gy = scatter_add_loops(np.zeros(x.shape), axis, idx, cot)
    np.testing.assert_allclose(g.grad(xn), gy, rtol=tol, atol=tol)
    np.testing.assert_allclose(g.grad(sn), gather_loops(gy, axis, idx), rtol=tol, atol=tol)
    assert g.grad(xn).dtype == dtype and g.grad(sn).dtype == dtype


def test_only_the_needed_gradient_is_computed():
    g = yscv.Graph(np.float64)
    x = g.constant(np.zeros((3, 2)))
    src = g.variable(np.ones((2, 2)))
    g.backward(g.scatter(x, np.array([2, 0]), src), grad=np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(g.grad(src), [[4.0, 5.0], [0.0, 1.0]])
    assert g.grad(x) is None


def test_kernels_are_safe_from_two_threads():
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 100, size=(64, 20))
    cot = rng.standard_normal((64, 20, 8))
    results = []

    def work():
        g = yscv.Graph(np.float64)
        w = g.variable(np.zeros((100, 8)))
        for _ in range(20):
            g.backward(g.embedding(w, idx), grad=cot)
        results.append(g.grad(w))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect = np.zeros((100, 8))
    np.add.at(expect, idx.reshape(-1), cot.reshape(-1, 8))
    for r in results:
        np.testing.assert_allclose(r, 20 * expect, rtol=1e-12, atol=1e-12)


def test_failed_index_check_leaves_graph_unchanged_with_array_operand():
    g = yscv.Graph()
    with pytest.raises(IndexError, match="embedding"):
        g.embedding(np.ones((3, 2)), np.array([5]))
    assert len(g) == 0


def test_fortran_ordered_index_array():
    idx = np.asfortranarray(np.array([[0, 2, 2], [1, 0, 0]]))
    g = yscv.Graph(np.float64)
    x = g.variable(np.arange(12.0).reshape(3, 4))
    y = g.gather(x, 0, idx)
    np.testing.assert_array_equal(g.value(y), gather_loops(g.value(x), 0, idx))
    g.backward(y, grad=np.ones((2, 3)))
    np.testing.assert_array_equal(g.grad(x), scatter_add_loops(np.zeros((3, 4)), 0, idx, np.ones((2, 3))))
    assert g._attrs[y.index][1].flags.c_contiguous


def test_checkpointed_segment_gives_bit_identical_gradients():
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((10, 4))
    x0 = rng.standard_normal((2, 3, 3, 4))

    def seg(g, w, x):
        e = g.embedding(w, np.array([[1, 2, 1], [0, 9, 9]]))
        h = g.pad(g.reshape(e, (2, 3, 1, 4)), ((0, 0), (0, 0), (1, 1), (0, 0))) * x
        h = g.pixel_shuffle(g.cat([h, g.flip(h, 1), h[:, ::-1], g.repeat(x, 1)], -1), 2)
        y = g.gather(g.flatten(g.upsample_nearest(h, 2)), 1, np.array([[0, 5, 5], [7, 7, 1]]))
        return g.scatter_add(y, 1, np.array([[2, 2]]), g.expand(x[0, 0, :1, :2], (1, 2)))

    res = []
    for checkpointed in (False, True):
        g = yscv.Graph(np.float64)
        w, x = g.variable(w0), g.variable(x0)
        out = g.checkpoint(seg, w, x) if checkpointed else seg(g, w, x)
        g.backward(g.sum(out * out))
        res.append((g.value(out), g.grad(w), g.grad(x)))
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------- SPEC section 11: indexing ops
@pytest.mark.parametrize("labels, classes", [(np.array([2, 0, 1, 2]), 4),
                                             (np.array([[1, 0], [3, 3]]), -1),
                                             (np.array(2), 3), (np.zeros(0, np.int64), 2)])
def test_one_hot_matches_pytorch(labels, classes):
    torch = pytest.importorskip("torch")
    g = yscv.Graph()
    got = g.one_hot(labels, classes)
    want = torch.nn.functional.one_hot(torch.tensor(labels), classes).numpy()
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert len(g) == 0   # an array, not a node


@pytest.mark.parametrize("labels, classes, err, match", [
    (np.array([0, 3]), 3, IndexError, r"one_hot: labels holds 3 at position \(1,\)"),
    (np.array([0, -1]), 3, IndexError, "one_hot: labels holds -1"),
    (np.array([0.0, 1.0]), 3, TypeError, "one_hot: labels must be an integer"),
    (np.array([0, 1]), 2.0, TypeError, "one_hot: num_classes"),
    (np.array([0, 1]), -2, ValueError, "one_hot: num_classes=-2"),
    (np.zeros(0, np.int64), -1, ValueError, "one_hot: cannot infer"),
    (np.array([[0, 1]] * 3), 10 ** 18, ValueError,
     r"one_hot: num_classes=1000000000000000000 gives an output of shape \(3, 2, 10+\)"),
])
def test_one_hot_bad_arguments(labels, classes, err, match):
    with pytest.raises(err, match=match):
        yscv.Graph().one_hot(labels, classes)


def test_index_select_backward_adds_repeats_at_scale():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 50, 4))
    idx = rng.integers(0, 50, size=400)
    g = yscv.Graph(np.float64)
    xn = g.variable(x)
    u = rng.standard_normal((3, 400, 4))
    g.backward(g.index_select(xn, 1, idx), grad=u)
    want = np.zeros_like(x)
    np.add.at(want, (slice(None), idx), u)
    np.testing.assert_allclose(g.grad(xn), want, rtol=1e-12, atol=1e-12)


def test_masked_fill_gradient_sums_over_the_broadcast():
    g = yscv.Graph(np.float64)
    x = g.variable(np.zeros(3))
    y = g.masked_fill(x, np.array([[True, False, False], [False, False, True]]), 5.0)
    assert g.value(y).shape == (2, 3)
    g.backward(g.sum(y))
    np.testing.assert_array_equal(g.grad(x), [1.0, 2.0, 1.0])
