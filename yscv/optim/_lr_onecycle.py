"""OneCycleLR: the 1cycle policy, stepped once per batch."""
from __future__ import annotations

import math

from ._lr_base import (LRScheduler, boolean, check_optimizer, checked, choice, int_at_least,
                       real_in)

__all__ = ["OneCycleLR"]

_PHASE_NAMES = {
    2: [("initial_lr", "max_lr", "max_momentum", "base_momentum"),
        ("max_lr", "min_lr", "base_momentum", "max_momentum")],
    3: [("initial_lr", "max_lr", "max_momentum", "base_momentum"),
        ("max_lr", "initial_lr", "base_momentum", "max_momentum"),
        ("initial_lr", "min_lr", "max_momentum", "max_momentum")],
}


def _phases(key, v, n_groups=None):
    """The saved phase table: [end_step, lr from, lr to, momentum from, momentum to]
    rows in one of the two layouts the constructor builds."""
    if not isinstance(v, (list, tuple)) or len(v) not in _PHASE_NAMES:
        raise ValueError(f"{key} must be a list of 2 or 3 phases, got {v!r}")
    out = []
    for k, (row, names) in enumerate(zip(v, _PHASE_NAMES[len(v)])):
        if not isinstance(row, (list, tuple)) or len(row) != 5 or tuple(row[1:]) != names:
            raise ValueError(f"{key}[{k}] must be [end_step, {', '.join(map(repr, names))}], "
                             f"got {row!r}")
        end = real_in(lo=-2.0)(f"{key}[{k}][0]", row[0])
        out.append([end, *names])
    return out


_momentum = real_in(0.0, 1.0)
_positive = real_in(lo=0.0, lo_open=True)


class OneCycleLR(LRScheduler):
    """The 1cycle policy (PyTorch's OneCycleLR, stepped once per BATCH:
    ``interval = "step"``).

    The rate goes from max_lr/div_factor up to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then
    down to initial_lr/final_div_factor, annealing by cosine or linearly;
    ``three_phase`` adds a symmetric way down before the final annihilation.
    With ``cycle_momentum`` the momentum (SGD ``momentum``, Adam ``betas[0]``)
    moves inversely between ``max_momentum`` and ``base_momentum``.
    Stepping past ``total_steps`` raises ValueError, as PyTorch. The rates
    are a closed form of the step (PyTorch's too): it does not chain.
    """

    interval = "step"
    _state_checks = {**LRScheduler._state_checks, "total_steps": int_at_least(1),
                     "_phases": _phases, "anneal_strategy": choice("cos", "linear"),
                     "cycle_momentum": boolean, "use_beta1": boolean}

    def __init__(self, optimizer, max_lr, total_steps: int = None, epochs: int = None,
                 steps_per_epoch: int = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        name = "OneCycleLR"
        check_optimizer(name, optimizer)
        pos = int_at_least(1)
        if total_steps is not None:
            self.total_steps = checked(name, pos, "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (checked(name, pos, "epochs", epochs)
                                * checked(name, pos, "steps_per_epoch", steps_per_epoch))
        else:
            raise ValueError("OneCycleLR: define either total_steps or (epochs and steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start!r}")
        self.anneal_strategy = checked(name, choice("cos", "linear"), "anneal_strategy",
                                       anneal_strategy)
        div_factor = checked(name, _positive, "div_factor", div_factor)
        final_div_factor = checked(name, _positive, "final_div_factor", final_div_factor)
        n = self.total_steps
        if three_phase:
            ends = [float(pct_start * n) - 1, float(2 * pct_start * n) - 2, n - 1]
        else:
            ends = [float(pct_start * n) - 1, n - 1]
        self._phases = [[end, *names] for end, names in zip(ends, _PHASE_NAMES[len(ends)])]
        groups = optimizer.param_groups
        max_lrs = _per_group("max_lr", max_lr, groups, _positive)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = checked(name, boolean, "cycle_momentum", cycle_momentum)
        self.use_beta1 = False
        if self.cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("OneCycleLR: optimizer must support momentum or beta1 with "
                                 "cycle_momentum=True")
            self.use_beta1 = "betas" in optimizer.defaults
            maxm = _per_group("max_momentum", max_momentum, groups, _momentum)
            basem = _per_group("base_momentum", base_momentum, groups, _momentum)
            if last_epoch == -1:
                for mm, bm, group in zip(maxm, basem, groups):
                    if self.use_beta1:
                        group["betas"] = (mm, *group["betas"][1:])
                    else:
                        group["momentum"] = mm
                    group["max_momentum"] = mm
                    group["base_momentum"] = bm
        super().__init__(optimizer, last_epoch)

    def _check_relations(self, values, problems):
        if values["_phases"][-1][0] != values["total_steps"] - 1:
            problems.append(f"_phases ends at step {values['_phases'][-1][0]!r}, total_steps is "
                            f"{values['total_steps']}")
        if values["cycle_momentum"]:
            beta1 = "betas" in self.optimizer.defaults
            if values["use_beta1"] != beta1 or (not beta1 and "momentum" not in
                                                self.optimizer.defaults):
                problems.append(f"use_beta1={values['use_beta1']!r} does not fit a "
                                f"{type(self.optimizer).__name__}")
        if values["last_epoch"] > values["total_steps"]:
            problems.append(f"last_epoch={values['last_epoch']} is past total_steps="
                            f"{values['total_steps']}")

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is "
                             f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[lr0], group[lr1], pct)
                    mom = self._anneal(group[m0], group[m1], pct) if self.cycle_momentum else None
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (mom, *group["betas"][1:])
                else:
                    group["momentum"] = mom
        return lrs


def _per_group(name: str, value, groups, check) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"OneCycleLR: expected {len(groups)} values for {name}, got {len(value)}")
        return [checked("OneCycleLR", check, f"{name}[{k}]", v) for k, v in enumerate(value)]
    return [checked("OneCycleLR", check, name, value)] * len(groups)
