"""``yscv.onnx.load`` on files written by ``torch.onnx.export``: PyTorch is
the oracle. Each model is exported, imported, and must give torch's outputs,
torch's gradients with respect to the inputs and the parameters, and the
same parameters after five SGD steps (lr 0.1), all to float32 rounding.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import yscv  # noqa: E402
import yscv.onnx  # noqa: E402

TOL = dict(rtol=2e-4, atol=2e-5)


def export(model, args, **kw) -> bytes:
    """The model's ONNX file (TorchScript exporter) as bytes."""
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, f, dynamo=False, **kw)
    return f.getvalue()


def arrays(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def run_both(tmodel, m, xs, cotangent_seed=1):
    """Outputs and gradients (inputs, parameters) of the torch model and the
    imported one under one random cotangent. Returns (torch output, yscv
    output, torch input grads, yscv input grads)."""
    txs = [torch.tensor(x, requires_grad=True) for x in xs]
    ty = tmodel(*txs)
    ty = ty[0] if isinstance(ty, tuple) else ty
    ct = np.random.default_rng(cotangent_seed).standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(ct))
    g = yscv.Graph()
    nodes = [g.variable(x) for x in xs]
    y = m(g, *nodes)
    y = y[0] if isinstance(y, tuple) else y
    g.backward(y, ct)
    return (ty.detach().numpy(), g.value(y), [t.grad.numpy() for t in txs],
            [g.grad(n) for n in nodes])


def assert_param_grads(tmodel, m, names=None):
    """Every initializer named after a torch parameter has torch's gradient
    (converted back to the file's layout)."""
    tparams = dict(tmodel.named_parameters())
    checked = 0
    for name in m.initializers():
        if name not in tparams or (names is not None and name not in names):
            continue
        p = m.parameter(name)
        np.testing.assert_allclose(m.file_layout(name, p.grad), tparams[name].grad.numpy(),
                                   err_msg=name, **TOL)
        checked += 1
    assert checked >= 2
    return checked


def sgd_steps(tmodel, m, xs, steps=5, lr=0.1):
    """Five SGD steps on mean(y**2) on both sides; returns the two loss lists."""
    topt = torch.optim.SGD(tmodel.parameters(), lr=lr)
    opt = yscv.optim.SGD(m.parameters(), lr=lr)
    tl, yl = [], []
    for _ in range(steps):
        ty = tmodel(*[torch.tensor(x) for x in xs])
        ty = ty[0] if isinstance(ty, tuple) else ty
        tloss = (ty ** 2).mean()
        topt.zero_grad()
        tloss.backward()
        topt.step()
        g = yscv.Graph()
        y = m(g, *[g.constant(x) for x in xs])
        y = y[0] if isinstance(y, tuple) else y
        loss = g.mean(y * y)
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        tl.append(float(tloss.detach()))
        yl.append(float(g.value(loss)))
    return tl, yl


def assert_same_parameters(tmodel, m):
    state = {k: v.detach().numpy() for k, v in tmodel.state_dict().items()}
    same = [n for n in m.initializers() if n in state]
    assert len(same) >= 2
    for name, value in m.initializers().items():
        if name in state:
            np.testing.assert_allclose(value, state[name], err_msg=name, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------- MLP
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def test_mlp_outputs_gradients_and_sgd():
    torch.manual_seed(0)
    tm = MLP()
    (x,) = arrays(0, (5, 6))
    m = yscv.onnx.load(export(tm, (torch.tensor(x),), input_names=["x"],
                              dynamic_axes={"x": {0: "batch"}}))
    assert set(m.state_dict()) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    ty, y, tgx, gx = run_both(tm, m, [x])
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(gx[0], tgx[0], **TOL)
    assert_param_grads(tm, m)
    for p in m.parameters():
        p.grad = None
    tl, yl = sgd_steps(tm, m, [x])
    np.testing.assert_allclose(yl, tl, rtol=1e-4)
    assert_same_parameters(tm, m)
    (x7,) = arrays(3, (7, 6))  # the batch axis is free
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, g.constant(x7))),
                               tm(torch.tensor(x7)).detach().numpy(), **TOL)


# ------------------------------------------------------------- CNN + BN
class CNN(torch.nn.Module):
    """Conv + BatchNorm + ReLU + pooling, flattened with x.view(x.size(0), -1)
    (the exporter's Shape/Gather/Unsqueeze/Concat/Reshape plumbing)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(6)
        self.conv2 = torch.nn.Conv2d(6, 8, 3, stride=2, groups=2)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.nn.functional.max_pool2d(y, 2)
        y = torch.relu(self.bn2(self.conv2(y)))
        return self.fc(y.view(y.size(0), -1))


def cnn(seed=0):
    torch.manual_seed(seed)
    tm = CNN()
    with torch.no_grad():  # running statistics that are not the defaults
        for bn in (tm.bn1, tm.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return tm.eval()


def test_cnn_batchnorm_folded():
    tm = cnn()
    (x,) = arrays(1, (2, 3, 10, 10))
    data = export(tm, (torch.tensor(x),), input_names=["x"], dynamic_axes={"x": {0: "n"}})
    m = yscv.onnx.load(data)
    assert m.state_dict().keys().isdisjoint({"bn1.running_mean", "bn1.weight"})  # folded away
    ty, y, tgx, gx = run_both(tm, m, [x])
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(gx[0], tgx[0], **TOL)
    (x3,) = arrays(2, (3, 3, 10, 10))  # another batch size through the shape plumbing
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, g.constant(x3))),
                               tm(torch.tensor(x3)).detach().numpy(), **TOL)


@pytest.mark.parametrize("how", ["no_folding", "preserve"])
def test_cnn_batchnorm_unfolded_eval(how):
    tm = cnn()
    (x,) = arrays(1, (2, 3, 10, 10))
    kw = (dict(do_constant_folding=False) if how == "no_folding"
          else dict(training=torch.onnx.TrainingMode.PRESERVE))
    m = yscv.onnx.load(export(tm, (torch.tensor(x),), **kw))
    sd = m.state_dict()
    for key in ("bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"):
        np.testing.assert_array_equal(sd[key], tm.state_dict()[key].numpy())
    ty, y, tgx, gx = run_both(tm, m, [x])
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(gx[0], tgx[0], **TOL)
    assert assert_param_grads(tm, m) == 10  # conv, bn and fc weights and biases
    for p in m.parameters():
        p.grad = None
    tl, yl = sgd_steps(tm, m, [x])
    np.testing.assert_allclose(yl, tl, rtol=1e-4)
    assert_same_parameters(tm, m)


def test_cnn_train_mode_batch_statistics_and_sgd():
    """m.train(): batch statistics and the running-stat update, as torch's
    train mode; five SGD steps land on torch's parameters and statistics."""
    tm = cnn()
    (x,) = arrays(4, (4, 3, 10, 10))
    m = yscv.onnx.load(export(tm, (torch.tensor(x),), do_constant_folding=False))
    assert not m.training  # imported for inference
    tm.train()
    m.train()
    tl, yl = sgd_steps(tm, m, [x])
    np.testing.assert_allclose(yl, tl, rtol=1e-4)
    assert_same_parameters(tm, m)
    sd = m.state_dict()
    for key in ("bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"):
        np.testing.assert_allclose(sd[key], tm.state_dict()[key].numpy(), rtol=1e-4, atol=1e-6)


def test_conv_weights_are_held_in_yscv_layout():
    tm = cnn()
    m = yscv.onnx.load(export(tm, (torch.zeros(1, 3, 10, 10),), do_constant_folding=False))
    w = tm.conv1.weight.detach().numpy()                     # [O, I, KH, KW]
    np.testing.assert_array_equal(m.parameter("conv1.weight").data, w.transpose(2, 3, 1, 0))
    np.testing.assert_array_equal(m.initializers()["conv1.weight"], w)
    assert m.onnx_names["conv1.weight"] == "conv1.weight"


# ---------------------------------------------------------- recurrent
class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = torch.nn.GRU(10, 4)
        self.rnn = torch.nn.RNN(4, 3, nonlinearity="relu")

    def forward(self, x):
        y, _ = self.lstm(x)
        y = y.transpose(0, 1)
        z, _ = self.gru(y)
        w, h = self.rnn(z)
        return w + h.sum(0)


@pytest.mark.parametrize("folding", [True, False])
def test_lstm_gru_rnn(folding):
    torch.manual_seed(0)
    tm = Recurrent()
    (x,) = arrays(5, (2, 6, 3))
    m = yscv.onnx.load(export(tm, (torch.tensor(x),), do_constant_folding=folding))
    ty, y, tgx, gx = run_both(tm, m, [x])
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(gx[0], tgx[0], **TOL)
    if not folding:  # the weights keep torch's names: gradients per parameter
        tparams = dict(tm.named_parameters())
        names = [n for n in m.initializers() if n in tparams]
        assert len(names) == len(tparams)
        assert_param_grads(tm, m)
    for p in m.parameters():
        p.grad = None
    tl, yl = sgd_steps(tm, m, [x])
    np.testing.assert_allclose(yl, tl, rtol=1e-4)
    if not folding:
        assert_same_parameters(tm, m)


# -------------------------------------------------- transformer-ish block
class Block(torch.nn.Module):
    """Pre-norm self-attention and an MLP with GELU (erf), residuals."""

    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 2 * d)
        self.fc2 = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


@pytest.mark.parametrize("opset", [17, 20, 14])
def test_transformer_block(opset):
    """opset 17: LayerNormalization and GELU as Div/Erf/Add/Mul/Mul; opset
    20: the Gelu operator; opset 14: LayerNorm as ReduceMean/Sub/Pow/Sqrt."""
    torch.manual_seed(0)
    tm = Block()
    (x,) = arrays(6, (2, 5, 8))
    m = yscv.onnx.load(export(tm, (torch.tensor(x),), opset_version=opset,
                              do_constant_folding=False, input_names=["x"],
                              dynamic_axes={"x": {0: "b", 1: "s"}}))
    ty, y, tgx, gx = run_both(tm, m, [x])
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(gx[0], tgx[0], **TOL)
    assert_param_grads(tm, m)
    for p in m.parameters():
        p.grad = None
    tl, yl = sgd_steps(tm, m, [x])
    np.testing.assert_allclose(yl, tl, rtol=1e-4)
    assert_same_parameters(tm, m)
    (x2,) = arrays(7, (3, 4, 8))  # dynamic batch and sequence
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, g.constant(x2))),
                               tm(torch.tensor(x2)).detach().numpy(), **TOL)


class TokenModel(torch.nn.Module):
    """Embedding lookup (Gather on an integer input), mean over the sequence."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 4)
        self.out = torch.nn.Linear(4, 2)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(1))


def test_embedding_with_integer_input():
    torch.manual_seed(0)
    tm = TokenModel()
    ids = np.array([[1, 3, 10], [0, 3, 3]], dtype=np.int64)
    m = yscv.onnx.load(export(tm, (torch.tensor(ids),), do_constant_folding=False))
    g = yscv.Graph()
    y = m(g, ids)
    ty = tm(torch.tensor(ids))
    np.testing.assert_allclose(g.value(y), ty.detach().numpy(), **TOL)
    g.backward(g.sum(y))
    ty.sum().backward()
    np.testing.assert_allclose(m.parameter("emb.weight").grad, tm.emb.weight.grad.numpy(), **TOL)


# ------------------------------------------------------------ state
def test_save_and_load_checkpoint_round_trip(tmp_path):
    pytest.importorskip("safetensors")
    tm = cnn()
    (x,) = arrays(8, (2, 3, 10, 10))
    data = export(tm, (torch.tensor(x),), do_constant_folding=False)
    m = yscv.onnx.load(data)
    m.train()
    sgd_steps(tm.train(), m, [x], steps=2)
    yscv.save_checkpoint(tmp_path / "ft.ckpt", model=m, step=2)
    m2 = yscv.onnx.load(data)
    info = yscv.load_checkpoint(tmp_path / "ft.ckpt", model=m2)
    assert info["step"] == 2
    for (k, a), (k2, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(a, b)
    m.eval()
    m2.eval()
    g = yscv.Graph()
    np.testing.assert_array_equal(g.value(m(g, g.constant(x))), g.value(m2(g, g.constant(x))))


# ------------------------------------------------------- more torch modules
class Plumbing(torch.nn.Module):
    """chunk, cat, keepdim reductions, normalize, pad, permute, strided
    slicing, clamp and pow: Split/Concat/Reduce*/ReduceL2/Pad/Transpose/Slice/Clip/Pow."""

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        y = torch.cat([b, a], 1).mean(dim=-1, keepdim=True) + x.sum(1, keepdim=True)
        y = torch.nn.functional.normalize(y * x, dim=-1)
        y = torch.nn.functional.pad(y, (1, 2))
        return y.permute(1, 0).reshape(-1, 3)[1:, ::2].clamp(min=-0.3) ** 3


def _zoo():
    nn = torch.nn
    return {
        "activations": (nn.Sequential(nn.SiLU(), nn.ELU(0.7), nn.SELU(), nn.CELU(0.5),
                                      nn.Softsign(), nn.Mish(), nn.Hardswish(), nn.ReLU6(),
                                      nn.Hardsigmoid(), nn.Softplus(), nn.LeakyReLU(0.1),
                                      nn.LogSoftmax(1)), [(3, 7)]),
        "plumbing": (Plumbing(), [(4, 6)]),
        "upsample": (nn.Sequential(nn.Conv2d(2, 3, 1), nn.Upsample(scale_factor=(3, 2)),
                                   nn.Conv2d(3, 2, 3)), [(1, 2, 3, 4)]),
        "conv1d_pool1d": (nn.Sequential(nn.Conv1d(3, 4, 3, padding=2, dilation=2),
                                        nn.MaxPool1d(2), nn.AvgPool1d(2)), [(2, 3, 12)]),
        "conv_transpose_bn": (nn.Sequential(
            nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
            nn.BatchNorm2d(4), nn.Tanh()), [(2, 3, 5, 5)]),
        "instance_group_norm": (nn.Sequential(nn.Conv2d(3, 4, 3),
                                              nn.InstanceNorm2d(4, affine=True),
                                              nn.GroupNorm(2, 4)), [(2, 3, 6, 6)]),
        "adaptive_flatten": (nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1),
                                           nn.Flatten(), nn.Linear(4, 2)), [(2, 3, 8, 8)]),
        "multihead_attention": (nn.MultiheadAttention(8, 2, batch_first=True),
                                [(2, 5, 8)] * 3),
    }


@pytest.mark.parametrize("name", sorted(_zoo()))
def test_torch_modules_outputs_and_input_gradients(name):
    torch.manual_seed(0)
    tm, shapes = _zoo()[name]
    tm.eval()
    xs = [3 * a for a in arrays(9, *shapes)]
    m = yscv.onnx.load(export(tm, tuple(torch.tensor(x) for x in xs)))
    ty, y, tgx, gx = run_both(tm, m, xs)
    np.testing.assert_allclose(y, ty, **TOL)
    for a, b in zip(gx, tgx):
        np.testing.assert_allclose(a, b, **TOL)


def test_hardswish_and_pytorchs_hardsigmoid_load_as_one_op_each():
    """HardSwish, and HardSigmoid with PyTorch's alpha 1/6 and beta 1/2, load
    as yscv's hardswish and hardsigmoid (one node each, PyTorch's bits on
    the forward); another alpha keeps the clamp of ``alpha x + beta``."""
    from yscv.node import Op
    tm = torch.nn.Sequential(torch.nn.Hardswish(), torch.nn.Hardsigmoid())
    m = yscv.onnx.load(export(tm, (torch.zeros(2, 5000),)))
    x = (4 * arrays(3, (2, 5000))[0]).astype(np.float32)
    x[0, :4] = [-3.0, 3.0, 0.0, np.nan]
    g = yscv.Graph()
    out = m(g, g.variable(x))
    out = out[0] if isinstance(out, (list, tuple)) else out
    ops = [Op(g._nodes[i][0]) for i in range(len(g._nodes))]
    assert ops.count(Op.HARDSWISH) == 1 and ops.count(Op.HARDSIGMOID) == 1
    assert Op.CLAMP not in ops
    with torch.no_grad():
        ty = tm(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(g.value(out), ty)
    ty, y, tgx, gx = run_both(tm, m, [x[:, 4:]])
    np.testing.assert_allclose(y, ty, **TOL)
    np.testing.assert_allclose(gx[0], tgx[0], **TOL)

    from onnx import helper
    node = helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.25, beta=0.4)
    graph = helper.make_graph([node], "hs", [helper.make_tensor_value_info("x", 1, [2, 3])],
                              [helper.make_tensor_value_info("y", 1, [2, 3])])
    other = yscv.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    g = yscv.Graph()
    xs = arrays(4, (2, 3))[0]
    y = other(g, g.constant(xs))
    y = y[0] if isinstance(y, (list, tuple)) else y
    assert Op.HARDSIGMOID not in [Op(g._nodes[i][0]) for i in range(len(g._nodes))]
    np.testing.assert_allclose(g.value(y), np.clip(0.25 * xs + 0.4, 0.0, 1.0), rtol=1e-6)
