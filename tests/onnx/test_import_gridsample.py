"""GridSample import: every mode, padding and align_corners against
PyTorch's grid_sample (outputs and the gradients of the input and the
grid) and ONNX Runtime; 3-D (volumetric) grids; load-time refusals."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from _onenode import matches_onnxruntime_with_gradients  # noqa: E402  (tests/onnx is on sys.path)
from yscv.gradcheck import gradcheck  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

TOL = dict(rtol=2e-4, atol=3e-5)


def _model(xshape, gshape, opset=20, **attrs):
    graph = helper.make_graph(
        [helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape),
         helper.make_tensor_value_info("grid", TensorProto.FLOAT, gshape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _inputs(xshape, gshape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(xshape).astype(np.float32),
            rng.uniform(-1.3, 1.3, gshape).astype(np.float32))


def _run(m, x, grid, ct=None):
    g = yscv.Graph()
    xv, gv = g.variable(x), g.variable(grid)
    y = m(g, xv, gv)
    g.backward(y, ct if ct is not None else np.ones(g.value(y).shape, np.float32))
    gg = g.grad(gv)  # None: no path from the grid (nearest)
    return g.value(y), g.grad(xv), np.zeros_like(grid) if gg is None else gg


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("corners", [0, 1])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_gridsample_matches_torch_with_input_and_grid_gradients(mode, corners, padding):
    x, grid = _inputs((2, 3, 5, 6), (2, 4, 7, 2))
    m = yscv.onnx.load(_model(list(x.shape), list(grid.shape), opset=16, mode=mode,
                              padding_mode=padding, align_corners=corners))
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    ty = torch.nn.functional.grid_sample(tx, tg, mode=mode, padding_mode=padding,
                                         align_corners=bool(corners))
    ct = np.random.default_rng(1).standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(ct))
    y, gx, gg = _run(m, x, grid, ct)
    np.testing.assert_allclose(y, ty.detach().numpy(), **TOL)
    np.testing.assert_allclose(gx, tx.grad.numpy(), **TOL)
    np.testing.assert_allclose(gg, tg.grad.numpy(), **TOL)


@pytest.mark.parametrize("mode, padding, corners, xshape, gshape", [
    ("cubic", "zeros", 0, (1, 2, 5, 6), (1, 4, 3, 2)),
    ("cubic", "border", 1, (1, 2, 5, 6), (1, 4, 3, 2)),
    ("cubic", "reflection", 0, (1, 2, 5, 6), (1, 4, 3, 2)),
    ("linear", "reflection", 1, (1, 2, 3, 4, 5), (1, 2, 3, 4, 3)),
    ("nearest", "border", 0, (1, 2, 3, 4, 5), (1, 2, 3, 4, 3)),
])
def test_gridsample_matches_onnxruntime(mode, padding, corners, xshape, gshape):
    x, grid = _inputs(xshape, gshape, seed=2)
    model = _model(list(xshape), list(gshape), mode=mode, padding_mode=padding,
                   align_corners=corners)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, gx, gg = _run(yscv.onnx.load(model), x, grid)
    np.testing.assert_allclose(y, sess.run(None, {"x": x, "grid": grid})[0], **TOL)
    assert np.abs(gx).sum() > 0 and np.all(np.isfinite(gg))
    if mode != "nearest":
        assert np.abs(gg).sum() > 0


def test_gridsample_cubic_gradcheck_float64():
    x, grid = _inputs((1, 1, 4, 5), (1, 2, 3, 2), seed=3)
    m = yscv.onnx.load(_model([1, 1, 4, 5], [1, 2, 3, 2], mode="cubic",
                              padding_mode="reflection"))
    assert gradcheck(lambda g, a, b: m(g, a, b), [x.astype(np.float64), grid.astype(np.float64)])


def test_gridsample_refuses_unknown_modes():
    with pytest.raises(OnnxImportError, match=r"'GridSample' \(node 'gs'.*'area'"):
        yscv.onnx.load(_model([1, 1, 4, 4], [1, 2, 2, 2], mode="area"))
    with pytest.raises(OnnxImportError, match=r"padding_mode 'wrap'"):
        yscv.onnx.load(_model([1, 1, 4, 4], [1, 2, 2, 2], padding_mode="wrap"))


@pytest.mark.parametrize("size, corners", [((2, 3, 5, 6), 0), ((2, 3, 5, 6), 1),
                                           ((1, 2, 3, 4, 5), 0)])
def test_affine_grid_then_gridsample_matches_torch_with_theta_gradient(size, corners):
    r = len(size) - 2
    rng = np.random.default_rng(7)
    x = rng.standard_normal(size).astype(np.float32)
    theta = (np.eye(r, r + 1) + 0.3 * rng.standard_normal((size[0], r, r + 1))).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], name="ag",
                          align_corners=corners),
         helper.make_node("GridSample", ["x", "grid"], ["y"], align_corners=corners)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(size)),
         helper.make_tensor_value_info("theta", TensorProto.FLOAT, list(theta.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.asarray(size, np.int64), "size")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 8
    tx, tt = torch.tensor(x, requires_grad=True), torch.tensor(theta, requires_grad=True)
    tgrid = torch.nn.functional.affine_grid(tt, list(size), align_corners=bool(corners))
    ty = torch.nn.functional.grid_sample(tx, tgrid, align_corners=bool(corners))
    ct = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(ct))
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    xv, tv = g.variable(x), g.variable(theta)
    y = m(g, xv, tv)
    g.backward(y, ct)
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), **TOL)
    np.testing.assert_allclose(g.grad(xv), tx.grad.numpy(), **TOL)
    np.testing.assert_allclose(g.grad(tv), tt.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("attrs", [
    dict(output_height=3, output_width=2, sampling_ratio=2, spatial_scale=0.5),
    dict(output_height=2, output_width=3, coordinate_transformation_mode="output_half_pixel"),
    dict(output_height=2, output_width=2, mode="max", sampling_ratio=2),
], ids=["avg_half_pixel", "avg_output_half_pixel_adaptive", "max"])
def test_roialign_matches_onnxruntime_with_gradients(attrs):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 6.0, 5.5], [-1.5, 2.0, 9.0, 7.5], [2.0, 2.0, 3.0, 2.5]],
                    np.float32)
    if attrs.get("spatial_scale"):
        rois = rois * 2
    graph = helper.make_graph(
        [helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="ra", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(rois, "rois"),
         onnx.numpy_helper.from_array(np.array([1, 0, 1], np.int64), "bi")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    m = matches_onnxruntime_with_gradients(model, x, TOL)
    if attrs.get("mode", "avg") == "avg":
        assert gradcheck(lambda gg, a: m(gg, a), [x.astype(np.float64)])
