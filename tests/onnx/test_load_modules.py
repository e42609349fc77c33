"""The sub-modules of a ``yscv.onnx.load``ed model: replacing a layer
(``m.fc = nn.Linear(...)``) changes what the forward calls; replacing what
several nodes read is refused at assignment; ``load(..., outputs=[...])``
cuts the graph at a tensor. PyTorch is the oracle for the values.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
import yscv.onnx  # noqa: E402
from yscv.nn.parameter import Parameter  # noqa: E402
from yscv.onnx import OnnxImportError  # noqa: E402

from test_load import TOL, arrays, export  # noqa: E402  (tests/onnx is on sys.path)


class Net(torch.nn.Module):
    """features (a Sequential: conv, BN, ReLU, conv, pooling, flatten) + fc."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
            torch.nn.Conv2d(6, 8, 3, stride=2), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(self.features(x))


def net(seed=0):
    torch.manual_seed(seed)
    tm = Net()
    with torch.no_grad():
        bn = tm.features[1]
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return tm.eval()


def exported(tm, **kw):
    return export(tm, (torch.zeros(2, 3, 9, 9),), input_names=["x"],
                  dynamic_axes={"x": {0: "n"}}, **kw)


def feature_name(data) -> str:
    """The tensor the head reads: the Gemm's data input."""
    proto = onnx.load_from_string(data)
    return next(n.input[0] for n in proto.graph.node if n.op_type == "Gemm")


def run(m, x):
    g = yscv.Graph()
    return g.value(m(g, g.constant(x)))


def new_head(seed, n_in, n_out):
    yscv.manual_seed(seed)
    head = nn.Linear(n_in, n_out)
    rng = np.random.default_rng(seed)
    head.bias.data[...] = rng.standard_normal(n_out).astype(np.float32)
    return head


# ------------------------------------------------------------ replacing fc
@pytest.mark.parametrize("folding", [True, False])
def test_replaced_head_is_what_the_forward_calls(folding):
    tm = net()
    m = yscv.onnx.load(exported(tm, do_constant_folding=folding))
    (x,) = arrays(1, (3, 3, 9, 9))
    old = [m.fc.weight, m.fc.bias]
    head = new_head(1, 8, 11)
    m.fc = head
    y = run(m, x)
    assert y.shape == (3, 11)
    feats = tm.features(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(y, feats @ head.weight.data + head.bias.data, **TOL)
    ids = {id(p) for p in m.parameters()}
    assert id(head.weight) in ids and id(head.bias) in ids
    assert not ids & {id(p) for p in old}
    sd = m.state_dict()
    assert sd["fc.weight"].shape == (8, 11) and sd["fc.bias"].shape == (11,)
    np.testing.assert_array_equal(sd["fc.weight"], head.weight.data)
    assert "fc.weight" not in m.initializers()
    with pytest.raises(KeyError, match="fc.weight"):
        m.parameter("fc.weight")
    again = yscv.onnx.load(exported(tm, do_constant_folding=folding))
    again.fc = nn.Linear(8, 11)
    again.load_state_dict(sd)               # the same keys and shapes
    np.testing.assert_array_equal(run(again, x), y)


def test_training_step_updates_the_new_head_as_torch_does():
    tm = net()
    m = yscv.onnx.load(exported(tm, do_constant_folding=False))
    head = new_head(2, 8, 4)
    m.fc = head
    tm.fc = torch.nn.Linear(8, 4)
    with torch.no_grad():
        tm.fc.weight.copy_(torch.tensor(head.weight.data.T))
        tm.fc.bias.copy_(torch.tensor(head.bias.data))
    (x,) = arrays(3, (4, 3, 9, 9))
    labels = np.array([0, 3, 1, 2])
    m.train()
    tm.train()
    assert head.training
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    opt = yscv.optim.SGD(m.parameters(), lr=0.1)
    before = head.weight.data.copy()
    for _ in range(2):
        tloss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(labels))
        topt.zero_grad()
        tloss.backward()
        topt.step()
        g = yscv.Graph()
        loss = g.cross_entropy(m(g, g.constant(x)), labels)
        g.backward(loss)
        assert head.weight.grad is not None
        opt.step()
        opt.zero_grad()
        np.testing.assert_allclose(float(g.value(loss)), float(tloss.detach()), rtol=1e-4)
    assert not np.allclose(head.weight.data, before)
    np.testing.assert_allclose(head.weight.data, tm.fc.weight.detach().numpy().T, **TOL)
    np.testing.assert_allclose(head.bias.data, tm.fc.bias.detach().numpy(), **TOL)
    np.testing.assert_allclose(m.initializers()["features.0.bias"],
                               tm.features[0].bias.detach().numpy(), **TOL)


def test_replaced_conv_and_indexing_numbered_children():
    tm = net()
    m = yscv.onnx.load(exported(tm, do_constant_folding=False))
    assert m.features[0] is m.features._modules["0"] is m.features["0"]
    assert set(m.features[0].state_dict()) == {"weight", "bias"}
    with pytest.raises(IndexError, match=r"features\[2\]"):
        m.features[2]                         # the ReLU holds nothing: no child
    with pytest.raises(IndexError):
        m.features[-1]
    with pytest.raises(TypeError, match="int or a child's name"):
        m.features[1.0]
    torch.manual_seed(5)
    tconv = torch.nn.Conv2d(3, 6, 3, padding=1)
    conv = nn.Conv2d(3, 6, 3, padding=1)
    conv.weight.data[...] = tconv.weight.detach().numpy().transpose(2, 3, 1, 0)
    conv.bias.data[...] = tconv.bias.detach().numpy()
    m.features[0] = conv                  # yscv's Conv2d: channel-last, as yscv's layers
    tm.features[0] = tconv
    (x,) = arrays(4, (2, 3, 9, 9))
    np.testing.assert_allclose(run(m, x), tm(torch.tensor(x)).detach().numpy(), **TOL)
    assert "features.0.weight" not in m.initializers()
    assert m.state_dict()["features.0.weight"].shape == (3, 3, 3, 6)


def test_assigned_parameter_is_read_by_the_forward():
    tm = net()
    m = yscv.onnx.load(exported(tm))
    w = np.random.default_rng(6).standard_normal((5, 8)).astype(np.float32)  # [out, in]
    m.fc.weight = Parameter(w)
    with torch.no_grad():
        tm.fc.weight.copy_(torch.tensor(w))
    (x,) = arrays(7, (2, 3, 9, 9))
    np.testing.assert_allclose(run(m, x), tm(torch.tensor(x)).detach().numpy(), **TOL)
    assert m.parameter("fc.weight") is m.fc.weight


def test_matmul_add_linear_from_yscv_export_is_replaceable(tmp_path):
    yscv.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    (x,) = arrays(8, (4, 6))
    m = yscv.onnx.load(yscv.onnx.export(model, x, tmp_path / "mlp.onnx"))
    head = new_head(9, 16, 2)
    m[2] = head
    want = np.tanh(x @ model[0].weight.data + model[0].bias.data) @ head.weight.data \
        + head.bias.data
    np.testing.assert_allclose(run(m, x), want, **TOL)


# ---------------------------------------------------------------- refusals
def test_replacing_what_several_nodes_read_is_refused_and_says_outputs():
    tm = net()
    m = yscv.onnx.load(exported(tm, do_constant_folding=False))
    features = m.features
    (x,) = arrays(1, (2, 3, 9, 9))
    want = run(m, x)
    with pytest.raises(TypeError, match=r"'features'.*outputs=") as err:
        m.features = nn.Identity()
    assert "'fc', 'features.0', 'features.1', 'features.3'" in str(err.value)
    with pytest.raises(TypeError, match=r"cannot delete 'fc': the forward calls it .*Gemm"):
        m.fc = None
    for bad in (lambda: delattr(m, "fc"), lambda: setattr(m.fc, "weight", None),
                lambda: m.add_module("features", nn.Identity()),
                lambda: m.register_parameter("fc", Parameter(np.zeros(3))),
                lambda: setattr(m.features[1], "running_mean", None)):
        with pytest.raises(TypeError, match="OnnxModule: cannot"):
            bad()
    assert m.features is features
    m.features = features                    # putting back what is there changes nothing
    np.testing.assert_array_equal(run(m, x), want)
    m.extra = nn.Linear(2, 2)                # a new name is an ordinary child
    assert "extra.weight" in m.state_dict()


class Seq(torch.nn.Module):
    """A Linear on [N, T, F]: the exporter writes MatMul with a transposed copy
    of the weight (not named fc.weight) and an Add of fc.bias."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def test_a_head_that_is_not_one_layer_call_is_refused():
    torch.manual_seed(0)
    m = yscv.onnx.load(export(Seq(), (torch.zeros(2, 5, 4),)))
    assert [n.op for n in m._nodes] == ["MatMul", "Add"]
    with pytest.raises(TypeError, match=r"cannot assign Linear to 'fc'.*outputs=\[tensor name\]"):
        m.fc = nn.Linear(4, 3)


# ---------------------------------------------------------------- outputs=
def test_outputs_cuts_the_backbone_and_drops_the_head():
    tm = net()
    data = exported(tm)
    feat = feature_name(data)
    full = yscv.onnx.load(data)
    m = yscv.onnx.load(data, outputs=[feat])
    assert m.output_names == [feat]
    assert len(m._nodes) == len(full._nodes) - 1           # the Gemm is dropped
    assert not any(k.startswith("fc.") for k in m.state_dict())
    (x,) = arrays(2, (3, 3, 9, 9))
    np.testing.assert_allclose(run(m, x), tm.features(torch.tensor(x)).detach().numpy(), **TOL)
    both = yscv.onnx.load(data, outputs=[full.output_names[0], feat])
    g = yscv.Graph()
    logits, f = both(g, g.constant(x))
    np.testing.assert_allclose(g.value(logits), tm(torch.tensor(x)).detach().numpy(), **TOL)
    np.testing.assert_allclose(g.value(f), run(m, x), **TOL)


def test_outputs_cut_at_a_channel_first_tensor():
    tm = net()
    m = yscv.onnx.load(exported(tm, do_constant_folding=False),
                       outputs=["/features/features.2/Relu_output_0"])
    (x,) = arrays(3, (2, 3, 9, 9))
    np.testing.assert_allclose(run(m, x), tm.features[:3](torch.tensor(x)).detach().numpy(),
                               **TOL)
    assert set(m.state_dict()) == {"features.0.weight", "features.0.bias", "features.1.weight",
                                   "features.1.bias", "features.1.running_mean",
                                   "features.1.running_var"}


def test_outputs_unknown_name_and_bad_arguments():
    data = exported(net())
    feat = feature_name(data)
    with pytest.raises(OnnxImportError, match=r"no value named 'feats'"):
        yscv.onnx.load(data, outputs=["feats"])
    with pytest.raises(OnnxImportError, match=r"did you mean '" + feat[:8]):
        yscv.onnx.load(data, outputs=[feat + "x"])
    with pytest.raises(TypeError, match="list of value names"):
        yscv.onnx.load(data, outputs=feat)
    with pytest.raises(ValueError, match="empty"):
        yscv.onnx.load(data, outputs=[])
    with pytest.raises(ValueError, match="twice"):
        yscv.onnx.load(data, outputs=[feat, feat])


# -------------------------------------------------------------------- docs
def test_docs_section_replacing_a_head_runs_and_prints_what_it_says(tmp_path, monkeypatch):
    import contextlib
    import io
    import os
    import re
    import warnings
    page = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "onnx.md")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^## Replacing a head, step by step\n(.*?)(?=^## |\Z)", text,
                        re.S | re.M).group(1)
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(block, page, "exec"), {"__name__": "__docs__"})
    printed = " ".join(out.getvalue().split())
    lines = block.splitlines()
    checked = 0
    for i, line in enumerate(lines):
        if line.lstrip().startswith("print(") and lines[i + 1].lstrip().startswith("# "):
            j, said = i + 1, []
            while j < len(lines) and lines[j].lstrip().startswith("# "):
                said.append(lines[j].strip()[2:])
                j += 1
            assert " ".join(" ".join(said).split()) in printed
            checked += 1
    assert checked == 5
