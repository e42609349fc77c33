"""Adagrad."""
from __future__ import annotations

from .optimizer import Optimizer, _check_flag, _check_nonneg, flat

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``torch.optim.Adagrad`` (foreach=False semantics), per parameter:

        step += 1
        g = grad (+ weight_decay * p)
        clr = lr / (1 + (step - 1) * lr_decay)
        sum += g*g                              # starts at initial_accumulator_value
        p -= clr * g / (sqrt(sum) + eps)

    State: ``step``, ``sum``.
    """

    _state_arrays = ("sum",)

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10,
                 maximize: bool = False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))

    def _validate_group(self, group):
        for key in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            _check_nonneg("Adagrad", group, key)
        _check_flag("Adagrad", group, "maximize")

    def _update(self, K, group, p, data, grad, state):
        dt = data.dtype.type
        step = state.get("step", 0) + 1
        state["step"] = step
        s = self._zeros_state(state, "sum", data, group["initial_accumulator_value"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        K.adagrad_update(flat(data), flat(grad), flat(s), dt(clr), dt(group["eps"]),
                         dt(group["weight_decay"]), bool(group["maximize"]))
