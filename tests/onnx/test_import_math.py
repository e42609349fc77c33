"""yscv.onnx.load on the elementwise math operators of _import_math: Mod,
the trigonometric and hyperbolic functions, Swish, ThresholdedRelu,
Shrink, Mean, ReduceL1, ReduceLogSum, CumSum, CumProd,
MeanVarianceNormalization, LpNormalization, BitShift and Bitwise*.

Oracles: ONNX Runtime for the forward values and dtypes, yscv.gradcheck
(float64, central differences) for the gradients through float data.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_forward, check_grad, one_node, yscv_run  # noqa: E402


def rng(seed=0):
    return np.random.default_rng(seed)


def uni(lo, hi, *shape, seed=0):
    return rng(seed).uniform(lo, hi, shape).astype(np.float32)


UNARY = [  # op, input range (away from poles and thresholds), attrs, opset
    ("Sin", (-3, 3), {}, 17), ("Cos", (-3, 3), {}, 17), ("Tan", (-1.2, 1.2), {}, 17),
    ("Asin", (-0.9, 0.9), {}, 17), ("Acos", (-0.9, 0.9), {}, 17), ("Atan", (-4, 4), {}, 17),
    ("Sinh", (-3, 3), {}, 17), ("Cosh", (-3, 3), {}, 17), ("Asinh", (-30, 30), {}, 17),
    ("Acosh", (1.1, 30), {}, 17), ("Atanh", (-0.9, 0.9), {}, 17),
    ("Swish", (-4, 4), {"alpha": 1.5}, 24), ("ThresholdedRelu", (-3, 3), {"alpha": 0.5}, 17),
    ("Shrink", (-3, 3), {"lambd": 0.7, "bias": 0.3}, 17),
]


@pytest.mark.parametrize("op,bounds,attrs,opset", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_ort_and_has_gradients(op, bounds, attrs, opset):
    x = uni(*bounds, 3, 5)
    x = np.where(np.abs(np.abs(x) - attrs.get("alpha", attrs.get("lambd", -9))) < 0.05,
                 x + 0.1, x).astype(np.float32)   # no element at a threshold
    model = one_node(op, [("x", x)], opset=opset, **attrs)
    check_forward(model, [("x", x)])
    check_grad(model, [("x", x)])


@pytest.mark.parametrize("op,x,fn", [
    ("Asinh", [-1e4, -50.0, -1e-3, 0.0, 1e-3, 50.0, 1e4], np.arcsinh),
    ("Acosh", [1.0, 1.0 + 1e-6, 1.001, 2.0, 1e4], np.arccosh),
    ("Atanh", [-0.999, -1e-4, 0.0, 1e-4, 0.5, 0.999], np.arctanh),
])
def test_inverse_hyperbolic_functions_are_accurate(op, x, fn):
    """Near 0 (and 1 for Acosh) and for large negative Asinh arguments."""
    x = np.array(x, np.float32)
    (got,), *_ = yscv_run(one_node(op, [("x", x)]), [("x", x)])
    np.testing.assert_allclose(got, fn(x.astype(np.float64)), rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("op", ["Asinh", "Atanh"])
def test_odd_functions_have_slope_one_at_zero(op):
    x = np.array([0.0, 0.0], np.float32)
    _, g, (xn,), (y,) = yscv_run(one_node(op, [("x", x)]), [("x", x)])
    g.backward(g.sum(y))
    np.testing.assert_allclose(g.grad(xn), [1.0, 1.0])


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_float_matches_ort_and_has_gradients(fmod):
    a = uni(-10, 10, 4, 5)
    b = np.where(rng(1).uniform(size=(5,)) < 0.5, -1.0, 1.0).astype(np.float32) \
        * uni(0.7, 3.0, 5, seed=2)
    ins = [("a", a), ("b", b)]
    if fmod:   # ONNX Runtime: float Mod needs fmod=1
        check_forward(one_node("Mod", ins, fmod=1), ins, rtol=1e-5, atol=1e-5)
    else:
        (got,), *_ = yscv_run(one_node("Mod", ins, fmod=0), ins)
        np.testing.assert_allclose(got, np.mod(a, b), rtol=1e-5, atol=1e-5)
    check_grad(one_node("Mod", ins, fmod=fmod), ins, wrt=(0, 1))


def test_mod_fmod_by_zero_is_nan():
    a, b = np.array([5.0, -5.0, 3.0], np.float32), np.array([0.0, 2.0, 0.0], np.float32)
    (got,), *_ = yscv_run(one_node("Mod", [("a", a), ("b", b)], fmod=1), [("a", a), ("b", b)])
    np.testing.assert_array_equal(np.isnan(got), [True, False, True])
    assert got[1] == -1.0


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integers_keep_their_dtype(dtype, fmod):
    info = np.iinfo(dtype)
    a = rng(3).integers(max(info.min, -100), 100, (3, 4)).astype(dtype)
    b = rng(4).integers(1, 9, (4,)).astype(dtype)
    if info.min < 0:
        b = (b * np.where(rng(5).uniform(size=4) < 0.5, -1, 1)).astype(dtype)
    ins = [("a", a), ("b", b)]
    check_forward(one_node("Mod", ins, fmod=fmod), ins)


def test_mean_of_three_inputs():
    ins = [("a", uni(-1, 1, 2, 3)), ("b", uni(-1, 1, 3, seed=1)), ("c", uni(-1, 1, 2, 3, seed=2))]
    model = one_node("Mean", ins)
    check_forward(model, ins)
    check_grad(model, ins, wrt=(0, 1, 2))


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceLogSum"])
@pytest.mark.parametrize("axes,keep", [(None, 1), ([1], 0), ([-1, 0], 1)])
def test_reductions_match_ort_and_have_gradients(op, axes, keep):
    x = uni(0.5, 2.0, 3, 4, 2) * np.where(rng(6).uniform(size=(3, 4, 2)) < 0.5, -1, 1) \
        if op == "ReduceL1" else uni(0.5, 2.0, 3, 4, 2)
    x = x.astype(np.float32)
    ins = [("x", x)]
    if axes is not None:
        ins.append(("axes", np.array(axes, np.int64)))
    model = one_node(op, ins, opset=18, keepdims=keep)
    check_forward(model, ins)
    check_grad(model, ins)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scans_match_ort_and_have_gradients(op, exclusive, reverse):
    x = uni(0.5, 1.5, 3, 4)
    ins = [("x", x), ("axis", np.array(1, np.int64))]
    model = one_node(op, ins, opset=26 if op == "CumProd" else 17,
                     exclusive=exclusive, reverse=reverse)
    check_forward(model, ins)
    check_grad(model, ins)


def test_cumsum_integers_keep_their_dtype():
    ins = [("x", np.arange(12, dtype=np.int32).reshape(3, 4)), ("axis", np.array(-2, np.int64))]
    check_forward(one_node("CumSum", ins, exclusive=1, reverse=1), ins)


def test_mean_variance_normalization():
    x = uni(-2, 2, 2, 3, 4, 5)
    model = one_node("MeanVarianceNormalization", [("x", x)])
    check_forward(model, [("x", x)], rtol=1e-4, atol=1e-5)
    check_grad(model, [("x", x)])


@pytest.mark.parametrize("p,axis", [(1, 0), (2, 1), (2, -1)])
def test_lp_normalization(p, axis):
    x = uni(-2, 2, 3, 4)
    x[0] = 0.0 if axis != 0 else x[0]   # a zero row gives 0, not nan
    model = one_node("LpNormalization", [("x", x)], p=p, axis=axis)
    (got,), *_ = yscv_run(model, [("x", x)])
    norm = np.sum(np.abs(x) ** p, axis=axis, keepdims=True) ** (1 / p)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(got, np.where(norm == 0, 0, x / norm), rtol=1e-5, atol=1e-6)
    check_grad(model, [("x", uni(-2, 2, 3, 4, seed=1))])


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_bit_shift(direction, dtype):
    x = rng(7).integers(0, 200, (2, 5)).astype(dtype)
    s = np.array([0, 1, 3, 5, 7], dtype)
    check_forward(one_node("BitShift", [("x", x), ("s", s)], direction=direction),
                  [("x", x), ("s", s)])


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.uint8, np.uint64])
def test_bitwise(op, dtype):
    info = np.iinfo(dtype)
    a = rng(8).integers(max(info.min, -1000), min(info.max, 1000), (3, 4)).astype(dtype)
    b = rng(9).integers(max(info.min, -1000), min(info.max, 1000), (4,)).astype(dtype)
    ins = [("a", a)] if op == "BitwiseNot" else [("a", a), ("b", b)]
    check_forward(one_node(op, ins, opset=18), ins)


def test_bitwise_refuses_float_data():
    x = uni(0, 1, 3)
    m = yscv.onnx.load(one_node("BitwiseNot", [("x", x)], opset=18))
    g = yscv.Graph()
    with pytest.raises(OnnxImportError, match="BitwiseNot.*must hold integers, got float32"):
        m(g, g.constant(x))
    assert len(g) == 1   # the input constant only


@pytest.mark.parametrize("op,attrs,why", [
    ("LpNormalization", {"p": 3}, "p=3 is not supported"),
    ("Mod", {"fmod": 2}, "fmod=2 is not supported"),
])
def test_load_refuses_unimplemented_attributes(op, attrs, why):
    ins = [("x", uni(1, 2, 3))] + ([("b", uni(1, 2, 3))] if op == "Mod" else [])
    with pytest.raises(OnnxImportError, match=f"'{op}' \\(node 'n0', index 0\\): {why}"):
        yscv.onnx.load(one_node(op, ins, **attrs))


class _TorchMath:
    """Modules whose PyTorch export writes the operators of this file."""

    @staticmethod
    def make(torch):
        class Remainders(torch.nn.Module):
            def forward(self, x, d):
                return x % d + torch.fmod(x, d) * 0.5

        class Cumulative(torch.nn.Module):
            def forward(self, x):
                return torch.cumsum(torch.atan(x) * torch.cos(x), dim=1) + torch.tan(x * 0.3)

        return {"Remainders": Remainders(), "Cumulative": Cumulative()}


@pytest.mark.parametrize("name", ["Remainders", "Cumulative"])
def test_torch_exports_match_torch_values_and_gradients(name, tmp_path):
    """torch.onnx.export (opset 17) of %, fmod (Mod), cumsum, atan, cos, tan:
    the loaded model gives PyTorch's outputs and input gradients."""
    torch = pytest.importorskip("torch")
    module = _TorchMath.make(torch)[name].eval()
    x = uni(-3, 3, 3, 4, seed=11)
    d = (np.where(uni(0, 1, 4, seed=12) < 0.5, -1, 1) * uni(0.6, 2.0, 4, seed=13)).astype(
        np.float32)
    args = (x, d) if name == "Remainders" else (x,)
    path = tmp_path / "m.onnx"
    torch.onnx.export(module, tuple(torch.from_numpy(a) for a in args), str(path), dynamo=False,
                      opset_version=17)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("Mod" in ops) if name == "Remainders" else {"CumSum", "Atan", "Cos", "Tan"} <= ops
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args]
    want = module.double()(*ts)
    want.backward(torch.ones_like(want))
    g = yscv.Graph(np.float64)
    xs = [g.variable(a.astype(np.float64)) for a in args]
    y = yscv.onnx.load(str(path))(g, *xs)
    np.testing.assert_allclose(g.value(y), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    g.backward(g.sum(y))
    for xn, t in zip(xs, ts):
        np.testing.assert_allclose(g.grad(xn), t.grad.numpy(), rtol=1e-6, atol=1e-6)
