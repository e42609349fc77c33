"""RMSprop."""
from __future__ import annotations

from .optimizer import Optimizer, _check_flag, _check_nonneg, flat

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``torch.optim.RMSprop`` (foreach=False semantics), per parameter:

        g = grad (+ weight_decay * p)
        sq = alpha*sq + (1-alpha)*g*g
        centered: ga = lerp(ga, g, 1-alpha); avg = sqrt(sq - ga*ga) + eps
        else:     avg = sqrt(sq) + eps                  # eps OUTSIDE the sqrt
        momentum > 0: buf = momentum*buf + g/avg; p -= lr*buf
        else:         p -= lr * g / avg

    The multiply-adds PyTorch's vectorised CPU kernels fuse (the weight
    decay, the addcmul into ``square_avg``, the centered lerp and variance,
    the momentum step) are fused multiply-adds here too on a CPU with FMA,
    so the averages equal PyTorch's bit for bit
    (`yscv.kernels.optim`).

    State: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0),
    ``grad_avg`` (centered).
    """

    _state_arrays = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 maximize: bool = False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _validate_group(self, group):
        for key in ("lr", "alpha", "eps", "weight_decay", "momentum"):
            _check_nonneg("RMSprop", group, key)
        for key in ("centered", "maximize"):
            _check_flag("RMSprop", group, key)

    def _update(self, K, group, p, data, grad, state):
        dt = data.dtype.type
        state["step"] = state.get("step", 0) + 1
        sq = flat(self._zeros_state(state, "square_avg", data))
        momentum = group["momentum"]
        alpha = group["alpha"]
        common = (flat(data), flat(grad), sq)
        scalars = (dt(group["lr"]), dt(alpha), dt(1 - alpha), dt(group["eps"]),
                   dt(group["weight_decay"]))
        maximize = bool(group["maximize"])
        if group["centered"]:
            ga = flat(self._zeros_state(state, "grad_avg", data))
            # torch's lerp weight: 1-alpha when below 0.5, else (1-alpha) - 1 (exact)
            w_small = abs(dt(1 - alpha)) < 0.5
            w = dt(1 - alpha) if w_small else dt(dt(1 - alpha) - dt(1))
            if momentum > 0:
                buf = flat(self._zeros_state(state, "momentum_buffer", data))
                K.rmsprop_update_centered_momentum(*common, ga, buf, *scalars, dt(momentum),
                                                   maximize, w, bool(w_small))
            else:
                K.rmsprop_update_centered(*common, ga, *scalars, maximize, w, bool(w_small))
        elif momentum > 0:
            buf = flat(self._zeros_state(state, "momentum_buffer", data))
            K.rmsprop_update_momentum(*common, buf, *scalars, dt(momentum), maximize)
        else:
            K.rmsprop_update(*common, *scalars, maximize)
