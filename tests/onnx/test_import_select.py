"""yscv.onnx.load on the selection and indexing operators of _import_select:
TopK, ArgMax, ArgMin, Hardmax, Trilu, OneHot, EyeLike, Det, NonZero,
GatherND, Compress and SpaceToDepth; and a static Gather with a 0-d index.

Oracles: ONNX Runtime for the forward values and dtypes (PyTorch's
pixel_unshuffle for SpaceToDepth's CRD mode, which ONNX Runtime does not
have yet), yscv.gradcheck (float64) for the gradients through float data.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_forward, check_grad, one_node, yscv_run  # noqa: E402

I64 = np.int64


def distinct(*shape, seed=0):
    """Float32 values with no ties (argmax/topk are unique)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) * 0.25 - 3).astype(
        np.float32)


@pytest.mark.parametrize("largest,axis", [(1, -1), (0, 1), (1, 0)])
def test_top_k(largest, axis):
    x = distinct(3, 4, 5)
    ins = [("x", x), ("k", np.array([2], I64))]
    model = one_node("TopK", ins, n_out=2, out=[np.float32, I64], largest=largest, axis=axis)
    check_forward(model, ins)
    check_grad(model, ins)


def test_top_k_ties_take_the_lower_index_and_integers_keep_their_dtype():
    x = np.array([[3, 1, 3, 2, 3], [0, 0, 5, 5, 1]], np.int64)
    ins = [("x", x), ("k", np.array([3], I64))]
    check_forward(one_node("TopK", ins, n_out=2, out=[I64, I64]), ins)
    xf = x.astype(np.float32)
    check_forward(one_node("TopK", [("x", xf), ins[1]], n_out=2, out=[np.float32, I64]),
                  [("x", xf), ins[1]])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims,last", [(1, 0), (0, 0), (1, 1), (0, 1)])
def test_arg_extremum(op, keepdims, last):
    x = np.random.default_rng(1).integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties
    ins = [("x", x)]
    check_forward(one_node(op, ins, out=[I64], axis=-2, keepdims=keepdims,
                           select_last_index=last), ins)


@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 0), (11, 1)])
def test_hardmax(opset, axis):
    x = np.random.default_rng(2).integers(0, 4, (2, 3, 4)).astype(np.float32)
    check_forward(one_node("Hardmax", [("x", x)], opset=opset, axis=axis), [("x", x)])


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-7, -1, 0, 2, 9])
def test_trilu(upper, k):
    x = distinct(2, 3, 5)
    ins = [("x", x), ("k", np.array(k, I64))]
    model = one_node("Trilu", ins, opset=14, upper=upper)
    check_forward(model, ins)
    if -3 < k < 5:
        check_grad(model, ins)
    xi = np.arange(15, dtype=I64).reshape(3, 5)
    check_forward(one_node("Trilu", [("x", xi), ins[1]], opset=14, upper=upper),
                  [("x", xi), ins[1]])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    idx = np.array([[0, 3, -1], [-4, 7, 2]], I64)   # 7 is out of range: a row of off
    depth = np.array(4.0, np.float32)
    vals = np.array([-0.5, 2.0], np.float32)
    ins = [("i", idx), ("depth", depth), ("v", vals)]
    model = one_node("OneHot", ins, out=[np.float32], axis=axis)
    check_forward(model, ins)
    check_grad(model, ins, wrt=(2,))


def test_one_hot_integer_values():
    ins = [("i", np.array([1, 0, 2], I64)), ("depth", np.array([3], I64)),
           ("v", np.array([0, 5], I64))]
    check_forward(one_node("OneHot", ins, out=[I64]), ins)


@pytest.mark.parametrize("k,dtype", [(0, None), (1, TensorProto.INT32), (-2, TensorProto.DOUBLE)])
def test_eye_like(k, dtype):
    x = np.zeros((3, 4), np.float32)
    out = [np.float32 if dtype is None else helper.tensor_dtype_to_np_dtype(dtype)]
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check_forward(one_node("EyeLike", [("x", x)], out=out, **attrs), [("x", x)])


def test_det():
    x = np.random.default_rng(3).standard_normal((2, 3, 3)).astype(np.float32)
    model = one_node("Det", [("x", x)])
    check_forward(model, [("x", x)], rtol=1e-4, atol=1e-5)
    check_grad(model, [("x", x)])


def test_non_zero():
    x = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, -3.0]], np.float32)
    check_forward(one_node("NonZero", [("x", x)], out=[I64]), [("x", x)])


@pytest.mark.parametrize("batch_dims,idx", [
    (0, [[0, 1], [2, 0]]), (0, [[[1], [0]], [[2], [2]]]), (1, [[1], [0]]), (1, [[[1, 0]], [[0, 1]]]),
])
def test_gather_nd(batch_dims, idx):
    x = distinct(3, 2, 2) if batch_dims == 0 else distinct(2, 2, 2)
    ins = [("x", x), ("idx", np.array(idx, I64))]
    model = one_node("GatherND", ins, batch_dims=batch_dims)
    check_forward(model, ins)
    check_grad(model, ins)
    xi = (x * 4).astype(np.int32)
    check_forward(one_node("GatherND", [("x", xi), ins[1]], batch_dims=batch_dims),
                  [("x", xi), ins[1]])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(axis):
    x = distinct(3, 4)
    cond = np.array([True, False, True], bool)
    ins = [("x", x), ("c", cond)]
    model = one_node("Compress", ins, **({} if axis is None else {"axis": axis}))
    check_forward(model, ins)
    check_grad(model, ins)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth(mode):
    x = distinct(2, 3, 4, 6)
    model = one_node("SpaceToDepth", [("x", x)], opset=28 if mode == "CRD" else 17,
                     blocksize=2, **({"mode": mode} if mode == "CRD" else {}))
    if mode == "DCR":
        check_forward(model, [("x", x)])
    else:
        torch = pytest.importorskip("torch")
        (got,), *_ = yscv_run(model, [("x", x)])
        np.testing.assert_array_equal(got, torch.nn.functional.pixel_unshuffle(
            torch.from_numpy(x), 2).numpy())
    check_grad(model, [("x", x)])


def test_static_gather_with_a_0d_index_feeds_range():
    """Gather of a shape at a 0-d index gives an array that Range can read."""
    x = np.zeros((5, 3), np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["i"], value=helper.make_tensor("i", TensorProto.INT64, [], [0])),
             helper.make_node("Gather", ["s", "i"], ["n"]),
             helper.make_node("Constant", [], ["z"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
             helper.make_node("Constant", [], ["o"], value=helper.make_tensor("o", TensorProto.INT64, [], [1])),
             helper.make_node("Range", ["z", "n", "o"], ["y0"])]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3])],
        [helper.make_tensor_value_info("y0", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    check_forward(model, [("x", x)])


def test_load_refuses_an_unknown_space_to_depth_mode():
    x = distinct(1, 1, 2, 2)
    with pytest.raises(OnnxImportError,
                       match="'SpaceToDepth' \\(node 'n0', index 0\\): mode='XYZ' is not supported"):
        yscv.onnx.load(one_node("SpaceToDepth", [("x", x)], opset=28, blocksize=2, mode="XYZ"))
