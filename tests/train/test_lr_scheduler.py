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
    with pytest.raises(ValueError, match="total_steps"):
        s.step()


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
