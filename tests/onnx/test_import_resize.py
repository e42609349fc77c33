"""Resize and Upsample import: every mode and coordinate transformation
against ONNX Runtime, PyTorch's exported interpolations against PyTorch
(outputs and input gradients), gradcheck in float64, load-time refusals."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from _onenode import matches_torch_under_a_cotangent  # noqa: E402  (tests/onnx is on sys.path)
from yscv.gradcheck import gradcheck  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

TOL = dict(rtol=2e-4, atol=2e-5)


def _resize_model(shape, attrs, roi=None, scales=None, sizes=None, opset=19, op="Resize"):
    inits, names = [], ["x"]
    for key, v, dt in (("roi", roi, np.float32), ("scales", scales, np.float32),
                       ("sizes", sizes, np.int64)):
        if op == "Upsample" and key != "scales":
            continue
        if v is None:
            names.append("")
        else:
            inits.append(numpy_helper.from_array(np.asarray(v, dt), key))
            names.append(key)
    while names and names[-1] == "":
        names.pop()
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], name="rs", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


CASES = {
    "linear_half_pixel_down_0.6": (dict(mode="linear"), dict(scales=[1, 1, 0.6, 0.6])),
    "linear_align_corners_up": (dict(mode="linear", coordinate_transformation_mode="align_corners"),
                                dict(sizes=[1, 2, 7, 9])),
    "linear_pytorch_half_pixel_sizes": (
        dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
        dict(sizes=[1, 2, 3, 1])),
    "cubic_asymmetric_up_1.7": (
        dict(mode="cubic", coordinate_transformation_mode="asymmetric"),
        dict(scales=[1, 1, 1.7, 2.3])),
    "cubic_exclude_outside_a-0.5": (
        dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), dict(scales=[1, 1, 0.8, 1.5])),
    "nearest_ceil_align_corners": (
        dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="align_corners"),
        dict(sizes=[1, 2, 8, 3])),
    "nearest_round_prefer_ceil_asymmetric": (
        dict(mode="nearest", nearest_mode="round_prefer_ceil",
             coordinate_transformation_mode="asymmetric"), dict(scales=[1, 1, 1.5, 0.5])),
    "nearest_floor_half_pixel_down": (dict(mode="nearest", nearest_mode="floor"),
                                      dict(scales=[1, 1, 0.7, 0.4])),
    "tf_crop_and_resize_extrapolation": (
        dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
             extrapolation_value=2.5),
        dict(roi=[0, 0, -0.2, 0.4, 1, 1, 0.6, 1.3], sizes=[1, 2, 4, 4])),
    "nearest_tf_crop_and_resize_extrapolation": (
        dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize",
             extrapolation_value=-3.0),
        dict(roi=[0, 0, -0.3, 0.2, 1, 1, 0.7, 1.4], sizes=[1, 2, 5, 4])),
    "linear_antialias_down": (dict(mode="linear", antialias=1), dict(scales=[1, 1, 0.4, 0.6])),
    "cubic_antialias_down": (dict(mode="cubic", antialias=1), dict(sizes=[1, 2, 2, 3])),
    "axes_3_2_not_larger": (dict(mode="linear", axes=[3, 2], keep_aspect_ratio_policy="not_larger"),
                            dict(sizes=[7, 3])),
    "axes_2_3_not_smaller": (dict(mode="nearest", axes=[2, 3],
                                  keep_aspect_ratio_policy="not_smaller"), dict(sizes=[3, 3])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_resize_matches_onnxruntime_and_has_gradients(name):
    attrs, inputs = CASES[name]
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 6)).astype(np.float32)
    model = _resize_model(list(x.shape), attrs, **inputs)
    if name.startswith("nearest_tf_crop"):  # ONNX Runtime reads rows ONNX's reference extrapolates
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    else:
        want = _ort(model, x)
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    xv = g.variable(x)
    y = m(g, xv)
    np.testing.assert_allclose(g.value(y), want, **TOL)
    g.backward(g.sum(g.mul(y, y)))
    gx = g.grad(xv)
    assert np.all(np.isfinite(gx)) and np.abs(gx).sum() > 0


@pytest.mark.parametrize("name", ["cubic_exclude_outside_a-0.5", "tf_crop_and_resize_extrapolation",
                                  "nearest_ceil_align_corners"])
def test_resize_gradcheck_float64(name):
    attrs, inputs = CASES[name]
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 6))
    m = yscv.onnx.load(_resize_model(list(x.shape), attrs, **inputs))
    assert gradcheck(lambda g, a: m(g, a), [x])


def test_upsample_linear_opset9_matches_onnxruntime():
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 4)).astype(np.float32)
    model = _resize_model(list(x.shape), dict(mode="linear"), scales=[1, 1, 2.5, 1.5],
                          opset=9, op="Upsample")
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, g.variable(x))), _ort(model, x), **TOL)


def _export(model, args):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, f, dynamo=False)
    return f.getvalue()


class _Interp(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 1)
        self.kw = kw

    def forward(self, x):
        return torch.nn.functional.interpolate(self.conv(x), **self.kw)


@pytest.mark.parametrize("kw", [
    dict(scale_factor=2, mode="bilinear"),
    dict(size=(5, 3), mode="bilinear", align_corners=True),
    dict(scale_factor=1.5, mode="bicubic"),
    dict(size=(3, 5), mode="nearest"),
    dict(scale_factor=0.6, mode="bilinear"),
], ids=["bilinear_x2", "bilinear_align_corners", "bicubic_1.5", "nearest_sizes",
        "bilinear_down_0.6"])
def test_exported_interpolate_matches_torch(kw):
    torch.manual_seed(0)
    tm = _Interp(**kw).eval()
    x = np.random.default_rng(3).standard_normal((2, 2, 4, 6)).astype(np.float32)
    m = yscv.onnx.load(_export(tm, (torch.tensor(x),)))
    tx = torch.tensor(x, requires_grad=True)
    ty = tm(tx)
    matches_torch_under_a_cotangent(m, x, tx, ty, 4, TOL)


@pytest.mark.parametrize("attrs, op, match", [
    (dict(mode="area"), "Resize", r"'Resize' \(node 'rs'.*mode 'area'"),
    (dict(mode="nearest", antialias=1), "Resize", r"antialias=1 with mode 'nearest'"),
    (dict(mode="linear", coordinate_transformation_mode="tf_half_pixel_for_nn"), "Resize",
     r"coordinate_transformation_mode 'tf_half_pixel_for_nn'"),
    (dict(mode="nearest", nearest_mode="round_half_even"), "Resize",
     r"nearest_mode 'round_half_even'"),
    (dict(mode="linear", keep_aspect_ratio_policy="fit"), "Resize",
     r"keep_aspect_ratio_policy 'fit'"),
    (dict(mode="cubic"), "Upsample", r"'Upsample' \(node 'rs'.*'cubic'"),
])
def test_resize_refuses_unimplemented_attributes_at_load(attrs, op, match):
    model = _resize_model([1, 1, 4, 4], attrs, scales=[1, 1, 2, 2], op=op,
                          opset=9 if op == "Upsample" else 19)
    with pytest.raises(OnnxImportError, match=match):
        yscv.onnx.load(model)


@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 1.5]])
def test_resize_opset10_scales_input_matches_onnxruntime(scales):
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "s"], ["y"], name="rs", mode="nearest")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(scales, np.float32), "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, g.variable(x))), _ort(model, x), **TOL)
