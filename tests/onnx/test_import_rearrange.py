"""yscv.onnx.load on the operators of _import_rearrange (ReverseSequence,
TensorScatter, Col2Im) and _import_sets (Unique, NonMaxSuppression).

Oracles: ONNX Runtime, ONNX's reference implementation (TensorScatter,
which ONNX Runtime lacks) and PyTorch's ``fold`` (Col2Im) for the values
and dtypes; yscv.gradcheck (float64) for the gradients through float data.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx.reference import ReferenceEvaluator  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_forward, check_grad, one_node, yscv_run  # noqa: E402

I64 = np.int64


def distinct(*shape, seed=0):
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.25 - 3).reshape(shape).astype(
        np.float32)


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis, time_axis):
    x = distinct(4, 3, 2) if batch_axis == 1 else distinct(3, 4, 2)
    ins = [("x", x), ("lens", np.array([4, 0, 2], I64))]
    model = one_node("ReverseSequence", ins, batch_axis=batch_axis, time_axis=time_axis)
    check_forward(model, ins)
    check_grad(model, ins)
    xi = (x * 4).astype(np.int32)
    check_forward(one_node("ReverseSequence", [("x", xi), ins[1]], batch_axis=batch_axis,
                           time_axis=time_axis), [("x", xi), ins[1]])


def test_reverse_sequence_rejects_lengths_past_the_time_axis():
    ins = [("x", distinct(2, 3)), ("lens", np.array([1, 5, 2], I64))]
    m = yscv.onnx.load(one_node("ReverseSequence", ins))
    with pytest.raises(OnnxImportError, match=r"sequence_lens \[1, 5, 2\] do not fit"):
        m(yscv.Graph(), *[a for _, a in ins])


@pytest.mark.parametrize("mode,write,axis", [("linear", [0, 2], -2), ("circular", [3, 1], -2),
                                             ("linear", [1, 0], 1)])
def test_tensor_scatter(mode, write, axis):
    past = distinct(2, 5, 3) if axis == -2 else distinct(2, 5, 3, 2)
    upd = distinct(2, 3, 3, seed=1) if axis == -2 else distinct(2, 3, 3, 2, seed=1)
    ins = [("past", past), ("upd", upd), ("w", np.array(write, I64))]
    model = one_node("TensorScatter", ins, opset=24, mode=mode, axis=axis)
    model.ir_version = onnx.IR_VERSION
    (want,) = ReferenceEvaluator(model).run(None, dict(ins))
    (got,), *_ = yscv_run(model, ins)
    np.testing.assert_array_equal(got, want)
    check_grad(model, ins, wrt=(0, 1))


def test_tensor_scatter_linear_refuses_writes_past_the_cache():
    ins = [("past", distinct(1, 4, 2)), ("upd", distinct(1, 2, 2)), ("w", np.array([3], I64))]
    model = one_node("TensorScatter", ins, opset=24)
    model.ir_version = onnx.IR_VERSION
    with pytest.raises(OnnxImportError, match="run past the cache length 4"):
        yscv.onnx.load(model)(yscv.Graph(), *[a for _, a in ins])


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1], "pads": [1, 0, 1, 2]},
                                   {"dilations": [2, 1], "pads": [1, 1, 1, 1]}])
def test_col2im_matches_torch_fold_and_has_gradients(attrs):
    torch = pytest.importorskip("torch")
    image, block = [5, 4], [2, 3]
    kw = dict(kernel_size=block, stride=attrs.get("strides", [1, 1]),
              dilation=attrs.get("dilations", [1, 1]),
              padding=attrs.get("pads", [0, 0])[:2])
    p = attrs.get("pads", [0] * 4)
    blocks = [(image[i] + p[i] + p[i + 2] - kw["dilation"][i] * (block[i] - 1) - 1)
              // kw["stride"][i] + 1 for i in range(2)]
    x = distinct(2, 3 * 6, blocks[0] * blocks[1])
    ins = [("x", x), ("img", np.array(image, I64)), ("blk", np.array(block, I64))]
    model = one_node("Col2Im", ins, opset=18, **attrs)
    (got,), *_ = yscv_run(model, ins)
    if attrs.get("pads", [0] * 4)[:2] == attrs.get("pads", [0] * 4)[2:]:
        want = torch.nn.functional.fold(torch.from_numpy(x), image, **kw).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    (want,) = ReferenceEvaluator(model).run(None, dict(ins))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    check_grad(model, ins)


def test_col2im_3d():
    ins = [("x", distinct(1, 2 * 8, 2 * 2 * 3)), ("img", np.array([3, 3, 4], I64)),
           ("blk", np.array([2, 2, 2], I64))]
    model = one_node("Col2Im", ins, opset=18)
    (want,) = ReferenceEvaluator(model).run(None, dict(ins))
    (got,), *_ = yscv_run(model, ins)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_col2im_rejects_a_wrong_number_of_blocks():
    ins = [("x", distinct(1, 4, 5)), ("img", np.array([3, 3], I64)), ("blk", np.array([2, 2], I64))]
    with pytest.raises(OnnxImportError, match=r"input axis 2 \(5\) is not the number of blocks"):
        yscv.onnx.load(one_node("Col2Im", ins, opset=18))(yscv.Graph(), *[a for _, a in ins])


@pytest.mark.parametrize("axis,sorted_", [(None, 1), (None, 0), (0, 1), (-1, 1), (1, 0)])
def test_unique(axis, sorted_):
    x = np.array([[2.0, 1.0, 2.0], [0.5, 1.0, 0.5], [2.0, 1.0, 2.0]], np.float32)
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    model = one_node("Unique", [("x", x)], n_out=4, out=[np.float32, I64, I64, I64], **attrs)
    (y, first, _, _), g, (xn,), outs = yscv_run(model, [("x", x)])
    check_forward(model, [("x", x)])
    # Y is x at the first occurrences: a cotangent lands there, nowhere else
    # (a finite difference would move the ties and change Y's shape)
    ct = np.arange(1, y.size + 1, dtype=np.float32).reshape(y.shape)
    g.backward(outs[0], ct)
    want = np.zeros_like(x)
    if axis is None:
        want.reshape(-1)[first] = ct
    else:
        np.moveaxis(want, axis, 0)[first] = np.moveaxis(ct, axis, 0)
    np.testing.assert_array_equal(g.grad(xn), want)
    # ONNX Runtime has float Unique only: int32 input 2x gives Y 2x, same indices
    xi = (x * 2).astype(np.int32)
    mi = one_node("Unique", [("x", xi)], n_out=4, out=[np.int32, I64, I64, I64], **attrs)
    got, *_ = yscv_run(mi, [("x", xi)])
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[0], (y * 2).astype(np.int32))
    for a, b in zip(got[1:], yscv_run(model, [("x", x)])[0][1:]):
        assert a.dtype == b.dtype == np.int64
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(center):
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 4, (2, 12, 2))
    wh = rng.uniform(0.5, 2.5, (2, 12, 2))
    if center:
        boxes = np.concatenate([xy, wh], -1)
    else:
        boxes = np.concatenate([xy[..., ::-1], (xy + wh)[..., ::-1]], -1)
        boxes[0, :3] = boxes[0, :3][:, [2, 3, 0, 1]]   # flipped corners
    boxes = boxes.astype(np.float32)
    scores = rng.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    scores[0, 0, 5] = scores[0, 0, 7]   # a tie: lower index first
    ins = [("b", boxes), ("s", scores), ("m", np.array([4], I64)),
           ("iou", np.array([0.3], np.float32)), ("thr", np.array([0.2], np.float32))]
    model = one_node("NonMaxSuppression", ins, out=[I64], center_point_box=center)
    check_forward(model, ins)


def test_non_max_suppression_refuses_an_unknown_box_format():
    ins = [("b", np.zeros((1, 2, 4), np.float32)), ("s", np.zeros((1, 1, 2), np.float32))]
    with pytest.raises(OnnxImportError, match="center_point_box=2 is not supported"):
        yscv.onnx.load(one_node("NonMaxSuppression", ins, out=[I64], center_point_box=2))
