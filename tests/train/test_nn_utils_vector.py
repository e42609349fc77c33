"""nn.utils.parameters_to_vector / vector_to_parameters against torch's, and
g.randn_like / g.rand_like drawn from the library generator."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import yscv  # noqa: E402
import yscv.nn as nn  # noqa: E402
from yscv.nn.utils import parameters_to_vector, vector_to_parameters  # noqa: E402


def _pair():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    ym = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    # the same values in the same order: torch's parameters as yscv parameters
    params = [nn.Parameter(p.detach().numpy()) for p in tm.parameters()]
    return tm, ym, params


def test_parameters_to_vector_equals_torch():
    tm, _, params = _pair()
    got = parameters_to_vector(params)
    want = torch.nn.utils.parameters_to_vector(tm.parameters()).detach().numpy()
    assert got.dtype == np.float32 and got.shape == want.shape == (3 * 4 + 4 + 4 * 2 + 2,)
    np.testing.assert_array_equal(got, want)
    got[0] = 99.0                       # a copy
    assert params[0].data.flat[0] != 99.0
    np.testing.assert_array_equal(parameters_to_vector(params[1]), params[1].data)


def test_vector_to_parameters_equals_torch_and_is_in_place():
    tm, _, params = _pair()
    vec = np.arange(sum(p.size for p in params), dtype=np.float32) / 10
    datas = [p.data for p in params]
    vector_to_parameters(vec, params)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(vec.copy()), tm.parameters())
    for p, t, d in zip(params, tm.parameters(), datas):
        np.testing.assert_array_equal(p.data, t.detach().numpy())
        assert p.data is d              # the same arrays: bound graphs see the new values
    np.testing.assert_array_equal(parameters_to_vector(params), vec)


def test_vector_functions_on_a_module_and_bad_arguments():
    _, ym, _ = _pair()
    vec = parameters_to_vector(ym.parameters())
    vector_to_parameters(vec * 2, ym.parameters())
    np.testing.assert_array_equal(parameters_to_vector(ym.parameters()), vec * 2)
    params = list(ym.parameters())
    with pytest.raises(ValueError, match=r"vector_to_parameters: vec has 3 elements, the "
                                         r"parameters hold 26"):
        vector_to_parameters(np.zeros(3, np.float32), params)
    with pytest.raises(TypeError, match="vector_to_parameters: vec must be a NumPy array, got list"):
        vector_to_parameters([0.0] * 26, params)
    with pytest.raises(TypeError, match=r"parameters_to_vector: parameters\[1\] must be a "
                                        r"Parameter, got ndarray"):
        parameters_to_vector([params[0], np.zeros(3)])
    with pytest.raises(TypeError, match="several dtypes"):
        parameters_to_vector([params[0], nn.Parameter(np.zeros(2), dtype=np.float64)])


@pytest.mark.parametrize("name, draw", [("randn_like", "standard_normal"), ("rand_like", "random")])
def test_random_like_is_reproduced_by_manual_seed(name, draw):
    g = yscv.Graph(dtype=np.float64)
    x = g.variable(np.ones((2, 3)))
    yscv.manual_seed(5)
    a = getattr(g, name)(x)
    yscv.manual_seed(5)
    b = getattr(g, name)(x)
    c = getattr(g, name)(np.zeros((2, 3)))
    np.testing.assert_array_equal(g.value(a), g.value(b))
    assert not np.array_equal(g.value(b), g.value(c))
    np.testing.assert_array_equal(g.value(a), getattr(np.random.default_rng(5), draw)((2, 3)))
    assert g.value(a).dtype == np.float64 and not g.requires_grad(a)
    if name == "rand_like":
        assert g.value(a).min() >= 0.0 and g.value(a).max() < 1.0
    g32 = yscv.Graph()
    assert g32.value(getattr(g32, name)(g32.constant(np.ones(4)))).dtype == np.float32
