"""yscv.nn: layer forwards against the op composition / NumPy / PyTorch,
PyTorch's default initialisation, state dicts, modes, binding into graphs."""
from __future__ import annotations

import math

import numpy as np
import pytest

import yscv
import yscv.nn as nn
import yscv.optim as optim

RNG = np.random.default_rng(0)


def _x(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------- forwards
def test_linear_forward_and_grads():
    yscv.manual_seed(0)
    lin = nn.Linear(5, 3)
    x = _x(4, 5)
    g = yscv.Graph()
    y = lin(g, g.constant(x))
    np.testing.assert_allclose(g.value(y), x @ lin.weight.data + lin.bias.data, rtol=1e-6, atol=1e-6)
    gy = _x(4, 3)
    g.backward(y, gy)
    np.testing.assert_allclose(lin.weight.grad, x.T @ gy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.bias.grad, gy.sum(0), rtol=1e-5, atol=1e-6)
    assert lin.weight.shape == (5, 3)  # input-major


@pytest.mark.parametrize("make,op,x_shape", [
    (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), "conv1d", (2, 9, 3)),
    (lambda: nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=1, dilation=1, groups=2), "conv2d",
     (2, 5, 6, 4)),
    (lambda: nn.Conv3d(2, 3, 2, bias=False), "conv3d", (1, 3, 4, 4, 2)),
])
def test_conv_layers_equal_op_composition(make, op, x_shape):
    layer = make()
    x = _x(*x_shape)
    g = yscv.Graph()
    y = layer(g, g.constant(x))
    g2 = yscv.Graph()
    b = None if layer.bias is None else g2.constant(layer.bias.data)
    ref = getattr(g2, op)(g2.constant(x), g2.constant(layer.weight.data), b, layer.stride,
                          layer.padding, layer.dilation, layer.groups)
    np.testing.assert_array_equal(g.value(y), g2.value(ref))


def test_conv2d_matches_torch():
    torch = pytest.importorskip("torch")
    layer = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    x = _x(2, 7, 7, 4)
    g = yscv.Graph()
    y = g.value(layer(g, g.constant(x)))
    tl = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(layer.weight.data.transpose(3, 2, 0, 1)))
        tl.bias.copy_(torch.tensor(layer.bias.data))
    ty = tl(torch.tensor(x.transpose(0, 3, 1, 2))).detach().numpy().transpose(0, 2, 3, 1)
    np.testing.assert_allclose(y, ty, rtol=1e-4, atol=1e-5)


def test_conv_transpose_and_depthwise_match_torch():
    torch = pytest.importorskip("torch")
    x = _x(2, 4, 5, 3)
    ct = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
    tct = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
    dw = nn.DepthwiseConv2d(3, 3, multiplier=2, padding=1)
    tdw = torch.nn.Conv2d(3, 6, 3, padding=1, groups=3)
    with torch.no_grad():
        tct.weight.copy_(torch.tensor(ct.weight.data.transpose(3, 2, 0, 1)))  # [Cin, Cout, KH, KW]
        tct.bias.copy_(torch.tensor(ct.bias.data))
        w = dw.weight.data  # [KH, KW, C, M] -> [C*M, 1, KH, KW], channel c*M + m
        tdw.weight.copy_(torch.tensor(w.reshape(3, 3, 6).transpose(2, 0, 1)[:, None]))
        tdw.bias.copy_(torch.tensor(dw.bias.data))
    tx = torch.tensor(x.transpose(0, 3, 1, 2))
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(ct(g, g.constant(x))),
                               tct(tx).detach().numpy().transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g.value(dw(g, g.constant(x))),
                               tdw(tx).detach().numpy().transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-5)


def test_batchnorm_running_stats_reach_the_buffer_and_match_torch():
    torch = pytest.importorskip("torch")
    bn = nn.BatchNorm2d(3, momentum=0.2)
    bn.weight.data[:] = [1.0, 2.0, 0.5]
    bn.bias.data[:] = [0.0, -1.0, 0.3]
    tbn = torch.nn.BatchNorm2d(3, momentum=0.2)
    with torch.no_grad():
        tbn.weight.copy_(torch.tensor(bn.weight.data))
        tbn.bias.copy_(torch.tensor(bn.bias.data))
    mean_buf = bn.running_mean
    g = yscv.Graph()
    k = bn.bind(g)
    for step in range(3):
        x = _x(4, 5, 5, 3) * (step + 1) + step
        g.truncate(k)  # one graph reused: the buffers stay bound
        y = bn(g, g.constant(x))
        ty = tbn(torch.tensor(x.transpose(0, 3, 1, 2)))
        np.testing.assert_allclose(g.value(y), ty.detach().numpy().transpose(0, 2, 3, 1),
                                   rtol=1e-4, atol=1e-4)
    assert bn.running_mean is mean_buf  # updated in place, not replaced
    np.testing.assert_allclose(bn.running_mean, tbn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var, tbn.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 3 == int(tbn.num_batches_tracked)
    bn.eval()
    tbn.eval()
    x = _x(2, 3, 3, 3)
    g = yscv.Graph()
    before = bn.running_mean.copy()
    y = bn(g, g.constant(x))
    np.testing.assert_allclose(g.value(y), tbn(torch.tensor(x.transpose(0, 3, 1, 2))).detach()
                               .numpy().transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(bn.running_mean, before)  # eval does not update


def test_batchnorm_any_rank_and_without_tracking():
    bn = nn.BatchNorm(4, affine=False, track_running_stats=False)
    assert list(bn.state_dict()) == []
    x = _x(6, 4) * 3 + 1
    g = yscv.Graph()
    bn.eval()  # without running stats, eval still normalises with batch statistics
    y = g.value(bn(g, g.constant(x)))
    np.testing.assert_allclose(y.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(0), 1, atol=1e-3)
    assert nn.BatchNorm1d is not nn.BatchNorm and issubclass(nn.BatchNorm1d, nn.BatchNorm)


def test_layer_group_instance_norm_equal_ops():
    x = _x(2, 3, 4, 6)
    for layer, ref in [
        (nn.LayerNorm(6, eps=1e-4), lambda g, x, l: g.layer_norm(x, g.constant(l.weight.data),
                                                                 g.constant(l.bias.data), 1e-4)),
        (nn.GroupNorm(3, 6), lambda g, x, l: g.group_norm(x, g.constant(l.weight.data),
                                                          g.constant(l.bias.data), 3)),
        (nn.InstanceNorm(6), lambda g, x, l: g.instance_norm(x, None, None)),
    ]:
        if getattr(layer, "weight", None) is not None:
            layer.weight.data[:] = np.linspace(0.5, 2, 6)
            layer.bias.data[:] = np.linspace(-1, 1, 6)
        g = yscv.Graph()
        g2 = yscv.Graph()
        np.testing.assert_array_equal(g.value(layer(g, g.constant(x))),
                                      g2.value(ref(g2, g2.constant(x), layer)))


@pytest.mark.parametrize("cls,kw", [
    ("RNN", dict(num_layers=2, bidirectional=True, nonlinearity="relu")),
    ("RNN", dict(batch_first=True)),
    ("LSTM", dict(num_layers=2)),
    ("LSTM", dict(bidirectional=True, batch_first=True)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(bias=False)),
])
def test_recurrent_layers_match_torch(cls, kw):
    torch = pytest.importorskip("torch")
    yscv.manual_seed(1)
    layer = getattr(nn, cls)(3, 4, **kw)
    tl = getattr(torch.nn, cls)(3, 4, **kw)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            getattr(tl, name).copy_(torch.tensor(p.data.T))  # ours are input-major
    x = _x(2, 5, 3) if kw.get("batch_first") else _x(5, 2, 3)
    g = yscv.Graph()
    out, state = layer(g, g.constant(x))
    tout, tstate = tl(torch.tensor(x))
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-4, atol=1e-5)
    if cls == "LSTM":  # (output, (h_n, c_n)) as PyTorch
        assert isinstance(state, tuple) and len(state) == 2
        for ours, theirs in zip(state, tstate):
            np.testing.assert_allclose(g.value(ours), theirs.detach().numpy(), rtol=1e-4,
                                       atol=1e-5)
    else:  # (output, h_n)
        np.testing.assert_allclose(g.value(state), tstate.detach().numpy(), rtol=1e-4, atol=1e-5)
    # gradients reach every parameter
    g.backward(out, np.ones(g.value(out).shape, np.float32))
    assert all(p.grad is not None for p in layer.parameters())


def test_recurrent_initial_state_and_unbatched():
    torch = pytest.importorskip("torch")
    layer = nn.LSTM(3, 4)
    tl = torch.nn.LSTM(3, 4)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            getattr(tl, name).copy_(torch.tensor(p.data.T))
    x, h0, c0 = _x(6, 3), _x(1, 4), _x(1, 4)
    g = yscv.Graph()
    out, (h_n, c_n) = layer(g, g.constant(x), (h0, c0))
    tout, (th, tc) = tl(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
    np.testing.assert_allclose(g.value(out), tout.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g.value(h_n), th.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g.value(c_n), tc.detach().numpy(), rtol=1e-4, atol=1e-5)


def _torch_twin(torch, layer, cls, **kw):
    """The PyTorch layer with ``layer``'s weights (ours are input-major), float64."""
    tl = getattr(torch.nn, cls)(layer.input_size, layer.hidden_size, **kw).double()
    with torch.no_grad():
        for name, p in layer.named_parameters():
            getattr(tl, name).copy_(torch.tensor(p.data.T))
    return tl


@pytest.mark.parametrize("batched", [True, False])
def test_lstm_layer_state_in_and_out_with_gradients_match_torch(batched):
    torch = pytest.importorskip("torch")
    yscv.manual_seed(3)
    kw = dict(num_layers=2, bidirectional=True, batch_first=True)
    layer = nn.LSTM(3, 4, **kw).to(np.float64)
    tl = _torch_twin(torch, layer, "LSTM", **kw)
    x = _x(2, 5, 3, dtype=np.float64) if batched else _x(5, 3, dtype=np.float64)
    sshape = (4, 2, 4) if batched else (4, 4)
    h0, c0 = _x(*sshape, dtype=np.float64), _x(*sshape, dtype=np.float64)
    g = yscv.Graph(np.float64)
    hn0, cn0 = g.variable(h0), g.variable(c0)
    out, (h_n, c_n) = layer(g, g.constant(x), (hn0, cn0))
    assert g.value(h_n).shape == sshape and g.value(c_n).shape == sshape
    wo, wc = _x(*g.value(out).shape, dtype=np.float64), _x(*sshape, dtype=np.float64)
    g.backward(g.add(g.sum(g.mul(out, wo)), g.add(g.sum(g.mul(c_n, wc)), g.sum(h_n))))
    th0 = torch.tensor(h0, requires_grad=True)
    tc0 = torch.tensor(c0, requires_grad=True)
    tout, (th, tc) = tl(torch.tensor(x), (th0, tc0))
    ((tout * torch.tensor(wo)).sum() + (tc * torch.tensor(wc)).sum() + th.sum()).backward()
    for ours, theirs in [(out, tout), (h_n, th), (c_n, tc)]:
        np.testing.assert_allclose(g.value(ours), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g.grad(hn0), th0.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g.grad(cn0), tc0.grad.numpy(), rtol=1e-9, atol=1e-12)
    for name, p in layer.named_parameters():
        np.testing.assert_allclose(p.grad, getattr(tl, name).grad.numpy().T, rtol=1e-9,
                                   atol=1e-12, err_msg=name)


def test_lstm_layer_truncated_bptt_matches_torch():
    """Two chunks, one fresh graph each; chunk 2 starts from chunk 1's
    (h_n, c_n) values (detached), gradients accumulate in the parameters."""
    torch = pytest.importorskip("torch")
    yscv.manual_seed(4)
    layer = nn.LSTM(3, 5, num_layers=2).to(np.float64)
    tl = _torch_twin(torch, layer, "LSTM", num_layers=2)
    chunks = [_x(4, 2, 3, dtype=np.float64) for _ in range(2)]
    state, tstate, losses, tlosses = None, None, [], []
    for xc in chunks:
        g = yscv.Graph(np.float64)
        out, (h_n, c_n) = layer(g, g.constant(xc), state)
        loss = g.add(g.mean(g.mul(out, out)), g.mean(c_n))
        g.backward(loss)
        losses.append(float(g.value(loss)))
        state = (g.value(h_n), g.value(c_n))
        tout, (th, tc) = tl(torch.tensor(xc), tstate)
        tloss = (tout * tout).mean() + tc.mean()
        tloss.backward()
        tlosses.append(tloss.item())
        tstate = (th.detach(), tc.detach())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-12)
    for name, p in layer.named_parameters():
        np.testing.assert_allclose(p.grad, getattr(tl, name).grad.numpy().T, rtol=1e-9,
                                   atol=1e-12, err_msg=name)


@pytest.mark.parametrize("cls", ["RNN", "GRU"])
def test_rnn_gru_layers_take_h0_and_return_h_n_like_torch(cls):
    torch = pytest.importorskip("torch")
    yscv.manual_seed(5)
    layer = getattr(nn, cls)(3, 4, num_layers=2).to(np.float64)
    tl = _torch_twin(torch, layer, cls, num_layers=2)
    x, h0 = _x(5, 2, 3, dtype=np.float64), _x(2, 2, 4, dtype=np.float64)
    g = yscv.Graph(np.float64)
    hn0 = g.variable(h0)
    out, h_n = layer(g, g.constant(x), hn0)
    g.backward(g.add(g.sum(out), g.sum(g.mul(h_n, h_n))))
    th0 = torch.tensor(h0, requires_grad=True)
    tout, th = tl(torch.tensor(x), th0)
    (tout.sum() + (th * th).sum()).backward()
    np.testing.assert_allclose(g.value(h_n), th.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g.grad(hn0), th0.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_recurrent_layer_bad_states():
    lstm, gru = nn.LSTM(3, 4, num_layers=2), nn.GRU(3, 4)
    x = _x(5, 2, 3)
    g = yscv.Graph()
    n = len(g)
    with pytest.raises(TypeError, match=r"LSTM: hx must be a pair \(h0, c0\)"):
        lstm(g, x, np.zeros((2, 2, 4), np.float32))
    with pytest.raises(TypeError, match="GRU: hx is the initial hidden state"):
        gru(g, x, (np.zeros((1, 2, 4)), np.zeros((1, 2, 4))))
    with pytest.raises(ValueError,
                       match=r"LSTM: c0 must have shape .* = \(2, 2, 4\), got \(1, 2, 4\)"):
        lstm(g, x, (np.zeros((2, 2, 4)), np.zeros((1, 2, 4))))
    with pytest.raises(ValueError, match=r"GRU: h0 must have shape .*unbatched.* = \(1, 4\)"):
        gru(g, x[:, 0], np.zeros((1, 2, 4)))
    assert len(g) == n  # raised before appending anything


def test_multihead_attention_matches_torch():
    torch = pytest.importorskip("torch")
    yscv.manual_seed(2)
    mha = nn.MultiHeadAttention(8, 2)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        tm.in_proj_weight.copy_(torch.tensor(mha.in_proj_weight.data.T))
        tm.in_proj_bias.copy_(torch.tensor(_x(24)))
        mha.in_proj_bias.data[:] = tm.in_proj_bias.numpy()
        tm.out_proj.weight.copy_(torch.tensor(mha.out_proj.weight.data.T))
        mha.out_proj.bias.data[:] = _x(8)
        tm.out_proj.bias.copy_(torch.tensor(mha.out_proj.bias.data))
    q, kv = _x(2, 5, 8), _x(2, 7, 8)
    pad = np.zeros((2, 7), bool)
    pad[1, 5:] = True
    g = yscv.Graph()
    self_out = mha(g, g.constant(q))
    cross = mha(g, g.constant(q), g.constant(kv), g.constant(kv), key_padding_mask=pad)
    causal = mha(g, g.constant(q), causal=True)
    tq, tkv = torch.tensor(q), torch.tensor(kv)
    t_self = tm(tq, tq, tq, need_weights=False)[0]
    t_cross = tm(tq, tkv, tkv, key_padding_mask=torch.tensor(pad), need_weights=False)[0]
    tmask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)  # torch: True = masked
    t_causal = tm(tq, tq, tq, attn_mask=tmask, need_weights=False)[0]
    for ours, theirs in [(self_out, t_self), (cross, t_cross), (causal, t_causal)]:
        np.testing.assert_allclose(g.value(ours), theirs.detach().numpy(), rtol=1e-4, atol=1e-5)



def test_multihead_attention_float_mask_is_additive_not_cast():
    """Issue 12: a PyTorch-style additive causal mask triu(-inf, 1) gives the
    same output and gradients as causal=True (it used to be cast to bool and
    inverted); float masks (also with key_padding_mask) match
    torch.nn.MultiheadAttention, and a bool mask is True = attend."""
    torch = pytest.importorskip("torch")
    yscv.manual_seed(3)
    mha = nn.MultiHeadAttention(8, 2)
    mha.in_proj_bias.data[:] = _x(24)
    mha.out_proj.bias.data[:] = _x(8)
    q = _x(2, 5, 8)
    tri = np.triu(np.full((5, 5), -np.inf, np.float32), 1)
    cot = _x(2, 5, 8)
    res = []
    for kw in ({"mask": tri}, {"causal": True}):
        g = yscv.Graph()
        x = g.variable(q)
        out = mha(g, x, **kw)
        g.backward(out, grad=cot)
        res.append((g.value(out), g.grad(x), mha.in_proj_weight.grad.copy()))
        mha.zero_grad()
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        tm.in_proj_weight.copy_(torch.tensor(mha.in_proj_weight.data.T))
        tm.in_proj_bias.copy_(torch.tensor(mha.in_proj_bias.data))
        tm.out_proj.weight.copy_(torch.tensor(mha.out_proj.weight.data.T))
        tm.out_proj.bias.copy_(torch.tensor(mha.out_proj.bias.data))
    kv = _x(2, 7, 8)
    fm = _x(5, 7)
    fm[:, 3] = -np.inf
    pad = np.zeros((2, 7), bool)
    pad[1, 5:] = True
    fpad = np.where(pad, -np.inf, 0.0).astype(np.float32)
    allowed = _x(5, 7) > -0.5
    allowed[:, 0] = True
    tq, tkv = torch.tensor(q), torch.tensor(kv)
    g = yscv.Graph()
    cases = [
        (mha(g, q, mask=tri), tm(tq, tq, tq, attn_mask=torch.tensor(tri), need_weights=False)[0]),
        (mha(g, q, kv, kv, mask=fm, key_padding_mask=fpad),
         tm(tq, tkv, tkv, attn_mask=torch.tensor(fm), key_padding_mask=torch.tensor(fpad),
            need_weights=False)[0]),
        (mha(g, q, kv, kv, mask=fm, key_padding_mask=pad),   # bool padding, float mask
         tm(tq, tkv, tkv, attn_mask=torch.tensor(fm), key_padding_mask=torch.tensor(fpad),
            need_weights=False)[0]),
        # yscv bool: True = attend; torch.nn.MultiheadAttention bool: True = blocked
        (mha(g, q, kv, kv, mask=allowed, key_padding_mask=pad),
         tm(tq, tkv, tkv, attn_mask=torch.tensor(~allowed), key_padding_mask=torch.tensor(pad),
            need_weights=False)[0]),
    ]
    for ours, theirs in cases:
        np.testing.assert_allclose(g.value(ours), theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    n = len(g)
    with pytest.raises(TypeError, match="MultiHeadAttention: mask must be a boolean .* int64"):
        mha(g, q, mask=np.ones((5, 5), np.int64))     # never cast to bool
    with pytest.raises(TypeError, match="MultiHeadAttention: key_padding_mask must be a boolean"):
        mha(g, q, kv, kv, key_padding_mask=pad.astype(np.int64))
    with pytest.raises(ValueError, match=r"MultiHeadAttention: key_padding_mask must be \[B, Sk\]"):
        mha(g, q, kv, kv, key_padding_mask=pad[0])
    assert len(g) == n  # masks are checked before any node is added


def test_embedding_padding_idx_gets_no_gradient():
    emb = nn.Embedding(6, 3, padding_idx=2)
    np.testing.assert_array_equal(emb.weight.data[2], 0)
    idx = np.array([[2, 1], [2, 5]])
    g = yscv.Graph()
    y = emb(g, idx)
    np.testing.assert_array_equal(g.value(y), emb.weight.data[idx])
    g.backward(g.sum(y))
    grad = emb.weight.grad
    np.testing.assert_array_equal(grad[2], 0)
    np.testing.assert_array_equal(grad[1], 1)
    np.testing.assert_array_equal(grad[5], 1)
    np.testing.assert_array_equal(grad[0], 0)


@pytest.mark.parametrize("name,ref", [
    ("ReLU", lambda x: np.maximum(x, 0)),
    ("LeakyReLU", lambda x: np.where(x > 0, x, 0.01 * x)),
    ("Sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    ("Tanh", np.tanh),
    ("SiLU", lambda x: x / (1 + np.exp(-x))),
    ("Softplus", lambda x: np.log1p(np.exp(x))),
    ("Mish", lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ("GELU", lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    ("PReLU", lambda x: np.where(x > 0, x, 0.25 * x)),
    ("Softmax", lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    ("LogSoftmax", lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))),
    ("Flatten", lambda x: x.reshape(x.shape[0], -1)),
])
def test_activation_layers(name, ref):
    x = _x(3, 2, 4).astype(np.float64)
    g = yscv.Graph(np.float64)
    layer = getattr(nn, name)().to(np.float64)
    np.testing.assert_allclose(g.value(layer(g, g.constant(x))), ref(x), rtol=1e-7, atol=1e-9)



# yscv module, the same torch.nn module: PyTorch's constructor arguments
TORCH_ACTIVATION_MODULES = [
    (lambda: nn.ELU(), lambda t: t.nn.ELU()),
    (lambda: nn.ELU(alpha=0.4, inplace=True), lambda t: t.nn.ELU(alpha=0.4)),
    (lambda: nn.SELU(), lambda t: t.nn.SELU()),
    (lambda: nn.CELU(alpha=1.5), lambda t: t.nn.CELU(alpha=1.5)),
    (lambda: nn.Hardtanh(), lambda t: t.nn.Hardtanh()),
    (lambda: nn.Hardtanh(min_val=-0.5, max_val=2.0), lambda t: t.nn.Hardtanh(-0.5, 2.0)),
    (lambda: nn.ReLU6(inplace=True), lambda t: t.nn.ReLU6()),
    (lambda: nn.Hardsigmoid(), lambda t: t.nn.Hardsigmoid()),
    (lambda: nn.Hardswish(), lambda t: t.nn.Hardswish()),
    (lambda: nn.Softsign(), lambda t: t.nn.Softsign()),
    (lambda: nn.LogSigmoid(), lambda t: t.nn.LogSigmoid()),
    (lambda: nn.GLU(), lambda t: t.nn.GLU()),
    (lambda: nn.GLU(dim=1), lambda t: t.nn.GLU(dim=1)),
    (lambda: nn.ReLU(inplace=True), lambda t: t.nn.ReLU()),
    (lambda: nn.LeakyReLU(0.2, inplace=True), lambda t: t.nn.LeakyReLU(0.2)),
    (lambda: nn.Softplus(beta=2.0, threshold=1.0), lambda t: t.nn.Softplus(beta=2.0, threshold=1.0)),
    (lambda: nn.Softmax(dim=1), lambda t: t.nn.Softmax(dim=1)),
    (lambda: nn.LogSoftmax(dim=0), lambda t: t.nn.LogSoftmax(dim=0)),
]


@pytest.mark.parametrize("k", range(len(TORCH_ACTIVATION_MODULES)),
                         ids=[f"{k}" for k in range(len(TORCH_ACTIVATION_MODULES))])
def test_activation_modules_match_torch_nn(k):
    """Values and input gradients equal torch.nn's module of the same name
    built with the same arguments (float64, one row per module and option)."""
    torch = pytest.importorskip("torch")
    make, make_torch = TORCH_ACTIVATION_MODULES[k]
    x = np.random.default_rng(k).uniform(-5.0, 7.0, (3, 4, 6))
    layer = make()
    g = yscv.Graph(np.float64)
    xn = g.variable(x)
    y = layer(g, xn)
    cot = np.random.default_rng(100 + k).standard_normal(g.value(y).shape)
    g.backward(y, grad=cot)
    xt = torch.tensor(x, requires_grad=True)
    yt = make_torch(torch)(xt)
    yt.backward(torch.tensor(cot))
    assert type(layer).__name__ == type(make_torch(torch)).__name__
    np.testing.assert_allclose(g.value(y), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    # hardsigmoid: PyTorch's float64 gradient multiplies by float32's 1/6
    np.testing.assert_allclose(g.grad(xn), xt.grad.numpy(), rtol=1e-7, atol=1e-14)


def test_activation_modules_reject_bad_arguments():
    for make, err, match in [
        (lambda: nn.CELU(alpha=0.0), ValueError, "CELU: alpha must not be 0"),
        (lambda: nn.ELU(alpha="1"), TypeError, "ELU: alpha"),
        (lambda: nn.Hardtanh(2.0, 1.0), ValueError, "Hardtanh: min_val=2.0 is greater"),
        (lambda: nn.ReLU6(inplace=1), TypeError, "ReLU6: inplace"),
        (lambda: nn.GLU(dim=1.0), TypeError, "GLU: dim"),
        (lambda: nn.Softplus(beta=0), ValueError, "Softplus: beta"),
        (lambda: nn.Softmax(dim="1"), TypeError, "Softmax: dim"),
    ]:
        with pytest.raises(err, match=match):
            make()
    g = yscv.Graph()
    with pytest.raises(yscv.ShapeError, match="glu: the length of axis 0"):
        nn.GLU(dim=0)(g, g.constant(np.ones((3, 2), np.float32)))
    assert len(g) == 1   # the constant only

def test_dropout_train_and_eval():
    drop = nn.Dropout(0.5)
    x = np.ones((200, 50), np.float32)
    g = yscv.Graph()
    y = g.value(drop(g, g.constant(x)))
    assert set(np.unique(y)) == {0.0, 2.0}
    assert 0.4 < (y == 0).mean() < 0.6
    drop.eval()
    xn = g.constant(x)
    assert drop(g, xn) == xn  # identity: no node, no seed drawn
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)


def test_dropout_masks_follow_manual_seed():
    def run():
        yscv.manual_seed(7)
        g = yscv.Graph()
        return g.value(nn.Dropout(0.3)(g, g.constant(np.ones((10, 10)))))
    np.testing.assert_array_equal(run(), run())


# --------------------------------------------------------- initialisation
def _within(arr, bound):
    assert np.all(np.abs(arr) <= bound + 1e-7)
    # U(-b, b): std b/sqrt(3); both ends reached for large tensors
    assert abs(arr.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.abs(arr).max() > 0.95 * bound


def test_default_initialisation_matches_pytorch_rules():
    yscv.manual_seed(0)
    lin = nn.Linear(400, 300)
    _within(lin.weight.data, 1 / math.sqrt(400))
    _within(lin.bias.data, 1 / math.sqrt(400))
    conv = nn.Conv2d(16, 64, 3, groups=2)  # fan_in = 8 * 9
    _within(conv.weight.data, 1 / math.sqrt(72))
    _within(conv.bias.data, 1 / math.sqrt(72))
    ct = nn.ConvTranspose2d(8, 40, 3)  # torch: fan_in from weight.size(1) = out_channels
    _within(ct.weight.data, 1 / math.sqrt(40 * 9))
    dw = nn.DepthwiseConv2d(32, 3, multiplier=4)
    _within(dw.weight.data, 1 / math.sqrt(9))
    emb = nn.Embedding(1000, 64)
    assert abs(emb.weight.data.mean()) < 0.01 and abs(emb.weight.data.std() - 1) < 0.01
    lstm = nn.LSTM(10, 50)
    for p in lstm.parameters():
        _within(p.data, 1 / math.sqrt(50))
    mha = nn.MultiHeadAttention(64, 4)
    _within(mha.in_proj_weight.data, math.sqrt(6 / (64 + 192)))
    np.testing.assert_array_equal(mha.in_proj_bias.data, 0)
    np.testing.assert_array_equal(mha.out_proj.bias.data, 0)
    _within(mha.out_proj.weight.data, 1 / math.sqrt(64))
    for norm in (nn.BatchNorm(7), nn.LayerNorm(7), nn.GroupNorm(1, 7)):
        np.testing.assert_array_equal(norm.weight.data, 1)
        np.testing.assert_array_equal(norm.bias.data, 0)


def test_initialisation_matches_torch_statistics():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    t = torch.nn.Linear(400, 300).weight.detach().numpy()
    ours = nn.Linear(400, 300).weight.data
    assert abs(t.max() - ours.max()) < 1e-3 and abs(t.std() - ours.std()) < 1e-3


def test_initialisation_draws_from_library_generator():
    yscv.manual_seed(5)
    a = nn.Sequential(nn.Linear(3, 4), nn.Conv2d(2, 3, 3), nn.GRU(2, 3))
    yscv.manual_seed(5)
    b = nn.Sequential(nn.Linear(3, 4), nn.Conv2d(2, 3, 3), nn.GRU(2, 3))
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb
        np.testing.assert_array_equal(va, vb)


# ------------------------------------------------------------ state dicts
def _model():
    return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm(3), nn.ReLU(), nn.Linear(3, 2))


def test_state_dict_names_and_copies():
    m = _model()
    sd = m.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                        "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"]
    sd["0.weight"][...] = 99
    assert not np.any(m[0].weight.data == 99)


def test_load_state_dict_round_trip_in_place():
    a, b = _model(), _model()
    w = b[0].weight.data
    b.load_state_dict(a.state_dict())
    assert b[0].weight.data is w
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(va, vb)


def test_load_state_dict_errors_list_everything_and_load_nothing():
    m = _model()
    before = m.state_dict()
    sd = _model().state_dict()
    del sd["3.bias"]
    sd["extra.weight"] = np.zeros(2)
    sd["0.weight"] = np.zeros((3, 4))
    with pytest.raises(nn.StateDictError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert "missing key(s): '3.bias'" in msg
    assert "unexpected key(s): 'extra.weight'" in msg
    assert "size mismatch for '0.weight'" in msg and "(3, 4)" in msg and "(4, 3)" in msg
    assert info.value.missing_keys == ["3.bias"]
    assert info.value.unexpected_keys == ["extra.weight"]
    assert info.value.mismatched == [("0.weight", (4, 3), (3, 4))]
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, before[k])  # nothing half-loaded
    sd["0.weight"] = np.ones((4, 3))
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["3.bias"] and res.unexpected_keys == ["extra.weight"]
    np.testing.assert_array_equal(m[0].weight.data, 1)
    with pytest.raises(nn.StateDictError, match="bad value for '0.bias'"):
        m.load_state_dict({**m.state_dict(), "0.bias": np.array(["a", "b", "c"])})


def test_train_eval_and_traversal():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.1), nn.BatchNorm(2)))
    assert m.training and m[1][0].training
    assert m.eval() is m and not m[1][1].training
    m.train()
    assert all(mod.training for mod in m.modules())
    names = [n for n, _ in m.named_modules()]
    assert names == ["", "0", "1", "1.0", "1.1"]
    assert len(list(m.parameters())) == 4
    assert len(m) == 2 and isinstance(m[0:1], nn.Sequential) and len(m[0:1]) == 1
    m.append(nn.ReLU())
    assert len(m) == 3


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(3, 3)
    m = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(m.parameters())) == 2
    g = yscv.Graph()
    y = m(g, g.constant(_x(2, 3)))
    g.backward(g.sum(y))
    assert lin.weight.grad.shape == (3, 3)


def _tied(lib):
    """Two Linear layers sharing one weight, plus a Linear registered twice."""
    a, b, c = lib.Linear(3, 3), lib.Linear(3, 3), lib.Linear(3, 3)
    b.weight = a.weight
    return lib.Sequential(a, b, c, lib.ReLU(), c)


def test_shared_parameters_state_dict_keys_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    m, tm = _tied(nn), _tied(torch.nn)
    sd, tsd = m.state_dict(), tm.state_dict()
    assert list(sd) == list(tsd) == ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight",
                                     "2.bias", "4.weight", "4.bias"]
    assert sd["0.weight"] is sd["1.weight"] and sd["2.bias"] is sd["4.bias"]  # one copy each
    assert sd["0.weight"] is not m[0].weight.data
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in tm.named_parameters(remove_duplicate=False)]
    assert len(list(m.parameters())) == 5

    # loading: every key is copied in module order, the last one wins (PyTorch)
    vals = {k: np.full(v.shape, float(i), np.float32) for i, (k, v) in enumerate(sd.items())}
    m.load_state_dict(vals)
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in vals.items()})
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, tm.state_dict()[k].numpy(), err_msg=k)
    np.testing.assert_array_equal(m[0].weight.data, 2.0)  # from '1.weight'
    # strict loading needs both keys of a shared parameter, as PyTorch does
    del vals["1.weight"]
    with pytest.raises(nn.StateDictError, match="missing key.*'1.weight'"):
        m.load_state_dict(vals)
    with pytest.raises(RuntimeError, match="1.weight"):
        tm.load_state_dict({k: torch.from_numpy(v) for k, v in vals.items()})

    # a training checkpoint of a tied model round-trips
    path = str(tmp_path / "tied.safetensors")
    yscv.save_checkpoint(path, model=m, step=3)
    m2 = _tied(nn)
    assert yscv.load_checkpoint(path, model=m2)["step"] == 3
    assert m2[1].weight is m2[0].weight
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(m2.state_dict()[k], v, err_msg=k)


def test_call_without_graph_is_a_clear_error():
    with pytest.raises(TypeError, match=r"layer\(g, x\)"):
        nn.Linear(2, 2)(np.ones((1, 2)))


def test_graph_reuse_with_truncate_binds_once_and_sees_updates():
    yscv.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = optim.SGD(m.parameters(), lr=0.1)
    x, t = _x(16, 4), _x(16, 1)
    g = yscv.Graph()
    k = m.bind(g)
    assert k == 4
    losses, sizes = [], []
    for _ in range(5):
        g.truncate(k)
        loss = g.mse_loss(m(g, g.constant(x)), t)
        sizes.append(len(g))
        g.backward(loss)
        opt.step()
        opt.zero_grad()
        g.zero_grads()
        losses.append(float(g.value(loss)))
    assert len(set(sizes)) == 1  # no parameter re-bound per step
    # the same steps with a fresh graph per step give the same losses
    yscv.manual_seed(0)
    m2 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt2 = optim.SGD(m2.parameters(), lr=0.1)
    for want in losses:
        g2 = yscv.Graph()
        loss = g2.mse_loss(m2(g2, g2.constant(x)), t)
        g2.backward(loss)
        opt2.step()
        opt2.zero_grad()
        assert float(g2.value(loss)) == want
    assert losses[-1] < losses[0]


def test_frozen_parameters_get_no_gradient():
    lin = nn.Linear(3, 2)
    lin.bias.requires_grad = False
    g = yscv.Graph()
    g.backward(g.sum(lin(g, g.constant(_x(4, 3)))))
    assert lin.weight.grad is not None and lin.bias.grad is None
    lin.requires_grad_(False)
    g = yscv.Graph()
    y = lin(g, g.constant(_x(4, 3)))
    assert not g.requires_grad(y)


def test_to_float64_and_dtype_mismatch_error():
    m = _model()
    g64 = yscv.Graph(np.float64)
    with pytest.raises(TypeError, match="dtype"):
        m(g64, g64.constant(_x(5, 4)))
    m.to(np.float64)
    assert all(p.data.dtype == np.float64 for p in m.parameters())
    assert m[1].running_mean.dtype == np.float64 and m[1].num_batches_tracked.dtype == np.int64
    y = m(g64, g64.constant(_x(5, 4)))
    assert g64.value(y).dtype == np.float64


def test_bad_layer_arguments():
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(0, 3)
    with pytest.raises(ValueError, match="groups=3"):
        nn.Conv2d(4, 6, 3, groups=3)
    with pytest.raises(ValueError, match="num_heads=3"):
        nn.MultiHeadAttention(8, 3)
    with pytest.raises(ValueError, match="num_groups=4"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(2, 2, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="normalized_shape"):
        nn.LayerNorm((3, 4))
    with pytest.raises(TypeError, match="not a Module"):
        nn.Sequential(nn.ReLU(), "relu")


# --------------------------------------------- nn.utils gradient clipping
def _clip_setup(dtype, torch, scale=3.0):
    """Parameters with grads (one without) and their PyTorch twins."""
    rng = np.random.default_rng(11)
    shapes = [(3, 4), (5,), (2, 2, 2), (6,)]
    grads = [rng.standard_normal(s) * scale for s in shapes]
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    ps, ts = [], []
    for k, (s, gr) in enumerate(zip(shapes, grads)):
        p = nn.Parameter(np.zeros(s), dtype=dtype)
        t = torch.zeros(s, dtype=tdt, requires_grad=True)
        if k != 1:  # params[1] has no grad: skipped, as PyTorch
            p.grad = gr.astype(dtype)
            t.grad = torch.tensor(gr, dtype=tdt)
        ps.append(p)
        ts.append(t)
    return ps, ts


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])  # clipped, and left alone
def test_clip_grad_norm_matches_torch(dtype, norm_type, max_norm):
    torch = pytest.importorskip("torch")
    ps, ts = _clip_setup(dtype, torch)
    arrays = [p.grad for p in ps]
    total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    ref = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type=norm_type)
    assert isinstance(total, float)
    tol = dict(rtol=2e-6, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-15)
    assert total == pytest.approx(ref.item(), rel=tol["rtol"])
    assert ps[1].grad is None
    for p, t, a in zip(ps, ts, arrays):
        if p.grad is not None:
            assert p.grad is a and p.grad.dtype == np.dtype(dtype)  # in place
            np.testing.assert_allclose(p.grad, t.grad.numpy(), **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_value_matches_torch(dtype):
    torch = pytest.importorskip("torch")
    ps, ts = _clip_setup(dtype, torch)
    arrays = [p.grad for p in ps]
    assert nn.utils.clip_grad_value_(ps, 1.25) is None
    torch.nn.utils.clip_grad_value_(ts, 1.25)
    for p, t, a in zip(ps, ts, arrays):
        if p.grad is not None:
            assert p.grad is a and p.grad.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(p.grad, t.grad.numpy())


def test_clip_grad_norm_single_parameter_generator_and_no_grads():
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.array([3.0, 4.0]))
    p.grad = np.array([3.0, 4.0], dtype=np.float32)
    t = torch.tensor([3.0, 4.0], requires_grad=True)
    t.grad = torch.tensor([3.0, 4.0])
    assert nn.utils.clip_grad_norm_(p, 1.0) == pytest.approx(
        torch.nn.utils.clip_grad_norm_(t, 1.0).item())
    np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-6)
    model = _model()
    assert nn.utils.clip_grad_norm_(model.parameters(), 1.0) == 0.0  # no grads yet
    # a generator of parameters, after a real backward
    g = yscv.Graph()
    g.backward(g.sum(model(g, g.constant(_x(5, 4) * 50.0))))
    total = nn.utils.clip_grad_norm_((q for q in model.parameters()), 0.1)
    after = np.sqrt(sum(float(np.sum(q.grad.astype(np.float64) ** 2))
                        for q in model.parameters() if q.grad is not None))
    assert total > 0.1 and after == pytest.approx(0.1, rel=1e-4)


def test_clip_grad_norm_nonfinite():
    torch = pytest.importorskip("torch")
    p = nn.Parameter(np.zeros(3))
    p.grad = np.array([1.0, np.inf, 2.0], dtype=np.float32)
    with pytest.raises(ValueError, match="clip_grad_norm_.*inf"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(p.grad, [1.0, np.inf, 2.0])  # unchanged
    t = torch.zeros(3, requires_grad=True)
    t.grad = torch.tensor([1.0, np.inf, 2.0])
    with np.errstate(invalid="ignore"):
        total = nn.utils.clip_grad_norm_([p], 1.0)
    ref = torch.nn.utils.clip_grad_norm_([t], 1.0)
    assert total == ref.item() == float("inf")
    np.testing.assert_array_equal(p.grad, t.grad.numpy())  # as PyTorch: 0 and NaN


def test_clip_grad_bad_arguments():
    p = nn.Parameter(np.zeros(2))
    p.grad = np.array([5.0, -5.0], dtype=np.float32)
    with pytest.raises(ValueError, match="max_norm"):
        nn.utils.clip_grad_norm_([p], -1.0)
    with pytest.raises(TypeError, match="max_norm"):
        nn.utils.clip_grad_norm_([p], None)
    with pytest.raises(ValueError, match="norm_type"):
        nn.utils.clip_grad_norm_([p], 1.0, norm_type=-2.0)
    with pytest.raises(TypeError, match="norm_type"):
        nn.utils.clip_grad_norm_([p], 1.0, norm_type="fro")
    with pytest.raises(TypeError, match=r"params\[1\]"):
        nn.utils.clip_grad_norm_([p, np.ones(2)], 1.0)
    with pytest.raises(TypeError, match="params"):
        nn.utils.clip_grad_value_(3, 1.0)
    with pytest.raises(ValueError, match="clip_value"):
        nn.utils.clip_grad_value_([p], -0.5)
    with pytest.raises(TypeError, match="clip_value"):
        nn.utils.clip_grad_value_([p], "1")
    ro = nn.Parameter(np.zeros(2))
    ro.grad = np.ones(2, dtype=np.float32)
    ro.grad.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        nn.utils.clip_grad_norm_([p, ro], 0.1)
    np.testing.assert_array_equal(p.grad, [5.0, -5.0])  # nothing changed before the error


def test_graph_clip_grad_norm_on_bound_parameters_clips_p_grad():
    # issue 12 item 2: g.clip_grad_norm on g.param nodes left every p.grad untouched
    yscv.manual_seed(4)
    model = _model()
    g = yscv.Graph()
    g.backward(g.sum(model(g, g.constant(_x(5, 4) * 50.0))))
    params = [q for q in model.parameters() if q.grad is not None]
    before = np.sqrt(sum(float(np.sum(q.grad.astype(np.float64) ** 2)) for q in params))
    total = g.clip_grad_norm([g.param(q) for q in params], 0.1)
    after = np.sqrt(sum(float(np.sum(q.grad.astype(np.float64) ** 2)) for q in params))
    assert total == pytest.approx(before, rel=1e-6) and before > 0.1
    assert after == pytest.approx(0.1, rel=1e-4)


def test_clip_grad_norm_inf_with_nan_matches_torch():
    torch = pytest.importorskip("torch")
    grads = [np.array([5.0, 1.0], np.float32), np.array([np.nan, 1.0], np.float32)]
    ps = [nn.Parameter(np.zeros(2)) for _ in grads]
    ts = [torch.zeros(2, requires_grad=True) for _ in grads]
    for p, t, gr in zip(ps, ts, grads):
        p.grad = gr.copy()
        t.grad = torch.tensor(gr)
    with np.errstate(invalid="ignore"):
        total = nn.utils.clip_grad_norm_(ps, 1.0, norm_type=float("inf"))
    ref = torch.nn.utils.clip_grad_norm_(ts, 1.0, norm_type=float("inf"))
    assert np.isnan(total) and np.isnan(ref.item())
    for p, t in zip(ps, ts):
        np.testing.assert_array_equal(p.grad, t.grad.numpy())
