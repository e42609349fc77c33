"""Transformer layers against torch.nn's: the same weights (copied with
``load_state_dict(layout="torch")``) give the same outputs in eval mode for
every option and mask kind, and the same gradients."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402

E, H, FF, B, S, T = 8, 2, 16, 3, 5, 4
RNG = np.random.default_rng(7)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _bool_mask(sq, sk, lead=()):
    m = RNG.random(lead + (sq, sk)) < 0.4
    m[..., 0] = False  # key 0 always attended: no row is fully blocked (PyTorch: NaN)
    return m


def _float_mask(sq, sk, lead=()):
    m = RNG.standard_normal(lead + (sq, sk)).astype(np.float32)
    m[_bool_mask(sq, sk, lead)] = -np.inf
    return m


def _pad(b, s, kind):
    p = np.zeros((b, s), bool)
    p[0, -1] = True
    p[1, 1:3] = True
    if kind == "float":
        return np.where(p, -np.inf, 0.5 * RNG.standard_normal((b, s))).astype(np.float32)
    return p


def _causal(s):
    return np.triu(np.full((s, s), -np.inf, np.float32), 1)


def _t(a):
    return None if a is None else torch.from_numpy(np.ascontiguousarray(a))


def _pair(cls_name, **kw):
    """A torch layer and the yscv one with its weights, both in eval mode."""
    torch.manual_seed(0)
    act_t = kw.pop("activation_t", None)
    t = getattr(torch.nn, cls_name)(E, H, FF, **kw, **({"activation": act_t} if act_t else {}))
    y_kw = dict(kw)
    if act_t is not None:
        y_kw["activation"] = nn.GELU(approximate="tanh")
    y = getattr(nn, cls_name)(E, H, FF, **y_kw)
    y.load_state_dict(t.state_dict(), layout="torch")
    return t.eval(), y.eval()


def _seq(x, batch_first):
    """[B, S, E] data as the layer's input layout."""
    return x if batch_first else np.ascontiguousarray(x.transpose(1, 0, 2))


ENC_MASKS = ["none", "bool", "float", "bool3d", "pad_bool", "pad_float", "bool+pad",
             "float+pad_bool", "causal_hint", "causal_hint+pad"]


def _enc_masks(kind):
    mask = pad = None
    causal = False
    if kind.startswith("bool3d"):
        mask = _bool_mask(S, S, (B * H,))
    elif kind.startswith("bool"):
        mask = _bool_mask(S, S)
    elif kind.startswith("float"):
        mask = _float_mask(S, S)
    elif kind.startswith("causal_hint"):
        mask, causal = _causal(S), True
    if "pad_bool" in kind or kind.endswith("+pad"):
        pad = _pad(B, S, "bool")
    elif "pad_float" in kind:
        pad = _pad(B, S, "float")
    return mask, pad, causal


@pytest.mark.parametrize("kind", ENC_MASKS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch_for_each_mask(kind, batch_first, norm_first):
    t, y = _pair("TransformerEncoderLayer", batch_first=batch_first, norm_first=norm_first)
    x = _seq(_x(B, S, E), batch_first)
    mask, pad, causal = _enc_masks(kind)
    # grad enabled (not no_grad): torch's inference fast path returned NaN with -inf float masks
    with torch.enable_grad():
        want = t(_t(x), src_mask=_t(mask), src_key_padding_mask=_t(pad),
                 is_causal=causal).detach().numpy()
    g = yscv.Graph()
    got = g.value(y(g, g.constant(x), src_mask=mask, src_key_padding_mask=pad, is_causal=causal))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("activation", ["relu", "gelu", "callable"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_encoder_layer_activations_and_bias_match_torch(activation, norm_first, bias):
    kw = dict(batch_first=True, norm_first=norm_first, bias=bias, layer_norm_eps=1e-4)
    if activation == "callable":
        kw["activation_t"] = torch.nn.GELU(approximate="tanh")
    else:
        kw["activation"] = activation
    t, y = _pair("TransformerEncoderLayer", **kw)
    x = _x(B, S, E)
    with torch.enable_grad():
        want = t(_t(x), src_mask=_t(_causal(S))).detach().numpy()
    g = yscv.Graph()
    got = g.value(y(g, x, src_mask=_causal(S)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    assert list(y.state_dict(layout="torch")) == list(t.state_dict())


def test_encoder_layer_unbatched_matches_torch():
    t, y = _pair("TransformerEncoderLayer", batch_first=False)
    x = _x(S, E)
    mask = _bool_mask(S, S, (H,))
    pad = np.array([False, False, True, False, True])
    with torch.enable_grad():
        want = t(_t(x), src_mask=_t(mask), src_key_padding_mask=_t(pad)).detach().numpy()
    g = yscv.Graph()
    got = g.value(y(g, x, src_mask=mask, src_key_padding_mask=pad))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


DEC_MASKS = ["none", "tgt_bool", "tgt_float", "mem_bool", "mem_float", "mem_bool3d",
             "tgt_pad_bool", "mem_pad_bool", "mem_pad_float", "all_bool", "causal_hint"]


@pytest.mark.parametrize("kind", DEC_MASKS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch_for_each_mask(kind, batch_first, norm_first):
    t, y = _pair("TransformerDecoderLayer", batch_first=batch_first, norm_first=norm_first)
    tgt = _seq(_x(B, T, E), batch_first)
    mem = _seq(_x(B, S, E), batch_first)
    kw = {}
    if kind in ("tgt_bool", "all_bool"):
        kw["tgt_mask"] = _bool_mask(T, T)
    if kind == "tgt_float":
        kw["tgt_mask"] = _float_mask(T, T)
    if kind in ("mem_bool", "all_bool"):
        kw["memory_mask"] = _bool_mask(T, S)
    if kind == "mem_float":
        kw["memory_mask"] = _float_mask(T, S)
    if kind == "mem_bool3d":
        kw["memory_mask"] = _bool_mask(T, S, (B * H,))
    if kind in ("tgt_pad_bool", "all_bool"):
        kw["tgt_key_padding_mask"] = _pad(B, T, "bool")
    if kind in ("mem_pad_bool", "all_bool"):
        kw["memory_key_padding_mask"] = _pad(B, S, "bool")
    if kind == "mem_pad_float":
        kw["memory_key_padding_mask"] = _pad(B, S, "float")
    if kind == "causal_hint":
        kw.update(tgt_mask=_causal(T), tgt_is_causal=True)
    with torch.enable_grad():
        want = t(_t(tgt), _t(mem), **{k: (_t(v) if isinstance(v, np.ndarray) else v)
                                      for k, v in kw.items()}).detach().numpy()
    g = yscv.Graph()
    got = g.value(y(g, g.constant(tgt), g.constant(mem), **kw))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_torch(activation, batch_first, norm_first):
    kw = dict(dim_feedforward=FF, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    torch.manual_seed(1)
    tenc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, **kw), 2,
                                       norm=torch.nn.LayerNorm(E), enable_nested_tensor=False)
    tdec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, **kw), 2,
                                       norm=torch.nn.LayerNorm(E))
    yenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **kw), 2, norm=nn.LayerNorm(E))
    ydec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, **kw), 2, norm=nn.LayerNorm(E))
    assert list(yenc.state_dict(layout="torch")) == list(tenc.state_dict())
    assert list(ydec.state_dict(layout="torch")) == list(tdec.state_dict())
    yenc.load_state_dict(tenc.state_dict(), layout="torch")
    ydec.load_state_dict(tdec.state_dict(), layout="torch")
    tenc.eval(), tdec.eval(), yenc.eval(), ydec.eval()
    src = _seq(_x(B, S, E), batch_first)
    tgt = _seq(_x(B, T, E), batch_first)
    spad, tpad = _pad(B, S, "bool"), _pad(B, T, "bool")
    with torch.enable_grad():
        mem_t = tenc(_t(src), src_key_padding_mask=_t(spad))
        want = tdec(_t(tgt), mem_t, tgt_mask=_t(_causal(T)), tgt_key_padding_mask=_t(tpad),
                    memory_key_padding_mask=_t(spad)).detach().numpy()
    g = yscv.Graph()
    mem = yenc(g, src, src_key_padding_mask=spad)
    np.testing.assert_allclose(g.value(mem), mem_t.detach().numpy(), rtol=1e-5, atol=2e-5)
    got = g.value(ydec(g, tgt, mem, tgt_mask=_causal(T), tgt_key_padding_mask=tpad,
                       memory_key_padding_mask=spad))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=3e-5)
    # the copies are independent, and the torch-layout state dict round-trips exactly
    assert yenc.layers[0].linear1.weight is not yenc.layers[1].linear1.weight
    for k, v in tdec.state_dict().items():
        np.testing.assert_array_equal(ydec.state_dict(layout="torch")[k], v.numpy())


def test_gradients_match_torch():
    """Post-norm encoder + decoder layer, masks, eval mode: input and every
    parameter gradient equal torch's (yscv weights input-major: transposed)."""
    torch.manual_seed(2)
    kw = dict(dim_feedforward=FF, batch_first=True, activation="gelu")
    tenc = torch.nn.TransformerEncoderLayer(E, H, **kw).eval()
    tdec = torch.nn.TransformerDecoderLayer(E, H, **kw).eval()
    yenc = nn.TransformerEncoderLayer(E, H, **kw).eval()
    ydec = nn.TransformerDecoderLayer(E, H, **kw).eval()
    yenc.load_state_dict(tenc.state_dict(), layout="torch")
    ydec.load_state_dict(tdec.state_dict(), layout="torch")
    src, tgt, w = _x(B, S, E), _x(B, T, E), _x(B, T, E)
    spad, smask = _pad(B, S, "bool"), _bool_mask(S, S)
    src_t = torch.tensor(src, requires_grad=True)
    tgt_t = torch.tensor(tgt, requires_grad=True)
    out_t = tdec(tgt_t, tenc(src_t, src_mask=_t(smask), src_key_padding_mask=_t(spad)),
                 tgt_mask=_t(_causal(T)), memory_key_padding_mask=_t(spad))
    (out_t * _t(w)).sum().backward()
    g = yscv.Graph()
    xs, xt = g.variable(src), g.variable(tgt)
    out = ydec(g, xt, yenc(g, xs, src_mask=smask, src_key_padding_mask=spad),
               tgt_mask=_causal(T), memory_key_padding_mask=spad)
    g.backward(g.sum(g.mul(out, w)))
    np.testing.assert_allclose(g.grad(xs), src_t.grad.detach().numpy(), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(g.grad(xt), tgt_t.grad.detach().numpy(), rtol=1e-4, atol=2e-5)
    for ymod, tmod in ((yenc, tenc), (ydec, tdec)):
        tgrads = {n: p.grad.numpy() for n, p in tmod.named_parameters()}
        ygrads = dict(ymod.named_parameters())
        assert sorted(ygrads) == sorted(tgrads)
        for n, p in ygrads.items():
            want = tgrads[n].T if p.grad.ndim == 2 else tgrads[n]
            np.testing.assert_allclose(p.grad, want, rtol=1e-4, atol=2e-5, err_msg=n)


def test_dropout_in_training_mode_is_seeded():
    layer = nn.TransformerDecoderLayer(E, H, FF, dropout=0.3, batch_first=True)
    tgt, mem = _x(B, T, E), _x(B, S, E)

    def run(seed):
        yscv.manual_seed(seed)
        g = yscv.Graph()
        return g.value(layer(g, tgt, mem, tgt_mask=_causal(T), tgt_is_causal=True))

    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    layer.eval()
    g = yscv.Graph()
    ev = g.value(layer(g, tgt, mem, tgt_mask=_causal(T)))
    assert not np.allclose(a, ev)
    assert np.isfinite(a).all()
    # dropout=0 in training mode equals eval mode (nothing random remains)
    quiet = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True)
    quiet.load_state_dict(layer.state_dict())
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(quiet(g, tgt, mem, tgt_mask=_causal(T))), ev,
                               rtol=1e-6, atol=1e-6)


def test_attention_dropout_weights_only_in_training():
    """MultiHeadAttention(dropout=p): training drops attention weights (rows
    no longer sum to one), eval is the fused op."""
    m = nn.MultiHeadAttention(E, H, dropout=0.5)
    x = _x(B, S, E)
    yscv.manual_seed(0)
    g = yscv.Graph()
    train = g.value(m(g, x))
    m.eval()
    g = yscv.Graph()
    ev = g.value(m(g, x))
    assert not np.allclose(train, ev)
    m.dropout = 1e-30  # the unfused path with nothing dropped equals the fused op
    m.train()
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(m(g, x, causal=True, key_padding_mask=_pad(B, S, "bool"))),
                               g.value(m.eval()(g, x, causal=True,
                                                key_padding_mask=_pad(B, S, "bool"))),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="dropout"):
        nn.MultiHeadAttention(E, H, dropout=1.5)


def test_bad_arguments_raise_and_leave_the_graph_unchanged():
    layer = nn.TransformerEncoderLayer(E, H, FF, batch_first=True)
    x = _x(B, S, E)
    g = yscv.Graph()
    xn = g.constant(x)
    n = len(g)
    with pytest.raises(TypeError, match="src_mask"):
        layer(g, xn, src_mask=np.zeros((S, S), np.int64))
    with pytest.raises(ValueError, match=r"src_mask must have shape"):
        layer(g, xn, src_mask=np.zeros((S, S + 1), bool))
    with pytest.raises(ValueError, match="src_key_padding_mask"):
        layer(g, xn, src_key_padding_mask=np.zeros((S, B), bool))
    with pytest.raises(ValueError, match="is_causal"):
        layer(g, xn, is_causal=True)
    with pytest.raises(ValueError, match="d_model"):
        layer(g, _x(B, S, E + 1))
    assert len(g) == n
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")
    with pytest.raises(ValueError, match="nhead"):
        nn.TransformerDecoderLayer(E, 3)
    with pytest.raises(TypeError, match="TransformerEncoder"):
        nn.TransformerEncoder("layer", 2)
    dec = nn.TransformerDecoderLayer(E, H, FF, batch_first=True)
    with pytest.raises(ValueError, match="batch size"):
        dec(g, xn, _x(B + 1, S, E))
    assert len(g) == n


def test_encoder_layer_exports_to_onnx(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    layer = nn.TransformerEncoderLayer(E, H, FF, batch_first=True, norm_first=True).eval()

    class Causal(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, g, x):
            return self.layer(g, x, src_mask=np.triu(np.ones((S, S), bool), 1))

    model = Causal().eval()
    x = _x(B, S, E)
    path = str(tmp_path / "layer.onnx")
    yscv.onnx.export(model, (x,), path)
    sess = ort.InferenceSession(path)
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    g = yscv.Graph()
    np.testing.assert_allclose(got, g.value(model(g, x)), rtol=1e-5, atol=1e-5)
