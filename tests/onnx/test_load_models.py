"""Real architectures exported by ``torch.onnx.export`` and imported by
``yscv.onnx.load``: ResNet-18, MobileNetV3-small and a 2-layer ViT, written
as torchvision builds them (benches/models.py holds the PyTorch twins the
model benches use; random weights, no downloads). Each must give PyTorch's
outputs in float64 and float32, PyTorch's gradient for every parameter, and
PyTorch's losses over three SGD steps."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402
from test_load import export  # noqa: E402  (tests/onnx is on sys.path)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benches"))
from models import torch_classes  # noqa: E402


def _model(name):
    resnet, mobilenet, vit = torch_classes(torch)
    torch.manual_seed(0)
    if name == "resnet18":
        return resnet(num_classes=10)
    if name == "mobilenet_v3_small":
        return mobilenet(num_classes=10)
    m = vit(image=32, patch=8, d=32, heads=2, layers=2, mlp=64, num_classes=10)
    with torch.no_grad():
        m.pos_embedding.normal_(std=0.02)
        m.class_token.normal_(std=0.02)
    return m


def _imported(tm, x):
    """Exported in eval mode without constant folding: batch norms stay
    BatchNormalization nodes and every weight keeps its PyTorch name."""
    tm.eval()
    return yscv.onnx.load(export(tm, (torch.tensor(x),), input_names=["x"],
                                 dynamic_axes={"x": {0: "n"}}, do_constant_folding=False))


SIZES = {"resnet18": 64, "mobilenet_v3_small": 64, "vit_tiny": 32}


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "vit_tiny"])
def test_forward_float64_and_float32_and_every_parameter_gradient(name):
    tm = _model(name).double()
    x = np.random.default_rng(1).standard_normal((2, 3, SIZES[name], SIZES[name]))
    m = _imported(tm, x)
    m.to(np.float64)
    tm.eval()
    tx = torch.tensor(x)
    ty = tm(tx)
    ct = np.random.default_rng(2).standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(ct))
    g = yscv.Graph(np.float64)
    y = m(g, g.constant(x))
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), rtol=1e-9, atol=1e-10)
    g.backward(y, ct)
    tparams = dict(tm.named_parameters())
    checked = 0
    for init in m.initializers():
        if init in tparams:
            np.testing.assert_allclose(m.file_layout(init, m.parameter(init).grad),
                                       tparams[init].grad.numpy(), rtol=1e-7, atol=1e-9,
                                       err_msg=init)
            checked += 1
    assert checked == len(tparams), (checked, len(tparams))
    # float32 on both sides: to float32 rounding
    tm32 = _model(name).eval()
    x32 = x.astype(np.float32)
    m32 = _imported(tm32, x32)
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m32(g, g.constant(x32))),
                               tm32(torch.tensor(x32)).detach().numpy(), rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("name", ["resnet18", "vit_tiny"])
def test_three_sgd_steps_in_training_mode_as_pytorch(name):
    """Training mode (batch statistics), mean cross-entropy, SGD lr 0.05:
    the losses of three steps and the final weights equal PyTorch's."""
    tm = _model(name).double()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, SIZES[name], SIZES[name]))
    labels = rng.integers(0, 10, 4)
    m = _imported(tm, x)
    m.to(np.float64)
    m.train()
    tm.train()
    topt = torch.optim.SGD(tm.parameters(), lr=0.05)
    opt = yscv.optim.SGD(m.parameters(), lr=0.05)
    tl, yl = [], []
    for _ in range(3):
        tloss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(labels))
        topt.zero_grad()
        tloss.backward()
        topt.step()
        g = yscv.Graph(np.float64)
        loss = g.cross_entropy(m(g, g.constant(x)), labels)
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        tl.append(float(tloss))
        yl.append(float(g.value(loss)))
    np.testing.assert_allclose(yl, tl, rtol=1e-8)
    state = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    for init, value in m.initializers().items():
        if init in state and state[init].dtype.kind == "f":
            np.testing.assert_allclose(value, state[init], rtol=1e-7, atol=1e-9, err_msg=init)
