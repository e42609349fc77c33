"""ReduceLROnPlateau: lower the rate when a monitored metric stops improving."""
from __future__ import annotations

import math
import numbers

import numpy as np

from ._lr_base import (LRScheduler, check_optimizer, checked, choice, int_at_least, per_group,
                       rate, rates, real_in)

__all__ = ["ReduceLROnPlateau"]

_MISSING = object()


def _best(key, v, n_groups=None):
    """The best metric so far: a real number, +-inf allowed (the start value)."""
    return real_in(finite=False)(key, v)


def _default_min_lr(key, v, n_groups=None):
    return None if v is None else rate(key, v)


class ReduceLROnPlateau(LRScheduler):
    """Multiplies every group's rate by ``factor`` once the metric passed to
    ``step(metrics)`` has not improved for more than ``patience`` epochs
    (PyTorch's ``ReduceLROnPlateau``, same counters and comparisons).

    Args:
        mode: "min" (lower is better, e.g. a loss) or "max" (e.g. accuracy).
        factor: new_lr = lr * factor, in [0, 1).
        patience: epochs without improvement tolerated (int >= 0).
        threshold: an improvement must beat ``best * (1 - threshold)``
            (``threshold_mode`` "rel", mode "min"; ``1 + threshold`` for
            "max") or ``best - threshold`` ("abs"; ``+`` for "max").
        threshold_mode: "rel" or "abs", as above.
        cooldown: epochs to wait after a reduction before counting again.
        min_lr: lower bound on the rate, one number or one per group.
        eps: a reduction smaller than eps is skipped.

    ``takes_metric = True``: the fit loop passes the monitored value to
    ``step``; ``interval = "epoch"``. Construction does not step, and it
    neither reads nor sets ``initial_lr`` (as PyTorch). It cannot be put in a
    ``SequentialLR`` or ``ChainedScheduler``.
    """

    takes_metric = True
    _state_checks = {
        "last_epoch": int_at_least(0), "_last_lr": rates,
        "mode": choice("min", "max"), "factor": real_in(0.0, 1.0, hi_open=True),
        "patience": int_at_least(0), "threshold": real_in(lo=0.0),
        "threshold_mode": choice("rel", "abs"), "cooldown": int_at_least(0),
        "min_lrs": per_group(rate), "default_min_lr": _default_min_lr,
        "eps": real_in(lo=0.0), "best": _best, "num_bad_epochs": int_at_least(0),
        "cooldown_counter": int_at_least(0),
    }

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr=0, eps: float = 1e-8):
        name = "ReduceLROnPlateau"
        check_optimizer(name, optimizer)
        self.optimizer = optimizer
        c = self._state_checks
        n = len(optimizer.param_groups)
        self.mode = checked(name, c["mode"], "mode", mode)
        self.factor = checked(name, c["factor"], "factor", factor)
        self.patience = checked(name, c["patience"], "patience", patience)
        self.threshold = checked(name, c["threshold"], "threshold", threshold)
        self.threshold_mode = checked(name, c["threshold_mode"], "threshold_mode", threshold_mode)
        self.cooldown = checked(name, c["cooldown"], "cooldown", cooldown)
        self.eps = checked(name, c["eps"], "eps", eps)
        if isinstance(min_lr, (list, tuple)):
            self.min_lrs = checked(name, c["min_lrs"], "min_lr", min_lr, n)
            self.default_min_lr = None
        else:
            self.default_min_lr = checked(name, rate, "min_lr", min_lr)
            self.min_lrs = [self.default_min_lr] * n
        self.last_epoch = 0
        self._is_initial = False
        self._last_lr = self._current_lrs()
        self.best = self._mode_worse()
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def _mode_worse(self) -> float:
        return math.inf if self.mode == "min" else -math.inf

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics=_MISSING) -> None:
        """Record this epoch's monitored value ``metrics`` (a number or a
        one-element array) and reduce the rates if it has not improved for
        more than ``patience`` epochs."""
        current = _metric_value(metrics)
        self.last_epoch += 1
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._current_lrs()

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter "
                                   f"groups, min_lr lists {len(self.min_lrs)}; set min_lrs to "
                                   "one value per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                group["lr"] = new

    def _check_relations(self, values, problems):
        d = values["default_min_lr"]
        if d is not None and any(m != d for m in values["min_lrs"]):
            problems.append(f"min_lrs {values['min_lrs']!r} differ from default_min_lr {d!r}")

    def __repr__(self) -> str:
        return (f"ReduceLROnPlateau(mode={self.mode!r}, best={self.best}, "
                f"num_bad_epochs={self.num_bad_epochs}, lr={self.get_last_lr()})")


def _metric_value(metrics) -> float:
    if metrics is _MISSING:
        raise TypeError("ReduceLROnPlateau.step: missing the monitored metric: call "
                        "step(metrics) with e.g. the validation loss")
    if isinstance(metrics, np.ndarray) and metrics.size == 1:
        metrics = metrics.reshape(()).item()
    if isinstance(metrics, (bool, np.bool_)) or not isinstance(metrics, (numbers.Real, np.generic)):
        raise TypeError(f"ReduceLROnPlateau.step: metrics must be a real number, got {metrics!r}")
    return float(metrics)
