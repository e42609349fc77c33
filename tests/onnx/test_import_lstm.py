"""yscv.onnx.load on ONNX's LSTM with peephole weights (input P), composed
per time step (_import_lstm).

Oracles: ONNX Runtime for the forward values (Y, Y_h, Y_c); yscv.gradcheck
(float64) for the gradients of the input, the weights and the peepholes.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402

from _onenode import check_forward, check_grad  # noqa: E402

T, B, I, H = 3, 2, 4, 3


def _inputs(dirs, seed=0):
    rng = np.random.default_rng(seed)

    def f(*s, k=0.5):
        return (rng.standard_normal(s) * k).astype(np.float32)
    return [("x", f(T, B, I, k=1.0)), ("w", f(dirs, 4 * H, I)), ("r", f(dirs, 4 * H, H)),
            ("b", f(dirs, 8 * H)), ("h0", f(dirs, B, H)), ("c0", f(dirs, B, H)),
            ("p", f(dirs, 3 * H, k=1.0))]


def _model(ins, direction):
    node_ins = [n for n, _ in ins]
    node_ins.insert(4, "")   # no sequence_lens
    node = helper.make_node("LSTM", node_ins, ["y", "yh", "yc"], name="n0", hidden_size=H,
                            direction=direction)
    vis = [helper.make_tensor_value_info(n, 1, a.shape) for n, a in ins]
    outs = [helper.make_tensor_value_info(n, 1, None) for n in ("y", "yh", "yc")]
    model = helper.make_model(helper.make_graph([node], "g", vis, outs),
                              opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_peepholes_match_ort(direction):
    ins = _inputs(2 if direction == "bidirectional" else 1)
    check_forward(_model(ins, direction), ins, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("out", [0, 2])
def test_lstm_peepholes_have_gradients(out):
    """Through Y and through the last cell state Y_c: x, W and P."""
    ins = _inputs(1, seed=1)
    check_grad(_model(ins, "forward"), ins, wrt=(0, 1, 6), out=out)


def test_peephole_initializer_is_a_trained_parameter():
    ins = _inputs(1, seed=2)
    model = _model(ins, "forward")
    p = ins[-1][1]
    model.graph.input.pop()            # P becomes an initializer
    model.graph.initializer.append(numpy_helper.from_array(p, "p"))
    m = yscv.onnx.load(model)
    g = yscv.Graph()
    y, _, _ = m(g, *[a for _, a in ins[:-1]])
    g.backward(g.sum(y * y))
    grad = np.asarray(m.parameter("p").grad)
    assert grad.shape == p.shape and np.all(np.isfinite(grad)) and np.any(grad != 0)
