"""One-node ONNX models for the operator tests of tests/onnx/test_import_*.py:
built with onnx.helper, run by ONNX Runtime (the oracle) and by yscv."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import yscv
import yscv.onnx


def one_node(op, inputs, n_out=1, opset=17, out=None, **attrs):
    """A model of one ``op`` node: ``inputs`` are (name, array) pairs (the
    graph inputs, their dtypes and shapes from the arrays); ``out`` the
    outputs' dtypes (default: the first input's)."""
    node = helper.make_node(op, [n for n, _ in inputs], [f"y{i}" for i in range(n_out)],
                            name="n0", **attrs)
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in inputs]
    out = out or [inputs[0][1].dtype] * n_out
    outs = [helper.make_tensor_value_info(f"y{i}", helper.np_dtype_to_tensor_dtype(np.dtype(d)),
                                          None) for i, d in enumerate(out)]
    model = helper.make_model(helper.make_graph([node], "g", vis, outs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def ort_run(model, inputs):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: a for n, a in inputs})


def yscv_run(model, inputs, dtype=np.float32):
    """The loaded model on a fresh graph: float inputs as variables; the
    outputs as arrays, with the graph and the input nodes."""
    m = yscv.onnx.load(model)
    g = yscv.Graph(dtype)
    xs = [g.variable(a.astype(dtype)) if a.dtype.kind == "f" else a for _, a in inputs]
    outs = m(g, *xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    vals = [np.asarray(g.value(o)) if isinstance(o, yscv.NodeId) else np.asarray(o) for o in outs]
    return vals, g, xs, outs


def check_forward(model, inputs, rtol=1e-5, atol=1e-6):
    """yscv's outputs equal ONNX Runtime's, values and (non-float) dtypes."""
    want = ort_run(model, inputs)
    got, *_ = yscv_run(model, inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape, (a.shape, b.shape)
        if b.dtype.kind != "f":
            assert a.dtype == b.dtype, (a.dtype, b.dtype)
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return got


def check_grad(model, inputs, wrt=(0,), out=0):
    """yscv.gradcheck (float64, central differences) of output ``out`` with
    respect to the float inputs at positions ``wrt``; the gradient is
    finite and not all zero."""
    m = yscv.onnx.load(model)
    arrays = [a for _, a in inputs]

    def fn(g, *nodes):
        xs = list(arrays)
        for k, node in zip(wrt, nodes):
            xs[k] = node
        xs = [g.constant(x.astype(np.float64)) if isinstance(x, np.ndarray) and x.dtype.kind == "f"
              else x for x in xs]
        y = m(g, *xs)
        return y[out] if isinstance(y, tuple) else y

    assert yscv.gradcheck(fn, [arrays[k].astype(np.float64) for k in wrt])
    g = yscv.Graph(np.float64)
    nodes = [g.variable(arrays[k].astype(np.float64)) for k in wrt]
    y = fn(g, *nodes)
    g.backward(g.sum(y * y))
    for n in nodes:
        grad = np.asarray(g.grad(n))
        assert np.all(np.isfinite(grad)) and np.any(grad != 0)


def matches_onnxruntime_with_gradients(model, x, tol):
    """``model`` (one float input ``x``) loaded by yscv gives ONNX Runtime's
    output to ``tol``, and a loss of it has a finite, nonzero gradient with
    respect to ``x``. Returns the loaded module."""
    (want,) = ort_run(model, [("x", x)])[:1]
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    xv = g.variable(x)
    y = m(g, xv)
    np.testing.assert_allclose(g.value(y), want, **tol)
    g.backward(g.sum(g.mul(y, y)))
    assert np.all(np.isfinite(g.grad(xv))) and np.abs(g.grad(xv)).sum() > 0
    return m


def matches_torch_under_a_cotangent(m, x, tx, ty, seed, tol):
    """The loaded module ``m`` on ``x`` gives PyTorch's output ``ty`` (of
    ``tx``, a leaf requiring grad) and, under one random cotangent, PyTorch's
    gradient with respect to the input."""
    import torch

    ct = np.random.default_rng(seed).standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(ct))
    g = yscv.Graph()
    xv = g.variable(x)
    y = m(g, xv)
    g.backward(y, ct)
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), **tol)
    np.testing.assert_allclose(g.grad(xv), tx.grad.numpy(), **tol)
