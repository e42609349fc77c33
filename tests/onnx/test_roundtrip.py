"""yscv -> ONNX -> yscv: a model exported by ``yscv.onnx.export`` and read
back by ``yscv.onnx.load`` gives the same outputs and the same gradients
(inputs and every parameter), and trains the same."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.optim as optim  # noqa: E402
from yscv.onnx import export, load  # noqa: E402


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 10))


def _mlp():
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.GELU(),
                         nn.LayerNorm(8), nn.Linear(8, 3))


class _Seq(nn.Module):
    """An LSTM over [T, B, I] and a linear head on its last state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 7)
        self.head = nn.Linear(7, 2)

    def forward(self, g, x):
        out, _ = self.rnn(g, x)
        return self.head(g, g.select(out, 0, x.shape[0] - 1))


def _prepare(model, dtype):
    yscv.manual_seed(0)
    m = model().to(dtype) if dtype == np.float64 else model()
    m.eval()
    return m


def _grads(model, x, dtype):
    """(output, input gradient, {parameter shape-order list of gradients})."""
    g = yscv.Graph(dtype)
    xn = g.variable(x)
    out = model(g, xn)
    cot = np.random.default_rng(3).standard_normal(out.shape).astype(dtype)
    g.backward(out, grad=cot)
    params = sorted((p.grad for p in model.parameters() if p.grad is not None),
                    key=lambda a: (a.shape, float(np.sum(np.abs(a)))))
    for p in model.parameters():
        p.grad = None
    return np.array(g.value(out)), np.array(g.grad(xn)), params


CASES = [
    ("cnn", _cnn, lambda r, n: r.uniform(0, 1, (n, 8, 8, 1))),
    ("mlp", _mlp, lambda r, n: r.standard_normal((n, 6))),
    ("lstm", _Seq, lambda r, n: r.standard_normal((4, n, 5))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,model,inputs", CASES, ids=[c[0] for c in CASES])
def test_export_then_load_gives_the_same_outputs_and_gradients(name, model, inputs, dtype,
                                                               tmp_path):
    m = _prepare(model, dtype)
    rng = np.random.default_rng(1)
    x = inputs(rng, 3).astype(dtype)
    batch_axis = 1 if name == "lstm" else 0
    path = tmp_path / f"{name}.onnx"
    export(m, x, path, input_names=["x"], dynamic_axes={"x": {batch_axis: "batch"}})
    back = load(path)
    back.eval()
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    for n in (3, 5):          # the dynamic batch, at two sizes
        x = inputs(rng, n).astype(dtype)
        o1, gx1, p1 = _grads(m, x, dtype)
        o2, gx2, p2 = _grads(back, x, dtype)
        np.testing.assert_allclose(o2, o1, **tol)
        np.testing.assert_allclose(gx2, gx1, **tol)
        if name == "lstm":
            # ONNX's LSTM holds two biases (input and recurrent, as PyTorch):
            # the file's parameters are not yscv's one for one
            continue
        assert len(p1) == len(p2)
        for a, b in zip(p1, p2):   # conv weights are laid out the same way after load
            np.testing.assert_allclose(np.sort(b.ravel()), np.sort(a.ravel()), **tol)


def test_an_imported_model_trains_as_the_original(tmp_path):
    """Five SGD steps on the reloaded MLP give the original's losses."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 6))
    y = rng.integers(0, 3, 8)
    m = _prepare(_mlp, np.float64)
    path = tmp_path / "mlp.onnx"
    export(m, x, path)
    back = load(path)
    m.train()
    back.train()
    losses = []
    for model in (m, back):
        opt = optim.SGD(model.parameters(), lr=0.1)
        run = []
        for _ in range(5):
            g = yscv.Graph(np.float64)
            loss = g.cross_entropy(model(g, g.constant(x)), y)
            g.backward(loss)
            opt.step()
            opt.zero_grad()
            run.append(float(g.value(loss)))
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-10)
