"""Stochastic gradient descent with momentum, dampening, Nesterov, weight decay."""
from __future__ import annotations

import numpy as np

from ..compute.updates import run_update
from .optimizer import Optimizer, _check_flag, _check_nonneg, flat

__all__ = ["SGD"]

_EMPTY = {}


def _empty(dtype) -> np.ndarray:
    arr = _EMPTY.get(dtype)
    if arr is None:
        arr = _EMPTY[dtype] = np.empty(0, dtype)
    return arr


class SGD(Optimizer):
    """``torch.optim.SGD`` (foreach=False semantics), per parameter:

        d = grad (+ weight_decay * p)           # -grad when maximize
        if momentum: buf = d (first step) else momentum*buf + (1-dampening)*d
                     d = d + momentum*buf (nesterov) else buf
        p -= lr * d

    State: ``momentum_buffer`` (only when momentum != 0). SGD keeps no step count.
    """

    _state_arrays = ("momentum_buffer",)
    _counts_steps = False

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _validate_group(self, group):
        for key in ("lr", "momentum", "dampening", "weight_decay"):
            _check_nonneg("SGD", group, key)
        for key in ("nesterov", "maximize"):
            _check_flag("SGD", group, key)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum requires a momentum > 0 and zero dampening")

    def _update(self, K, group, p, data, grad, state):
        dt = data.dtype.type
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            first = buf is None
            if first:
                buf = state["momentum_buffer"] = np.empty_like(data)
            buf = flat(buf)
        else:
            buf, first = _empty(data.dtype), False
        run_update(K.sgd_update, K.sgd_update_region, data.size, flat(data), flat(grad), buf,
                   dt(group["lr"]), dt(group["weight_decay"]), dt(momentum),
                   dt(1 - group["dampening"]), bool(group["nesterov"]), bool(group["maximize"]),
                   first)
