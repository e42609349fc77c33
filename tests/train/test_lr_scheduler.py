"""LR schedulers: closed forms by hand, PyTorch step by step, state dicts."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import yscv.optim as optim
from yscv.nn import Parameter
from yscv.optim import lr_scheduler


def _opt(kind="SGD", lr=0.1, groups=1, **kw):
    params = [Parameter(np.ones(2)) for _ in range(groups)]
    spec = [{"params": [p], "lr": lr * (k + 1)} for k, p in enumerate(params)]
    return getattr(optim, kind)(spec, lr=lr, **kw)


def _lrs(sched, steps):
    out = [sched.get_last_lr()]
    for _ in range(steps):
        sched.optimizer.step()
        sched.step()
        out.append(sched.get_last_lr())
    return out


def test_step_lr_by_hand():
    s = lr_scheduler.StepLR(_opt(lr=0.1), step_size=3, gamma=0.5)
    got = [v[0] for v in _lrs(s, 8)]
    assert got == [0.1 * 0.5 ** (t // 3) for t in range(9)]


def test_multistep_lr_by_hand():
    s = optim.MultiStepLR(_opt(lr=1.0), milestones=[2, 5, 5], gamma=0.1)
    got = [v[0] for v in _lrs(s, 7)]
    expected = [1.0, 1.0, 0.1, 0.1, 0.1, 0.1 * 0.01, 0.1 * 0.01, 0.1 * 0.01]
    np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_exponential_lr_by_hand():
    s = optim.ExponentialLR(_opt(lr=0.2), gamma=0.9)
    np.testing.assert_allclose([v[0] for v in _lrs(s, 6)], [0.2 * 0.9 ** t for t in range(7)],
                               rtol=1e-15)


def test_cosine_by_hand():
    s = optim.CosineAnnealingLR(_opt(lr=0.1), T_max=5, eta_min=0.01)
    got = [v[0] for v in _lrs(s, 7)]
    exp = [0.01 + 0.09 * (1 + math.cos(math.pi * t / 5)) / 2 for t in range(8)]
    np.testing.assert_allclose(got, exp, rtol=1e-15)
    assert got[5] == pytest.approx(0.01)


def test_linear_warmup_by_hand():
    s = optim.LinearLR(_opt(lr=0.1), start_factor=0.25, end_factor=1.0, total_iters=4)
    got = [v[0] for v in _lrs(s, 6)]
    np.testing.assert_allclose(got, [0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1], rtol=1e-15)


def test_one_cycle_by_hand_and_momentum():
    opt = _opt(lr=0.1, momentum=0.9)
    s = optim.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3, div_factor=10.0,
                         final_div_factor=100.0)
    lrs, moms = [opt.param_groups[0]["lr"]], [opt.param_groups[0]["momentum"]]
    for _ in range(9):
        s.step()
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
    # warm-up over steps 0..2 (end_step = 0.3*10 - 1 = 2), then down to 0.1/100 at step 9
    assert lrs[0] == pytest.approx(0.1) and lrs[2] == pytest.approx(1.0)
    assert lrs[9] == pytest.approx(0.001)
    assert lrs[1] == pytest.approx(1.0 + (0.1 - 1.0) / 2 * (math.cos(math.pi * 0.5) + 1))
    assert moms[0] == pytest.approx(0.95) and moms[2] == pytest.approx(0.85)
    assert moms[9] == pytest.approx(0.95)
    s.step()  # step 10 == total_steps is allowed (PyTorch), 11 is not
    before = s.state_dict(), dict(opt.param_groups[0])
    with pytest.raises(ValueError, match="total_steps"):
        s.step()
    assert (s.state_dict(), opt.param_groups[0]) == before   # the failed step changed nothing


def test_one_cycle_cycles_adam_beta1_and_linear_three_phase():
    opt = _opt("Adam", lr=0.1, betas=(0.9, 0.99))
    s = optim.OneCycleLR(opt, max_lr=0.5, epochs=2, steps_per_epoch=5, anneal_strategy="linear",
                         three_phase=True, base_momentum=0.8, max_momentum=0.9)
    assert opt.param_groups[0]["betas"] == (0.9, 0.99)
    for _ in range(2):
        s.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5)
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.8)
    assert opt.param_groups[0]["betas"][1] == 0.99


def _torch_pairs():
    return [
        ("StepLR", dict(step_size=3, gamma=0.5), 12),
        ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3), 12),
        ("ExponentialLR", dict(gamma=0.8), 12),
        ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001), 20),
        ("LinearLR", dict(start_factor=0.1, end_factor=0.9, total_iters=6), 10),
        ("LinearLR", dict(start_factor=1.0, end_factor=0.0, total_iters=4), 8),
        ("OneCycleLR", dict(max_lr=[1.0, 2.0], total_steps=20), 19),
        ("OneCycleLR", dict(max_lr=0.5, total_steps=15, three_phase=True, anneal_strategy="linear",
                            pct_start=0.4), 14),
        ("OneCycleLR", dict(max_lr=0.5, epochs=3, steps_per_epoch=4, cycle_momentum=False), 11),
    ]


@pytest.mark.parametrize("name,kw,steps", _torch_pairs(), ids=lambda v: str(v))
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_matches_torch_step_by_step(name, kw, steps, kind):
    torch = pytest.importorskip("torch")
    extra = {"momentum": 0.9} if kind == "SGD" else {}
    opt = _opt(kind, lr=0.1, groups=2, **extra)
    tparams = [torch.nn.Parameter(torch.ones(2)) for _ in range(2)]
    topt = getattr(torch.optim, kind)([{"params": [p], "lr": 0.1 * (k + 1)}
                                       for k, p in enumerate(tparams)], lr=0.1, **extra)
    s = getattr(lr_scheduler, name)(opt, **kw)
    ts = getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    for t in range(steps + 1):
        np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12, err_msg=f"step {t}")
        for g, tg in zip(opt.param_groups, topt.param_groups):
            assert g["lr"] == pytest.approx(tg["lr"], rel=1e-12)
            if kind == "SGD":
                assert g["momentum"] == pytest.approx(tg["momentum"], rel=1e-12)
            else:
                assert g["betas"][0] == pytest.approx(tg["betas"][0], rel=1e-12)
        if t < steps:
            opt.step()
            topt.step()
            s.step()
            ts.step()


@pytest.mark.parametrize("make", [
    lambda o: optim.StepLR(o, step_size=2, gamma=0.5),
    lambda o: optim.MultiStepLR(o, [1, 4]),
    lambda o: optim.ExponentialLR(o, 0.9),
    lambda o: optim.CosineAnnealingLR(o, T_max=6),
    lambda o: optim.LinearLR(o, start_factor=0.2, total_iters=5),
    lambda o: optim.OneCycleLR(o, max_lr=1.0, total_steps=12),
])
def test_state_dict_round_trip_json(make):
    a = _opt(momentum=0.9)
    sa = make(a)
    for _ in range(3):
        sa.step()
    sd = json.loads(json.dumps(sa.state_dict()))  # it is JSON-serialisable
    b = _opt(momentum=0.9)
    sb = make(b)
    b.load_state_dict(a.state_dict())
    sb.load_state_dict(sd)
    assert sb.state_dict() == sa.state_dict()
    for _ in range(5):
        sa.step()
        sb.step()
        assert sa.get_last_lr() == sb.get_last_lr()
        assert a.param_groups[0]["lr"] == b.param_groups[0]["lr"]
        assert a.param_groups[0]["momentum"] == b.param_groups[0]["momentum"]


def test_load_state_dict_rejects_other_scheduler_and_changes_nothing():
    s = optim.StepLR(_opt(), step_size=2)
    before = s.state_dict()
    other = optim.CosineAnnealingLR(_opt(), T_max=3).state_dict()
    with pytest.raises(ValueError, match="CosineAnnealingLR state, this is a StepLR"):
        s.load_state_dict(other)
    broken = dict(before)
    broken["base_lrs"] = [0.1, 0.2]
    with pytest.raises(ValueError, match="base_lrs must list one value per parameter group"):
        s.load_state_dict(broken)
    assert s.state_dict() == before


def test_bad_arguments():
    with pytest.raises(ValueError, match="step_size"):
        optim.StepLR(_opt(), step_size=0)
    with pytest.raises(ValueError, match="start_factor"):
        optim.LinearLR(_opt(), start_factor=0.0)
    with pytest.raises(ValueError, match="total_steps"):
        optim.OneCycleLR(_opt(), max_lr=1.0)
    with pytest.raises(ValueError, match="anneal_strategy"):
        optim.OneCycleLR(_opt(), max_lr=1.0, total_steps=5, anneal_strategy="exp")
    with pytest.raises(ValueError, match="momentum or beta1"):
        optim.OneCycleLR(_opt("Adagrad"), max_lr=1.0, total_steps=5)
    with pytest.raises(TypeError, match="not a yscv.optim Optimizer"):
        optim.StepLR(object(), step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        optim.StepLR(_opt(), step_size=1, last_epoch=3)


def test_exported_from_optim_and_lr_scheduler():
    for name in ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                 "OneCycleLR"):
        assert getattr(optim, name) is getattr(lr_scheduler, name)


# ---------------------------------------------------------------- PyTorch, step by step
# Each builder takes the scheduler module (yscv's or torch's: same API) and an
# optimizer, and returns one scheduler or a list of schedulers all stepped on
# the same optimizer (PyTorch's chainable composition).
def _warm(epoch):
    return min(1.0, (epoch + 1) / 5)


def _decay(epoch):
    return 0.93 ** epoch


TORCH_CASES = {
    "LambdaLR": lambda L, o: L.LambdaLR(o, _warm),
    "LambdaLR-per-group": lambda L, o: L.LambdaLR(o, [_warm, _decay]),
    "StepLR": lambda L, o: L.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, milestones=[30, 3, 12, 12], gamma=0.3),
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, gamma=0.95),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, T_max=13, eta_min=0.001),
    "LinearLR": lambda L, o: L.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=17),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, max_lr=[1.0, 3.0], total_steps=60),
    "OneCycleLR-3phase": lambda L, o: L.OneCycleLR(o, max_lr=0.5, total_steps=60, pct_start=0.25,
                                                   three_phase=True, anneal_strategy="linear"),
    "chain Exponential+MultiStep": lambda L, o: [L.ExponentialLR(o, gamma=0.9),
                                                 L.MultiStepLR(o, milestones=[4, 9], gamma=0.5)],
    "chain Linear+Cosine": lambda L, o: [L.LinearLR(o, start_factor=0.2, total_iters=8),
                                         L.CosineAnnealingLR(o, T_max=25)],
    "chain StepLR+Lambda+Exponential": lambda L, o: [L.StepLR(o, 5, 0.7), L.LambdaLR(o, _warm),
                                                     L.ExponentialLR(o, 0.98)],
    "ChainedScheduler": lambda L, o: L.ChainedScheduler([L.ExponentialLR(o, gamma=0.9),
                                                         L.StepLR(o, step_size=4, gamma=0.5)]),
    "SequentialLR Linear->Cosine": lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=10), L.CosineAnnealingLR(o, T_max=30)],
        milestones=[10]),
    "SequentialLR Lambda->Step->Exponential": lambda L, o: L.SequentialLR(
        o, [L.LambdaLR(o, _warm), L.StepLR(o, 4, 0.5), L.ExponentialLR(o, 0.9)],
        milestones=[6, 25]),
    "SequentialLR Exponential->MultiStep": lambda L, o: L.SequentialLR(
        o, [L.ExponentialLR(o, 0.8), L.MultiStepLR(o, [3, 5])], milestones=[7]),
}


def _torch_opt(torch, kind, groups, lr, **kw):
    params = [torch.nn.Parameter(torch.ones(2)) for _ in range(groups)]
    return getattr(torch.optim, kind)([{"params": [p], "lr": lr * (k + 1)}
                                       for k, p in enumerate(params)], lr=lr, **kw)


def _as_list(s):
    return s if isinstance(s, list) else [s]


def _group_values(opt, kind):
    key = "momentum" if kind == "SGD" else "betas"
    return [(g["lr"], g[key]) for g in opt.param_groups]


@pytest.mark.parametrize("case", list(TORCH_CASES))
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_every_scheduler_equals_torch_for_60_steps(case, kind):
    """Every rate of every group (and the cycled momentum) is bit-identical
    to torch 2.x at every one of 60 steps."""
    torch = pytest.importorskip("torch")
    extra = {"momentum": 0.9} if kind == "SGD" else {}
    opt = _opt(kind, lr=0.1, groups=2, **extra)
    topt = _torch_opt(torch, kind, 2, 0.1, **extra)
    ours = _as_list(TORCH_CASES[case](lr_scheduler, opt))
    theirs = _as_list(TORCH_CASES[case](torch.optim.lr_scheduler, topt))
    for t in range(61):
        got = [float(g["lr"]) for g in opt.param_groups]
        want = [float(g["lr"]) for g in topt.param_groups]
        assert got == want, f"step {t}: {got} != {want}"
        assert [s.get_last_lr() for s in ours] == [s.get_last_lr() for s in theirs], f"step {t}"
        if kind == "SGD":
            assert [g["momentum"] for g in opt.param_groups] == \
                [g["momentum"] for g in topt.param_groups]
        else:
            assert [tuple(g["betas"]) for g in opt.param_groups] == \
                [tuple(g["betas"]) for g in topt.param_groups]
        if t == 60:
            break
        opt.step()
        topt.step()
        for a, b in zip(ours, theirs):
            a.step()
            b.step()


def _metrics(n=60):
    # improves, plateaus (tiny improvements under the threshold), worsens, improves again
    vals = [1.0, 0.8, 0.7, 0.7, 0.69999, 0.7, 0.71, 0.72, 0.6, 0.6, 0.6, 0.6, 0.61, 0.5]
    vals += [0.5 + 0.01 * ((k * 7) % 5) for k in range(n)]
    return vals[:n]


PLATEAU_CASES = [
    dict(),
    dict(patience=2),
    dict(mode="max", patience=1, factor=0.5),
    dict(patience=0, threshold=0.05, threshold_mode="abs", cooldown=2),
    dict(mode="max", patience=1, threshold=0.01, threshold_mode="abs", factor=0.3),
    dict(patience=1, factor=0.5, min_lr=[0.02, 0.09], eps=1e-3),
    dict(patience=0, factor=0.2, min_lr=0.001, cooldown=1),
]


@pytest.mark.parametrize("kw", PLATEAU_CASES, ids=str)
def test_reduce_on_plateau_equals_torch(kw):
    torch = pytest.importorskip("torch")
    opt = _opt("SGD", lr=0.1, groups=2)
    topt = _torch_opt(torch, "SGD", 2, 0.1)
    s = optim.ReduceLROnPlateau(opt, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    metrics = _metrics()
    if kw.get("mode") == "max":
        metrics = [-m for m in metrics]
    reductions = 0
    for t, m in enumerate(metrics):
        opt.step()
        topt.step()
        before = opt.param_groups[0]["lr"]
        s.step(m)
        ts.step(m)
        reductions += opt.param_groups[0]["lr"] != before
        assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in topt.param_groups], t
        assert s.get_last_lr() == ts.get_last_lr()
        assert (s.best, s.num_bad_epochs, s.cooldown_counter, s.last_epoch) == \
            (ts.best, ts.num_bad_epochs, ts.cooldown_counter, ts.last_epoch), t
    assert reductions >= 1  # the metric sequence does exercise a reduction


def test_reduce_on_plateau_by_hand():
    opt = _opt(lr=1.0)
    s = optim.ReduceLROnPlateau(opt, patience=1, factor=0.5, threshold=0.0)
    lrs = []
    for m in [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]:
        s.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    # bad epochs at 3rd, 4th (2 > patience -> halve, reset), 6th, 7th (halve), 8th
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    s.step(np.array([0.1]))          # a one-element array is a metric too
    assert s.best == pytest.approx(0.1)


def test_chained_schedulers_compose_by_hand():
    opt = _opt(lr=1.0)
    a = optim.ExponentialLR(opt, gamma=0.5)
    b = optim.MultiStepLR(opt, milestones=[2], gamma=0.1)
    got = []
    for _ in range(3):
        a.step()
        b.step()
        got.append(opt.param_groups[0]["lr"])
    np.testing.assert_allclose(got, [0.5, 0.25 * 0.1, 0.125 * 0.1], rtol=1e-15)


# ---------------------------------------------------------------- state dicts and resume
def _plateau(L, o):
    return L.ReduceLROnPlateau(o, patience=1, factor=0.5, cooldown=1, min_lr=[0.0, 0.01])


RESUME_CASES = {**TORCH_CASES, "ReduceLROnPlateau": _plateau}


def _drive(opt, scheds, t):
    opt.step()
    for s in scheds:
        if s.takes_metric:
            s.step(_metrics(60)[t])
        else:
            s.step()


@pytest.mark.parametrize("case", list(RESUME_CASES))
@pytest.mark.parametrize("at", [0, 5, 13])
def test_resume_mid_schedule_continues_identically(case, at):
    build = RESUME_CASES[case]
    a = _opt("SGD", lr=0.1, groups=2, momentum=0.9)
    sa = _as_list(build(lr_scheduler, a))
    for t in range(at):
        _drive(a, sa, t)
    opt_sd = a.state_dict()
    sched_sds = [json.loads(json.dumps(s.state_dict())) for s in sa]   # JSON-serialisable
    b = _opt("SGD", lr=0.1, groups=2, momentum=0.9)
    sb = _as_list(build(lr_scheduler, b))
    b.load_state_dict(opt_sd)
    for s, sd in zip(sb, sched_sds):
        s.load_state_dict(sd)
    assert [s.state_dict() for s in sb] == [s.state_dict() for s in sa]
    for t in range(at, at + 30):
        _drive(a, sa, t)
        _drive(b, sb, t)
        assert _group_values(a, "SGD") == _group_values(b, "SGD"), t
        assert [s.get_last_lr() for s in sa] == [s.get_last_lr() for s in sb], t


class _Warmup:
    """A callable object: LambdaLR saves its attributes (not the code)."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.steps)


def test_lambda_lr_saves_no_functions_but_callable_objects_state():
    s = optim.LambdaLR(_opt(groups=2), [lambda e: 0.5 ** e, _Warmup(4)])
    s.lr_lambdas[1].steps = 10
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [None, {"steps": 10}]
    json.dumps(sd)
    fresh = optim.LambdaLR(_opt(groups=2), [lambda e: 0.5 ** e, _Warmup(4)])
    fresh.load_state_dict(sd)
    assert fresh.lr_lambdas[1].steps == 10
    with pytest.raises(ValueError, match=r"lr_lambdas\[0\] must be None or a dict"):
        fresh.load_state_dict({**sd, "lr_lambdas": ["code", None]})


def test_interval_and_takes_metric_class_attributes():
    for name in lr_scheduler.__all__:
        cls = getattr(lr_scheduler, name)
        assert cls.interval in ("epoch", "step"), name
        assert cls.takes_metric is (name == "ReduceLROnPlateau"), name
    assert optim.OneCycleLR.interval == "step"
    assert optim.StepLR.interval == optim.ReduceLROnPlateau.interval == "epoch"
    o = _opt()
    one = optim.OneCycleLR(o, max_lr=1.0, total_steps=20)
    assert optim.ChainedScheduler([one]).interval == "step"
    assert optim.ChainedScheduler([one, optim.StepLR(o, 3)]).interval == "epoch"
    assert optim.SequentialLR(o, [optim.LinearLR(o), optim.ExponentialLR(o, 0.9)],
                              milestones=[3]).interval == "epoch"


def test_exported_new_schedulers():
    for name in ("LambdaLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau",
                 "LRScheduler"):
        assert getattr(optim, name) is getattr(lr_scheduler, name)
        assert name in optim.__all__ and name in lr_scheduler.__all__


def test_new_scheduler_bad_arguments():
    o = _opt(groups=2)
    with pytest.raises(TypeError, match=r"LambdaLR: lr_lambda\[0\] is not callable"):
        optim.LambdaLR(o, 0.5)
    with pytest.raises(ValueError, match="LambdaLR: expected 2 lr_lambdas"):
        optim.LambdaLR(o, [_decay])
    other = _opt()
    with pytest.raises(ValueError, match="one milestone fewer"):
        optim.SequentialLR(o, [optim.StepLR(o, 2), optim.ExponentialLR(o, 0.9)], milestones=[])
    with pytest.raises(ValueError, match=r"schedulers\[1\].*another optimizer"):
        optim.SequentialLR(o, [optim.StepLR(o, 2), optim.StepLR(other, 2)], milestones=[3])
    with pytest.raises(ValueError, match="needs a metric"):
        optim.SequentialLR(o, [optim.StepLR(o, 2), optim.ReduceLROnPlateau(o)], milestones=[3])
    with pytest.raises(TypeError, match=r"schedulers\[0\] is a str"):
        optim.SequentialLR(o, ["StepLR"], milestones=[])
    with pytest.raises(ValueError, match="milestones must be increasing"):
        optim.SequentialLR(o, [optim.StepLR(o, 2)] * 3, milestones=[5, 2])
    with pytest.raises(ValueError, match="at least one scheduler"):
        optim.ChainedScheduler([], optimizer=o)
    with pytest.raises(ValueError, match="needs a metric"):
        optim.ChainedScheduler([optim.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match="mode must be one of"):
        optim.ReduceLROnPlateau(o, mode="avg")
    with pytest.raises(ValueError, match="factor must be < 1.0"):
        optim.ReduceLROnPlateau(o, factor=1.0)
    with pytest.raises(ValueError, match="patience must be an int >= 0"):
        optim.ReduceLROnPlateau(o, patience=-1)
    with pytest.raises(TypeError, match="patience must be an int"):
        optim.ReduceLROnPlateau(o, patience=2.5)
    with pytest.raises(ValueError, match="threshold_mode must be one of"):
        optim.ReduceLROnPlateau(o, threshold_mode="pct")
    with pytest.raises(ValueError, match="min_lr must list one value per parameter group"):
        optim.ReduceLROnPlateau(o, min_lr=[0.1])
    with pytest.raises(ValueError, match="cooldown"):
        optim.ReduceLROnPlateau(o, cooldown=-2)
    with pytest.raises(TypeError, match="StepLR: gamma must be a real number"):
        optim.StepLR(o, 2, gamma="x")
    with pytest.raises(ValueError, match=r"MultiStepLR: milestones\[1\] must be an int >= 0"):
        optim.MultiStepLR(o, [2, -1])


def test_reduce_on_plateau_step_needs_the_metric():
    o = _opt()
    s = optim.ReduceLROnPlateau(o)
    before = s.state_dict()
    with pytest.raises(TypeError, match="ReduceLROnPlateau.step: missing the monitored metric"):
        s.step()
    with pytest.raises(TypeError, match="metrics must be a real number, got 'low'"):
        s.step("low")
    assert s.state_dict() == before


def _seq(L, o):
    return L.SequentialLR(o, [L.LinearLR(o, 0.5, total_iters=3), L.StepLR(o, 2)], milestones=[3])


def _chained(L, o):
    return L.ChainedScheduler([L.ExponentialLR(o, 0.9), L.StepLR(o, 2)])


class _Delete:
    def __repr__(self):
        return "<deleted>"


_DELETE = _Delete()
BAD_STATES = [
    (TORCH_CASES["StepLR"], "step_size", 0, "step_size must be an int >= 1, got 0"),
    (TORCH_CASES["StepLR"], "step_size", "3", "step_size must be an int, got '3'"),
    (TORCH_CASES["StepLR"], "step_size", 2.0, "step_size must be an int"),
    (TORCH_CASES["StepLR"], "gamma", "x", "gamma must be a real number, got 'x'"),
    (TORCH_CASES["StepLR"], "gamma", -0.5, "gamma must be >= 0.0"),
    (TORCH_CASES["StepLR"], "gamma", float("nan"), "gamma must be a finite number"),
    (TORCH_CASES["StepLR"], "gamma", _DELETE, r"missing key\(s\) \['gamma'\]"),
    (TORCH_CASES["StepLR"], "foo", 1, r"unexpected key\(s\) \['foo'\]"),
    (TORCH_CASES["StepLR"], "last_epoch", -7, "last_epoch must be an int >= -1"),
    (TORCH_CASES["StepLR"], "last_epoch", 2.5, "last_epoch must be an int"),
    (TORCH_CASES["StepLR"], "_step_count", None, "_step_count must be an int"),
    (TORCH_CASES["StepLR"], "base_lrs", ["a", 0.1], r"base_lrs\[0\] must be a real number"),
    (TORCH_CASES["StepLR"], "_last_lr", [0.1, -1.0], r"_last_lr\[1\] must be >= 0.0"),
    (TORCH_CASES["MultiStepLR"], "milestones", [12, 3], "milestones must be sorted"),
    (TORCH_CASES["MultiStepLR"], "milestones", [1.5], r"milestones\[0\] must be an int"),
    (TORCH_CASES["MultiStepLR"], "milestones", "12", "milestones must be a list of ints"),
    (TORCH_CASES["ExponentialLR"], "gamma", True, "gamma must be a real number, got True"),
    (TORCH_CASES["CosineAnnealingLR"], "T_max", 0, "T_max must be an int >= 1"),
    (TORCH_CASES["CosineAnnealingLR"], "eta_min", -1.0, "eta_min must be >= 0.0"),
    (TORCH_CASES["LinearLR"], "start_factor", 0.0, "start_factor must be > 0.0"),
    (TORCH_CASES["LinearLR"], "end_factor", 2, "end_factor must be <= 1.0"),
    (TORCH_CASES["LinearLR"], "total_iters", [5], "total_iters must be an int"),
    (TORCH_CASES["OneCycleLR"], "anneal_strategy", "exp", "anneal_strategy must be one of"),
    (TORCH_CASES["OneCycleLR"], "cycle_momentum", "yes", "cycle_momentum must be a bool"),
    (TORCH_CASES["OneCycleLR"], "use_beta1", True, "use_beta1=True does not fit a SGD"),
    (TORCH_CASES["OneCycleLR"], "total_steps", 30, "_phases ends at step 59.0, total_steps is 30"),
    (TORCH_CASES["OneCycleLR"], "_phases", [[1, "a", "b", "c", "d"]] * 2, r"_phases\[0\] must be"),
    (TORCH_CASES["OneCycleLR"], "_phases", "x", "_phases must be a list of 2 or 3 phases"),
    (TORCH_CASES["LambdaLR-per-group"], "lr_lambdas", [None], "lr_lambdas must list one entry"),
    (_plateau, "mode", "avg", "mode must be one of"),
    (_plateau, "factor", 2.0, "factor must be < 1.0"),
    (_plateau, "patience", "3", "patience must be an int"),
    (_plateau, "best", "x", "best must be a real number"),
    (_plateau, "num_bad_epochs", -1, "num_bad_epochs must be an int >= 0"),
    (_plateau, "min_lrs", [0.1], "min_lrs must list one value per parameter group"),
    (_plateau, "threshold_mode", 1, "threshold_mode must be one of"),
    (_plateau, "eps", -1e-8, "eps must be >= 0.0"),
    (_seq, "_milestones", [1, 2], "_milestones must have 1 entries"),
    (_seq, "_milestones", ["3"], r"_milestones\[0\] must be an int"),
    (_seq, "_schedulers", [None, None], r"_schedulers\[0\] \(LinearLR\): .*expected a dict"),
    (_chained, "_schedulers", "x", "_schedulers must list 2 state dicts"),
]


def _set(sd, key, value):
    if value is _DELETE:
        del sd[key]
    else:
        sd[key] = value


@pytest.mark.parametrize("build,key,value,match", BAD_STATES,
                         ids=[f"{k}={v!r}" for _, k, v, _ in BAD_STATES])
def test_load_state_dict_refuses_each_bad_setting_and_changes_nothing(build, key, value, match):
    o = _opt("SGD", lr=0.1, groups=2, momentum=0.9)
    s = build(lr_scheduler, o)
    for t in range(3):
        _drive(o, [s], t)
    before, lrs = s.state_dict(), _group_values(o, "SGD")
    bad = json.loads(json.dumps(before))
    _set(bad, key, value)
    with pytest.raises(ValueError, match=match):
        s.check_state_dict(bad)
    with pytest.raises(ValueError, match=match):
        s.load_state_dict(bad)
    assert s.state_dict() == before and _group_values(o, "SGD") == lrs


def test_load_state_dict_checks_nested_scheduler_settings():
    o = _opt(groups=2)
    s = _seq(lr_scheduler, o)
    sd = s.state_dict()
    sd["_schedulers"][1]["step_size"] = 0
    with pytest.raises(ValueError, match=r"_schedulers\[1\] \(StepLR\): step_size must be an int"):
        s.load_state_dict(sd)
    c = _chained(lr_scheduler, o)
    sd = c.state_dict()
    sd["_schedulers"][0]["gamma"] = "x"
    before = c.state_dict()
    with pytest.raises(ValueError, match=r"_schedulers\[0\] \(ExponentialLR\): gamma"):
        c.load_state_dict(sd)
    assert c.state_dict() == before


@pytest.mark.parametrize("case", ["SequentialLR Linear->Cosine", "ChainedScheduler",
                                  "LambdaLR-per-group", "ReduceLROnPlateau"])
@pytest.mark.parametrize("at", [0, 4])
def test_checkpoint_round_trip_of_new_schedulers(tmp_path, case, at):
    """save_checkpoint / load_checkpoint carry the new schedulers' states
    (nested dicts, +-inf best) and the run continues identically."""
    from yscv.state import load_checkpoint, save_checkpoint

    build = RESUME_CASES[case]
    a = _opt("SGD", lr=0.1, groups=2, momentum=0.9)
    sa = build(lr_scheduler, a)
    for t in range(at):
        _drive(a, [sa], t)
    path = save_checkpoint(tmp_path / "c.safetensors", optimizer=a, scheduler=sa, step=at)
    b = _opt("SGD", lr=0.1, groups=2, momentum=0.9)
    sb = build(lr_scheduler, b)
    load_checkpoint(path, optimizer=b, scheduler=sb)
    assert sb.state_dict() == sa.state_dict()
    for t in range(at, at + 20):
        _drive(a, [sa], t)
        _drive(b, [sb], t)
        assert _group_values(a, "SGD") == _group_values(b, "SGD"), t
