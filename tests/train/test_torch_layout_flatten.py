"""Conv -> Flatten -> Linear with PyTorch weights and no ``flatten_from``: the
Linear's row permutation (torch row c*S + s -> yscv row s*C + c) needs only
the conv's out_channels C and S = in_features / C, both told by the model."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402

RNG = np.random.default_rng(11)


def _run(m, x):
    g = yscv.Graph()
    return g.value(m(g, g.constant(x)))


def _torch(tm, x):
    with torch.no_grad():
        return tm(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_flatten_linear_loads_without_flatten_from_both_ways(nd):
    torch.manual_seed(nd)
    conv_t = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[nd]
    conv_y = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[nd]
    spatial = {1: (7,), 2: (5, 4), 3: (3, 4, 2)}[nd]
    c = 5
    s = int(np.prod(spatial))
    tm = torch.nn.Sequential(conv_t(3, c, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                             torch.nn.Linear(c * s, 4)).eval()
    ours = nn.Sequential(conv_y(3, c, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(c * s, 4)).eval()
    sd = {k: v.numpy() for k, v in tm.state_dict().items()}
    ours.load_state_dict(sd, layout="torch")
    x = RNG.standard_normal((2, 3) + spatial).astype(np.float32)
    want = _torch(tm, x)
    got = _run(ours, np.ascontiguousarray(np.moveaxis(x, 1, -1)))  # NC... -> N...C
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    # the reverse: yscv's weights in torch's layout load into a fresh torch model
    back = ours.state_dict(layout="torch")
    for k, v in back.items():
        np.testing.assert_array_equal(v, sd[k], err_msg=k)
    fresh = torch.nn.Sequential(conv_t(3, c, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(c * s, 4)).eval()
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()})
    np.testing.assert_allclose(_torch(fresh, x), want, rtol=1e-6, atol=1e-7)
    # the explicit shape still works and is the same load
    named = nn.Sequential(conv_y(3, c, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(c * s, 4)).eval()
    named.load_state_dict(sd, layout="torch", flatten_from={"3": (c,) + spatial})
    np.testing.assert_array_equal(named.state_dict()["3.weight"], ours.state_dict()["3.weight"])


def test_in_features_not_a_multiple_of_the_channels_is_refused():
    m = nn.Sequential(nn.Conv2d(2, 4, 3), nn.Flatten(), nn.Linear(10, 3))
    sd = {"0.weight": np.zeros((4, 2, 3, 3), np.float32), "0.bias": np.zeros(4, np.float32),
          "2.weight": np.zeros((3, 10), np.float32), "2.bias": np.zeros(3, np.float32)}
    before = m.state_dict()
    with pytest.raises(ValueError, match=r"Linear '2' \('2\.weight'\) reads the Flatten at '1'.*"
                       r"Conv2d at '0' with 4 channels, but its in_features=10 is not a "
                       r"multiple of 4"):
        m.load_state_dict(sd, layout="torch")
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_flatten_from_is_still_needed_where_the_model_does_not_tell_the_channels():
    # a pooling of the model's input: no layer before it tells C
    m = nn.Sequential(nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 2))
    with pytest.raises(ValueError, match=r"'2\.weight'.*MaxPool2d at '0'.*channel count cannot "
                       r"be told from the model: pass flatten_from=\{'2': \(C, H, W\)\}"):
        m.state_dict(layout="torch")
    assert m.state_dict(layout="torch", flatten_from={"2": (3, 2, 2)})["2.weight"].shape == (2, 12)
