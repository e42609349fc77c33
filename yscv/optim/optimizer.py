"""``Optimizer``: parameter groups, per-parameter state, state dicts.

Semantics follow ``torch.optim.Optimizer``:

- ``params`` is an iterable of `yscv.nn.Parameter` or of dicts
  ``{"params": [...], <option>: value}`` (parameter groups with their own
  options; missing options take the optimizer's defaults).
- ``step()`` updates every parameter whose ``grad`` is not None, IN PLACE
  (graphs that bound ``p.data`` see the new values), and skips the others.
- ``zero_grad()`` sets every ``p.grad`` to None.
- ``state_dict()`` -> ``{"state": {index: {name: array | int}}, "param_groups":
  [{option: value, "params": [index, ...]}]}``, indices numbering the
  parameters in group order. Arrays are copies; ``load_state_dict`` validates
  everything before changing anything and restores exactly.

The update itself is one fused Numba kernel per optimizer
(`yscv.kernels.optim`), imported on the first ``step``.
"""
from __future__ import annotations

import copy
import numbers

import numpy as np

from ..kernels import lazy
from ..nn.parameter import Parameter, cast_problem

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required>"


required = _Required()
_K = lazy("optim")  # the fused update kernels; imports numba on the first step


def flat(arr: np.ndarray) -> np.ndarray:
    """A 1-d view of a C-contiguous array (kernels write through it)."""
    return arr.reshape(-1)


class Optimizer:
    """Base class. Subclasses set ``_state_arrays`` (names of per-parameter
    array states), ``_counts_steps`` and implement ``_validate_group`` and
    ``_update(group, p, grad, state)``."""

    _state_arrays: tuple = ()
    _counts_steps = True

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.param_groups: list = []
        self.state: dict = {}
        if isinstance(params, (Parameter, np.ndarray)):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Parameters "
                            "or of dicts, e.g. model.parameters()")
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ---------------------------------------------------------------- groups
    def add_param_group(self, group: dict) -> None:
        """Add a group ``{"params": [...], option: value, ...}``."""
        name = type(self).__name__
        if not isinstance(group, dict):
            raise TypeError(f"{name}: a parameter group must be a dict, got {type(group).__name__}")
        group = dict(group)
        params = group.get("params")
        if params is None:
            raise ValueError(f"{name}: a parameter group needs a 'params' entry")
        params = [params] if isinstance(params, Parameter) else list(params)
        for k, p in enumerate(params):
            if not isinstance(p, Parameter):
                raise TypeError(f"{name}: params[{k}] is a {type(p).__name__}, expected a "
                                "yscv.nn.Parameter")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: a parameter appears twice in one group")
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken.intersection(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required "
                                 f"option {key!r}")
            group.setdefault(key, copy.deepcopy(default))
        unknown = set(group) - set(self.defaults) - {"params"} - self._extra_group_keys()
        if unknown:
            raise ValueError(f"{name}: unknown option(s) {sorted(unknown)}; known: "
                             f"{sorted(self.defaults)}")
        group["params"] = params
        self._check_group(group)
        self.param_groups.append(group)

    def _extra_group_keys(self) -> set:
        # keys schedulers put in groups (OneCycleLR, LRScheduler)
        return {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"}

    def _check_group(self, group: dict) -> None:
        """Check (and normalise in place) every option of a group: the
        optimizer's own (``_validate_group``) and the schedulers' rates."""
        self._validate_group(group)
        for key in sorted(self._extra_group_keys().intersection(group)):
            _check_nonneg(type(self).__name__, group, key)

    def _validate_group(self, group: dict) -> None:
        _check_nonneg(type(self).__name__, group, "lr")

    # ------------------------------------------------------------------ step
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every parameter's grad to None (or zeros in place with ``set_to_none=False``)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad[...] = 0

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns ``closure()`` if given."""
        loss = closure() if closure is not None else None
        K = _K
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is None or not p.requires_grad:
                    continue
                data = p.data
                if grad.shape != data.shape:
                    raise ValueError(f"{type(self).__name__}.step: grad of shape {grad.shape} "
                                     f"for a parameter of shape {data.shape}")
                grad = np.ascontiguousarray(grad, dtype=data.dtype)
                state = self.state.get(p)
                if state is None:
                    state = self.state[p] = {}
                if data.flags.c_contiguous:
                    self._update(K, group, p, data, grad, state)
                else:  # kernels need a flat view; update a copy and write it back
                    work = np.ascontiguousarray(data)
                    self._update(K, group, p, work, grad, state)
                    data[...] = work
        return loss

    def _update(self, K, group, p, data, grad, state) -> None:
        raise NotImplementedError

    def _zeros_state(self, state: dict, name: str, data: np.ndarray, fill: float = 0.0) -> np.ndarray:
        arr = state.get(name)
        if arr is None:
            arr = state[name] = np.full(data.shape, fill, dtype=data.dtype)
        return arr

    # ------------------------------------------------------------ state dict
    def _params(self) -> list:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict:
        """``{"state": {i: {...}}, "param_groups": [...]}`` with copied arrays."""
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = []
        for group in self.param_groups:
            g = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            g["params"] = [index[id(p)] for p in group["params"]]
            groups.append(g)
        state = {}
        for p, st in self.state.items():
            if id(p) in index and st:
                state[index[id(p)]] = {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                       for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def check_state_dict(self, state_dict) -> None:
        """Raise ValueError naming every mismatch between ``state_dict`` and
        this optimizer's parameters; changes nothing."""
        name = type(self).__name__
        problems = []
        if not isinstance(state_dict, dict) or "state" not in state_dict \
                or "param_groups" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with 'state' and "
                             "'param_groups'")
        groups = state_dict["param_groups"]
        if not isinstance(groups, (list, tuple)):
            raise ValueError(f"{name}.load_state_dict: param_groups must be a list, got "
                             f"{type(groups).__name__}")
        if not isinstance(state_dict["state"], dict):
            raise ValueError(f"{name}.load_state_dict: state must be a dict, got "
                             f"{type(state_dict['state']).__name__}")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state dict has {len(groups)} "
                             f"parameter group(s), the optimizer has {len(self.param_groups)}")
        self._checked_groups(groups, problems)
        params = self._params()
        allowed = set(self._state_arrays) | ({"step"} if self._counts_steps else set())
        for key, st in state_dict["state"].items():
            try:
                i = int(key)
            except (TypeError, ValueError):
                problems.append(f"state key {key!r} is not a parameter index")
                continue
            if not 0 <= i < len(params):
                problems.append(f"state for parameter {i}: the optimizer has {len(params)} parameters")
                continue
            if not isinstance(st, dict):
                problems.append(f"state for parameter {i} is not a dict")
                continue
            for sk, sv in st.items():
                if sk not in allowed:
                    problems.append(f"state for parameter {i}: unknown entry {sk!r} "
                                    f"(expected some of {sorted(allowed)})")
                elif sk == "step":
                    if isinstance(sv, bool) or not isinstance(sv, numbers.Real) \
                            or not 0 <= sv < float("inf") or sv != int(sv):
                        problems.append(f"state for parameter {i}: step={sv!r} is not a count")
                else:
                    arr = np.asarray(sv) if not isinstance(sv, np.ndarray) else sv
                    if arr.dtype.kind != "f":
                        problems.append(f"state for parameter {i}: {sk!r} has dtype {arr.dtype}")
                    elif arr.shape != params[i].shape:
                        problems.append(f"state for parameter {i}: {sk!r} has shape {arr.shape}, "
                                        f"the parameter has {params[i].shape}")
                    elif (why := cast_problem(arr, params[i].data.dtype)) is not None:
                        problems.append(f"state for parameter {i}: {sk!r}: {why}")
            if self._counts_steps and st and "step" not in st:
                problems.append(f"state for parameter {i} lacks 'step'")
        if problems:
            raise ValueError(f"{name}.load_state_dict: state dict does not match the optimizer "
                             "(nothing was loaded):\n  " + "\n  ".join(problems))

    def _checked_groups(self, groups, problems: list) -> list:
        """The saved groups merged over the current ones and checked as
        ``add_param_group`` checks a new group (types, ranges, unknown
        options); problems are appended, the normalised candidates returned."""
        name = type(self).__name__
        known = set(self.defaults) | self._extra_group_keys() | {"params"}
        candidates = []
        for k, (saved, mine) in enumerate(zip(groups, self.param_groups)):
            if not isinstance(saved, dict):
                problems.append(f"group {k} is a {type(saved).__name__}, not a dict")
                continue
            ids = saved.get("params", ())
            if not isinstance(ids, (list, tuple)) or not all(
                    isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in ids):
                problems.append(f"group {k}: params must be a list of parameter indices, "
                                f"got {ids!r}")
            elif len(ids) != len(mine["params"]):
                problems.append(f"group {k} has {len(ids)} parameter(s) in the state dict, "
                                f"{len(mine['params'])} in the optimizer")
            unknown = sorted(str(key) for key in saved if key not in known)
            if unknown:
                problems.append(f"group {k}: unknown option(s) {unknown}; known: "
                                f"{sorted(self.defaults)}")
                continue
            cand = {key: copy.deepcopy(val) for key, val in mine.items() if key != "params"}
            cand.update({key: copy.deepcopy(val) for key, val in saved.items() if key != "params"})
            try:
                self._check_group(cand)
            except (TypeError, ValueError) as exc:
                problems.append(f"group {k}: {exc}")
                continue
            candidates.append(cand)
        return candidates

    def load_state_dict(self, state_dict) -> None:
        """Restore options and state (validated first; arrays copied and cast
        to each parameter's dtype)."""
        self.check_state_dict(state_dict)
        params = self._params()
        candidates = self._checked_groups(state_dict["param_groups"], [])
        for saved, cand, mine in zip(state_dict["param_groups"], candidates, self.param_groups):
            for key in saved:
                if key != "params":
                    mine[key] = cand[key]
        new_state = {}
        for key, st in state_dict["state"].items():
            p = params[int(key)]
            new_state[p] = {k: (int(v) if k == "step" else
                                np.array(v, dtype=p.data.dtype, copy=True, order="C"))
                            for k, v in st.items()}
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for k, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {k}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


def _check_nonneg(name: str, group: dict, key: str) -> None:
    """``group[key]`` must be a finite real number >= 0 (TypeError / ValueError
    naming the option otherwise)."""
    v = group[key]
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: invalid {key}={v!r} (must be a number >= 0)")
    if not 0 <= v < float("inf"):
        raise ValueError(f"{name}: invalid {key}={v!r} (must be a number >= 0)")


def _check_flag(name: str, group: dict, key: str) -> None:
    """``group[key]`` must be a bool (a NumPy bool is converted)."""
    v = group[key]
    if isinstance(v, np.bool_):
        group[key] = v = bool(v)
    if not isinstance(v, bool):
        raise TypeError(f"{name}: invalid {key}={v!r} (must be True or False)")

