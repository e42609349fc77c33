"""The scheduler base class and the checks shared by constructors and
``load_state_dict``.

Every scheduler declares its saved state as a table ``_state_checks``: state
key -> checker. A checker ``check(key, value, n_groups)`` returns the value
normalised (ints as int, rates as a list of floats) or raises ``TypeError``
(wrong type) / ``ValueError`` (out of range) with a message naming the key.
Constructors run the same checkers on their arguments, so a state dict
edited by hand (or a crafted checkpoint) is refused exactly where the
constructor would refuse the setting, before anything is changed.
"""
from __future__ import annotations

import math
import numbers

from .optimizer import Optimizer

__all__ = ["LRScheduler"]


# ----------------------------------------------------------------- checkers
def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def int_at_least(lo: int):
    """Checker: an int >= lo."""
    def check(key, v, n_groups=None):
        if not _is_int(v):
            raise TypeError(f"{key} must be an int, got {v!r}")
        if v < lo:
            raise ValueError(f"{key} must be an int >= {lo}, got {v!r}")
        return int(v)
    return check


def int_list(order: str):
    """Checker: a list (or tuple) of ints >= 0 that ``sorted`` leaves unchanged;
    ``order`` names that in the error ("sorted", "increasing")."""
    item = int_at_least(0)

    def check(key, v, n_groups=None):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{key} must be a list of ints, got {v!r}")
        out = [item(f"{key}[{k}]", m) for k, m in enumerate(v)]
        if out != sorted(out):
            raise ValueError(f"{key} must be {order}, got {v!r}")
        return out
    return check


def real_in(lo=None, hi=None, lo_open=False, hi_open=False, finite=True):
    """Checker: a real number (not a bool) in the given range; NaN never passes."""
    def check(key, v, n_groups=None):
        if not _is_real(v):
            raise TypeError(f"{key} must be a real number, got {v!r}")
        v = float(v)
        if math.isnan(v) or (finite and math.isinf(v)):
            raise ValueError(f"{key} must be a finite number, got {v!r}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise ValueError(f"{key} must be {'>' if lo_open else '>='} {lo}, got {v!r}")
        if hi is not None and (v > hi or (hi_open and v == hi)):
            raise ValueError(f"{key} must be {'<' if hi_open else '<='} {hi}, got {v!r}")
        return v
    return check


def choice(*options):
    """Checker: one of ``options``."""
    def check(key, v, n_groups=None):
        if not isinstance(v, str) or v not in options:
            raise ValueError(f"{key} must be one of {list(options)}, got {v!r}")
        return v
    return check


def boolean(key, v, n_groups=None):
    """Checker: a bool."""
    if not isinstance(v, bool):
        raise TypeError(f"{key} must be a bool, got {v!r}")
    return v


def per_group(item):
    """Checker: a list with one ``item``-checked value per parameter group."""
    def check(key, v, n_groups):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{key} must be a list (one value per parameter group), got {v!r}")
        if len(v) != n_groups:
            raise ValueError(f"{key} must list one value per parameter group ({n_groups}), "
                             f"got {len(v)}")
        return [item(f"{key}[{k}]", x) for k, x in enumerate(v)]
    return check


rate = real_in(lo=0.0)
rates = per_group(rate)


def checked(owner: str, check, key, value, n_groups=None):
    """Run ``check`` for a constructor argument; the error names the owner."""
    try:
        return check(key, value, n_groups)
    except TypeError as exc:
        raise TypeError(f"{owner}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{owner}: {exc}") from None


def check_optimizer(owner: str, optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{owner}: {type(optimizer).__name__} is not a yscv.optim Optimizer")


# ------------------------------------------------------------- base class
class LRScheduler:
    """Base class of the learning-rate schedulers (PyTorch's ``LRScheduler``).

    Construction sets ``group["initial_lr"]`` (if absent) and performs the
    initial step (``last_epoch`` -1 -> 0). ``step()`` advances ``last_epoch``
    and sets every group's ``lr`` from `get_lr`, which — as PyTorch's
    chainable form — scales the CURRENT ``group["lr"]``: several schedulers
    stepping the same optimizer compose, and a manual change of the rate
    between steps carries on.

    Class attributes read by the fit loop (``yscv.train``):

    - ``interval``: ``"epoch"`` (step once per epoch, the default) or
      ``"step"`` (once per optimizer step, e.g. ``OneCycleLR``). An instance
      may override it (``sched.interval = "step"`` for a per-batch warm-up).
    - ``takes_metric``: ``False``; ``True`` for ``ReduceLROnPlateau``, whose
      ``step(metrics)`` takes the monitored value.
    """

    interval = "epoch"
    takes_metric = False
    # state key -> checker; saved by state_dict() besides "type"
    _state_checks: dict = {
        "last_epoch": int_at_least(-1),
        "_step_count": int_at_least(0),
        "base_lrs": rates,
        "_last_lr": rates,
    }

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        name = type(self).__name__
        check_optimizer(name, optimizer)
        last_epoch = checked(name, int_at_least(-1), "last_epoch", last_epoch)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for k, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{name}: param_groups[{k}] has no 'initial_lr' when resuming "
                                   "with last_epoch >= 0; load the optimizer's state dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._is_initial = False
        self._initial_step()

    def _initial_step(self) -> None:
        """Reset the step count and step once in "initial mode" (PyTorch's)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """Rates for ``last_epoch`` (chainable form: from the current ``group["lr"]``)."""
        raise NotImplementedError

    def step(self) -> None:
        """Advance one step (or epoch) and set each group's ``lr``; a step
        that raises (OneCycleLR past ``total_steps``) changes nothing."""
        self._step_count += 1
        try:
            self._update_lr()
        except BaseException:
            self._step_count -= 1
            raise

    def _update_lr(self, epoch: int = None) -> None:
        """Set the rates for ``last_epoch + 1`` (chainable ``get_lr``) or, with
        ``epoch``, for that epoch by the closed form when there is one (how
        ``SequentialLR`` restarts a scheduler at its milestone)."""
        before = self.last_epoch
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        except BaseException:
            self.last_epoch = before
            raise
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _current_lrs(self) -> list:
        return [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list:
        """The rates set by the latest ``step()``."""
        return list(self._last_lr)

    # ------------------------------------------------------------ state dict
    def state_dict(self) -> dict:
        """JSON-serialisable state: ``type`` and every key of ``_state_checks``."""
        sd = {"type": type(self).__name__}
        for key in self._state_checks:
            sd[key] = _copy(getattr(self, key))
        return sd

    def _n_groups(self) -> int:
        return len(self.optimizer.param_groups)

    def _check_entries(self, state_dict) -> tuple:
        """(problems, normalised values) for a candidate state dict."""
        name = type(self).__name__
        if not isinstance(state_dict, dict):
            raise ValueError(f"{name}.load_state_dict: expected a dict, got "
                             f"{type(state_dict).__name__}")
        problems, values = [], {}
        if state_dict.get("type", name) != name:
            problems.append(f"it is a {state_dict.get('type')} state, this is a {name}")
            return problems, values
        allowed = set(self._state_checks) | {"type"}
        missing = [k for k in self._state_checks if k not in state_dict]
        unexpected = [k for k in state_dict if k not in allowed]
        if missing:
            problems.append(f"missing key(s) {missing}")
        if unexpected:
            problems.append(f"unexpected key(s) {unexpected}")
        n = self._n_groups()
        for key, check in self._state_checks.items():
            if key in state_dict:
                try:
                    values[key] = check(key, state_dict[key], n)
                except (TypeError, ValueError) as exc:
                    problems.append(str(exc))
        if not problems:
            self._check_relations(values, problems)
        return problems, values

    def _check_relations(self, values: dict, problems: list) -> None:
        """Cross-key checks on already type-checked values (subclasses)."""

    def check_state_dict(self, state_dict) -> None:
        """Raise ValueError naming every setting of ``state_dict`` that this
        scheduler's constructor would refuse (or a missing/unknown key, another
        scheduler's type); changes nothing."""
        problems, _ = self._check_entries(state_dict)
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: state dict does not match "
                             "(nothing was loaded): " + "; ".join(problems))

    def load_state_dict(self, state_dict) -> None:
        """Restore the scheduler's state after checking every entry (not the
        optimizer's ``lr``: load the optimizer's state dict for that, as in
        PyTorch)."""
        problems, values = self._check_entries(state_dict)
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: state dict does not match "
                             "(nothing was loaded): " + "; ".join(problems))
        self._restore(values)

    def _restore(self, values: dict) -> None:
        for key, val in values.items():
            setattr(self, key, _copy(val))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.get_last_lr()})"


def _copy(v):
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_copy(x) for x in v]
    return v
