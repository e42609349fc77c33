"""Training steps of real architectures: yscv vs PyTorch eager CPU.

One step = forward in training mode (batch-norm batch statistics), mean
cross-entropy, backward to every parameter, and an SGD update (lr 0.01,
momentum 0.9), on a fresh graph per step as in SPEC section 6's loop.
The models (benches/models.py) are built from ``yscv.nn`` layers the way
torchvision builds them, with PyTorch twins whose initial weights are
loaded into yscv by the torch-layout loader; setting up a bench checks
that both sides' first losses agree.

Rows: ResNet-18, MobileNetV3-small and ViT-tiny (patch 8, 4 layers,
d=192) at batch 8, 64x64; ResNet-18 and MobileNetV3-small at batch 2,
224x224; against PyTorch NCHW and channels_last; and the ResNet-18 and
MobileNetV3-small twins exported by ``torch.onnx.export`` and imported by
``yscv.onnx.load`` (NCHW at the edges) against PyTorch channels_last.

    python benches/run.py models --separate      # each side alone
    python benches/bench_models.py --profile resnet18   # cProfile of the yscv step
"""
from __future__ import annotations

import io
import pathlib
import sys
import tempfile

import numpy as np

import yscv
from common import Bench, profile_step
from models import build

LR, MOMENTUM = 0.01, 0.9


def _data(batch, size, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, size, size, 3)).astype(np.float32)
    return x, rng.integers(0, 1000, size=batch)


def _yscv_step(model, x, labels, nchw=False):
    model.train()
    opt = yscv.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x

    def step():
        g = yscv.Graph()
        out = model(g, g.constant(xin))
        out = out[0] if isinstance(out, (tuple, list)) else out
        loss = g.cross_entropy(out, labels)
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        return float(g.value(loss))

    return step


def _torch_step(torch, model, x, labels, channels_last):
    model.train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    xt = torch.tensor(x.transpose(0, 3, 1, 2)).contiguous(memory_format=fmt)
    yt = torch.tensor(labels)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _first_losses_agree(name, ours, theirs, torch, x, labels, nchw=False):
    """Both models' first training-mode losses, before any update."""
    g = yscv.Graph()
    ours.train()
    theirs.train()
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x
    out = ours(g, g.constant(xin))
    out = out[0] if isinstance(out, (tuple, list)) else out
    ly = float(g.value(g.cross_entropy(out, labels)))
    with torch.no_grad():
        saved = {k: v.clone() for k, v in theirs.state_dict().items()}
        lt = float(torch.nn.functional.cross_entropy(
            theirs(torch.tensor(x.transpose(0, 3, 1, 2))), torch.tensor(labels)))
        theirs.load_state_dict(saved)       # the running statistics as before
    if not np.isclose(ly, lt, rtol=2e-3):
        raise AssertionError(f"bench_models {name}: first losses differ: yscv {ly}, torch {lt}")


def _onnx_file(name: str) -> pathlib.Path:
    """Where the torch twin's export is kept for the processes that time
    yscv alone (they never import PyTorch): the system's temporary folder."""
    return pathlib.Path(tempfile.gettempdir()) / f"yscv-bench-{name}.onnx"


def _onnx_import(torch, name, x):
    """The torch twin exported by torch.onnx (in eval mode, as torch.onnx
    exports; written to `_onnx_file` when PyTorch is here) and loaded by
    yscv.onnx.load; the step trains it in training mode as any module.
    None without PyTorch and without an earlier export (``torch`` None: the
    file written before)."""
    import yscv.onnx

    path = _onnx_file(name)
    if torch is not None:
        theirs = build(name, torch)[1].eval()
        buf = io.BytesIO()
        torch.onnx.export(theirs, (torch.tensor(x.transpose(0, 3, 1, 2)),), buf, dynamo=False,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}})
        path.write_bytes(buf.getvalue())
    return yscv.onnx.load(path) if path.exists() else None


class _Lazy:
    """A step built on its first call: a process that times one row builds
    only that row's model (``benches(torch)[k]`` lists them all)."""

    def __init__(self, make):
        self._make, self._step = make, None

    def __call__(self):
        if self._step is None:
            self._step = self._make()
        return self._step()


def _rows(torch, name, label, batch, size, cl_only=False, onnx=False):
    x, labels = _data(batch, size)

    def ours():
        model, theirs = build(name, torch)
        if theirs is not None:
            _first_losses_agree(name, model, theirs, torch, x, labels)
        return _yscv_step(model, x, labels)

    def theirs(channels_last):
        if torch is None:
            return None
        return _Lazy(lambda: _torch_step(torch, build(name, torch)[1], x, labels,
                                         channels_last))

    ys = _Lazy(ours)
    title = f"{label} train step, batch {batch}, {size}x{size}"
    rows = []
    if not cl_only:
        rows.append(Bench(f"{title} (vs NCHW)", ys, theirs(False), target=1.0))
    rows.append(Bench(f"{title} (vs channels_last)", ys, theirs(True),
                      reference_name="PyTorch channels_last", target=1.0))
    if onnx and (torch is not None or _onnx_file(name).exists()):
        if torch is not None:
            _onnx_import(torch, name, x)      # the file the PyTorch-free processes read
        ys_onnx = _Lazy(lambda: _yscv_step(_onnx_import(None, name, x), x, labels, nchw=True))
        rows.append(Bench(f"{title}, imported from ONNX (vs channels_last)", ys_onnx,
                          theirs(True), reference_name="PyTorch channels_last", target=1.0))
    return rows


def benches(torch):
    rows = []
    rows += _rows(torch, "resnet18", "ResNet-18", 8, 64, onnx=True)
    rows += _rows(torch, "mobilenet_v3_small", "MobileNetV3-small", 8, 64, onnx=True)
    rows += _rows(torch, "vit_tiny", "ViT-tiny (patch 8, 4 layers, d=192)", 8, 64)
    rows += _rows(torch, "resnet18", "ResNet-18", 2, 224, cl_only=True)
    rows += _rows(torch, "mobilenet_v3_small", "MobileNetV3-small", 2, 224, cl_only=True)
    return rows


def _profile(name, steps=5):
    """cProfile of the yscv step of model ``name`` (batch 8, 64x64)."""
    x, labels = _data(8, 64)
    profile_step(_yscv_step(build(name)[0], x, labels), steps, rows=30)


if __name__ == "__main__":
    if "--profile" in sys.argv:
        _profile(sys.argv[sys.argv.index("--profile") + 1])
