"""Real architectures exported by ``torch.onnx.export`` and imported by
``yscv.onnx.load``: ResNet-18, MobileNetV3-small and a 2-layer ViT, written
as torchvision builds them (benches/models.py holds the PyTorch twins the
model benches use), and a Swin transformer at 64 px written out below
(shifted windows with torch.roll, relative position bias gathered from a
table, patch merging by strided slices); random weights, no downloads. Each must give PyTorch's
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


tnn = torch.nn
F = torch.nn.functional


class WindowAttention(tnn.Module):
    def __init__(self, dim, window, heads):
        super().__init__()
        self.window, self.heads = window, heads
        self.qkv = tnn.Linear(dim, dim * 3)
        self.proj = tnn.Linear(dim, dim)
        self.relative_position_bias_table = tnn.Parameter(0.02 * torch.randn((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("relative_position_index", (rel[..., 0] * (2 * window - 1) + rel[..., 1]).flatten())

    def forward(self, x, mask=None):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * (c // self.heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.relative_position_bias_table[self.relative_position_index].view(n, n, -1).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(b // nw, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, n, n)
        attn = attn.softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))

class SwinBlock(tnn.Module):
    def __init__(self, dim, res, heads, window, shift):
        super().__init__()
        self.res, self.window, self.shift = res, window, shift
        self.norm1 = tnn.LayerNorm(dim); self.attn = WindowAttention(dim, window, heads)
        self.norm2 = tnn.LayerNorm(dim); self.fc1 = tnn.Linear(dim, 4 * dim); self.fc2 = tnn.Linear(4 * dim, dim)
        if shift:
            img = torch.zeros(1, res, res, 1); cnt = 0
            for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                    img[:, hs, ws, :] = cnt; cnt += 1
            mw = self._windows(img).view(-1, window * window)
            m = mw.unsqueeze(1) - mw.unsqueeze(2)
            self.register_buffer("attn_mask", m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0))
        else:
            self.attn_mask = None

    def _windows(self, x):
        b, h, w, c = x.shape; ws = self.window
        return x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)

    def forward(self, x):
        b, h, w, c = x.shape; ws = self.window
        y = self.norm1(x)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
        y = self.attn(self._windows(y), self.attn_mask)
        y = y.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if self.shift:
            y = torch.roll(y, (self.shift, self.shift), (1, 2))
        x = x + y
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

class PatchMerging(tnn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = tnn.LayerNorm(4 * dim); self.reduction = tnn.Linear(4 * dim, 2 * dim, bias=False)
    def forward(self, x):
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduction(self.norm(x))

class Swin(tnn.Module):
    """Swin-T's structure at 64 px: 4x4 patches, window 4, two stages (2 blocks each, the second shifted)."""
    def __init__(self, dim=16, classes=10):
        super().__init__()
        self.patch = tnn.Conv2d(3, dim, 4, 4); self.pnorm = tnn.LayerNorm(dim)
        # head depth 4 in both stages: the exporter writes the attention scale as a float32
        # Pow of constants (then a Cast to double), which 4 ** -0.5 = 0.5 survives exactly
        self.stage1 = tnn.Sequential(SwinBlock(dim, 16, 4, 4, 0), SwinBlock(dim, 16, 4, 4, 2))
        self.merge = PatchMerging(dim)
        self.stage2 = tnn.Sequential(SwinBlock(2 * dim, 8, 8, 4, 0), SwinBlock(2 * dim, 8, 8, 4, 2))
        self.norm = tnn.LayerNorm(2 * dim); self.head = tnn.Linear(2 * dim, classes)
    def forward(self, x):
        x = self.pnorm(self.patch(x).permute(0, 2, 3, 1))
        x = self.stage2(self.merge(self.stage1(x)))
        return self.head(self.norm(x).mean((1, 2)))


def _model(name):
    if name == "swin":
        torch.manual_seed(0)
        return Swin()
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


SIZES = {"resnet18": 64, "mobilenet_v3_small": 64, "vit_tiny": 32, "swin": 64}


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "vit_tiny", "swin"])
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


@pytest.mark.parametrize("name", ["resnet18", "vit_tiny", "swin"])
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
    # the file does not say which float initializers were PyTorch buffers (Swin's
    # attention mask): the imported model trains PyTorch's parameters only, as a
    # user fine-tuning it would ask
    tparams = dict(tm.named_parameters())
    opt = yscv.optim.SGD([m.parameter(n) for n in m.initializers() if n in tparams], lr=0.05)
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
