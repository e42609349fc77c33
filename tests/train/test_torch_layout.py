"""PyTorch weights in yscv and back: ``load_state_dict(sd, layout="torch")``
and ``state_dict(layout="torch")``.

Each case builds a PyTorch module and the equivalent yscv module, writes
torch's state dict to a safetensors file with ``safetensors.torch``, reads
it back with ``safetensors.numpy`` into the yscv module, and compares the
outputs on the same input (NCHW vs NHWC transposed in the test) to float32
rounding; then the yscv module's torch-layout state dict loads into a fresh
torch module and must reproduce torch's state dict exactly.
"""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")
st_numpy = pytest.importorskip("safetensors.numpy")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
from yscv.nn import torch_layout  # noqa: E402

RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _cl(x):
    """Channels-first (torch) -> channels-last (yscv)."""
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


def _cf(y):
    """Channels-last -> channels-first."""
    return np.moveaxis(y, -1, 1)


def _randomise(tm):
    """Non-default values everywhere (biases, norm scales, running stats)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, t in tm.state_dict().items():
            if t.dtype.is_floating_point:
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5 if "var" in name
                        else torch.randn(t.shape, generator=gen) * 0.5)
            else:
                t.fill_(7)
    return tm


def _through_file(tm, tmp_path):
    path = str(tmp_path / "torch.safetensors")
    st_torch.save_file({k: v.contiguous() for k, v in tm.state_dict().items()}, path)
    return st_numpy.load_file(path)


def _run_torch(tm, x):
    with torch.no_grad():
        return tm(torch.from_numpy(x)).numpy()


def _run(m, x):
    g = yscv.Graph()
    return g.value(m(g, g.constant(x)))


def _rnn_out(m, x):
    g = yscv.Graph()
    out, state = m(g, g.constant(x))
    states = state if isinstance(state, tuple) else (state,)
    return [g.value(out)] + [g.value(s) for s in states]


def _rnn_out_torch(tm, x):
    with torch.no_grad():
        out, state = tm(torch.from_numpy(x))
    states = state if isinstance(state, tuple) else (state,)
    return [out.numpy()] + [s.numpy() for s in states]


def _mha_torch(tm, x):
    with torch.no_grad():
        t = torch.from_numpy(x)
        return tm(t, t, t, need_weights=False)[0].numpy()


# (id, torch module, yscv module, input in torch's layout, torch run, yscv run)
CASES = [
    ("linear", lambda: torch.nn.Linear(5, 3), lambda: nn.Linear(5, 3),
     lambda: _x(4, 5), _run_torch, _run),
    ("linear_no_bias_3d_input", lambda: torch.nn.Linear(5, 3, bias=False),
     lambda: nn.Linear(5, 3, bias=False), lambda: _x(2, 4, 5), _run_torch, _run),
    ("conv1d_groups", lambda: torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
     lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
     lambda: _x(2, 4, 9), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("conv2d", lambda: torch.nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=1, dilation=(2, 1),
                                       groups=2),
     lambda: nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=1, dilation=(2, 1), groups=2),
     lambda: _x(2, 4, 7, 6), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("conv3d_no_bias", lambda: torch.nn.Conv3d(2, 3, 2, bias=False),
     lambda: nn.Conv3d(2, 3, 2, bias=False),
     lambda: _x(1, 2, 3, 4, 4), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("conv_transpose2d", lambda: torch.nn.ConvTranspose2d(4, 3, (3, 2), stride=2, padding=1,
                                                          output_padding=1),
     lambda: nn.ConvTranspose2d(4, 3, (3, 2), stride=2, padding=1, output_padding=1),
     lambda: _x(2, 4, 5, 4), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("depthwise_conv2d", lambda: torch.nn.Conv2d(3, 6, 3, padding=1, groups=3),
     lambda: nn.DepthwiseConv2d(3, 3, multiplier=2, padding=1),
     lambda: _x(2, 3, 5, 6), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("batch_norm2d_eval", lambda: torch.nn.BatchNorm2d(5).eval(),
     lambda: nn.BatchNorm2d(5).eval(),
     lambda: _x(3, 5, 4, 4), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("batch_norm1d_eval", lambda: torch.nn.BatchNorm1d(5).eval(),
     lambda: nn.BatchNorm1d(5).eval(), lambda: _x(6, 5), _run_torch, _run),
    ("layer_norm", lambda: torch.nn.LayerNorm(6), lambda: nn.LayerNorm(6),
     lambda: _x(2, 3, 6), _run_torch, _run),
    ("group_norm", lambda: torch.nn.GroupNorm(2, 6), lambda: nn.GroupNorm(2, 6),
     lambda: _x(2, 6, 3, 3), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("instance_norm_affine", lambda: torch.nn.InstanceNorm2d(4, affine=True),
     lambda: nn.InstanceNorm(4, affine=True),
     lambda: _x(2, 4, 3, 5), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("prelu", lambda: torch.nn.PReLU(3), lambda: nn.PReLU(3),
     lambda: _x(2, 3, 4, 4), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("embedding", lambda: torch.nn.Embedding(10, 4), lambda: nn.Embedding(10, 4),
     lambda: RNG.integers(0, 10, (3, 5)),
     lambda tm, i: tm(torch.from_numpy(i)).detach().numpy(),
     lambda m, i: (lambda g: g.value(m(g, i)))(yscv.Graph())),
    ("rnn_relu_2layers_bidirectional",
     lambda: torch.nn.RNN(3, 4, num_layers=2, nonlinearity="relu", bidirectional=True),
     lambda: nn.RNN(3, 4, num_layers=2, nonlinearity="relu", bidirectional=True),
     lambda: _x(5, 2, 3), _rnn_out_torch, _rnn_out),
    ("lstm_2layers", lambda: torch.nn.LSTM(3, 4, num_layers=2),
     lambda: nn.LSTM(3, 4, num_layers=2), lambda: _x(5, 2, 3), _rnn_out_torch, _rnn_out),
    ("lstm_no_bias_unbatched", lambda: torch.nn.LSTM(3, 4, bias=False),
     lambda: nn.LSTM(3, 4, bias=False), lambda: _x(5, 3), _rnn_out_torch, _rnn_out),
    ("gru_bidirectional_batch_first",
     lambda: torch.nn.GRU(3, 4, bidirectional=True, batch_first=True),
     lambda: nn.GRU(3, 4, bidirectional=True, batch_first=True),
     lambda: _x(2, 5, 3), _rnn_out_torch, _rnn_out),
    ("multihead_attention", lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True),
     lambda: nn.MultiHeadAttention(8, 2), lambda: _x(2, 5, 8), _mha_torch, _run),
    ("sequential_nested",
     lambda: torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh()),
                                 torch.nn.LayerNorm(4), torch.nn.Linear(4, 2)),
     lambda: nn.Sequential(nn.Sequential(nn.Linear(5, 4), nn.Tanh()), nn.LayerNorm(4),
                           nn.Linear(4, 2)),
     lambda: _x(3, 5), _run_torch, _run),
]


CASES += [  # transposed 1-d and 3-d convolutions, 1-d and 3-d pools
    ("conv_transpose1d_groups_dilation",
     lambda: torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                      dilation=2),
     lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                dilation=2),
     lambda: _x(2, 4, 5), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("conv_transpose3d_no_bias",
     lambda: torch.nn.ConvTranspose3d(2, 3, (2, 3, 2), stride=(2, 1, 1), padding=(0, 1, 0),
                                      bias=False),
     lambda: nn.ConvTranspose3d(2, 3, (2, 3, 2), stride=(2, 1, 1), padding=(0, 1, 0),
                                bias=False),
     lambda: _x(1, 2, 3, 4, 3), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("max_pool1d", lambda: torch.nn.MaxPool1d(3, 2, 1), lambda: nn.MaxPool1d(3, 2, 1),
     lambda: _x(2, 3, 9), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("avg_pool1d_exclude_pad", lambda: torch.nn.AvgPool1d(3, 2, 1, count_include_pad=False),
     lambda: nn.AvgPool1d(3, 2, 1, count_include_pad=False),
     lambda: _x(2, 3, 9), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("adaptive_avg_pool1d", lambda: torch.nn.AdaptiveAvgPool1d(4),
     lambda: nn.AdaptiveAvgPool1d(4), lambda: _x(2, 3, 9), _run_torch,
     lambda m, x: _cf(_run(m, _cl(x)))),
    ("max_pool3d", lambda: torch.nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)),
     lambda: nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)),
     lambda: _x(2, 3, 4, 5, 4), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
    ("avg_pool3d", lambda: torch.nn.AvgPool3d(2, stride=1, padding=1),
     lambda: nn.AvgPool3d(2, stride=1, padding=1),
     lambda: _x(2, 3, 4, 3, 4), _run_torch, lambda m, x: _cf(_run(m, _cl(x)))),
]


def test_conv_transpose_1d_3d_initialise_like_pytorch():
    """Weights in PyTorch's layout and uniform bound 1/sqrt(fan_in), fan_in =
    Cout/groups * prod(K) (torch's fan of its weight's second axis)."""
    for ours, theirs in ((nn.ConvTranspose1d(8, 12, 5, groups=4),
                          torch.nn.ConvTranspose1d(8, 12, 5, groups=4)),
                         (nn.ConvTranspose3d(4, 6, 3), torch.nn.ConvTranspose3d(4, 6, 3))):
        w = ours.weight.data
        tw = theirs.weight.detach().numpy()
        assert w.shape == tuple(np.moveaxis(tw, (0, 1), (-1, -2)).shape)
        bound = 1 / np.sqrt(tw.shape[1] * np.prod(tw.shape[2:]))
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
        assert np.abs(ours.bias.data).max() <= bound


def test_pool_and_conv_transpose_modules_refuse_options_they_lack():
    with pytest.raises(ValueError, match="MaxPool1d: ceil_mode=True is not supported"):
        nn.MaxPool1d(2, ceil_mode=True)
    with pytest.raises(ValueError, match="MaxPool3d: dilation=2"):
        nn.MaxPool3d(2, dilation=2)
    with pytest.raises(ValueError, match="AvgPool3d: divisor_override=3"):
        nn.AvgPool3d(2, divisor_override=3)
    with pytest.raises(ValueError, match="ConvTranspose3d: padding_mode='reflect'"):
        nn.ConvTranspose3d(2, 2, 2, padding_mode="reflect")
    with pytest.raises(ValueError, match="ConvTranspose1d: groups=2 must divide"):
        nn.ConvTranspose1d(3, 4, 2, groups=2)


def _assert_outputs_close(ours, theirs):
    if isinstance(theirs, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_torch_weights_load_and_round_trip(case, tmp_path):
    _, make_torch, make_ours, make_x, run_torch, run_ours = case
    torch.manual_seed(0)
    tm = _randomise(make_torch())
    ours = make_ours()
    sd = _through_file(tm, tmp_path)
    res = ours.load_state_dict(sd, layout="torch")
    assert res.missing_keys == [] and res.unexpected_keys == []
    x = make_x()
    _assert_outputs_close(run_ours(ours, x), run_torch(tm, x))

    # yscv -> torch: a fresh torch module gets exactly torch's original state
    back = ours.state_dict(layout="torch")
    assert list(back) == list(tm.state_dict())
    assert all(isinstance(v, np.ndarray) and v.flags.c_contiguous for v in back.values())
    fresh = make_torch()
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()})
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[k].numpy(), v.numpy(), err_msg=k)
    # and back into yscv, straight from torch tensors
    again = make_ours()
    again.load_state_dict(fresh.state_dict(), layout="torch")
    for (k, a), (_, b) in zip(ours.state_dict().items(), again.state_dict().items()):
        np.testing.assert_array_equal(a, b, err_msg=k)


def test_batch_norm_training_mode_updates_match_after_loading(tmp_path):
    tm = _randomise(torch.nn.BatchNorm2d(3)).train()
    ours = nn.BatchNorm2d(3)
    ours.load_state_dict(_through_file(tm, tmp_path), layout="torch")
    x = _x(4, 3, 5, 5)
    np.testing.assert_allclose(_cf(_run(ours, _cl(x))), _run_torch(tm, x), rtol=1e-4, atol=2e-5)
    for k, v in ours.state_dict(layout="torch").items():
        np.testing.assert_allclose(v, tm.state_dict()[k].numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)


# ------------------------------------------------------ a small CNN end to end
def _torch_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(6, 4, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 3, 5))


def _yscv_cnn():
    return nn.Sequential(
        nn.Conv2d(2, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(6, 4, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(4 * 4 * 3, 5))


def test_small_cnn_end_to_end_with_flatten(tmp_path):
    torch.manual_seed(3)
    tm = _randomise(_torch_cnn()).eval()
    sd = _through_file(tm, tmp_path)
    ours = _yscv_cnn().eval()
    flat = {"7": (4, 4, 3)}  # the Linear reads torch's [N, 4, 4, 3] flattened (C, H, W)
    ours.load_state_dict(sd, layout="torch", flatten_from=flat)
    x = _x(3, 2, 8, 6)
    want = _run_torch(tm, x)
    np.testing.assert_allclose(_run(ours, _cl(x)), want, rtol=1e-4, atol=2e-5)
    # without flatten_from: the Conv2d at '4' tells C=4, so S = 48 / 4 (the same load)
    naive = _yscv_cnn().eval()
    naive.load_state_dict(sd, layout="torch")
    np.testing.assert_array_equal(_run(naive, _cl(x)), _run(ours, _cl(x)))
    for k, v in naive.state_dict(layout="torch").items():
        np.testing.assert_array_equal(v, tm.state_dict()[k].numpy(), err_msg=k)
    # round trip through torch
    fresh = _torch_cnn().eval()
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in
                           ours.state_dict(layout="torch", flatten_from=flat).items()})
    np.testing.assert_allclose(_run_torch(fresh, x), want, rtol=1e-6, atol=1e-7)


def _load_and_compare(tm, ours, x, tmp_path, to_ours=_cl, **kw):
    """torch's weights into ``ours`` (through a file), outputs equal to torch's."""
    ours.load_state_dict(_through_file(tm, tmp_path), layout="torch", **kw)
    want = _run_torch(tm, x)
    np.testing.assert_allclose(_run(ours, to_ours(x)), want, rtol=1e-4, atol=2e-5)
    return want


def test_flatten_from_in_the_wrong_axis_order_is_refused(tmp_path):
    # Conv2d -> Flatten -> Linear; PyTorch flattens (C, H, W) = (5, 6, 4)
    torch.manual_seed(4)
    tm = _randomise(torch.nn.Sequential(torch.nn.Conv2d(2, 5, 3, padding=1), torch.nn.ReLU(),
                                        torch.nn.Flatten(), torch.nn.Linear(120, 3))).eval()

    def make():
        return nn.Sequential(nn.Conv2d(2, 5, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(120, 3)).eval()

    x = _x(2, 2, 6, 4)
    _load_and_compare(tm, make(), x, tmp_path, flatten_from={"3": (5, 6, 4)})
    sd = _through_file(tm, tmp_path)
    for bad in ((6, 4, 5), (5, 24), (120,), (4, 6, 5)):  # yscv's order, wrong rank, ...
        m = make()
        before = m.state_dict()
        with pytest.raises(ValueError, match=rf"flatten_from\['3'\] = {re.escape(repr(bad))} "
                           r"does not match the Flatten at '2'.*Conv2d at '0'.*\(5, H, W\)"):
            m.load_state_dict(sd, layout="torch", flatten_from={"3": bad})
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(v, before[k], err_msg=k)
    with pytest.raises(ValueError, match="yscv's channels-last order"):
        make().state_dict(layout="torch", flatten_from={"3": (6, 4, 5)})


def test_flatten_needs_nothing_where_both_orders_agree(tmp_path):
    # after a global pool (one spatial position) and after an Embedding
    torch.manual_seed(5)
    tm = _randomise(torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))).eval()
    ours = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.5), nn.Linear(4, 2)).eval()
    _load_and_compare(tm, ours, _x(2, 3, 5, 5), tmp_path)
    with pytest.raises(ValueError, match=r"flatten_from\['4'\] = \(1, 2, 2\).*one spatial"):
        ours.state_dict(layout="torch", flatten_from={"4": (1, 2, 2)})
    tm = _randomise(torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Flatten(),
                                        torch.nn.Linear(12, 2)))
    ours = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 2))
    ours.load_state_dict(_through_file(tm, tmp_path), layout="torch")
    idx = RNG.integers(0, 10, (5, 3))
    with torch.no_grad():
        want = tm(torch.from_numpy(idx)).numpy()
    g = yscv.Graph()
    np.testing.assert_allclose(g.value(ours(g, idx)), want, rtol=1e-4, atol=2e-5)


def test_flatten_of_the_input_or_outside_a_sequential_must_be_named(tmp_path):
    # a Flatten on the model's input: the input's layout is the caller's
    tm = _randomise(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 2)))
    sd = _through_file(tm, tmp_path)
    ours = nn.Sequential(nn.Flatten(), nn.Linear(12, 2))
    with pytest.raises(ValueError, match=r"'1\.weight'.*flattens the model's input.*"
                       r"flatten_from=\{'1': \(12,\)\}"):
        ours.load_state_dict(sd, layout="torch")
    x = _x(2, 3, 4)  # both sides take it as is here
    _load_and_compare(tm, ours, x, tmp_path, to_ours=lambda a: a, flatten_from={"1": (12,)})
    # PyTorch's input channels first, yscv's channels last: name the shape
    ours = nn.Sequential(nn.Flatten(), nn.Linear(12, 2))
    _load_and_compare(tm, ours, x, tmp_path, flatten_from={"1": (3, 4)})

    # a Flatten registered in a module of one's own: the order is its forward's
    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.flat, self.fc = (torch.nn.Conv2d(2, 3, 3), torch.nn.Flatten(),
                                             torch.nn.Linear(3 * 2 * 3, 2))

        def forward(self, x):
            return self.fc(self.flat(self.conv(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.flat, self.fc = (nn.Conv2d(2, 3, 3), nn.Flatten(),
                                             nn.Linear(3 * 2 * 3, 2))

        def forward(self, g, x):
            return self.fc(g, self.flat(g, self.conv(g, x)))

    tm = _randomise(TNet())
    with pytest.raises(ValueError, match=r"Flatten at 'flat' outside a Sequential.*flatten_from"):
        Net().load_state_dict(_through_file(tm, tmp_path), layout="torch")
    _load_and_compare(tm, Net(), _x(2, 2, 4, 5), tmp_path, flatten_from={"fc": (3, 2, 3)})


def test_flatten_row_permutations_are_inverse():
    w = RNG.standard_normal((4 * 3 * 2, 5))
    shape = (4, 3, 2)
    back = torch_layout.flatten_rows_from_torch(torch_layout.flatten_rows_to_torch(w, shape), shape)
    np.testing.assert_array_equal(back, w)
    # row for (c, h, w) in torch order is c*6 + h*2 + w; in yscv (h*2 + w)*4 + c
    t = torch_layout.flatten_rows_to_torch(w, shape)
    np.testing.assert_array_equal(t[2 * 6 + 1 * 2 + 1], w[(1 * 2 + 1) * 4 + 2])


# --------------------------------------------------------------- errors
FLAT = {"7": (4, 4, 3)}  # the CNN's Linear reads torch's [N, 4, 4, 3] flattened


def test_bad_keys_and_shapes_are_named_and_nothing_loads(tmp_path):
    tm = _torch_cnn()
    ours = _yscv_cnn()
    before = ours.state_dict()
    sd = dict(_through_file(tm, tmp_path))
    del sd["1.running_var"]
    sd["9.weight"] = np.zeros(3, np.float32)
    sd["0.weight"] = np.zeros((3, 3, 2, 6), np.float32)  # yscv's layout, not torch's
    with pytest.raises(nn.StateDictError) as info:
        ours.load_state_dict(sd, layout="torch", flatten_from=FLAT)
    msg = str(info.value)
    assert "missing key(s): '1.running_var'" in msg
    assert "unexpected key(s): '9.weight'" in msg
    assert ("size mismatch for '0.weight': the state dict has shape (3, 3, 2, 6), "
            "the model expects (6, 2, 3, 3) in PyTorch's layout") in msg
    assert info.value.mismatched == [("0.weight", (6, 2, 3, 3), (3, 3, 2, 6))]
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    # strict=False: missing / unexpected are returned, a bad shape still raises
    with pytest.raises(nn.StateDictError, match="size mismatch for '0.weight'"):
        ours.load_state_dict(sd, strict=False, layout="torch", flatten_from=FLAT)
    sd["0.weight"] = tm.state_dict()["0.weight"].numpy()
    res = ours.load_state_dict(sd, strict=False, layout="torch", flatten_from=FLAT)
    assert res.missing_keys == ["1.running_var"] and res.unexpected_keys == ["9.weight"]


def test_bad_layout_and_flatten_from_arguments():
    m = _yscv_cnn()
    sd = {k: torch.from_numpy(v) for k, v in m.state_dict(layout="torch", flatten_from=FLAT).items()}
    for call in (lambda: m.load_state_dict(sd, layout="tf"), lambda: m.state_dict(layout="TORCH")):
        with pytest.raises(ValueError, match="layout must be 'yscv' or 'torch'"):
            call()
    with pytest.raises(ValueError, match="flatten_from applies to layout='torch' only"):
        m.state_dict(flatten_from={"7": (4, 4, 3)})
    with pytest.raises(ValueError, match=r"flatten_from names '4', which is a Conv2d"):
        m.load_state_dict(sd, layout="torch", flatten_from={"4": (4, 4, 3)})
    with pytest.raises(ValueError, match=r"flatten_from names '12', which is no module"):
        m.state_dict(layout="torch", flatten_from={"12": (4, 4, 3)})
    with pytest.raises(ValueError, match=r"flatten_from\['7'\] = \(4, 4, 4\).*in_features=48"):
        m.load_state_dict(sd, layout="torch", flatten_from={"7": (4, 4, 4)})
    with pytest.raises(TypeError, match="flatten_from must be a mapping"):
        m.load_state_dict(sd, layout="torch", flatten_from=(4, 4, 3))
    with pytest.raises(TypeError, match="expected a mapping"):
        m.load_state_dict([1, 2], layout="torch")


def test_register_layout_for_a_custom_module():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Parameter(np.arange(6.0).reshape(2, 3))

    model = nn.Sequential(Scale())
    assert list(model.state_dict(layout="torch")) == ["0.table"]  # as is by default
    torch_layout.register_layout(Scale, "table", lambda a, m: a.T, lambda a, m: a.T)
    out = model.state_dict(layout="torch")
    np.testing.assert_array_equal(out["0.table"], np.arange(6.0).reshape(2, 3).T)
    fresh = nn.Sequential(Scale())
    fresh.load_state_dict(OrderedDict([("0.table", out["0.table"] * 2)]), layout="torch")
    np.testing.assert_array_equal(fresh[0].table.data, np.arange(6.0).reshape(2, 3) * 2)
    with pytest.raises(TypeError, match="register_layout: cls must be a class"):
        torch_layout.register_layout(Scale(), "table", abs, abs)
