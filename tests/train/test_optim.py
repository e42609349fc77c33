"""Optimizers: hand-written NumPy references over several steps, PyTorch step
by step, param groups, zero_grad / skipped params, state-dict round trips."""
from __future__ import annotations

import numpy as np
import pytest

import yscv.optim as optim
from yscv.kernels import simd
from yscv.nn import Parameter

SHAPES = [(5, 3), (3,), (2, 2, 2)]
STEPS = 6


def _grads(seed=0, dtype=np.float64, steps=STEPS):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(steps)]


def _init(seed=1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


# ------------------------------------------------------------ references
def ref_sgd(ps, grads, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False):
    ps = [p.copy() for p in ps]
    bufs = [None] * len(ps)
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            d = -g if maximize else g
            d = d + weight_decay * ps[i]
            if momentum:
                bufs[i] = d.copy() if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * d
                d = d + momentum * bufs[i] if nesterov else bufs[i]
            ps[i] = ps[i] - lr * d
    return ps


def ref_adam(ps, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
             maximize=False, decoupled=False):
    ps = [p.copy() for p in ps]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    vmax = [np.zeros_like(p) for p in ps]
    b1, b2 = betas
    for t, step_grads in enumerate(grads, 1):
        for i, g in enumerate(step_grads):
            g = -g if maximize else g
            if decoupled:
                ps[i] = ps[i] * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * ps[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            vhat = v[i]
            if amsgrad:
                vmax[i] = np.maximum(vmax[i], v[i])
                vhat = vmax[i]
            mhat = m[i] / (1 - b1 ** t)
            ps[i] = ps[i] - lr * mhat / (np.sqrt(vhat) / np.sqrt(1 - b2 ** t) + eps)
    return ps


def ref_rmsprop(ps, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False, maximize=False):
    ps = [p.copy() for p in ps]
    sq = [np.zeros_like(p) for p in ps]
    ga = [np.zeros_like(p) for p in ps]
    buf = [np.zeros_like(p) for p in ps]
    for step_grads in grads:
        for i, g in enumerate(step_grads):
            g = -g if maximize else g
            g = g + weight_decay * ps[i]
            sq[i] = alpha * sq[i] + (1 - alpha) * g * g
            if centered:
                ga[i] = alpha * ga[i] + (1 - alpha) * g
                avg = np.sqrt(sq[i] - ga[i] ** 2) + eps
            else:
                avg = np.sqrt(sq[i]) + eps
            if momentum > 0:
                buf[i] = momentum * buf[i] + g / avg
                ps[i] = ps[i] - lr * buf[i]
            else:
                ps[i] = ps[i] - lr * g / avg
    return ps


def ref_adagrad(ps, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                eps=1e-10, maximize=False):
    ps = [p.copy() for p in ps]
    s = [np.full_like(p, initial_accumulator_value) for p in ps]
    for t, step_grads in enumerate(grads, 1):
        for i, g in enumerate(step_grads):
            g = -g if maximize else g
            g = g + weight_decay * ps[i]
            clr = lr / (1 + (t - 1) * lr_decay)
            s[i] = s[i] + g * g
            ps[i] = ps[i] - clr * g / (np.sqrt(s[i]) + eps)
    return ps


CASES = [
    ("SGD", dict(lr=0.1), ref_sgd),
    ("SGD", dict(lr=0.1, weight_decay=0.05), ref_sgd),
    ("SGD", dict(lr=0.1, momentum=0.9), ref_sgd),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01), ref_sgd),
    ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01), ref_sgd),
    ("SGD", dict(lr=0.1, momentum=0.5, maximize=True), ref_sgd),
    ("Adam", dict(lr=1e-2), ref_adam),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), ref_adam),
    ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.01), ref_adam),
    ("Adam", dict(lr=1e-2, maximize=True), ref_adam),
    ("AdamW", dict(lr=1e-2), lambda ps, gs, **kw: ref_adam(ps, gs, weight_decay=1e-2, decoupled=True, **kw)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.2, amsgrad=True),
     lambda ps, gs, **kw: ref_adam(ps, gs, decoupled=True, **kw)),
    ("RMSprop", dict(lr=1e-2), ref_rmsprop),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, eps=1e-6, weight_decay=0.05), ref_rmsprop),
    ("RMSprop", dict(lr=1e-2, momentum=0.9), ref_rmsprop),
    ("RMSprop", dict(lr=1e-2, centered=True), ref_rmsprop),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5, weight_decay=0.01, maximize=True),
     ref_rmsprop),
    ("Adagrad", dict(lr=0.1), ref_adagrad),
    ("Adagrad", dict(lr=0.1, lr_decay=0.2), ref_adagrad),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5,
                     eps=1e-6), ref_adagrad),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw, _ in CASES]


def _run(name, kw, init, grads, dtype):
    params = [Parameter(p, dtype) for p in init]
    opt = getattr(optim, name)(params, **kw)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.astype(dtype)
        opt.step()
        opt.zero_grad()
    return params, opt


@pytest.mark.parametrize("name,kw,ref", CASES, ids=IDS)
def test_matches_numpy_reference_float64(name, kw, ref):
    init, grads = _init(), _grads()
    params, _ = _run(name, kw, init, grads, np.float64)
    expected = ref(init, grads, **kw)
    for p, e in zip(params, expected):
        assert p.data.dtype == np.float64
        np.testing.assert_allclose(p.data, e, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,kw,ref", CASES, ids=IDS)
def test_float32_stays_float32_and_close(name, kw, ref):
    init, grads = _init(), _grads()
    params, opt = _run(name, kw, init, grads, np.float32)
    expected = ref(init, grads, **kw)
    for p, e in zip(params, expected):
        assert p.data.dtype == np.float32
        np.testing.assert_allclose(p.data, e, rtol=2e-5, atol=2e-6)
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, np.ndarray):
                assert v.dtype == np.float32


@pytest.mark.parametrize("name,kw,ref", CASES, ids=IDS)
def test_matches_torch_step_by_step(name, kw, ref):
    torch = pytest.importorskip("torch")
    init, grads = _init(dtype=np.float32), _grads(dtype=np.float32)
    params = [Parameter(p) for p in init]
    tparams = [torch.nn.Parameter(torch.tensor(p)) for p in init]
    opt = getattr(optim, name)(params, **kw)
    topt = getattr(torch.optim, name)(tparams, foreach=False, **kw)
    for step_grads in grads:
        for p, tp, g in zip(params, tparams, step_grads):
            p.grad = g.copy()
            tp.grad = torch.tensor(g)
        opt.step()
        topt.step()
        for p, tp in zip(params, tparams):
            np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_param_groups_use_their_own_options():
    init, grads = _init(), _grads()
    a = [Parameter(p, np.float64) for p in init[:2]]
    b = [Parameter(init[2], np.float64)]
    opt = optim.SGD([{"params": a}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0.0
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.9
    for step_grads in grads:
        for p, g in zip(a + b, step_grads):
            p.grad = g.copy()
        opt.step()
    exp_a = ref_sgd(init[:2], [gs[:2] for gs in grads], lr=0.1)
    exp_b = ref_sgd(init[2:], [gs[2:] for gs in grads], lr=0.5, momentum=0.9)
    for p, e in zip(a + b, exp_a + exp_b):
        np.testing.assert_allclose(p.data, e, rtol=1e-12)


def test_param_groups_match_torch():
    torch = pytest.importorskip("torch")
    init, grads = _init(dtype=np.float32), _grads(dtype=np.float32)
    params = [Parameter(p) for p in init]
    tparams = [torch.nn.Parameter(torch.tensor(p)) for p in init]
    opt = optim.Adam([{"params": params[:1], "lr": 0.05, "amsgrad": True},
                      {"params": params[1:], "weight_decay": 0.1}], lr=0.01)
    topt = torch.optim.Adam([{"params": tparams[:1], "lr": 0.05, "amsgrad": True},
                             {"params": tparams[1:], "weight_decay": 0.1}], lr=0.01, foreach=False)
    for step_grads in grads:
        for p, tp, g in zip(params, tparams, step_grads):
            p.grad, tp.grad = g.copy(), torch.tensor(g)
        opt.step()
        topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_zero_grad_and_none_grads_are_skipped():
    init = _init()
    params = [Parameter(p) for p in init]
    opt = optim.Adam(params, lr=0.1)
    params[0].grad = np.ones(SHAPES[0], np.float32)
    before = [p.data.copy() for p in params]
    opt.step()
    assert not np.array_equal(params[0].data, before[0])
    for p, b in zip(params[1:], before[1:]):
        np.testing.assert_array_equal(p.data, b)
    assert set(opt.state) == {params[0]}
    assert opt.state[params[0]]["step"] == 1
    opt.zero_grad()
    assert all(p.grad is None for p in params)
    params[1].grad = np.ones(SHAPES[1], np.float32)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(params[1].grad, np.zeros(SHAPES[1], np.float32))


def test_frozen_parameter_is_not_updated():
    p = Parameter(np.ones(3), requires_grad=False)
    q = Parameter(np.ones(3))
    opt = optim.SGD([p, q], lr=1.0)
    p.grad = np.ones(3, np.float32)
    q.grad = np.ones(3, np.float32)
    opt.step()
    np.testing.assert_array_equal(p.data, np.ones(3))
    np.testing.assert_array_equal(q.data, np.zeros(3))


def test_update_is_in_place():
    p = Parameter(np.ones((4, 4)))
    data = p.data
    opt = optim.AdamW([p], lr=0.1)
    p.grad = np.ones((4, 4), np.float32)
    opt.step()
    assert p.data is data
    assert not np.array_equal(data, np.ones((4, 4)))


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)),
    ("Adam", dict(lr=0.01, weight_decay=1e-2)), ("AdamW", dict(lr=0.01, maximize=True))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_big_parameters_update_over_the_cores_with_the_one_thread_bits(name, kw, dtype):
    """A parameter of several `UPDATE_GRAIN` chunks is updated over the cores
    (yscv/compute/updates.py): the same bits as one thread, over 3 steps."""
    import yscv
    from yscv.compute.updates import UPDATE_GRAIN
    rng = np.random.default_rng(9)
    n = 3 * UPDATE_GRAIN + 17
    init = rng.standard_normal(n).astype(dtype)
    grads = [rng.standard_normal(n).astype(dtype) for _ in range(3)]

    def run(threads):
        before = yscv.get_num_threads()
        yscv.set_num_threads(threads, blas=False)
        try:
            p = Parameter(init.copy(), dtype)
            opt = getattr(optim, name)([p], **kw)
            for gr in grads:
                p.grad = gr.copy()
                opt.step()
            return p.data
        finally:
            yscv.set_num_threads(before, blas=False)

    one, two = run(1), run(2)
    assert one.dtype == dtype
    np.testing.assert_array_equal(one, two)
    ref = ref_sgd if name == "SGD" else None
    if ref is not None:
        np.testing.assert_allclose(one, ref([init], [[gr] for gr in grads], **kw)[0],
                                   rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                     ("Adam", dict(lr=0.01, amsgrad=True)),
                                     ("AdamW", dict(lr=0.01)),
                                     ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
                                     ("Adagrad", dict(lr=0.1, lr_decay=0.1))])
def test_state_dict_round_trip_is_exact(name, kw):
    init, grads = _init(dtype=np.float32), _grads(dtype=np.float32, steps=8)
    a = [Parameter(p) for p in init]
    opt_a = getattr(optim, name)(a, **kw)
    for step_grads in grads[:4]:
        for p, g in zip(a, step_grads):
            p.grad = g.copy()
        opt_a.step()
    sd = opt_a.state_dict()
    b = [Parameter(p.data) for p in a]
    opt_b = getattr(optim, name)(b, lr=123.0)
    opt_b.load_state_dict(sd)
    assert opt_b.param_groups[0]["lr"] == kw["lr"]
    # the state dict holds copies: mutating it changes nothing
    for st in sd["state"].values():
        for v in st.values():
            if isinstance(v, np.ndarray):
                v[...] = 1e9
    for step_grads in grads[4:]:
        for pa, pb, g in zip(a, b, step_grads):
            pa.grad, pb.grad = g.copy(), g.copy()
        opt_a.step()
        opt_b.step()
    for pa, pb in zip(a, b):
        np.testing.assert_array_equal(pa.data, pb.data)
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i in sa["state"]:
        for k, v in sa["state"][i].items():
            np.testing.assert_array_equal(v, sb["state"][i][k])


def test_load_state_dict_rejects_mismatches_and_changes_nothing():
    init = _init(dtype=np.float32)
    params = [Parameter(p) for p in init]
    opt = optim.Adam(params, lr=0.01)
    for p in params:
        p.grad = np.ones(p.shape, np.float32)
    opt.step()
    good = opt.state_dict()
    before = opt.state_dict()

    bad_shape = opt.state_dict()
    bad_shape["state"][0]["exp_avg"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"'exp_avg' has shape \(2, 2\)"):
        opt.load_state_dict(bad_shape)
    bad_groups = {"state": {}, "param_groups": good["param_groups"] * 2}
    with pytest.raises(ValueError, match="2 parameter group"):
        opt.load_state_dict(bad_groups)
    bad_count = opt.state_dict()
    bad_count["param_groups"][0]["params"] = [0, 1]
    with pytest.raises(ValueError, match="group 0 has 2 parameter"):
        opt.load_state_dict(bad_count)
    bad_key = opt.state_dict()
    bad_key["state"][1]["momentum_buffer"] = np.zeros(SHAPES[1], np.float32)
    with pytest.raises(ValueError, match="unknown entry 'momentum_buffer'"):
        opt.load_state_dict(bad_key)
    bad_index = opt.state_dict()
    bad_index["state"][7] = {"step": 1}
    with pytest.raises(ValueError, match="state for parameter 7"):
        opt.load_state_dict(bad_index)
    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for i in before["state"]:
        for k, v in before["state"][i].items():
            np.testing.assert_array_equal(v, after["state"][i][k])


@pytest.mark.parametrize("call,match", [
    (lambda ps: optim.SGD(ps, lr=-1.0), "invalid lr"),
    (lambda ps: optim.SGD(ps, lr=0.1, nesterov=True), "nesterov"),
    (lambda ps: optim.Adam(ps, betas=(1.0, 0.9)), "beta parameter at index 0"),
    (lambda ps: optim.RMSprop(ps, momentum=-0.1), "invalid momentum"),
    (lambda ps: optim.Adagrad(ps, lr_decay=-1.0), "invalid lr_decay"),
    (lambda ps: optim.SGD([], lr=0.1), "empty parameter list"),
    (lambda ps: optim.SGD([{"params": ps, "bogus": 1}], lr=0.1), "unknown option"),
    (lambda ps: optim.SGD([{"params": ps}, {"params": ps[:1]}], lr=0.1), "more than one"),
])
def test_bad_arguments(call, match):
    params = [Parameter(p) for p in _init()]
    with pytest.raises(ValueError, match=match):
        call(params)


def test_params_must_be_parameters():
    with pytest.raises(TypeError, match="Parameter"):
        optim.SGD([np.ones(3)], lr=0.1)
    with pytest.raises(TypeError, match="iterable"):
        optim.SGD(Parameter(np.ones(3)), lr=0.1)


def test_grad_shape_mismatch_raises():
    p = Parameter(np.ones(3))
    opt = optim.SGD([p], lr=0.1)
    p.grad = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"grad of shape \(4,\)"):
        opt.step()


def test_step_with_closure_returns_loss():
    p = Parameter(np.ones(2))
    opt = optim.SGD([p], lr=0.5)

    def closure():
        p.grad = 2 * p.data
        return float(np.sum(p.data ** 2))

    assert opt.step(closure) == 2.0
    np.testing.assert_allclose(p.data, [0.0, 0.0])


def test_add_param_group():
    a, b = Parameter(np.ones(2)), Parameter(np.ones(3))
    opt = optim.Adam([a], lr=0.01)
    opt.add_param_group({"params": [b], "lr": 0.1})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    b.grad = np.ones(3, np.float32)
    opt.step()
    np.testing.assert_allclose(b.data, np.full(3, 0.9), rtol=1e-6)


# ------------------------------------------- restored settings are checked like new ones
OPT_KW = {"SGD": dict(lr=0.1, momentum=0.9), "Adam": dict(lr=0.01), "AdamW": dict(lr=0.01),
          "RMSprop": dict(lr=0.01, momentum=0.5), "Adagrad": dict(lr=0.1)}

BAD_GROUP_SETTINGS = [
    ("Adam", "betas", ["a", "b"], TypeError, "beta parameter at index 0: 'a'"),
    ("Adam", "betas", [0.9], ValueError, "betas must be a pair"),
    ("Adam", "betas", [0.9, 1.5], ValueError, "beta parameter at index 1"),
    ("Adam", "eps", -1e-8, ValueError, "invalid eps"),
    ("Adam", "amsgrad", "yes", TypeError, "invalid amsgrad='yes'"),
    ("AdamW", "weight_decay", "0.01", TypeError, "invalid weight_decay='0.01'"),
    ("AdamW", "maximize", 1, TypeError, "invalid maximize=1"),
    ("SGD", "lr", "fast", TypeError, "invalid lr='fast'"),
    ("SGD", "lr", float("nan"), ValueError, "invalid lr=nan"),
    ("SGD", "momentum", -0.9, ValueError, "invalid momentum"),
    ("SGD", "nesterov", "no", TypeError, "invalid nesterov='no'"),
    ("SGD", "dampening", None, TypeError, "invalid dampening=None"),
    ("RMSprop", "alpha", float("inf"), ValueError, "invalid alpha=inf"),
    ("RMSprop", "centered", 0, TypeError, "invalid centered=0"),
    ("Adagrad", "lr_decay", -1.0, ValueError, "invalid lr_decay"),
    ("Adagrad", "initial_accumulator_value", [0.1], TypeError, "initial_accumulator_value"),
    ("Adagrad", "initial_lr", "x", TypeError, "invalid initial_lr='x'"),
]


def _trained(name, n=2):
    params = [Parameter(p) for p in _init(dtype=np.float32)]
    opt = getattr(optim, name)(params, **OPT_KW[name])
    for step_grads in _grads(dtype=np.float32, steps=n):
        for p, g in zip(params, step_grads):
            p.grad = g
        opt.step()
    return opt


def _opt_snapshot(opt):
    sd = opt.state_dict()
    return sd["param_groups"], {i: {k: np.array(v, copy=True) for k, v in st.items()}
                                for i, st in sd["state"].items()}


def _assert_opt_unchanged(opt, snap):
    groups, state = _opt_snapshot(opt)
    assert groups == snap[0]
    assert state.keys() == snap[1].keys()
    for i in state:
        for k in state[i]:
            np.testing.assert_array_equal(state[i][k], snap[1][i][k])


@pytest.mark.parametrize("name,key,value,exc,match", BAD_GROUP_SETTINGS,
                         ids=[f"{n}-{k}={v!r}" for n, k, v, _, _ in BAD_GROUP_SETTINGS])
def test_bad_setting_refused_by_constructor_and_load_state_dict(name, key, value, exc, match):
    params = [Parameter(p) for p in _init()]
    with pytest.raises(exc, match=match):   # a new group with that setting is refused ...
        getattr(optim, name)([{"params": params, key: value}], **OPT_KW[name])
    opt = _trained(name)
    snap = _opt_snapshot(opt)
    sd = opt.state_dict()
    sd["param_groups"][0][key] = value
    with pytest.raises(ValueError, match=f"group 0: .*{match}"):  # ... and so is a restored one
        opt.load_state_dict(sd)
    _assert_opt_unchanged(opt, snap)


@pytest.mark.parametrize("name", list(OPT_KW))
def test_load_state_dict_refuses_unknown_group_keys_and_bad_counts(name):
    opt = _trained(name)
    snap = _opt_snapshot(opt)
    sd = opt.state_dict()
    sd["param_groups"][0]["foo"] = 1
    with pytest.raises(ValueError, match=r"group 0: unknown option\(s\) \['foo'\]"):
        opt.load_state_dict(sd)
    sd = opt.state_dict()
    sd["param_groups"][0]["params"] = ["a", "b", "c"]
    with pytest.raises(ValueError, match="params must be a list of parameter indices"):
        opt.load_state_dict(sd)
    sd = opt.state_dict()
    sd["param_groups"] = ["lr"]
    with pytest.raises(ValueError, match="group 0 is a str, not a dict"):
        opt.load_state_dict(sd)
    if name != "SGD":
        sd = opt.state_dict()
        sd["state"][0]["step"] = float("inf")
        with pytest.raises(ValueError, match="step=inf is not a count"):
            opt.load_state_dict(sd)
    _assert_opt_unchanged(opt, snap)


def test_restored_settings_are_normalised():
    opt = _trained("Adam")
    sd = opt.state_dict()
    sd["param_groups"][0]["betas"] = [0.8, 0.99]      # JSON gives a list
    sd["param_groups"][0]["amsgrad"] = np.bool_(True)
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["betas"] == (0.8, 0.99)
    assert opt.param_groups[0]["amsgrad"] is True


# ------------------------------------------------ crafted checkpoints (edited metadata)
def _craft(src, dst, edit):
    """Rewrite a checkpoint with ``edit(meta)`` applied to its JSON metadata and
    the checksum recomputed: a file that passes the integrity check."""
    import json
    import struct

    from safetensors.numpy import load_file, save

    from yscv.state.encoding import _checksum

    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))["__metadata__"]
    meta = json.loads(header["yscv.meta"])
    edit(meta)
    meta_json = json.dumps(meta, sort_keys=True, separators=(",", ":"))
    arrays = load_file(src)
    header["yscv.meta"] = meta_json
    header["yscv.sha256"] = _checksum(meta_json, arrays)
    with open(dst, "wb") as f:
        f.write(save(arrays, metadata=header))
    return dst


def _objects(name, sched):
    import yscv
    import yscv.nn as nn

    yscv.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = getattr(optim, name)(model.parameters(), **OPT_KW[name])
    s = sched(opt)
    for _ in range(3):
        for p in model.parameters():
            p.grad = np.ones_like(p.data)
        opt.step()
        s.step()
    return model, opt, s


def _set_group(key, value):
    def edit(meta):
        meta["optimizer"]["param_groups"][0][key] = value
    return edit


def _set_sched(key, value):
    def edit(meta):
        meta["scheduler"][key] = value
    return edit


def _set_step(value):
    def edit(meta):
        meta["optimizer"]["state_scalars"]["0"]["step"] = value
    return edit


_STEP = lambda o: optim.StepLR(o, step_size=2, gamma=0.5)                      # noqa: E731
_CYCLE = lambda o: optim.OneCycleLR(o, max_lr=0.1, total_steps=20)             # noqa: E731
_LINEAR = lambda o: optim.LinearLR(o, start_factor=0.5, total_iters=4)        # noqa: E731
CRAFTED = [
    ("Adam", _STEP, _set_group("betas", ["a", "b"]), "beta parameter at index 0"),
    ("Adam", _STEP, _set_group("betas", [0.9, 0.999, 0.1]), "betas must be a pair"),
    ("Adam", _STEP, _set_group("foo", 1), r"unknown option\(s\) \['foo'\]"),
    ("Adam", _STEP, _set_group("amsgrad", "false"), "invalid amsgrad"),
    ("AdamW", _STEP, _set_group("lr", -0.1), "invalid lr=-0.1"),
    ("SGD", _STEP, _set_group("momentum", "0.9"), "invalid momentum='0.9'"),
    ("SGD", _STEP, _set_group("nesterov", "yes"), "invalid nesterov"),
    ("RMSprop", _STEP, _set_group("alpha", None), "invalid alpha=None"),
    ("Adagrad", _STEP, _set_group("eps", -1.0), "invalid eps"),
    ("Adagrad", _STEP, _set_step("many"), "step='many' is not a count"),
    ("SGD", _STEP, _set_sched("step_size", 0), "step_size must be an int >= 1, got 0"),
    ("SGD", _STEP, _set_sched("gamma", "x"), "gamma must be a real number, got 'x'"),
    ("SGD", _STEP, _set_sched("last_epoch", "3"), "last_epoch must be an int"),
    ("SGD", _STEP, _set_sched("extra_key", 1), r"unexpected key\(s\) \['extra_key'\]"),
    ("SGD", _CYCLE, _set_sched("anneal_strategy", "exp"), "anneal_strategy must be one of"),
    ("Adam", _CYCLE, _set_sched("total_steps", -5), "total_steps must be an int >= 1"),
    ("Adam", _CYCLE, _set_group("max_lr", "high"), "invalid max_lr='high'"),
    ("SGD", _LINEAR, _set_sched("start_factor", 5.0), "start_factor must be <= 1.0"),
]


@pytest.mark.parametrize("name,sched,edit,match", CRAFTED,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CRAFTED)])
def test_crafted_checkpoint_setting_raises_checkpoint_error_and_loads_nothing(
        tmp_path, name, sched, edit, match):
    import yscv
    from yscv import random as yrandom
    from yscv.state import load_checkpoint, save_checkpoint

    model, opt, s = _objects(name, sched)
    good = save_checkpoint(tmp_path / "good.safetensors", model, opt, s, step=3)
    bad = _craft(good, tmp_path / "bad.safetensors", edit)
    m2, o2, s2 = _objects(name, sched)
    load_checkpoint(good, m2, o2, s2)             # the untouched file loads
    yscv.manual_seed(7)
    before = (m2.state_dict(), _opt_snapshot(o2), s2.state_dict(), yrandom.get_rng_state())
    with pytest.raises(yscv.CheckpointError, match=match):
        load_checkpoint(bad, m2, o2, s2)
    for k, v in m2.state_dict().items():
        np.testing.assert_array_equal(v, before[0][k])
    _assert_opt_unchanged(o2, before[1])
    assert s2.state_dict() == before[2] and yrandom.get_rng_state() == before[3]


def _torch_fuses(torch):
    """Whether this torch's CPU kernels compute add(alpha=) as one fused
    multiply-add (AVX2/AVX512 builds): in float32, -1 + (1 + 2**-12)**2 is
    2**-11 unfused (the product rounds to 1 + 2**-11), 2**-11 + 2**-24 fused."""
    b = torch.full((32,), 1 + 2.0 ** -12)
    return bool((torch.full((32,), -1.0).add(b, alpha=1 + 2.0 ** -12)
                 == 2.0 ** -11 + 2.0 ** -24).all())


@pytest.mark.parametrize("kw", [dict(alpha=0.99), dict(alpha=0.99, centered=True),
                                dict(alpha=0.99, momentum=0.9),
                                dict(alpha=0.99, weight_decay=1e-2),
                                dict(alpha=0.3, centered=True, momentum=0.5)],
                         ids=["plain", "centered", "momentum", "weight_decay", "big_weight"])
def test_rmsprop_float32_roundings_match_torch_on_digits_mlp(kw):
    """48 steps of an MLP on scikit-learn's digits, torch computing the
    gradients and both optimizers taking the same ones: the float32 square
    and gradient averages are torch's bit for bit (addcmul, lerp,
    add(alpha=) rounded once, as torch's vectorised kernels do), the
    parameters torch's to 1e-6 relative (torch's float32 sqrt is not always
    correctly rounded, numpy's is)."""
    torch = pytest.importorskip("torch")
    datasets = pytest.importorskip("sklearn.datasets")
    x, y = datasets.load_digits(return_X_y=True)
    x = torch.from_numpy((x[:256] / 16.0).astype(np.float32))
    y = torch.from_numpy(y[:256])
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 10))
    tparams = list(net.parameters())
    params = [Parameter(tp.detach().numpy().copy()) for tp in tparams]
    opt = optim.RMSprop(params, lr=1e-3, **kw)
    topt = torch.optim.RMSprop(tparams, lr=1e-3, foreach=False, **kw)
    exact = _torch_fuses(torch) and simd._HAS_FMA  # both round the multiply-adds once
    for step in range(48):
        topt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        for p, tp in zip(params, tparams):
            p.grad = tp.grad.numpy().copy()
        topt.step()
        opt.step()
        for p, tp in zip(params, tparams):
            want = tp.detach().numpy()
            scale = np.abs(want).max()
            assert np.abs(p.data - want).max() <= 1e-6 * scale, step
            if exact and ("weight_decay" not in kw or step == 0):  # the decay reads p
                for key in ("square_avg", "grad_avg"):
                    if key in opt.state[p]:
                        np.testing.assert_array_equal(opt.state[p][key],
                                                      topt.state[tp][key].numpy(),
                                                      err_msg=f"{key} at step {step}")
