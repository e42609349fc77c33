"""Shape ops: NumPy forward reference, float64 gradcheck, bad arguments."""
import itertools

import numpy as np
import pytest

import yscv
from yscv import Op
from yscv.testing import (BadCase, OpCase, check_second_order_float32, check_torch_second_order,
                          followed_by_square, make_op_tests, make_second_order_tests)


def _ints(*shapes):
    """Inputs with distinct values (so a misplaced element cannot go unnoticed)."""
    def make(rng):
        return tuple(rng.permutation(int(np.prod(s))).reshape(s) * 0.1 - 1.0 for s in shapes)
    return make


def pixel_shuffle_loops(x, r):
    n, h, w, crr = x.shape
    c = crr // (r * r)
    out = np.empty((n, h * r, w * r, c))
    for b, hh, ww, cc, i, j in itertools.product(range(n), range(h), range(w), range(c),
                                                  range(r), range(r)):
        out[b, hh * r + i, ww * r + j, cc] = x[b, hh, ww, cc * r * r + i * r + j]
    return out


def upsample_loops(x, rh, rw):
    n, h, w, c = x.shape
    out = np.empty((n, h * rh, w * rw, c))
    for oh, ow in itertools.product(range(h * rh), range(w * rw)):
        out[:, oh, ow, :] = x[:, oh // rh, ow // rw, :]
    return out


def tile_loops(x, reps):
    d = max(x.ndim, len(reps))
    reps = (1,) * (d - len(reps)) + tuple(reps)
    xf = x.reshape((1,) * (d - x.ndim) + x.shape)
    out = np.empty(tuple(r * s for r, s in zip(reps, xf.shape)))
    for pos in itertools.product(*[range(n) for n in out.shape]):
        out[pos] = xf[tuple(p % s for p, s in zip(pos, xf.shape))]
    return out


def _nchw(t, fn, x):
    """PyTorch's channel-first ``fn`` on yscv's channel-last ``x`` (and back)."""
    last = x.dim() - 1
    return fn(x.movedim(last, 1)).movedim(1, last)


C = np.arange(6.0).reshape(2, 3) * 0.5  # a constant (non-node) operand

CASES = [
    # reshape
    OpCase(Op.RESHAPE, lambda g, x: g.reshape(x, (2, -1)), [(3, 4)], lambda x: x.reshape(2, 6),
           name="reshape_infer",
           torch_build=lambda t, x: x.reshape(2, -1)),
    OpCase(Op.RESHAPE, lambda g, x: g.reshape(x, [4, 3, 2]), [(2, 3, 4)],
           lambda x: x.reshape(4, 3, 2), name="reshape_list",
           torch_build=lambda t, x: x.reshape(4, 3, 2)),
    OpCase(Op.RESHAPE, lambda g, x: g.reshape(x, 6), [(2, 3)], lambda x: x.reshape(6),
           name="reshape_int",
           torch_build=lambda t, x: x.reshape(6)),
    OpCase(Op.RESHAPE, lambda g, x: g.reshape(x, ()), [(1, 1)], lambda x: x.reshape(()),
           name="reshape_to_0d",
           torch_build=lambda t, x: x.reshape(())),
    OpCase(Op.RESHAPE, lambda g, x: g.reshape(x[:, ::2], (-1,)), [(3, 4)],
           lambda x: x[:, ::2].reshape(-1), name="reshape_noncontiguous",
           torch_build=lambda t, x: x[:, ::2].reshape(-1)),
    # flatten
    OpCase(Op.FLATTEN, lambda g, x: g.flatten(x), [(2, 3, 4)], lambda x: x.reshape(2, 12),
           name="flatten_default",
           torch_build=lambda t, x: x.flatten(1)),
    OpCase(Op.FLATTEN, lambda g, x: g.flatten(x, 0), [(2, 3, 4)], lambda x: x.reshape(24),
           name="flatten_all",
           torch_build=lambda t, x: x.flatten(0)),
    OpCase(Op.FLATTEN, lambda g, x: g.flatten(x, -2), [(2, 3, 4)], lambda x: x.reshape(2, 12),
           name="flatten_negative_start",
           torch_build=lambda t, x: x.flatten(-2)),
    OpCase(Op.FLATTEN, lambda g, x: g.flatten(x, 1, 2), [(2, 3, 2, 2)],
           lambda x: x.reshape(2, 6, 2), name="flatten_end_axis",
           torch_build=lambda t, x: x.flatten(1, 2)),
    OpCase(Op.FLATTEN, lambda g, x: g.flatten(x, 0), [()], lambda x: x.reshape(1),
           name="flatten_0d",
           torch_build=lambda t, x: x.flatten(0)),
    # unsqueeze
    OpCase(Op.UNSQUEEZE, lambda g, x: g.unsqueeze(x, 0), [(2, 3)], lambda x: x[None],
           name="unsqueeze_front",
           torch_build=lambda t, x: x.unsqueeze(0)),
    OpCase(Op.UNSQUEEZE, lambda g, x: g.unsqueeze(x, -1), [(2, 3)], lambda x: x[..., None],
           name="unsqueeze_back",
           torch_build=lambda t, x: x.unsqueeze(-1)),
    OpCase(Op.UNSQUEEZE, lambda g, x: g.unsqueeze(x, -2), [(2, 3)], lambda x: x[:, None],
           name="unsqueeze_negative_middle",
           torch_build=lambda t, x: x.unsqueeze(-2)),
    OpCase(Op.UNSQUEEZE, lambda g, x: g.unsqueeze(x, 2), [(2, 3)], lambda x: x[:, :, None],
           name="unsqueeze_at_ndim",
           torch_build=lambda t, x: x.unsqueeze(2)),
    # squeeze
    OpCase(Op.SQUEEZE, lambda g, x: g.squeeze(x, 1), [(2, 1, 3)], lambda x: x[:, 0],
           name="squeeze_int",
           torch_build=lambda t, x: x.squeeze(1)),
    OpCase(Op.SQUEEZE, lambda g, x: g.squeeze(x, (0, -1)), [(1, 3, 1, 1)],
           lambda x: x[0, :, :, 0], name="squeeze_tuple",
           torch_build=lambda t, x: x.squeeze((0, -1))),
    OpCase(Op.SQUEEZE, lambda g, x: g.squeeze(x), [(1, 3, 1, 2)], np.squeeze,
           name="squeeze_all",
           torch_build=lambda t, x: x.squeeze()),
    OpCase(Op.SQUEEZE, lambda g, x: g.squeeze(x, None), [(1, 1)], lambda x: x.reshape(()),
           name="squeeze_to_0d",
           torch_build=lambda t, x: x.squeeze()),
    # expand
    OpCase(Op.EXPAND, lambda g, x: g.expand(x, (2, 3, 4)), [(3, 1)],
           lambda x: np.broadcast_to(x, (2, 3, 4)), name="expand_leading_and_size1",
           torch_build=lambda t, x: x.expand(2, 3, 4)),
    OpCase(Op.EXPAND, lambda g, x: g.expand(x, (4, -1, 5)), [(1, 3, 1)],
           lambda x: np.broadcast_to(x, (4, 3, 5)), name="expand_minus1",
           torch_build=lambda t, x: x.expand(4, -1, 5)),
    OpCase(Op.EXPAND, lambda g, x: g.expand(x, [5]), [()], lambda x: np.broadcast_to(x, (5,)),
           name="expand_0d",
           torch_build=lambda t, x: x.expand(5)),
    OpCase(Op.EXPAND, lambda g, x: g.expand(x, (2, 3)), [(2, 3)], lambda x: x,
           name="expand_same_shape",
           torch_build=lambda t, x: x.expand(2, 3)),
    # cat
    OpCase(Op.CAT, lambda g, a, b: g.cat([a, b]), [(2, 3), (4, 3)],
           lambda a, b: np.concatenate([a, b]), name="cat_axis0",
           torch_build=lambda t, a, b: t.cat([a, b])),
    OpCase(Op.CAT, lambda g, a, b, c: g.cat((a, b, c), 1), [(2, 1), (2, 3), (2, 2)],
           lambda a, b, c: np.concatenate([a, b, c], 1), name="cat_three_axis1",
           torch_build=lambda t, a, b, c: t.cat([a, b, c], 1)),
    OpCase(Op.CAT, lambda g, a, b: g.cat([a, b, a], axis=-1), [(2, 2, 2), (2, 2, 1)],
           lambda a, b: np.concatenate([a, b, a], -1), name="cat_repeated_node_negative_axis",
           torch_build=lambda t, a, b: t.cat([a, b, a], -1)),
    OpCase(Op.CAT, lambda g, a: g.cat([a]), [(3, 2)], lambda a: a, name="cat_single",
           torch_build=lambda t, a: t.cat([a])),
    OpCase(Op.CAT, lambda g, a: g.cat([a, C], 0), [(1, 3)],
           lambda a: np.concatenate([a, C]), name="cat_with_constant_array",
           torch_build=lambda t, a: t.cat([a, t.tensor(C)], 0)),
    # stack
    OpCase(Op.STACK, lambda g, a, b: g.stack([a, b]), [(2, 3), (2, 3)],
           lambda a, b: np.stack([a, b]), name="stack_axis0",
           torch_build=lambda t, a, b: t.stack([a, b])),
    OpCase(Op.STACK, lambda g, a, b, c: g.stack([a, b, c], -1), [(2, 3)] * 3,
           lambda a, b, c: np.stack([a, b, c], -1), name="stack_last",
           torch_build=lambda t, a, b, c: t.stack([a, b, c], -1)),
    OpCase(Op.STACK, lambda g, a, b: g.stack([a, b], 1), [(2, 3), (2, 3)],
           lambda a, b: np.stack([a, b], 1), name="stack_middle",
           torch_build=lambda t, a, b: t.stack([a, b], 1)),
    OpCase(Op.STACK, lambda g, a, b: g.stack([a, b], -1), [(), ()],
           lambda a, b: np.stack([a, b]), name="stack_0d",
           torch_build=lambda t, a, b: t.stack([a, b], -1)),
    # select
    OpCase(Op.SELECT, lambda g, x: g.select(x, 1, 2), [(2, 3, 4)], lambda x: x[:, 2],
           name="select",
           torch_build=lambda t, x: x.select(1, 2)),
    OpCase(Op.SELECT, lambda g, x: g.select(x, -1, -1), [(2, 3, 4)], lambda x: x[..., -1],
           name="select_negative",
           torch_build=lambda t, x: x.select(-1, -1)),
    OpCase(Op.SELECT, lambda g, x: g.select(x, 0, 3), [(5,)], lambda x: x[3],
           name="select_to_0d",
           torch_build=lambda t, x: x.select(0, 3)),
    # narrow
    OpCase(Op.NARROW, lambda g, x: g.narrow(x, 1, 1, 2), [(2, 4, 3)], lambda x: x[:, 1:3],
           name="narrow",
           torch_build=lambda t, x: x.narrow(1, 1, 2)),
    OpCase(Op.NARROW, lambda g, x: g.narrow(x, -1, -3, 2), [(2, 5)], lambda x: x[:, 2:4],
           name="narrow_negative_start",
           torch_build=lambda t, x: x.narrow(-1, -3, 2)),
    OpCase(Op.NARROW, lambda g, x: g.narrow(x, 0, 2, 0), [(3, 2)], lambda x: x[2:2],
           name="narrow_empty",
           torch_build=lambda t, x: x.narrow(0, 2, 0)),
    # getitem
    OpCase(Op.GETITEM, lambda g, x: x[1], [(3, 4)], lambda x: x[1], name="getitem_int",
           torch_build=lambda t, x: x[1]),
    OpCase(Op.GETITEM, lambda g, x: x[1, -1], [(3, 4)], lambda x: np.asarray(x[1, -1]),
           name="getitem_ints_to_0d",
           torch_build=lambda t, x: x[1, -1]),
    OpCase(Op.GETITEM, lambda g, x: x[1:, ::2], [(4, 5)], lambda x: x[1:, ::2],
           name="getitem_step",
           torch_build=lambda t, x: x[1:, ::2]),
    OpCase(Op.GETITEM, lambda g, x: x[::-2, 3:0:-1], [(5, 5)], lambda x: x[::-2, 3:0:-1],
           name="getitem_negative_step",
           torch_build=lambda t, x: x.flip(0)[::2, :].narrow(1, 1, 3).flip(1)),
    OpCase(Op.GETITEM, lambda g, x: x[None, :, None, 1], [(3, 4)], lambda x: x[None, :, None, 1],
           name="getitem_none",
           torch_build=lambda t, x: x[None, :, None, 1]),
    OpCase(Op.GETITEM, lambda g, x: x[..., 1:3], [(2, 3, 4)], lambda x: x[..., 1:3],
           name="getitem_ellipsis_front",
           torch_build=lambda t, x: x[..., 1:3]),
    OpCase(Op.GETITEM, lambda g, x: g.getitem(x, (0, Ellipsis, None, -1)), [(2, 3, 4)],
           lambda x: x[0, ..., None, -1], name="getitem_ellipsis_middle",
           torch_build=lambda t, x: x[0, ..., None, -1]),
    OpCase(Op.GETITEM, lambda g, x: x[np.int64(1), -10:10], [(3, 4)], lambda x: x[1, -10:10],
           name="getitem_numpy_int_and_clipped_slice",
           torch_build=lambda t, x: x[1, -10:10]),
    OpCase(Op.GETITEM, lambda g, x: x[...], [(2, 3)], lambda x: x, name="getitem_ellipsis_only",
           torch_build=lambda t, x: x[...]),
    # flip
    OpCase(Op.FLIP, lambda g, x: g.flip(x, 1), [(2, 3, 4)], lambda x: x[:, ::-1],
           name="flip_int",
           torch_build=lambda t, x: x.flip(1)),
    OpCase(Op.FLIP, lambda g, x: g.flip(x, (0, -1)), [(2, 3, 4)], lambda x: x[::-1, :, ::-1],
           name="flip_tuple",
           torch_build=lambda t, x: x.flip((0, -1))),
    OpCase(Op.FLIP, lambda g, x: g.flip(x), [(2, 3)], lambda x: x[::-1, ::-1], name="flip_all",
           torch_build=lambda t, x: x.flip((0, 1))),
    # pad
    OpCase(Op.PAD, lambda g, x: g.pad(x, ((1, 0), (0, 2), (2, 1))), [(2, 3, 2)],
           lambda x: np.pad(x, ((1, 0), (0, 2), (2, 1))), name="pad_three_axes",
           torch_build=lambda t, x: t.nn.functional.pad(x, (2, 1, 0, 2, 1, 0))),
    OpCase(Op.PAD, lambda g, x: g.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], value=-1.5),
           [(1, 2, 3, 2)], lambda x: np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)),
                                            constant_values=-1.5), name="pad_nhwc_value",
           torch_build=lambda t, x: t.nn.functional.pad(x, (0, 0, 1, 1, 1, 1), value=-1.5)),
    OpCase(Op.PAD, lambda g, x: g.pad(x, 2), [(2, 3)], lambda x: np.pad(x, 2), name="pad_int",
           torch_build=lambda t, x: t.nn.functional.pad(x, (2, 2, 2, 2))),
    OpCase(Op.PAD, lambda g, x: g.pad(x, (1, 3), 0.5), [(2, 3)],
           lambda x: np.pad(x, (1, 3), constant_values=0.5), name="pad_one_pair_all_axes",
           torch_build=lambda t, x: t.nn.functional.pad(x, (1, 3, 1, 3), value=0.5)),
    # repeat
    OpCase(Op.REPEAT, lambda g, x: g.repeat(x, 3), [(2, 3)], lambda x: tile_loops(x, (3,)),
           name="repeat_int",
           torch_build=lambda t, x: x.repeat(1, 3)),
    OpCase(Op.REPEAT, lambda g, x: g.repeat(x, (2, 1, 3)), [(2, 2, 2)],
           lambda x: tile_loops(x, (2, 1, 3)), name="repeat_tuple",
           torch_build=lambda t, x: x.repeat(2, 1, 3)),
    OpCase(Op.REPEAT, lambda g, x: g.repeat(x, (2, 1, 2, 2)), [(2, 3)],
           lambda x: tile_loops(x, (2, 1, 2, 2)), name="repeat_more_reps_than_ndim",
           torch_build=lambda t, x: x.repeat(2, 1, 2, 2)),
    OpCase(Op.REPEAT, lambda g, x: g.repeat(x, (2,)), [(2, 3)], lambda x: tile_loops(x, (1, 2)),
           name="repeat_fewer_reps_than_ndim",
           torch_build=lambda t, x: x.repeat(1, 2)),
    OpCase(Op.REPEAT, lambda g, x: g.repeat(x, (0, 2)), [(2, 3)], lambda x: np.zeros((0, 6)),
           name="repeat_zero",
           torch_build=lambda t, x: x.repeat(0, 2)),
    # pixel_shuffle
    OpCase(Op.PIXEL_SHUFFLE, lambda g, x: g.pixel_shuffle(x, 2), [(2, 2, 3, 12)],
           lambda x: pixel_shuffle_loops(x, 2), inputs=_ints((2, 2, 3, 12)),
           name="pixel_shuffle_r2_c3",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.pixel_shuffle(z, 2), x)),
    OpCase(Op.PIXEL_SHUFFLE, lambda g, x: g.pixel_shuffle(x, 3), [(1, 2, 1, 18)],
           lambda x: pixel_shuffle_loops(x, 3), inputs=_ints((1, 2, 1, 18)),
           name="pixel_shuffle_r3_c2",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.pixel_shuffle(z, 3), x)),
    OpCase(Op.PIXEL_SHUFFLE, lambda g, x: g.pixel_shuffle(x, 1), [(1, 2, 2, 3)],
           lambda x: x, name="pixel_shuffle_r1",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.pixel_shuffle(z, 1), x)),
    # upsample_nearest
    OpCase(Op.UPSAMPLE_NEAREST, lambda g, x: g.upsample_nearest(x, 2), [(2, 2, 3, 3)],
           lambda x: upsample_loops(x, 2, 2), inputs=_ints((2, 2, 3, 3)), name="upsample_r2",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.interpolate(z, scale_factor=2, mode="nearest"), x)),
    OpCase(Op.UPSAMPLE_NEAREST, lambda g, x: g.upsample_nearest(x, 3), [(1, 2, 2, 2)],
           lambda x: upsample_loops(x, 3, 3), inputs=_ints((1, 2, 2, 2)), name="upsample_r3",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.interpolate(z, scale_factor=3, mode="nearest"), x)),
    OpCase(Op.UPSAMPLE_NEAREST, lambda g, x: g.upsample_nearest(x, (1, 2)), [(1, 3, 2, 2)],
           lambda x: upsample_loops(x, 1, 2), name="upsample_per_axis",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.interpolate(z, scale_factor=(1, 2), mode="nearest"), x)),
    OpCase(Op.UPSAMPLE_NEAREST, lambda g, x: g.upsample_nearest(x, 2), [(2, 3, 2)],
           lambda x: np.repeat(x, 2, axis=1), name="upsample_nlc",
           torch_build=lambda t, x: _nchw(t, lambda z: t.nn.functional.interpolate(z, scale_factor=2, mode="nearest"), x)),
]


BIG = 2 ** 63   # one more than the largest array index


def _leaf(*shapes):
    return lambda g: tuple(g.variable(np.ones(s)) for s in shapes)


BAD = [
    BadCase(Op.RESHAPE, "reshape_size_mismatch", _leaf((3, 4)), lambda g, x: g.reshape(x, (5, -1)),
            yscv.ShapeError, "reshape: cannot reshape"),
    BadCase(Op.RESHAPE, "reshape_two_minus1", _leaf((3, 4)), lambda g, x: g.reshape(x, (-1, -1)),
            ValueError, "reshape"),
    BadCase(Op.RESHAPE, "reshape_float_shape", _leaf((3, 4)), lambda g, x: g.reshape(x, (2.0, 6)),
            TypeError, "reshape"),
    BadCase(Op.RESHAPE, "reshape_complex_input", lambda g: (np.ones(2) * 1j,),
            lambda g, x: g.reshape(x, 2), TypeError, "reshape"),
    BadCase(Op.FLATTEN, "flatten_axis_range", _leaf((3,)), lambda g, x: g.flatten(x),
            ValueError, "flatten: start_axis=1"),
    BadCase(Op.FLATTEN, "flatten_start_after_end", _leaf((2, 3, 4)),
            lambda g, x: g.flatten(x, 2, 1), ValueError, "flatten"),
    BadCase(Op.UNSQUEEZE, "unsqueeze_axis_range", _leaf((2, 3)), lambda g, x: g.unsqueeze(x, 3),
            ValueError, "unsqueeze: axis=3"),
    BadCase(Op.UNSQUEEZE, "unsqueeze_axis_type", _leaf((2, 3)), lambda g, x: g.unsqueeze(x, 1.0),
            TypeError, "unsqueeze"),
    BadCase(Op.SQUEEZE, "squeeze_not_size1", _leaf((2, 1)), lambda g, x: g.squeeze(x, 0),
            yscv.ShapeError, "squeeze: axis 0 has size 2"),
    BadCase(Op.SQUEEZE, "squeeze_axis_range", _leaf((2, 1)), lambda g, x: g.squeeze(x, 2),
            ValueError, "squeeze"),
    BadCase(Op.EXPAND, "expand_non_size1", _leaf((2, 3)), lambda g, x: g.expand(x, (4, 3)),
            yscv.ShapeError, "expand: cannot expand axis 0"),
    BadCase(Op.EXPAND, "expand_fewer_axes", _leaf((2, 3)), lambda g, x: g.expand(x, (3,)),
            yscv.ShapeError, "expand"),
    BadCase(Op.EXPAND, "expand_minus1_new_axis", _leaf((3,)), lambda g, x: g.expand(x, (-1, 3)),
            ValueError, "expand"),
    BadCase(Op.CAT, "cat_mismatch_names_input", _leaf((2, 3), (2, 3), (3, 4)),
            lambda g, a, b, c: g.cat([a, b, c], 0), yscv.ShapeError, r"cat: nodes\[2\]"),
    BadCase(Op.CAT, "cat_ndim_mismatch", _leaf((2, 3), (3,)), lambda g, a, b: g.cat([a, b]),
            yscv.ShapeError, r"nodes\[1\]"),
    BadCase(Op.CAT, "cat_empty", lambda g: (), lambda g: g.cat([]), ValueError, "cat: nodes is empty"),
    BadCase(Op.CAT, "cat_axis_range", _leaf((2, 3), (2, 3)), lambda g, a, b: g.cat([a, b], 2),
            ValueError, "cat: axis=2"),
    BadCase(Op.CAT, "cat_not_list", _leaf((2, 3)), lambda g, a: g.cat(a), TypeError, "cat"),
    BadCase(Op.CAT, "cat_0d", _leaf((), ()), lambda g, a, b: g.cat([a, b]), yscv.ShapeError, "cat"),
    BadCase(Op.STACK, "stack_mismatch_names_input", _leaf((2, 3), (2, 4)),
            lambda g, a, b: g.stack([a, b]), yscv.ShapeError, r"stack: nodes\[1\]"),
    BadCase(Op.STACK, "stack_empty", lambda g: (), lambda g: g.stack(()), ValueError, "stack"),
    BadCase(Op.STACK, "stack_axis_range", _leaf((2,), (2,)), lambda g, a, b: g.stack([a, b], 2),
            ValueError, "stack: axis=2"),
    BadCase(Op.SELECT, "select_index_range", _leaf((2, 3)), lambda g, x: g.select(x, 1, 3),
            IndexError, "select: index=3"),
    BadCase(Op.SELECT, "select_negative_index_range", _leaf((2, 3)),
            lambda g, x: g.select(x, 0, -3), IndexError, "select"),
    BadCase(Op.SELECT, "select_axis_range", _leaf((2, 3)), lambda g, x: g.select(x, 2, 0),
            ValueError, "select: axis=2"),
    BadCase(Op.SELECT, "select_float_index", _leaf((2, 3)), lambda g, x: g.select(x, 0, 1.0),
            TypeError, "select"),
    BadCase(Op.NARROW, "narrow_too_long", _leaf((2, 5)), lambda g, x: g.narrow(x, 1, 3, 3),
            ValueError, "narrow: start=3 with length=3"),
    BadCase(Op.NARROW, "narrow_start_range", _leaf((2, 5)), lambda g, x: g.narrow(x, 1, 6, 0),
            IndexError, "narrow: start=6"),
    BadCase(Op.NARROW, "narrow_axis_range", _leaf((2, 5)), lambda g, x: g.narrow(x, -3, 0, 1),
            ValueError, "narrow"),
    BadCase(Op.GETITEM, "getitem_int_array", _leaf((3, 4)), lambda g, x: x[np.array([0, 2])],
            TypeError, "getitem: .*only basic slicing.*gather"),
    BadCase(Op.GETITEM, "getitem_list", _leaf((3, 4)), lambda g, x: x[:, [0, 1]],
            TypeError, "getitem: .*embedding"),
    BadCase(Op.GETITEM, "getitem_bool_mask", _leaf((3,)), lambda g, x: x[np.array([True, False, True])],
            TypeError, "only basic slicing"),
    BadCase(Op.GETITEM, "getitem_bool_scalar", _leaf((3,)), lambda g, x: x[True], TypeError, "getitem"),
    BadCase(Op.GETITEM, "getitem_out_of_range", _leaf((3, 4)), lambda g, x: x[:, 4],
            IndexError, "getitem: index 4 is out of range for axis 1"),
    BadCase(Op.GETITEM, "getitem_too_many", _leaf((3,)), lambda g, x: x[0, 0], IndexError,
            "too many indices"),
    BadCase(Op.GETITEM, "getitem_two_ellipses", _leaf((3, 4)), lambda g, x: x[..., 0, ...],
            IndexError, "Ellipsis"),
    BadCase(Op.GETITEM, "getitem_float", _leaf((3,)), lambda g, x: x[1.0], TypeError, "getitem"),
    BadCase(Op.GETITEM, "getitem_float_slice", _leaf((3,)), lambda g, x: x[0.5:2], TypeError,
            "slice bounds"),
    BadCase(Op.GETITEM, "getitem_zero_step", _leaf((3,)), lambda g, x: x[::0], ValueError,
            "step cannot be zero"),
    BadCase(Op.GETITEM, "getitem_node_key", _leaf((3,), (1,)), lambda g, x, k: x[k], TypeError,
            "NodeId cannot be used as an index"),
    BadCase(Op.FLIP, "flip_axis_range", _leaf((2, 3)), lambda g, x: g.flip(x, 2), ValueError,
            "flip: axes=2"),
    BadCase(Op.FLIP, "flip_repeated_axis", _leaf((2, 3)), lambda g, x: g.flip(x, (1, -1)),
            ValueError, "flip"),
    BadCase(Op.PAD, "pad_negative", _leaf((2, 3)), lambda g, x: g.pad(x, ((0, 1), (-1, 0))),
            ValueError, "pad: .*negative"),
    BadCase(Op.PAD, "pad_wrong_pairs", _leaf((2, 3)), lambda g, x: g.pad(x, ((1, 1),) * 3),
            ValueError, "pad: pad_width"),
    BadCase(Op.PAD, "pad_float_widths", _leaf((2, 3)), lambda g, x: g.pad(x, 1.5), TypeError, "pad"),
    BadCase(Op.PAD, "pad_bad_value", _leaf((2, 3)), lambda g, x: g.pad(x, 1, value="x"),
            TypeError, "pad: value"),
    BadCase(Op.REPEAT, "repeat_negative", _leaf((2, 3)), lambda g, x: g.repeat(x, (2, -1)),
            ValueError, "repeat"),
    BadCase(Op.REPEAT, "repeat_float", _leaf((2, 3)), lambda g, x: g.repeat(x, 1.5),
            TypeError, "repeat"),
    BadCase(Op.PIXEL_SHUFFLE, "pixel_shuffle_channels", _leaf((1, 2, 2, 6)),
            lambda g, x: g.pixel_shuffle(x, 2), yscv.ShapeError, "pixel_shuffle: channels 6"),
    BadCase(Op.PIXEL_SHUFFLE, "pixel_shuffle_ndim", _leaf((2, 2, 4)),
            lambda g, x: g.pixel_shuffle(x, 2), yscv.ShapeError, "pixel_shuffle"),
    BadCase(Op.PIXEL_SHUFFLE, "pixel_shuffle_r0", _leaf((1, 2, 2, 4)),
            lambda g, x: g.pixel_shuffle(x, 0), ValueError, "pixel_shuffle: r"),
    BadCase(Op.UPSAMPLE_NEAREST, "upsample_ndim", _leaf((2, 3)),
            lambda g, x: g.upsample_nearest(x, 2), yscv.ShapeError, "upsample_nearest"),
    BadCase(Op.UPSAMPLE_NEAREST, "upsample_float_scale", _leaf((1, 2, 2, 1)),
            lambda g, x: g.upsample_nearest(x, 1.5), TypeError, "upsample_nearest: r"),
    BadCase(Op.UPSAMPLE_NEAREST, "upsample_zero_scale", _leaf((1, 2, 2, 1)),
            lambda g, x: g.upsample_nearest(x, (2, 0)), ValueError, "upsample_nearest"),
    # int arguments beyond an array index, results beyond any array (issue 12.8): a
    # ValueError naming the op and the argument, not NumPy's "array is too big",
    # "Maximum allowed dimension exceeded", "iterator is too large" or an OverflowError
    BadCase(Op.PAD, "pad_width_2pow63", _leaf((2, 3)),
            lambda g, x: g.pad(x, ((BIG, 0), (0, 0))), ValueError,
            rf"pad: pad_width=\(\({BIG}, 0\), \(0, 0\)\) is too large: {BIG} does not fit"),
    BadCase(Op.PAD, "pad_result_beyond_any_array", _leaf((2, 3)),
            lambda g, x: g.pad(x, 10 ** 10), ValueError,
            r"pad: pad_width=10000000000 gives an output of shape \(20000000002, 20000000003\)"),
    BadCase(Op.PAD, "pad_empty_input_dimension_beyond_index", _leaf((0, 3)),
            lambda g, x: g.pad(x, ((0, 0), (BIG // 2, BIG // 2))), ValueError,
            "pad: pad_width=.* gives an output of shape"),
    BadCase(Op.REPEAT, "repeat_2pow63", _leaf((2, 3)), lambda g, x: g.repeat(x, (BIG, 1)),
            ValueError, "repeat: repeats=.* is too large"),
    BadCase(Op.REPEAT, "repeat_result_beyond_any_array", _leaf((2, 3)),
            lambda g, x: g.repeat(x, (10 ** 10, 10 ** 10)), ValueError,
            r"repeat: repeats=\(10000000000, 10000000000\) gives an output of shape "
            r"\(20000000000, 30000000000\)"),
    BadCase(Op.EXPAND, "expand_2pow63", _leaf((1, 3)), lambda g, x: g.expand(x, (BIG, 3)),
            ValueError, "expand: shape=.* is too large"),
    BadCase(Op.EXPAND, "expand_result_beyond_any_array", _leaf((1, 1)),
            lambda g, x: g.expand(x, (10 ** 10, 10 ** 10)), ValueError,
            "expand: shape=.* gives an output of shape"),
    BadCase(Op.RESHAPE, "reshape_2pow63", _leaf((1, 2)), lambda g, x: g.reshape(x, (BIG, 2)),
            ValueError, "reshape: shape=.* is too large"),
    BadCase(Op.UPSAMPLE_NEAREST, "upsample_2pow63", _leaf((1, 2, 2, 1)),
            lambda g, x: g.upsample_nearest(x, BIG), ValueError,
            f"upsample_nearest: r={BIG} is too large"),
    BadCase(Op.UPSAMPLE_NEAREST, "upsample_result_beyond_any_array", _leaf((1, 2, 2, 1)),
            lambda g, x: g.upsample_nearest(x, 10 ** 10), ValueError,
            r"upsample_nearest: r=10000000000 gives an output of shape "
            r"\(1, 20000000000, 20000000000, 1\)"),
    BadCase(Op.PIXEL_SHUFFLE, "pixel_shuffle_r_2pow63", _leaf((1, 2, 2, 4)),
            lambda g, x: g.pixel_shuffle(x, BIG), ValueError, "pixel_shuffle: r=.* too large"),
]


# ------------------------------------------------ SPEC section 11: shape ops
def diagonal_loops(x, offset, a1, a2):
    xm = np.moveaxis(x, (a1, a2), (-2, -1))
    n1, n2 = xm.shape[-2:]
    vals = [xm[..., i, i + offset] for i in range(n1) if 0 <= i + offset < n2]
    return np.stack(vals, -1) if vals else np.zeros(xm.shape[:-2] + (0,))


def unfold_loops(x, k, d, p, s):
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (p[0], p[0]), (p[1], p[1]), (0, 0)))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.empty((n, oh * ow, k[0] * k[1] * c))
    for a, b, i, j, cc in itertools.product(range(oh), range(ow), range(k[0]), range(k[1]),
                                            range(c)):
        out[:, a * ow + b, (i * k[1] + j) * c + cc] = xp[:, a * s[0] + i * d[0],
                                                          b * s[1] + j * d[1], cc]
    return out


def fold_loops(x, size, k, d, p, s):
    n, L, f = x.shape
    c = f // (k[0] * k[1])
    h, w = size
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, h + 2 * p[0], w + 2 * p[1], c))
    for blk, i, j, cc in itertools.product(range(L), range(k[0]), range(k[1]), range(c)):
        a, b = divmod(blk, ow)
        out[:, a * s[0] + i * d[0], b * s[1] + j * d[1], cc] += x[:, blk, (i * k[1] + j) * c + cc]
    return out[:, p[0]:p[0] + h, p[1]:p[1] + w]


def _torch_unfold(t, x, k, d, p, s):
    """yscv's unfold layout from F.unfold: [N, C*KH*KW, L] -> [N, L, KH*KW*C]."""
    n, c = x.shape[0], x.shape[3]
    u = t.nn.functional.unfold(x.permute(0, 3, 1, 2), k, d, p, s)
    return u.reshape(n, c, k[0], k[1], -1).permute(0, 4, 2, 3, 1).reshape(n, u.shape[-1], -1)


def _torch_fold(t, x, size, k, d, p, s):
    n, L, f = x.shape
    c = f // (k[0] * k[1])
    u = x.reshape(n, L, k[0], k[1], c).permute(0, 4, 2, 3, 1).reshape(n, c * k[0] * k[1], L)
    return t.nn.functional.fold(u, size, k, d, p, s).permute(0, 2, 3, 1)


def _torch_interpolate(t, x, **kw):
    return t.nn.functional.interpolate(x.permute(0, 3, 1, 2), **kw).permute(0, 2, 3, 1)


def interpolate_reference(**kw):
    """PyTorch's F.interpolate (NCHW) as the forward reference of yscv's NHWC op."""
    def ref(x):
        torch = pytest.importorskip("torch")
        return _torch_interpolate(torch, torch.tensor(x), **kw).numpy()
    return ref


U1 = ((2, 2), (1, 1), (0, 0), (1, 1))
U2 = ((2, 3), (1, 2), (1, 0), (2, 1))
F1 = ((3, 4), (2, 2), (1, 1), (0, 0), (1, 1))
F2 = ((4, 4), (2, 2), (1, 1), (1, 1), (2, 2))
F3 = ((5, 4), (2, 2), (2, 1), (0, 1), (1, 2))
_IN_BLOCKS = {F1: (1, 6, 4), F2: (1, 9, 8), F3: (1, 9, 4)}


def _interp_row(name, shape, **kw):
    return OpCase(Op.INTERPOLATE, lambda g, x: g.interpolate(x, **kw), [shape],
                  interpolate_reference(**kw), name=name,
                  torch_build=lambda t, x: _torch_interpolate(t, x, **kw))


CASES += [
    OpCase(Op.TRIL, lambda g, x: g.tril(x), [(3, 4)], np.tril, name="tril",
           torch_build=lambda t, x: t.tril(x)),
    OpCase(Op.TRIL, lambda g, x: g.tril(x, -1), [(2, 3, 4)], lambda x: np.tril(x, -1),
           name="tril_batched_k_negative", torch_build=lambda t, x: t.tril(x, -1)),
    OpCase(Op.TRIU, lambda g, x: g.triu(x, 1), [(4, 3)], lambda x: np.triu(x, 1),
           name="triu_k1", torch_build=lambda t, x: t.triu(x, 1)),
    OpCase(Op.TRIU, lambda g, x: g.triu(x, -2), [(2, 3, 3)], lambda x: np.triu(x, -2),
           name="triu_batched_k_negative", torch_build=lambda t, x: t.triu(x, -2)),
    OpCase(Op.ROLL, lambda g, x: g.roll(x, 5), [(3, 4)],
           lambda x: np.roll(x.reshape(-1), 5).reshape(3, 4), name="roll_flattened",
           torch_build=lambda t, x: t.roll(x, 5)),
    OpCase(Op.ROLL, lambda g, x: g.roll(x, (1, -2), (0, -1)), [(3, 4)],
           lambda x: np.roll(x, (1, -2), (0, 1)), name="roll_two_axes",
           torch_build=lambda t, x: t.roll(x, (1, -2), (0, -1))),
    OpCase(Op.ROLL, lambda g, x: g.roll(x, 7, 1), [(2, 3, 2)], lambda x: np.roll(x, 7, 1),
           name="roll_shift_beyond_size", torch_build=lambda t, x: t.roll(x, 7, 1)),
    OpCase(Op.DIAGONAL, lambda g, x: g.diagonal(x), [(3, 4)], lambda x: diagonal_loops(x, 0, 0, 1),
           name="diagonal", torch_build=lambda t, x: t.diagonal(x)),
    OpCase(Op.DIAGONAL, lambda g, x: g.diagonal(x, 1, 2, 0), [(3, 2, 4)],
           lambda x: diagonal_loops(x, 1, 2, 0), name="diagonal_offset_axes_swapped",
           torch_build=lambda t, x: t.diagonal(x, 1, 2, 0)),
    OpCase(Op.DIAGONAL, lambda g, x: g.diagonal(x, -1, -2, -1), [(2, 4, 3)],
           lambda x: diagonal_loops(x, -1, 1, 2), name="diagonal_below_last_axes",
           torch_build=lambda t, x: t.diagonal(x, -1, -2, -1)),
    OpCase(Op.DIAGONAL, lambda g, x: g.diagonal(x, 5), [(2, 3)],
           lambda x: diagonal_loops(x, 5, 0, 1), name="diagonal_empty",
           torch_build=lambda t, x: t.diagonal(x, 5)),
    OpCase(Op.OUTER, lambda g, a, b: g.outer(a, b), [(3,), (4,)], np.outer, name="outer",
           torch_build=lambda t, a, b: t.outer(a, b)),
    OpCase(Op.OUTER, lambda g, a: g.outer(a, a), [(3,)], lambda a: np.outer(a, a),
           name="outer_same_input", torch_build=lambda t, a: t.outer(a, a)),
    OpCase(Op.UNFOLD, lambda g, x: g.unfold(x, *U1), [(1, 3, 4, 2)],
           lambda x: unfold_loops(x, *U1), name="unfold",
           torch_build=lambda t, x: _torch_unfold(t, x, *U1)),
    OpCase(Op.UNFOLD, lambda g, x: g.unfold(x, *U2), [(2, 4, 5, 1)],
           lambda x: unfold_loops(x, *U2), name="unfold_dilation_padding_stride",
           torch_build=lambda t, x: _torch_unfold(t, x, *U2)),
    OpCase(Op.FOLD, lambda g, x: g.fold(x, *F1), [_IN_BLOCKS[F1]], lambda x: fold_loops(x, *F1),
           name="fold_overlapping", torch_build=lambda t, x: _torch_fold(t, x, *F1)),
    OpCase(Op.FOLD, lambda g, x: g.fold(x, *F2), [_IN_BLOCKS[F2]], lambda x: fold_loops(x, *F2),
           name="fold_padding_stride", torch_build=lambda t, x: _torch_fold(t, x, *F2)),
    OpCase(Op.FOLD, lambda g, x: g.fold(x, *F3), [_IN_BLOCKS[F3]], lambda x: fold_loops(x, *F3),
           name="fold_dilation", torch_build=lambda t, x: _torch_fold(t, x, *F3)),
    _interp_row("interpolate_nearest_size", (1, 3, 4, 2), size=(5, 3)),
    _interp_row("interpolate_nearest_scale", (1, 2, 3, 2), scale_factor=1.5),
    _interp_row("interpolate_nearest_double", (1, 2, 2, 1), scale_factor=2),
    _interp_row("interpolate_bilinear_size", (1, 3, 4, 1), size=(5, 7), mode="bilinear"),
    _interp_row("interpolate_bilinear_align_corners", (1, 3, 3, 2), scale_factor=(2, 1.5),
                mode="bilinear", align_corners=True),
    _interp_row("interpolate_bilinear_downscale", (2, 5, 4, 1), scale_factor=0.6,
                mode="bilinear"),
    _interp_row("interpolate_bilinear_same_size_scale", (1, 3, 2, 1), scale_factor=1.2,
                mode="bilinear"),
    # split / chunk are narrows, take_along_axis a gather: their rows cover those ops
    OpCase(Op.NARROW, lambda g, x: g.split(x, 2, 1)[1], [(2, 5)], lambda x: x[:, 2:4],
           name="split_int_middle_piece", torch_build=lambda t, x: t.split(x, 2, 1)[1]),
    OpCase(Op.NARROW, lambda g, x: g.split(x, [1, 3, 1])[2], [(5, 2)], lambda x: x[4:],
           name="split_sections_last", torch_build=lambda t, x: t.split(x, [1, 3, 1])[2]),
    OpCase(Op.NARROW, lambda g, x: g.chunk(x, 3, -1)[2], [(2, 7)], lambda x: x[:, 6:],
           name="chunk_last_smaller", torch_build=lambda t, x: t.chunk(x, 3, -1)[2]),
    OpCase(Op.GATHER, lambda g, x: g.take_along_axis(x, np.array([[2, -1, 0]]), 1), [(3, 4)],
           lambda x: np.take_along_axis(x, np.array([[2, 3, 0]] * 3), 1),
           name="take_along_axis_broadcast_index_negative",
           torch_build=lambda t, x: t.take_along_dim(x, t.tensor([[2, -1, 0]]), 1)),
    OpCase(Op.GATHER, lambda g, x: g.take_along_axis(x, np.array([[[1], [0]]]), 2), [(3, 1, 2)],
           lambda x: np.take_along_axis(np.broadcast_to(x, (3, 2, 2)),
                                        np.broadcast_to(np.array([[[1], [0]]]), (3, 2, 1)), 2),
           name="take_along_axis_broadcast_x",
           torch_build=lambda t, x: t.take_along_dim(x, t.tensor([[[1], [0]]]), 2)),
    OpCase(Op.GATHER, lambda g, x: g.take_along_axis(x, np.array([5, 0, 5]), None), [(2, 3)],
           lambda x: x.reshape(-1)[[5, 0, 5]], name="take_along_axis_flattened",
           torch_build=lambda t, x: t.take_along_dim(x, t.tensor([5, 0, 5]))),
]

BAD += [
    BadCase(Op.TRIL, "tril_1d", _leaf((3,)), lambda g, x: g.tril(x), yscv.ShapeError, "tril"),
    BadCase(Op.TRIL, "tril_float_k", _leaf((3, 3)), lambda g, x: g.tril(x, 0.5), TypeError,
            "tril: k must be an int"),
    BadCase(Op.TRIU, "triu_0d", _leaf(()), lambda g, x: g.triu(x), yscv.ShapeError, "triu"),
    BadCase(Op.TRIU, "triu_k_2pow63", _leaf((3, 3)), lambda g, x: g.triu(x, BIG), ValueError,
            "triu: k=.* too large"),
    BadCase(Op.ROLL, "roll_axis_range", _leaf((2, 3)), lambda g, x: g.roll(x, 1, 2), ValueError,
            "roll: axis=2"),
    BadCase(Op.ROLL, "roll_lengths_differ", _leaf((2, 3)), lambda g, x: g.roll(x, (1, 2), 0),
            ValueError, "roll: shifts"),
    BadCase(Op.ROLL, "roll_tuple_without_axis", _leaf((2, 3)), lambda g, x: g.roll(x, (1, 2)),
            ValueError, "roll: shifts=.* one int when axis is None"),
    BadCase(Op.ROLL, "roll_float_shift", _leaf((2, 3)), lambda g, x: g.roll(x, 0.5, 0),
            TypeError, "roll: shifts"),
    BadCase(Op.DIAGONAL, "diagonal_same_axes", _leaf((3, 3)), lambda g, x: g.diagonal(x, 0, 1, -1),
            ValueError, "diagonal: axis1=1 and axis2=-1"),
    BadCase(Op.DIAGONAL, "diagonal_1d", _leaf((3,)), lambda g, x: g.diagonal(x), yscv.ShapeError,
            "diagonal"),
    BadCase(Op.DIAGONAL, "diagonal_axis_range", _leaf((3, 3)), lambda g, x: g.diagonal(x, 0, 0, 2),
            ValueError, "diagonal: axis2=2"),
    BadCase(Op.DIAGONAL, "diagonal_float_offset", _leaf((3, 3)), lambda g, x: g.diagonal(x, 1.0),
            TypeError, "diagonal: offset"),
    BadCase(Op.OUTER, "outer_2d", _leaf((2, 2), (3,)), lambda g, a, b: g.outer(a, b),
            yscv.ShapeError, "outer: a must be 1-d"),
    BadCase(Op.OUTER, "outer_0d", _leaf((2,), ()), lambda g, a, b: g.outer(a, b),
            yscv.ShapeError, "outer: b must be 1-d"),
    BadCase(Op.UNFOLD, "unfold_3d", _leaf((1, 4, 2)), lambda g, x: g.unfold(x, 2),
            yscv.ShapeError, "unfold: x must be 4-d"),
    BadCase(Op.UNFOLD, "unfold_kernel_too_big", _leaf((1, 3, 3, 1)), lambda g, x: g.unfold(x, 4),
            ValueError, "unfold: kernel=4"),
    BadCase(Op.UNFOLD, "unfold_zero_stride", _leaf((1, 3, 3, 1)),
            lambda g, x: g.unfold(x, 2, stride=0), ValueError, "unfold: stride"),
    BadCase(Op.UNFOLD, "unfold_negative_padding", _leaf((1, 3, 3, 1)),
            lambda g, x: g.unfold(x, 2, padding=-1), ValueError, "unfold: padding"),
    BadCase(Op.UNFOLD, "unfold_float_kernel", _leaf((1, 3, 3, 1)),
            lambda g, x: g.unfold(x, 1.5), TypeError, "unfold: kernel"),
    BadCase(Op.FOLD, "fold_blocks_mismatch", _leaf((1, 5, 4)), lambda g, x: g.fold(x, (3, 4), 2),
            yscv.ShapeError, "fold: x has 5 blocks"),
    BadCase(Op.FOLD, "fold_features_not_divisible", _leaf((1, 6, 5)),
            lambda g, x: g.fold(x, (3, 4), 2), yscv.ShapeError, "fold: x's last axis"),
    BadCase(Op.FOLD, "fold_4d", _leaf((1, 6, 4, 1)), lambda g, x: g.fold(x, (3, 4), 2),
            yscv.ShapeError, "fold: x must be 3-d"),
    BadCase(Op.FOLD, "fold_zero_output_size", _leaf((1, 6, 4)), lambda g, x: g.fold(x, (0, 4), 2),
            ValueError, "fold: output_size"),
    BadCase(Op.INTERPOLATE, "interpolate_both_size_and_scale", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, 3, 2.0), ValueError, "interpolate: give exactly one"),
    BadCase(Op.INTERPOLATE, "interpolate_neither", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x), ValueError, "interpolate: give exactly one"),
    BadCase(Op.INTERPOLATE, "interpolate_bad_mode", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, 3, mode="bicubic"), ValueError,
            "interpolate: mode='bicubic'"),
    BadCase(Op.INTERPOLATE, "interpolate_align_corners_nearest", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, 3, align_corners=False), ValueError,
            "interpolate: align_corners can only be set"),
    BadCase(Op.INTERPOLATE, "interpolate_3d", _leaf((1, 2, 1)),
            lambda g, x: g.interpolate(x, 3), yscv.ShapeError, "interpolate: x must be 4-d"),
    BadCase(Op.INTERPOLATE, "interpolate_zero_size", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, (0, 2)), ValueError, "interpolate: size"),
    BadCase(Op.INTERPOLATE, "interpolate_negative_scale", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, scale_factor=-2.0), ValueError,
            "interpolate: scale_factor=-2.0"),
    BadCase(Op.INTERPOLATE, "interpolate_scale_gives_empty", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, scale_factor=0.3), ValueError,
            r"interpolate: scale_factor=0.3 gives an output size \(0, 0\)"),
    BadCase(Op.INTERPOLATE, "interpolate_string_scale", _leaf((1, 2, 2, 1)),
            lambda g, x: g.interpolate(x, scale_factor="2"), TypeError,
            "interpolate: scale_factor"),
    BadCase(Op.NARROW, "split_sections_do_not_add_up", _leaf((5, 2)),
            lambda g, x: g.split(x, [2, 2]), ValueError, r"split: size_or_sections=\(2, 2\)"),
    BadCase(Op.NARROW, "split_zero_size", _leaf((5, 2)), lambda g, x: g.split(x, 0), ValueError,
            "split: size_or_sections=0"),
    BadCase(Op.NARROW, "split_float", _leaf((5, 2)), lambda g, x: g.split(x, 2.0), TypeError,
            "split"),
    BadCase(Op.NARROW, "chunk_zero", _leaf((5, 2)), lambda g, x: g.chunk(x, 0), ValueError,
            "chunk: chunks=0"),
    BadCase(Op.NARROW, "chunk_axis_range", _leaf((5, 2)), lambda g, x: g.chunk(x, 2, 2),
            ValueError, "chunk: axis=2"),
    BadCase(Op.GATHER, "take_along_axis_out_of_range", _leaf((3, 4)),
            lambda g, x: g.take_along_axis(x, np.array([[0, -5]]), 1), IndexError,
            r"take_along_axis: index holds -5 at position \(0, 1\), outside \[-4, 4\)"),
    BadCase(Op.GATHER, "take_along_axis_ndim", _leaf((3, 4)),
            lambda g, x: g.take_along_axis(x, np.array([0, 1]), 1), yscv.ShapeError,
            "take_along_axis: index must have x's number of dimensions"),
    BadCase(Op.GATHER, "take_along_axis_no_broadcast", _leaf((3, 4)),
            lambda g, x: g.take_along_axis(x, np.zeros((2, 1), np.int64), 1), yscv.ShapeError,
            "take_along_axis: index of shape"),
    BadCase(Op.GATHER, "take_along_axis_float_index", _leaf((3, 4)),
            lambda g, x: g.take_along_axis(x, np.zeros((1, 1)), 1), TypeError,
            "take_along_axis: index must be an integer"),
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


def test_third_derivative_through_a_chain_of_shape_ops_matches_pytorch():
    """getitem (a scatter of the gradient, whose own rule is a gather), flip,
    pad, narrow, repeat, select, cat, to the third derivative."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).uniform(-1, 1, (4, 5))

    def chain(g, xn):
        y = g.pad(g.flip(xn[1:, ::2], 0), ((1, 0), (0, 1)))
        y = g.cat([g.repeat(g.narrow(y, 0, 1, 2), (2, 1)), g.select(xn, 1, 2)[None]], 0)
        return g.sum(g.mul(g.mul(y, y), y))

    g = yscv.Graph(np.float64)
    xn = g.variable(x)
    (d1,) = g.gradients(chain(g, xn), [xn], create_graph=True)
    (d2,) = g.gradients(g.sum(g.mul(d1, d1)), [xn], create_graph=True)
    (d3,) = g.gradients(g.sum(g.mul(d2, d2)), [xn])
    xt = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.pad(xt[1:, ::2].flip(0), (0, 1, 1, 0))
    y = torch.cat([y.narrow(0, 1, 2).repeat(2, 1), xt.select(1, 2)[None]], 0)
    (t1,) = torch.autograd.grad((y ** 3).sum(), xt, create_graph=True)
    (t2,) = torch.autograd.grad((t1 * t1).sum(), xt, create_graph=True)
    (t3,) = torch.autograd.grad((t2 * t2).sum(), xt)
    np.testing.assert_allclose(g.value(d1), t1.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g.value(d2), t2.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d3, t3.numpy(), rtol=1e-10, atol=1e-10)


def test_views_share_memory_with_the_input():
    g = yscv.Graph()
    x = g.variable(np.arange(24.0).reshape(2, 3, 4))
    xv = g.value(x)
    for y in (g.reshape(x, (6, 4)), g.flatten(x), g.unsqueeze(x, 0), g.select(x, 1, 0),
              g.narrow(x, 2, 1, 2), x[:, ::2], g.flip(x, 0), g.expand(x, (5, 2, 3, 4))):
        assert np.shares_memory(g.value(y), xv), g.op(y)


def test_expand_gradient_sums_over_broadcast_axes():
    g = yscv.Graph(np.float64)
    x = g.variable(np.ones((3, 1)))
    g.backward(g.expand(x, (2, 3, 4)), grad=np.ones((2, 3, 4)))
    np.testing.assert_array_equal(g.grad(x), np.full((3, 1), 8.0))


def test_getitem_gradient_scatters_into_zeros():
    g = yscv.Graph(np.float64)
    x = g.variable(np.zeros((4, 3)))
    y = x[::-2, None, 1]                    # rows 3 and 1, column 1
    g.backward(y, grad=np.array([[10.0], [20.0]]))
    expect = np.zeros((4, 3))
    expect[3, 1] = 10.0
    expect[1, 1] = 20.0
    np.testing.assert_array_equal(g.grad(x), expect)


def test_operator_getitem_records_getitem_node():
    g = yscv.Graph()
    x = g.variable(np.arange(6.0).reshape(2, 3))
    y = x[1, 1:]
    assert g.op(y) is Op.GETITEM
    np.testing.assert_array_equal(g.value(y), [4.0, 5.0])
    assert g.value(x[0, 0]).shape == ()


def test_float32_graph_keeps_float32_gradients():
    g = yscv.Graph(np.float32)
    x = g.variable(np.ones((1, 2, 2, 4)))
    y = g.upsample_nearest(g.pixel_shuffle(g.pad(x, ((0, 0), (1, 0), (0, 1), (0, 0)), 2.0), 2), 2)
    y = g.repeat(g.cat([g.flip(y, 1), y[:, ::2]], 1), (1, 2, 1, 1))
    assert g.value(y).dtype == np.float32
    g.backward(y, grad=np.ones(g.value(y).shape))
    assert g.grad(x).dtype == np.float32


def test_pixel_shuffle_matches_pytorch_channel_order_layout_example():
    # one 1x1 pixel with r=2, C=2: channels (c, i, j) in c*4 + i*2 + j order
    g = yscv.Graph(np.float64)
    x = g.variable(np.arange(8.0).reshape(1, 1, 1, 8))
    out = g.value(g.pixel_shuffle(x, 2))
    np.testing.assert_array_equal(out[0, :, :, 0], [[0, 1], [2, 3]])
    np.testing.assert_array_equal(out[0, :, :, 1], [[4, 5], [6, 7]])


def test_upsample_backward_sums_each_block():
    g = yscv.Graph(np.float64)
    x = g.variable(np.zeros((1, 2, 2, 1)))
    cot = np.arange(36.0).reshape(1, 6, 6, 1)
    g.backward(g.upsample_nearest(x, 3), grad=cot)
    expect = cot.reshape(2, 3, 2, 3).sum(axis=(1, 3)).reshape(1, 2, 2, 1)
    np.testing.assert_array_equal(g.grad(x), expect)


def test_shape_ops_do_not_import_numba():
    import subprocess
    import sys
    code = ("import numpy as np, yscv, sys\n"
            "g = yscv.Graph(); x = g.variable(np.ones((1, 2, 2, 4)))\n"
            "y = g.upsample_nearest(g.pixel_shuffle(g.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), 2), 2)\n"
            "g.backward(g.reshape(y[0, 0, 0, :1], ()))\n"
            "assert 'numba' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_is_pure_replay(dtype):
    # the same attrs on the same input give the same value (checkpoint replay)
    from yscv import registry
    g = yscv.Graph(dtype)
    x = g.variable(np.arange(12.0).reshape(3, 4))
    for y in (g.pad(x, 1, 3.0), g.repeat(x, (2, 1)), x[::-1, 1:]):
        i = y.index
        again, _ = registry.FORWARD[g._ops[i]](g._attrs[i], g.value(x))
        np.testing.assert_array_equal(again, g.value(y))


def test_check_array_size_limits(monkeypatch):
    """The shared size check (yscv/ops/_common.py): NumPy's own limits, on
    Python ints (no overflow), naming the op and the cause."""
    from yscv.ops import _common
    from yscv.ops._common import MAX_INTP, check_array_size

    monkeypatch.setattr(_common, "_MEMORY_LIMIT", MAX_INTP)   # NumPy's limits alone here

    assert MAX_INTP == np.iinfo(np.intp).max
    assert check_array_size("op", (MAX_INTP // 8, 1), 8, x=1) == (MAX_INTP // 8, 1)
    assert check_array_size("op", (0, MAX_INTP), 8, x=1) == (0, MAX_INTP)
    with pytest.raises(ValueError, match=r"op: x=2, y=\(3, 4\) gives an output of shape "
                                         r"\(1, 9223372036854775807\)"):
        check_array_size("op", (1, MAX_INTP), 2, x=2, y=(3, 4))
    with pytest.raises(ValueError, match="op: x=3 gives a result of shape"):
        check_array_size("op", (0, MAX_INTP + 1), 1, "a result", x=3)  # empty, one axis too long
    for shape in ((2 ** 32, 2 ** 32), (3, 2 ** 62)):
        with pytest.raises(ValueError):
            np.empty(shape, np.uint8)                           # NumPy refuses these as well
        with pytest.raises(ValueError, match="larger than any array can be"):
            check_array_size("op", shape, 1, x=4)


def test_check_array_size_refuses_more_than_the_machine_memory(monkeypatch):
    """An array NumPy could describe but this machine cannot hold is refused
    up front, naming the op and the cause (not a MemoryError later)."""
    from yscv.ops import _common

    monkeypatch.setattr(_common, "_MEMORY_LIMIT", 1 << 20)
    assert _common.check_array_size("op", (1 << 18,), 4, x=1) == (1 << 18,)
    with pytest.raises(ValueError, match=r"op: x=2 gives an output of shape \(262145,\) "
                                         r"\(262145 elements, 1048580 bytes\), more than this "
                                         r"machine's memory \(1048576 bytes\)"):
        _common.check_array_size("op", ((1 << 18) + 1,), 4, x=2)


# ------------------------------------------------ SPEC section 11: shape ops
@pytest.mark.parametrize("n, arg, axis", [(7, 3, 0), (6, 4, 0), (0, 2, 0), (0, 0, 0),
                                          (5, [2, 0, 3], 0), (5, 5, -1), (5, 9, 0)])
def test_split_matches_pytorch(n, arg, axis):
    torch = pytest.importorskip("torch")
    x = np.arange(2.0 * n).reshape(n, 2) if axis == 0 else np.arange(2.0 * n).reshape(2, n)
    g = yscv.Graph(np.float64)
    parts = g.split(g.variable(x), arg, axis)
    want = torch.split(torch.tensor(x), arg, axis)
    assert isinstance(parts, tuple) and len(parts) == len(want)
    for p, w in zip(parts, want):
        assert g.op(p) is Op.NARROW
        np.testing.assert_array_equal(g.value(p), w.numpy())


@pytest.mark.parametrize("n, chunks", [(7, 3), (6, 4), (6, 3), (2, 5), (0, 3), (1, 1)])
def test_chunk_matches_pytorch(n, chunks):
    torch = pytest.importorskip("torch")
    x = np.arange(3.0 * n).reshape(3, n)
    g = yscv.Graph(np.float64)
    parts = g.chunk(x, chunks, 1)
    want = torch.chunk(torch.tensor(x), chunks, 1)
    assert isinstance(parts, tuple) and len(parts) == len(want)
    for p, w in zip(parts, want):
        np.testing.assert_array_equal(g.value(p), w.numpy())


def test_split_gradient_reaches_every_piece():
    g = yscv.Graph(np.float64)
    x = g.variable(np.arange(5.0))
    a, b, c = g.split(x, 2)
    g.backward(g.sum(a) + 2.0 * g.sum(b) + 3.0 * g.sum(c))
    np.testing.assert_array_equal(g.grad(x), [1.0, 1.0, 2.0, 2.0, 3.0])


@pytest.mark.parametrize("mode, align_corners", [("nearest", None), ("bilinear", False),
                                                 ("bilinear", True)])
def test_interpolate_matches_pytorch_over_many_sizes(mode, align_corners):
    """PyTorch's index rules (float32 nearest index arithmetic; bilinear
    weights; the copy when a size does not change) over sizes and scales,
    forward and backward, in float32 and float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 5, 7, 2))
    settings = [dict(size=s) for s in ((3, 11), (13, 2), (5, 7), (10, 14), (1, 1), 9)]
    settings += [dict(scale_factor=s) for s in (1.5, 0.5, 3, (2.5, 1.3), 1.1, 0.7, 2)]
    for kw in settings:
        for dtype in (np.float64, np.float32):
            g = yscv.Graph(dtype)
            xn = g.variable(x)
            y = g.interpolate(xn, mode=mode, align_corners=align_corners, **kw)
            u = rng.standard_normal(g.value(y).shape)
            g.backward(y, grad=u)
            xt = torch.tensor(x.astype(dtype), requires_grad=True)
            yt = _torch_interpolate(torch, xt, mode=mode, align_corners=align_corners, **kw)
            yt.backward(torch.tensor(u.astype(dtype)))
            tol = 1e-12 if dtype == np.float64 else 1e-5
            np.testing.assert_allclose(g.value(y), yt.detach().numpy(), rtol=tol, atol=tol,
                                       err_msg=f"{kw} {dtype.__name__}")
            np.testing.assert_allclose(g.grad(xn), xt.grad.numpy(), rtol=tol, atol=tol,
                                       err_msg=f"{kw} {dtype.__name__} gradient")
            assert g.value(y).dtype == dtype and g.grad(xn).dtype == dtype


def test_fold_of_unfold_counts_the_blocks_covering_each_pixel():
    """F.fold's documented identity: fold(unfold(x)) = x * fold(unfold(ones))."""
    x = np.random.default_rng(1).standard_normal((2, 5, 4, 3))
    g = yscv.Graph(np.float64)
    args = ((3, 2), (1, 2), 1, (2, 1))
    xx = g.fold(g.unfold(x, *args), (5, 4), *args)
    count = g.fold(g.unfold(np.ones_like(x), *args), (5, 4), *args)
    np.testing.assert_allclose(g.value(xx), x * g.value(count), rtol=1e-14)
    assert g.value(count).min() >= 1.0


def test_unfold_features_follow_conv_weight_order():
    """unfold then a matmul with a conv weight [KH, KW, C, Cout] flattened is conv2d."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 6, 3))
    w = rng.standard_normal((3, 2, 3, 4))
    g = yscv.Graph(np.float64)
    cols = g.unfold(x, (3, 2), padding=1, stride=(2, 1))
    y = g.reshape(g.matmul(cols, w.reshape(-1, 4)), (2, 3, 7, 4))
    np.testing.assert_allclose(g.value(y), g.value(g.conv2d(x, w, padding=1, stride=(2, 1))),
                               rtol=1e-12, atol=1e-12)


def test_new_shape_ops_keep_float32():
    g = yscv.Graph(np.float32)
    x = g.variable(np.ones((1, 4, 4, 2)))
    y = g.interpolate(g.fold(g.unfold(g.roll(g.tril(x), 1, 2), 2), (4, 4), 2), (3, 5),
                      mode="bilinear")
    d = g.diagonal(g.outer(g.reshape(y, (-1,)), g.reshape(y, (-1,))))
    assert g.value(d).dtype == np.float32
    g.backward(g.sum(d))
    assert g.grad(x).dtype == np.float32


#: every method the shape category's Graph mixin had before it was split in two
SHAPE_METHODS = ("reshape", "flatten", "unsqueeze", "squeeze", "expand", "cat", "stack",
                 "select", "narrow", "getitem", "flip", "split", "chunk", "_pieces",
                 "pad", "repeat", "pixel_shuffle", "upsample_nearest", "tril", "triu",
                 "_triangle", "roll", "diagonal", "outer", "unfold", "fold", "interpolate")


def test_shape_methods_resolve_to_the_shape_mixins():
    """Graph's method resolution finds each shape method in exactly one of
    the two shape mixins, and no other mixin defines the same name."""
    from yscv.ops import OP_MIXINS
    from yscv.ops.shape import ShapeOps
    from yscv.ops.shape_windows import ShapeWindowOps
    for name in SHAPE_METHODS:
        owners = [m for m in OP_MIXINS if name in vars(m)]
        assert len(owners) == 1 and owners[0] in (ShapeOps, ShapeWindowOps), (name, owners)
        assert getattr(yscv.Graph, name) is vars(owners[0])[name], name
    defined = {k for m in (ShapeOps, ShapeWindowOps) for k, v in vars(m).items() if callable(v)}
    assert defined == set(SHAPE_METHODS)
