"""Schedulers made of schedulers: SequentialLR (one after the other, switched
at milestones) and ChainedScheduler (all stepped together)."""
from __future__ import annotations

import bisect

from ._lr_base import LRScheduler, check_optimizer, checked, int_at_least, int_list, rates

__all__ = ["SequentialLR", "ChainedScheduler"]


def _check_children(owner: str, schedulers, optimizer) -> list:
    if isinstance(schedulers, LRScheduler) or not isinstance(schedulers, (list, tuple)):
        raise TypeError(f"{owner}: schedulers must be a list of schedulers, got {schedulers!r}")
    if not schedulers:
        raise ValueError(f"{owner}: expects at least one scheduler, got none")
    for k, s in enumerate(schedulers):
        if not isinstance(s, LRScheduler):
            raise TypeError(f"{owner}: schedulers[{k}] is a {type(s).__name__}, not a scheduler")
        if s.takes_metric:
            raise ValueError(f"{owner}: schedulers[{k}] is a {type(s).__name__}, whose step() "
                             "needs a metric; it cannot be composed")
        if s.optimizer is not optimizer:
            raise ValueError(f"{owner}: schedulers[{k}] ({type(s).__name__}) steps another "
                             "optimizer; all must belong to the same one")
    return list(schedulers)


def _common_interval(schedulers) -> str:
    """"step" when every child runs per step, else "epoch"."""
    return "step" if all(s.interval == "step" for s in schedulers) else "epoch"


_milestones = int_list("increasing")


class _Composite(LRScheduler):
    """State handling shared by SequentialLR and ChainedScheduler: the
    children's state dicts are nested under ``"_schedulers"``."""

    def state_dict(self):
        sd = super().state_dict()
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def _check_entries(self, state_dict):
        if not isinstance(state_dict, dict):
            return super()._check_entries(state_dict)
        own = {k: v for k, v in state_dict.items() if k != "_schedulers"}
        problems, values = super()._check_entries(own)
        if own.get("type", type(self).__name__) != type(self).__name__:
            return problems, values
        children = state_dict.get("_schedulers")
        if "_schedulers" not in state_dict:
            problems.append("missing key(s) ['_schedulers']")
        elif not isinstance(children, (list, tuple)) or len(children) != len(self._schedulers):
            problems.append(f"_schedulers must list {len(self._schedulers)} state dicts, got "
                            f"{children!r}")
        else:
            values["_schedulers"] = []
            for k, (child, csd) in enumerate(zip(self._schedulers, children)):
                try:
                    sub, vals = child._check_entries(csd)
                except ValueError as exc:
                    sub, vals = [str(exc)], {}
                problems.extend(f"_schedulers[{k}] ({type(child).__name__}): {p}" for p in sub)
                values["_schedulers"].append(vals)
        return problems, values

    def _restore(self, values):
        children = values.pop("_schedulers")
        super()._restore(values)
        for child, vals in zip(self._schedulers, children):
            child._restore(vals)


class SequentialLR(_Composite):
    """Runs ``schedulers`` one after the other: ``schedulers[i]`` from
    epoch ``milestones[i-1]`` on (``len(milestones) == len(schedulers) - 1``),
    restarted there at its epoch 0 (PyTorch's ``SequentialLR``: e.g. a
    ``LinearLR`` warm-up then ``CosineAnnealingLR``). All must step
    ``optimizer``; ``ReduceLROnPlateau`` cannot be one of them.

    ``interval`` is "step" when every child's is, else "epoch".
    """

    _state_checks = {"last_epoch": int_at_least(0), "_milestones": _milestones,
                     "_last_lr": rates}

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        name = "SequentialLR"
        check_optimizer(name, optimizer)
        self._schedulers = _check_children(name, schedulers, optimizer)
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"SequentialLR: milestones must be a list of ints, got {milestones!r}")
        self._milestones = checked(name, _milestones, "milestones", list(milestones))
        if len(self._milestones) != len(self._schedulers) - 1:
            raise ValueError(f"SequentialLR: expects one milestone fewer than schedulers, got "
                             f"{len(self._schedulers)} schedulers and {len(self._milestones)} "
                             "milestones")
        self.last_epoch = checked(name, int_at_least(-1), "last_epoch", last_epoch) + 1
        self.optimizer = optimizer
        self.interval = _common_interval(self._schedulers)
        self._is_initial = False
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:  # undo the initial step each child made
            _undo_step(s)
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:
        """Advance one epoch: step the scheduler whose turn it is (restarted
        at its epoch 0 on its milestone)."""
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def _check_relations(self, values, problems):
        if len(values["_milestones"]) != len(self._schedulers) - 1:
            problems.append(f"_milestones must have {len(self._schedulers) - 1} entries, got "
                            f"{values['_milestones']!r}")


def _undo_step(s) -> None:
    if isinstance(s, _Composite):
        for child in s._schedulers:
            _undo_step(child)
    elif hasattr(s, "last_epoch"):
        s.last_epoch -= 1


class ChainedScheduler(_Composite):
    """Steps every scheduler of ``schedulers`` (all on one optimizer), in
    order, at each ``step()`` (PyTorch's ``ChainedScheduler``): their
    chainable updates compose, e.g. an ``ExponentialLR`` decay with a
    ``MultiStepLR`` drop. Constructing it does not step.

    ``interval`` is "step" when every child's is, else "epoch".
    """

    _state_checks = {"_last_lr": rates}

    def __init__(self, schedulers, optimizer=None):
        name = "ChainedScheduler"
        if isinstance(schedulers, (list, tuple)) and schedulers and optimizer is None:
            optimizer = getattr(schedulers[0], "optimizer", None)
        check_optimizer(name, optimizer)
        self._schedulers = _check_children(name, schedulers, optimizer)
        self.optimizer = optimizer
        self.interval = _common_interval(self._schedulers)
        self._is_initial = False
        self._last_lr = self._current_lrs()

    def step(self) -> None:
        """Step every scheduler once, in order."""
        for s in self._schedulers:
            s.step()
        self._last_lr = self._current_lrs()

    def __repr__(self) -> str:
        names = ", ".join(type(s).__name__ for s in self._schedulers)
        return f"ChainedScheduler([{names}], lr={self.get_last_lr()})"
