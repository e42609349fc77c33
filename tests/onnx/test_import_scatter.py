"""yscv.onnx.load on ScatterElements and ScatterND with the reductions max,
min and mul (_import_scatter).

Oracles: ONNX Runtime for the forward values; PyTorch's scatter_reduce
(include_self=True, ONNX's semantics) for the gradients, ties and duplicate
indices included; yscv.gradcheck (float64) for ScatterND.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from _onenode import check_forward, check_grad, one_node  # noqa: E402

TORCH_RED = {"max": "amax", "min": "amin", "mul": "prod"}


def _case():
    """x [3, 4]; indices along axis 1 with duplicates; updates with values
    tied with x and with each other at some targets."""
    x = np.array([[1.0, 5.0, -2.0, 0.5], [3.0, -1.0, 2.0, 2.0], [0.0, 4.0, 1.5, -3.0]],
                 np.float32)
    idx = np.array([[0, 0, 2], [1, 3, 3], [2, 2, 2]], np.int64)
    u = np.array([[1.0, 1.0, 0.7], [-1.0, 2.0, 2.5], [1.5, 3.0, 1.5]], np.float32)
    return x, idx, u


@pytest.mark.parametrize("red", ["max", "min", "mul"])
def test_scatter_elements_reductions_match_ort_and_torch_gradients(red):
    torch = pytest.importorskip("torch")
    x, idx, u = _case()
    ins = [("x", x), ("i", idx), ("u", u)]
    model = one_node("ScatterElements", ins, opset=18, axis=1, reduction=red)
    check_forward(model, ins)
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    xn, un = g.variable(x), g.variable(u)
    y = m(g, xn, idx, un)
    ct = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    g.backward(y, ct)
    tx, tu = torch.tensor(x, requires_grad=True), torch.tensor(u, requires_grad=True)
    ty = torch.scatter_reduce(tx, 1, torch.tensor(idx), tu, TORCH_RED[red], include_self=True)
    ty.backward(torch.tensor(ct))
    np.testing.assert_array_equal(g.value(y), ty.detach().numpy())
    np.testing.assert_allclose(g.grad(xn), tx.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g.grad(un), tu.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("red", ["max", "min", "mul"])
def test_scatter_nd_reductions_match_ort_and_gradcheck(red):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    idx = np.array([[1], [3], [1]], np.int64)   # row 1 twice
    u = rng.standard_normal((3, 3, 2)).astype(np.float32)
    ins = [("x", x), ("i", idx), ("u", u)]
    model = one_node("ScatterND", ins, opset=18, reduction=red)
    check_forward(model, ins)
    check_grad(model, ins, wrt=(0, 2))


def test_static_scatter_reductions_keep_the_integer_dtype():
    x = np.array([[1, 5, -2, 4]], np.int32)
    idx = np.array([[0, 0, 3]], np.int64)
    u = np.array([[3, -7, 2]], np.int32)
    ins = [("x", x), ("i", idx), ("u", u)]
    for red in ("max", "min", "mul"):
        (y,) = check_forward(one_node("ScatterElements", ins, opset=18, axis=1,
                                      reduction=red), ins)
        assert y.dtype == np.int32


def test_unknown_reduction_is_refused_at_load():
    x, idx, u = _case()
    model = one_node("ScatterElements", [("x", x), ("i", idx), ("u", u)], opset=18,
                     reduction="mean")
    with pytest.raises(OnnxImportError, match=r"'ScatterElements' \(node 'n0'.*'mean'"):
        yscv.onnx.load(model)
