"""yscv.func.functional_call and stack_module_state against torch.func's:
values, gradients with respect to a dict of parameters (per key), buffers
(batch norm in training and eval mode), tied and missing keys, the module
left untouched, errors, and per-sample gradients by a loop of grad equal to
torch.func.vmap(grad(...))."""
import copy

import numpy as np
import pytest

import yscv
from yscv import func as F
from yscv import nn as ynn

torch = pytest.importorskip("torch")
TF = torch.func
tnn = torch.nn

RNG = np.random.default_rng(0)
D = np.float64


def mlp():
    yscv.manual_seed(0)
    return ynn.Sequential(ynn.Linear(5, 8, dtype=D), ynn.Tanh(), ynn.Linear(8, 3, dtype=D))


def torch_twin(model, t_model):
    """t_model with model's values (PyTorch's layouts), in float64."""
    t_model = t_model.double()
    t_model.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict(layout="torch").items()})
    return t_model


def t_mlp(model):
    return torch_twin(model, tnn.Sequential(tnn.Linear(5, 8), tnn.Tanh(), tnn.Linear(8, 3)))


def torch_layout(model, d):
    """A dict of yscv-layout arrays (some of ``model``'s keys) in PyTorch's layouts."""
    m = copy.deepcopy(model)
    full = m.state_dict()
    full.update({k: np.asarray(v) for k, v in d.items()})
    m.load_state_dict(full)
    sd = m.state_dict(layout="torch")
    return {k: torch.tensor(sd[k]) for k in d}


def random_like(model):
    return {k: RNG.standard_normal(p.shape) for k, p in model.named_parameters()}


def snapshot(model):
    return ({k: p.data.copy() for k, p in model.named_parameters()},
            {k: None if p.grad is None else p.grad.copy() for k, p in model.named_parameters()},
            {k: b.copy() for k, b in model.named_buffers()},
            [m.training for m in model.modules()])


def assert_untouched(model, snap):
    data, grads, bufs, modes = snap
    for k, p in model.named_parameters():
        np.testing.assert_array_equal(p.data, data[k])
        assert (p.grad is None) == (grads[k] is None)
        if p.grad is not None:
            np.testing.assert_array_equal(p.grad, grads[k])
    for k, b in model.named_buffers():
        np.testing.assert_array_equal(b, bufs[k])
    assert [m.training for m in model.modules()] == modes


def close(a, b, tol=1e-12):
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol)


X = RNG.standard_normal((4, 5))
Y = np.array([0, 2, 1, 2])


def ce(g, logits, y):
    return g.cross_entropy(logits, y)


def run(model, x):
    """The module's own output, as an array."""
    g = yscv.Graph(D)
    return g.value(model(g, g.constant(x)))


# ------------------------------------------------------------------ values
def test_values_in_both_forms_match_torch_and_leave_the_module_untouched():
    model = mlp()
    snap = snapshot(model)
    p = random_like(model)
    want = TF.functional_call(t_mlp(model), torch_layout(model, p), (torch.tensor(X),))
    close(F.functional_call(model, p, (X,)), want)                 # arrays in, arrays out
    close(F.functional_call(model, p, X), want)                    # one input, not a tuple
    g = yscv.Graph(D)
    out = F.functional_call(model, p, (g, g.variable(X)))
    assert type(out) is yscv.NodeId
    close(g.value(out), want)
    g.backward(g.sum(out))        # every key given: no module parameter in the graph
    assert_untouched(model, snap)
    close(run(model, X), t_mlp(model)(torch.tensor(X)))  # the module's own


def test_a_missing_key_keeps_the_modules_own_and_a_tuple_of_dicts_is_merged():
    model = mlp()
    p = random_like(model)
    part = {"0.weight": p["0.weight"]}
    want = TF.functional_call(t_mlp(model), torch_layout(model, part), (torch.tensor(X),))
    close(F.functional_call(model, part, (X,)), want)
    both = ({"0.weight": p["0.weight"], "0.bias": p["0.bias"]},
            {"2.weight": p["2.weight"], "2.bias": p["2.bias"]})
    close(F.functional_call(model, both, (X,)), F.functional_call(model, p, (X,)))
    # a missing key in the graph form is the module's parameter: its grad accumulates
    g = yscv.Graph(D)
    g.backward(g.sum(F.functional_call(model, part, (g, X))))
    assert model[0].weight.grad is None and model[0].bias.grad is not None


# --------------------------------------------------------------- gradients
def test_grad_over_a_dict_of_parameters_matches_torch_per_key():
    model = mlp()
    tm = t_mlp(model)
    snap = snapshot(model)
    p = random_like(model)

    def loss(g, params, x, y):
        return ce(g, F.functional_call(model, params, (g, x)), y)

    def t_loss(params, x, y):
        return tnn.functional.cross_entropy(TF.functional_call(tm, params, (x,)), y)

    got = F.grad(loss)(p, X, Y)
    assert list(got) == list(p) and all(type(v) is np.ndarray for v in got.values())
    want = TF.grad(t_loss)(torch_layout(model, p), torch.tensor(X), torch.tensor(Y))
    for k, v in torch_layout(model, got).items():
        close(v, want[k])
    # value_and_grad, and the gradient with respect to the input too
    (v, (gp, gx)) = F.value_and_grad(loss, argnums=(0, 1))(p, X, Y)
    close(v, t_loss(torch_layout(model, p), torch.tensor(X), torch.tensor(Y)))
    tx = TF.grad(t_loss, argnums=1)(torch_layout(model, p), torch.tensor(X), torch.tensor(Y))
    close(gx, tx)
    assert_untouched(model, snap)


def test_in_a_graph_gradients_flow_to_the_given_nodes():
    model = mlp()
    for p in model.parameters():          # gradients of an earlier step stay as they are
        p.grad = np.full(p.shape, 0.5)
    snap = snapshot(model)
    p = random_like(model)
    g = yscv.Graph(D)
    nodes = {k: g.variable(v) for k, v in p.items()}
    loss = ce(g, F.functional_call(model, nodes, (g, g.constant(X))), Y)
    grads = g.gradients(loss, list(nodes.values()))
    want = F.grad(lambda g2, q: ce(g2, F.functional_call(model, q, (g2, X)), Y))(p)
    for k, gk in zip(nodes, grads):
        close(gk, want[k])
    g.backward(loss)
    assert_untouched(model, snap)          # Parameter.grad is not accumulated into
    # grad in the graph form returns a dict of recorded nodes, differentiable again
    dq = F.grad(lambda g2, q: ce(g2, F.functional_call(model, q, (g2, X)), Y))(g, nodes)
    assert set(dq) == set(p) and all(type(v) is yscv.NodeId for v in dq.values())
    (h,) = g.gradients(g.sum(dq["2.bias"] * dq["2.bias"]), [nodes["2.bias"]])
    assert np.all(np.isfinite(h))


def test_per_sample_gradients_by_a_loop_equal_torch_vmap_of_grad_mlp():
    model = mlp()
    tm = t_mlp(model)
    p = {k: v.data for k, v in model.named_parameters()}

    def loss(g, params, x, y):
        return ce(g, F.functional_call(model, params, (g, x)), y)

    def t_loss(params, x, y):
        out = TF.functional_call(tm, params, (x.unsqueeze(0),))
        return tnn.functional.cross_entropy(out, y.unsqueeze(0))

    per_sample = F.grad(loss)
    ours = [per_sample(p, X[i:i + 1], Y[i:i + 1]) for i in range(len(X))]
    want = TF.vmap(TF.grad(t_loss), in_dims=(None, 0, 0))(
        torch_layout(model, p), torch.tensor(X), torch.tensor(Y))
    for i, gi in enumerate(ours):
        for k, v in torch_layout(model, gi).items():
            close(v, want[k][i])


class Net(ynn.Module):
    def __init__(self):
        super().__init__()
        self.conv = ynn.Conv2d(2, 4, 3, padding=1, dtype=D)
        self.fc = ynn.Linear(4, 3, dtype=D)

    def forward(self, g, x):
        return self.fc(g, g.global_avg_pool2d(g.relu(self.conv(g, x))))


class TNet(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv = tnn.Conv2d(2, 4, 3, padding=1)
        self.fc = tnn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def test_per_sample_gradients_by_a_loop_equal_torch_vmap_of_grad_cnn():
    yscv.manual_seed(1)
    model = Net()
    tm = torch_twin(model, TNet())
    p = {k: v.data for k, v in model.named_parameters()}
    x = RNG.standard_normal((3, 5, 5, 2))              # NHWC
    y = np.array([2, 0, 1])

    def loss(g, params, xi, yi):
        return ce(g, F.functional_call(model, params, (g, xi)), yi)

    def t_loss(params, xi, yi):
        return tnn.functional.cross_entropy(TF.functional_call(tm, params, (xi.unsqueeze(0),)),
                                            yi.unsqueeze(0))

    want = TF.vmap(TF.grad(t_loss), in_dims=(None, 0, 0))(
        torch_layout(model, p), torch.tensor(x.transpose(0, 3, 1, 2)), torch.tensor(y))
    for i in range(len(x)):
        gi = F.grad(loss)(p, x[i:i + 1], y[i:i + 1])
        for k, v in torch_layout(model, gi).items():
            close(v, want[k][i], 1e-11)


# ----------------------------------------------------------------- buffers
def bn_net():
    yscv.manual_seed(2)
    return ynn.Sequential(ynn.Linear(5, 4, dtype=D), ynn.BatchNorm1d(4, dtype=D))


def t_bn_net(model):
    return torch_twin(model, tnn.Sequential(tnn.Linear(5, 4), tnn.BatchNorm1d(4)))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_buffers_are_used_and_updated_as_torch_does(training):
    model = bn_net().train(training)
    tm = t_bn_net(model).train(training)
    snap = snapshot(model)
    p = random_like(model)
    bufs = {"1.running_mean": RNG.standard_normal(4), "1.running_var": RNG.uniform(0.5, 2, 4),
            "1.num_batches_tracked": np.array(3, dtype=np.int64)}
    t_bufs = {k: torch.tensor(v) for k, v in bufs.items()}
    want = TF.functional_call(tm, (torch_layout(model, p), t_bufs), (torch.tensor(X),))
    got = F.functional_call(model, (p, bufs), (X,))
    close(got, want)
    for k in bufs:                    # the given buffers changed as torch's did, in place
        close(bufs[k], t_bufs[k])
    assert int(bufs["1.num_batches_tracked"]) == (4 if training else 3)
    assert_untouched(model, snap)      # the module's own buffers did not move
    # without buffers in the dict, the module's own are used (and updated) as torch's
    want = TF.functional_call(tm, torch_layout(model, p), (torch.tensor(X),))
    close(F.functional_call(model, p, (X,)), want)
    for k, b in model.named_buffers():
        close(b, dict(tm.named_buffers())[k])


@pytest.mark.parametrize("training", [True, False])
def test_buffers_given_as_nodes_enter_the_graph_and_the_module_keeps_its_own(training):
    model = bn_net().train(training)
    tm = t_bn_net(model).train(training)
    mean, var = RNG.standard_normal(4), RNG.uniform(0.5, 2, 4)
    t_bufs = {"1.running_mean": torch.tensor(mean), "1.running_var": torch.tensor(var)}
    want = TF.functional_call(tm, t_bufs, (torch.tensor(X),))
    snap = snapshot(model)
    g = yscv.Graph(D)
    nodes = {"1.running_mean": g.constant(mean), "1.running_var": g.constant(var)}
    close(g.value(F.functional_call(model, nodes, (g, X))), want)
    for k, n in nodes.items():         # a leaf's value is updated as torch's tensor was
        close(g.value(n), t_bufs[k])
    data, grads, bufs, modes = snap
    for k in ("1.running_mean", "1.running_var"):
        np.testing.assert_array_equal(dict(model.named_buffers())[k], bufs[k])


# ----------------------------------------------------------- tied weights
def tied():
    yscv.manual_seed(3)
    lin = ynn.Linear(4, 4, dtype=D)
    return ynn.Sequential(lin, ynn.Tanh(), lin)


def test_tied_keys_take_the_value_given_for_either_and_different_values_raise():
    model = tied()
    lin = tnn.Linear(4, 4)
    tm = torch_twin(model, tnn.Sequential(lin, tnn.Tanh(), lin))
    x = RNG.standard_normal((3, 4))
    w = RNG.standard_normal((4, 4))
    for key in ("0.weight", "2.weight"):
        want = TF.functional_call(tm, {key: torch.tensor(w.T)}, (torch.tensor(x),))
        close(F.functional_call(model, {key: w}, (x,)), want)
    close(F.functional_call(model, {"0.weight": w, "2.weight": w}, (x,)),
          F.functional_call(model, {"0.weight": w}, (x,)))
    with pytest.raises(ValueError, match=r"different values given for the keys "
                                         r"\['0.weight', '2.weight'\], which are tied"):
        F.functional_call(model, {"0.weight": w, "2.weight": w.copy()}, (x,))


# ------------------------------------------------------------------ errors
def test_bad_keys_and_arguments_are_named():
    model = mlp()
    p = random_like(model)
    with pytest.raises(ValueError, match=r"Sequential has no parameter or buffer named "
                                         r"'0.wieght'.*its keys: '0.weight'"):
        F.functional_call(model, {"0.wieght": p["0.weight"]}, (X,))
    with pytest.raises(ValueError, match=r"the key '0.bias' is in more than one of the dicts"):
        F.functional_call(model, ({"0.bias": p["0.bias"]}, {"0.bias": p["0.bias"]}), (X,))
    with pytest.raises(ValueError, match=r"strict=True and no value given for '2.weight', "
                                         r"'2.bias'"):
        F.functional_call(model, {"0.weight": p["0.weight"], "0.bias": p["0.bias"]}, (X,),
                          strict=True)
    with pytest.raises(TypeError, match=r"params_and_buffers must be a dict or a tuple of dicts"):
        F.functional_call(model, [p["0.bias"]], (X,))
    with pytest.raises(TypeError, match=r"module must be a yscv.nn.Module, got function"):
        F.functional_call(lambda g, x: x, p, (X,))
    other = yscv.Graph(D)
    g = yscv.Graph(D)
    with pytest.raises(ValueError, match=r"the value for '0.bias' is a NodeId of another graph"):
        F.functional_call(model, {"0.bias": other.constant(p["0.bias"])}, (g, X))
    with pytest.raises(TypeError, match=r"the buffer '1.running_mean' is float32, the graph is "
                                        r"float64"):
        F.functional_call(bn_net(), {"1.running_mean": np.zeros(4, np.float32)}, (X,))


def test_the_module_is_restored_when_the_call_raises():
    model = bn_net()
    snap = snapshot(model)
    bufs = {"1.running_mean": np.zeros(4), "1.running_var": np.ones(4)}
    with pytest.raises(yscv.ShapeError):
        F.functional_call(model, (random_like(model), bufs), (np.ones((4, 7)),))   # 7 != 5
    assert_untouched(model, snap)
    assert model[1].running_mean is model[1]._buffers["running_mean"]
    assert model[1].running_mean is not bufs["1.running_mean"]
    # and nothing stays substituted: a plain call uses the module's own values
    close(run(model, X), t_bn_net(copy.deepcopy(model))(torch.tensor(X)))


class DirectBinding(ynn.Module):
    def __init__(self):
        super().__init__()
        self.weight = ynn.Parameter(np.ones((5, 2)), D)

    def forward(self, g, x):
        return g.matmul(x, g.param(self.weight))


def test_a_layer_binding_its_parameter_with_g_param_itself_is_an_error():
    with pytest.raises(ValueError, match=r"bound the parameter\(s\) \['weight'\] with g.param "
                                         r"itself.*self.param\(g, name\)"):
        F.functional_call(DirectBinding(), {"weight": np.zeros((5, 2))}, (X,))


# ------------------------------------------------------ stack_module_state
def test_stack_module_state_matches_torch_and_runs_an_ensemble():
    models = [bn_net() for _ in range(3)]
    for i, m in enumerate(models):
        m.load_state_dict({k: v + i for k, v in m.state_dict().items()})
    params, buffers = F.stack_module_state(models)
    t_params, t_buffers = TF.stack_module_state([t_bn_net(m) for m in models])
    assert list(params) == list(t_params) and list(buffers) == list(t_buffers)
    for k in params:
        assert params[k].shape == (3,) + models[0].state_dict()[k].shape
        close(torch_layout(models[0], {k: params[k][1]})[k], t_params[k][1])
    for k in buffers:
        close(buffers[k], t_buffers[k])
    params["0.bias"][0] += 1.0           # copies: the models do not see it
    np.testing.assert_array_equal(models[0][0].bias.data, bn_net()[0].bias.data)
    for m in models:
        m.eval()
    base = copy.deepcopy(models[0])
    params, buffers = F.stack_module_state(models)
    for i, m in enumerate(models):
        one = ({k: v[i] for k, v in params.items()}, {k: v[i] for k, v in buffers.items()})
        close(F.functional_call(base, one, (X,)), run(m, X))


def test_stack_module_state_names_what_differs():
    with pytest.raises(ValueError, match=r"expected at least one model, got none"):
        F.stack_module_state([])
    with pytest.raises(ValueError, match=r"model 1 is a Tanh, model 0 a Linear"):
        F.stack_module_state([ynn.Linear(2, 3), ynn.Tanh()])
    with pytest.raises(ValueError, match=r"model 1's parameters differ from model 0's: "
                                         r"lacks \['bias'\]"):
        F.stack_module_state([ynn.Linear(2, 3), ynn.Linear(2, 3, bias=False)])
    with pytest.raises(ValueError, match=r"'weight' is float32\[2, 4\] in model 1, "
                                         r"float32\[2, 3\] in model 0"):
        F.stack_module_state([ynn.Linear(2, 3), ynn.Linear(2, 4)])
    with pytest.raises(ValueError, match=r"model 1 is in eval mode, model 0 in training mode"):
        F.stack_module_state([ynn.Linear(2, 3), ynn.Linear(2, 3).eval()])
    frozen = ynn.Linear(2, 3)
    frozen.weight.requires_grad = False
    with pytest.raises(ValueError, match=r"'weight' has requires_grad=False in model 1"):
        F.stack_module_state([ynn.Linear(2, 3), frozen])


# ------------------------------------------------------------- and more
class Scaled(ynn.Module):
    """A module with a keyword argument, a sub-module called twice and a
    buffer it reassigns (not in place) at each call."""

    def __init__(self):
        super().__init__()
        self.lin = ynn.Linear(5, 5, dtype=D)
        self.register_buffer("calls", np.zeros(()))

    def forward(self, g, x, scale=1.0):
        self.calls = np.asarray(self.calls + 1.0)
        return self.lin(g, self.lin(g, x)) * scale


def test_keyword_arguments_a_layer_called_twice_and_a_reassigned_buffer():
    model = Scaled()
    snap = snapshot(model)
    w = RNG.standard_normal((5, 5))
    b = model.lin.bias.data
    state = {"lin.weight": w, "calls": np.zeros(())}
    out = F.functional_call(model, state, (X,), {"scale": 3.0})
    close(out, ((X @ w + b) @ w + b) * 3.0)
    assert float(state["calls"]) == 1.0          # written back into the dict, as torch
    assert_untouched(model, snap)
    # the gradient of a layer used twice sums both uses
    gw = F.grad(lambda g, q: g.sum(F.functional_call(model, q, (g, X))))({"lin.weight": w})
    tw = torch.tensor(w, requires_grad=True)
    tx, tb = torch.tensor(X), torch.tensor(b)
    ((tx @ tw + tb) @ tw + tb).sum().backward()
    close(gw["lin.weight"], tw.grad)


def test_functional_call_nests():
    outer, inner = mlp(), ynn.Linear(3, 3, dtype=D)
    p, q = random_like(outer), random_like(inner)

    class Both(ynn.Module):
        def forward(self, g, x):
            return F.functional_call(inner, q, (g, F.functional_call(outer, p, (g, x))))

    both = Both()
    want = F.functional_call(inner, q, (F.functional_call(outer, p, (X,)),))
    close(F.functional_call(both, {}, (X,)), want)


def test_a_model_loaded_from_onnx_is_substituted_too(tmp_path):
    pytest.importorskip("onnx")
    model = mlp()
    path = tmp_path / "mlp.onnx"
    yscv.onnx.export(model, (X,), str(path))
    loaded = yscv.onnx.load(str(path))
    assert list(loaded.state_dict()) == list(model.state_dict())
    p = random_like(model)
    close(F.functional_call(loaded, p, (X,)), F.functional_call(model, p, (X,)), 1e-10)

    def grads(m):
        return F.grad(lambda g, q: ce(g, F.functional_call(m, q, (g, X)), Y))(p)

    ours, theirs = grads(loaded), grads(model)
    for k in p:
        close(ours[k], theirs[k], 1e-10)
