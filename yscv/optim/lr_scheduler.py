"""Learning-rate schedulers, PyTorch's API (``step()``, ``get_last_lr()``,
``state_dict()`` / ``load_state_dict()``, ``last_epoch``).

Every scheduler computes the rate at step ``last_epoch`` from a CLOSED FORM
of the base rates (``group["initial_lr"]``), where PyTorch's ``step()`` uses
a recursive ("chainable") update of the current ``group["lr"]``. For a plain
run — nothing else touches ``group["lr"]`` — both give the same value (they
differ by float64 rounding only, ~1e-16 relative; tests compare them against
torch step by step). The closed form cannot drift and makes resuming from a
state dict exact. Unlike PyTorch's recursive form it does not compound with
a manual change of ``group["lr"]`` or with a second scheduler on the same
optimizer: the scheduler owns the rate.

``state_dict()`` is a small JSON-serialisable dict (it goes into the
checkpoint's metadata). ``OneCycleLR`` also cycles the momentum (SGD's
``momentum`` or Adam's ``betas[0]``) like PyTorch.
"""
from __future__ import annotations

import bisect
import copy
import math
import numbers

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "LinearLR", "OneCycleLR"]


class LRScheduler:
    """Base class. Construction sets ``group["initial_lr"]`` (if absent) and
    performs the initial step (``last_epoch`` -1 -> 0), as PyTorch."""

    _state_keys: tuple = ()  # hyper-parameters saved besides the common fields

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not a "
                            "yscv.optim Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for k, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: param_groups[{k}] has no 'initial_lr' "
                                   "when resuming with last_epoch >= 0; load the optimizer's "
                                   "state dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = int(last_epoch)
        self._step_count = 0
        self.step()

    def get_lr(self) -> list:
        """Rates for the current ``last_epoch`` (closed form)."""
        raise NotImplementedError

    def step(self) -> None:
        """Advance one step (or epoch) and set each group's ``lr``."""
        self._step_count += 1
        self.last_epoch += 1
        values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list:
        """The rates set by the latest ``step()``."""
        return list(self._last_lr)

    # ------------------------------------------------------------ state dict
    def state_dict(self) -> dict:
        """JSON-serialisable state: type, counters, base rates, hyper-parameters."""
        sd = {"type": type(self).__name__, "last_epoch": self.last_epoch,
              "_step_count": self._step_count, "base_lrs": list(self.base_lrs),
              "_last_lr": list(self._last_lr)}
        for key in self._state_keys:
            sd[key] = copy.deepcopy(getattr(self, key))
        return sd

    def check_state_dict(self, state_dict) -> None:
        """Raise ValueError if ``state_dict`` does not fit this scheduler."""
        name = type(self).__name__
        if not isinstance(state_dict, dict):
            raise ValueError(f"{name}.load_state_dict: expected a dict, got "
                             f"{type(state_dict).__name__}")
        own = self.state_dict()
        problems = []
        if state_dict.get("type", name) != name:
            problems.append(f"it is a {state_dict.get('type')} state, this is a {name}")
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if missing:
            problems.append(f"missing key(s) {missing}")
        if unexpected:
            problems.append(f"unexpected key(s) {unexpected}")
        for key in ("base_lrs", "_last_lr"):
            val = state_dict.get(key)
            if key in state_dict and (not isinstance(val, (list, tuple))
                                      or len(val) != len(self.optimizer.param_groups)):
                problems.append(f"{key} must list one rate per parameter group "
                                f"({len(self.optimizer.param_groups)})")
        for key in ("last_epoch", "_step_count"):
            val = state_dict.get(key)
            if key in state_dict and (isinstance(val, bool) or not isinstance(val, numbers.Integral)):
                problems.append(f"{key}={val!r} is not an int")
        if problems:
            raise ValueError(f"{name}.load_state_dict: state dict does not match (nothing was "
                             "loaded): " + "; ".join(problems))

    def load_state_dict(self, state_dict) -> None:
        """Restore the scheduler's state (not the optimizer's ``lr``: load the
        optimizer's state dict for that, as in PyTorch)."""
        self.check_state_dict(state_dict)
        for key, val in state_dict.items():
            if key == "type":
                continue
            cur = getattr(self, key, None)
            if isinstance(cur, tuple) and isinstance(val, list):
                val = tuple(val)
            setattr(self, key, copy.deepcopy(val))
        self._after_load()

    def _after_load(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.get_last_lr()})"


def _positive_int(name: str, arg: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
        raise ValueError(f"{name}: {arg} must be a positive int, got {v!r}")
    return int(v)


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (last_epoch // step_size)."""

    _state_keys = ("step_size", "gamma")

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = _positive_int("StepLR", "step_size", step_size)
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= last_epoch); a
    milestone listed twice counts twice (as PyTorch's Counter)."""

    _state_keys = ("milestones", "gamma")

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        ms = list(milestones)
        for m in ms:
            if isinstance(m, bool) or not isinstance(m, numbers.Integral):
                raise ValueError(f"MultiStepLR: milestones must be ints, got {milestones!r}")
        self.milestones = sorted(int(m) for m in ms)
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        n = bisect.bisect_right(self.milestones, self.last_epoch)
        return [b * self.gamma ** n for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** last_epoch."""

    _state_keys = ("gamma",)

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2.

    Past ``T_max`` the cosine continues (rises again), which is also what
    PyTorch's recursive form gives.
    """

    _state_keys = ("T_max", "eta_min")

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = _positive_int("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = float(eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]


class LinearLR(LRScheduler):
    """Linear warm-up (or decay) of the factor from ``start_factor`` to
    ``end_factor`` over ``total_iters`` steps, then constant:
    lr = base_lr * (start + (end - start) * min(total_iters, last_epoch) / total_iters)."""

    _state_keys = ("start_factor", "end_factor", "total_iters")

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if not 0 < start_factor <= 1.0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1.0:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor = float(start_factor)
        self.end_factor = float(end_factor)
        self.total_iters = _positive_int("LinearLR", "total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        f = self.start_factor + (self.end_factor - self.start_factor) * \
            min(self.total_iters, self.last_epoch) / self.total_iters
        return [b * f for b in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (PyTorch's OneCycleLR, stepped once per BATCH).

    The rate goes from max_lr/div_factor up to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then
    down to initial_lr/final_div_factor, annealing by cosine or linearly;
    ``three_phase`` adds a symmetric way down before the final annihilation.
    With ``cycle_momentum`` the momentum (SGD ``momentum``, Adam ``betas[0]``)
    moves inversely between ``max_momentum`` and ``base_momentum``.
    Stepping past ``total_steps`` raises ValueError, as PyTorch.
    """

    _state_keys = ("total_steps", "_phases", "anneal_strategy", "cycle_momentum", "use_beta1")

    def __init__(self, optimizer, max_lr, total_steps: int = None, epochs: int = None,
                 steps_per_epoch: int = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"OneCycleLR: {type(optimizer).__name__} is not a yscv.optim Optimizer")
        if total_steps is not None:
            self.total_steps = _positive_int("OneCycleLR", "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_positive_int("OneCycleLR", "epochs", epochs)
                                * _positive_int("OneCycleLR", "steps_per_epoch", steps_per_epoch))
        else:
            raise ValueError("OneCycleLR: define either total_steps or (epochs and steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', "
                             f"got {anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        n = self.total_steps
        if three_phase:
            self._phases = [
                [float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                [float(2 * pct_start * n) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"],
                [n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"],
            ]
        else:
            self._phases = [
                [float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"],
                [n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"],
            ]
        groups = optimizer.param_groups
        max_lrs = _per_group("max_lr", max_lr, groups)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = bool(cycle_momentum)
        self.use_beta1 = False
        if self.cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("OneCycleLR: optimizer must support momentum or beta1 with "
                                 "cycle_momentum=True")
            self.use_beta1 = "betas" in optimizer.defaults
            maxm = _per_group("max_momentum", max_momentum, groups)
            basem = _per_group("base_momentum", base_momentum, groups)
            if last_epoch == -1:
                for mm, bm, group in zip(maxm, basem, groups):
                    if self.use_beta1:
                        group["betas"] = (mm, *group["betas"][1:])
                    else:
                        group["momentum"] = mm
                    group["max_momentum"] = mm
                    group["base_momentum"] = bm
        super().__init__(optimizer, last_epoch)

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


def _per_group(name: str, value, groups) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"OneCycleLR: expected {len(groups)} values for {name}, got {len(value)}")
        return [float(v) for v in value]
    return [float(value)] * len(groups)
