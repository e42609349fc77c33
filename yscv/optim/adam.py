"""Adam and AdamW."""
from __future__ import annotations

import numbers

from ..compute.updates import run_update
from .optimizer import Optimizer, _check_flag, _check_nonneg, flat

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``torch.optim.Adam`` (foreach=False semantics), per parameter:

        step += 1
        g = grad (+ weight_decay * p)             # coupled L2 (Adam)
        m = lerp(m, g, 1 - beta1);  v = beta2*v + (1-beta2)*g*g
        vhat = max(vmax, v) if amsgrad else v     # vmax kept in state
        p -= (lr / (1 - beta1**step)) * m / (sqrt(vhat) / sqrt(1 - beta2**step) + eps)

    State: ``step`` (int), ``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq`` (amsgrad).
    The bias corrections are computed in Python floats (float64) and cast once.
    """

    _state_arrays = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _validate_group(self, group):
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay"):
            _check_nonneg(name, group, key)
        for key in ("amsgrad", "maximize"):
            _check_flag(name, group, key)
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair, got {betas!r}")
        for k, b in enumerate(betas):
            if isinstance(b, bool) or not isinstance(b, numbers.Real):
                raise TypeError(f"{name}: invalid beta parameter at index {k}: {b!r} (betas "
                                "must be two numbers in [0, 1))")
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{name}: invalid beta parameter at index {k}: {b}")
        group["betas"] = tuple(float(b) for b in betas)

    def _update(self, K, group, p, data, grad, state):
        dt = data.dtype.type
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        step = state.get("step", 0) + 1
        state["step"] = step
        m = self._zeros_state(state, "exp_avg", data)
        v = self._zeros_state(state, "exp_avg_sq", data)
        step_size = lr / (1 - beta1 ** step)
        bc2_sqrt = (1 - beta2 ** step) ** 0.5
        if self._decoupled:
            decay, coupled = 1 - lr * wd, 0.0
        else:
            decay, coupled = 1.0, wd
        scalars = (dt(1 - beta1), dt(beta2), dt(1 - beta2), dt(step_size), dt(bc2_sqrt),
                   dt(group["eps"]), dt(coupled), dt(decay), bool(group["maximize"]))
        if group["amsgrad"]:
            vmax = flat(self._zeros_state(state, "max_exp_avg_sq", data))
            K.adam_update_amsgrad(flat(data), flat(grad), flat(m), flat(v), vmax, *scalars)
        else:
            run_update(K.adam_update, K.adam_update_region, data.size, flat(data), flat(grad),
                       flat(m), flat(v), *scalars)


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay — each step
    first ``p *= 1 - lr * weight_decay``, then the Adam update without the
    L2 term. Default ``weight_decay=1e-2`` as PyTorch."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
