"""Learning-rate schedulers, PyTorch's API (``step()``, ``get_last_lr()``,
``state_dict()`` / ``load_state_dict()``, ``last_epoch``) and PyTorch's
values step by step.

``step()`` uses PyTorch's CHAINABLE form: each scheduler scales the current
``group["lr"]`` (StepLR multiplies it by ``gamma`` at each multiple of
``step_size``, ExponentialLR by ``gamma`` every step, ...), with the same
arithmetic as ``torch.optim.lr_scheduler``, so the rates equal PyTorch's
bit for bit, and several schedulers stepping one optimizer compose as in
PyTorch (e.g. ``ExponentialLR`` and ``MultiStepLR`` stepped together give
the product of both decays). ``SequentialLR`` runs schedulers one after the
other at milestones, ``ChainedScheduler`` steps several at once, and
``ReduceLROnPlateau`` lowers the rate when a monitored metric stops
improving (``step(metrics)``).

Every class has two class attributes for the fit loop: ``interval``
(``"epoch"``, or ``"step"`` for ``OneCycleLR``: how often to call
``step()``) and ``takes_metric`` (``True`` only for ``ReduceLROnPlateau``).

``state_dict()`` is a small JSON-serialisable dict (it goes into the
checkpoint's metadata); ``load_state_dict`` checks every entry's type and
range as the constructor would and changes nothing when one is wrong.
Resuming = constructing the same scheduler, loading the OPTIMIZER's state
dict (it holds the current rates) and the scheduler's: the continuation
equals the uninterrupted run. ``OneCycleLR`` also cycles the momentum
(SGD's ``momentum`` or Adam's ``betas[0]``) like PyTorch.
"""
from __future__ import annotations

import bisect
import math
import types

from ._lr_base import (LRScheduler, _copy, check_optimizer, checked, int_at_least, int_list,
                       real_in)
from ._lr_compose import ChainedScheduler, SequentialLR
from ._lr_onecycle import OneCycleLR
from ._lr_plateau import ReduceLROnPlateau

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "CosineAnnealingLR", "LinearLR", "OneCycleLR", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau"]

_positive_int = int_at_least(1)
_gamma = real_in(lo=0.0)


def _lambda_states(key, v, n_groups):
    """LambdaLR's saved lambdas: one entry per group, None (a function: not
    saved, as PyTorch) or the ``__dict__`` of a callable object."""
    if not isinstance(v, (list, tuple)) or len(v) != n_groups:
        raise ValueError(f"{key} must list one entry per parameter group ({n_groups}), got {v!r}")
    for k, entry in enumerate(v):
        if entry is not None and (not isinstance(entry, dict)
                                  or not all(isinstance(a, str) for a in entry)):
            raise TypeError(f"{key}[{k}] must be None or a dict of attributes, got {entry!r}")
    return list(v)


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(last_epoch), one function for all groups or
    a list with one per group (PyTorch's ``LambdaLR``).

    ``state_dict()`` does not store functions (as PyTorch): a plain function
    or lambda is saved as None and must be given again to the constructor;
    a callable OBJECT has its ``__dict__`` saved and restored (it must then
    be JSON-serialisable to go into a checkpoint).
    """

    _state_checks = {**LRScheduler._state_checks, "lr_lambdas": _lambda_states}

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        check_optimizer("LambdaLR", optimizer)
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"LambdaLR: expected {n} lr_lambdas (one per parameter group), "
                                 f"got {len(lr_lambda)}")
            fns = list(lr_lambda)
        else:
            fns = [lr_lambda] * n
        for k, fn in enumerate(fns):
            if not callable(fn):
                raise TypeError(f"LambdaLR: lr_lambda[{k}] is not callable: {fn!r}")
        self.lr_lambdas = fns
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        sd = super().state_dict()
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                            for fn in self.lr_lambdas]
        return sd

    def _restore(self, values):
        saved = values.pop("lr_lambdas")
        super()._restore(values)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                fn.__dict__.update(_copy(attrs))


class StepLR(LRScheduler):
    """Multiplies the rate by ``gamma`` every ``step_size`` epochs:
    lr = base_lr * gamma ** (last_epoch // step_size) when run alone.
    ``step_size`` a positive int, ``gamma`` a number >= 0."""

    _state_checks = {**LRScheduler._state_checks, "step_size": _positive_int, "gamma": _gamma}

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size = checked("StepLR", _positive_int, "step_size", step_size)
        self.gamma = checked("StepLR", _gamma, "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


_milestones = int_list("sorted")


class MultiStepLR(LRScheduler):
    """Multiplies the rate by ``gamma`` at each milestone (epoch index; a
    milestone listed twice multiplies twice, as PyTorch's Counter):
    lr = base_lr * gamma ** (number of milestones <= last_epoch) when run alone."""

    _state_checks = {**LRScheduler._state_checks, "milestones": _milestones, "gamma": _gamma}

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"MultiStepLR: milestones must be a list of ints, got {milestones!r}")
        self.milestones = sorted(checked("MultiStepLR", int_at_least(0), f"milestones[{k}]", m)
                                 for k, m in enumerate(milestones))
        self.gamma = checked("MultiStepLR", _gamma, "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        n = self.milestones.count(self.last_epoch)
        if n == 0:
            return self._current_lrs()
        return [group["lr"] * self.gamma ** n for group in self.optimizer.param_groups]

    def _closed_form_lr(self):
        n = bisect.bisect_right(self.milestones, self.last_epoch)
        return [b * self.gamma ** n for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiplies the rate by ``gamma`` every epoch: lr = base_lr * gamma **
    last_epoch when run alone."""

    _state_checks = {**LRScheduler._state_checks, "gamma": _gamma}

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = checked("ExponentialLR", _gamma, "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing, PyTorch's recursive form, whose values alone are
    lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2.
    Past ``T_max`` the cosine continues (rises again), as PyTorch."""

    _state_checks = {**LRScheduler._state_checks, "T_max": _positive_int,
                     "eta_min": real_in(lo=0.0)}

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max = checked("CosineAnnealingLR", _positive_int, "T_max", T_max)
        self.eta_min = checked("CosineAnnealingLR", real_in(lo=0.0), "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, T, eta = self.last_epoch, self.T_max, self.eta_min
        groups = self.optimizer.param_groups
        if self._is_initial:
            return self._current_lrs()
        if self._step_count == 1 and t > 0:
            return [eta + (b - eta) * (1 + math.cos(t * math.pi / T)) / 2 for b in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (b - eta) * (1 - math.cos(math.pi / T)) / 2
                    for b, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
                * (g["lr"] - eta) + eta for g in groups]

    def _closed_form_lr(self):
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]


class LinearLR(LRScheduler):
    """Linear warm-up (or decay) of the factor from ``start_factor`` (in
    (0, 1]) to ``end_factor`` (in [0, 1]) over ``total_iters`` steps, then
    constant; alone: lr = base_lr * (start + (end - start) * min(total_iters,
    last_epoch) / total_iters)."""

    _state_checks = {**LRScheduler._state_checks,
                     "start_factor": real_in(0.0, 1.0, lo_open=True),
                     "end_factor": real_in(0.0, 1.0), "total_iters": _positive_int}

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        checks = self._state_checks
        self.start_factor = checked("LinearLR", checks["start_factor"], "start_factor",
                                    start_factor)
        self.end_factor = checked("LinearLR", checks["end_factor"], "end_factor", end_factor)
        self.total_iters = checked("LinearLR", _positive_int, "total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        d = self.end_factor - self.start_factor
        return [g["lr"] * (1.0 + d / (self.total_iters * self.start_factor
                                      + (self.last_epoch - 1) * d)) for g in groups]

    def _closed_form_lr(self):
        f = self.start_factor + (self.end_factor - self.start_factor) * \
            min(self.total_iters, self.last_epoch) / self.total_iters
        return [b * f for b in self.base_lrs]
