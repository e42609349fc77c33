"""nn.Transformer (the encoder-decoder) against torch.nn.Transformer: the same
state-dict keys, torch's weights loaded with layout="torch" give the same
outputs; generate_square_subsequent_mask equals torch's."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:torch")

E, H, FF, B, S, T = 8, 2, 16, 3, 5, 4
RNG = np.random.default_rng(21)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _t(a):
    return None if a is None else torch.from_numpy(np.ascontiguousarray(a))


@pytest.mark.parametrize("sz", [1, 4, 7])
def test_generate_square_subsequent_mask_equals_torch(sz):
    got = nn.Transformer.generate_square_subsequent_mask(sz)
    want = torch.nn.Transformer.generate_square_subsequent_mask(sz).numpy()
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (sz, sz)
    np.testing.assert_array_equal(got, want)
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="generate_square_subsequent_mask: sz must be a positive"):
        nn.Transformer.generate_square_subsequent_mask(0)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_loads_torch_weights_and_matches(batch_first, norm_first, activation):
    kw = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=FF, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    torch.manual_seed(2)
    tm = torch.nn.Transformer(**kw).eval()
    ym = nn.Transformer(**kw).eval()
    assert list(ym.state_dict(layout="torch")) == list(tm.state_dict())
    ym.load_state_dict(tm.state_dict(), layout="torch")
    src, tgt = _x(B, S, E), _x(B, T, E)
    if not batch_first:
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    tmask = nn.Transformer.generate_square_subsequent_mask(T)
    spad = np.zeros((B, S), bool)
    spad[0, -1] = spad[1, 2:] = True
    with torch.no_grad():
        want = tm(_t(src), _t(tgt), tgt_mask=_t(tmask), src_key_padding_mask=_t(spad),
                  memory_key_padding_mask=_t(spad)).numpy()
    g = yscv.Graph()
    out = ym(g, g.constant(src), g.constant(tgt), tgt_mask=tmask, src_key_padding_mask=spad,
             memory_key_padding_mask=spad)
    assert out.shape == want.shape
    np.testing.assert_allclose(g.value(out), want, rtol=1e-5, atol=3e-5)
    for k, v in ym.state_dict(layout="torch").items():
        np.testing.assert_array_equal(v, tm.state_dict()[k].numpy(), err_msg=k)


def test_transformer_unbatched_custom_parts_and_init():
    torch.manual_seed(3)
    tm = torch.nn.Transformer(E, H, 1, 1, FF).eval()
    ym = nn.Transformer(E, H, 1, 1, FF).eval()
    ym.load_state_dict(tm.state_dict(), layout="torch")
    src, tgt = _x(S, E), _x(T, E)
    with torch.no_grad():
        want = tm(_t(src), _t(tgt)).numpy()
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(ym(g, src, tgt)), want, rtol=1e-5, atol=3e-5)
    # every weight matrix Xavier-uniform, as torch's _reset_parameters: within the bound
    yscv.manual_seed(0)
    fresh = nn.Transformer(E, H, 1, 1, FF)
    w = fresh.encoder.layers[0].linear1.weight.data          # [E, FF]
    bound = np.sqrt(6.0 / (E + FF))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF), 1)
    custom = nn.Transformer(E, H, dim_feedforward=FF, custom_encoder=enc)
    assert custom.encoder is enc
    with pytest.raises(TypeError, match="Transformer: custom_decoder must be a Module"):
        nn.Transformer(E, H, custom_decoder=3)


def test_transformer_bad_inputs_leave_the_graph_unchanged():
    ym = nn.Transformer(E, H, 1, 1, FF)
    g = yscv.Graph()
    src, tgt = g.constant(_x(S, B, E)), g.constant(_x(T, B + 1, E))
    n = len(g)
    with pytest.raises(ValueError, match=r"Transformer: src and tgt must have the same batch "
                       r"size .* \(5, 3, 8\) and \(4, 4, 8\)"):
        ym(g, src, tgt)
    with pytest.raises(ValueError, match=r"feature size of src and tgt must be d_model=8"):
        ym(g, src, g.constant(_x(T, B, E + 1)))
    assert len(g) == n + 1
