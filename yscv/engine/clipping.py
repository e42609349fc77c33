"""Gradient clipping on graph nodes, and the norm helpers ``yscv.nn.utils`` shares.

``g.clip_grad_norm(nodes, max_norm)`` / ``g.clip_grad_value(nodes, v)`` act on
the graph's stored gradients of ``nodes`` and, for a node bound to a
Parameter (``g.param(p)``), on ``p.grad`` too: that is the gradient an
optimizer reads, so clipping only the graph's copy would change nothing.
"""
from __future__ import annotations

import numpy as np

from ..node import NodeId


def check_clip_args(fname: str, argname: str, limit, norm_type=2.0) -> None:
    """Validate a clipping limit (a real number >= 0) and norm type (> 0 or inf)."""
    for name, v in ((argname, limit), ("norm_type", norm_type)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{fname}: {name} must be a real number, got {type(v).__name__}")
    if not limit >= 0:
        raise ValueError(f"{fname}: {argname} must be >= 0, got {limit}")
    if not norm_type > 0:
        raise ValueError(f"{fname}: norm_type must be > 0 or inf, got {norm_type}")


def total_grad_norm(grads, norm_type: float) -> float:
    """The ``norm_type``-norm of all elements of ``grads`` taken together
    (accumulated in float64), as a float; 0.0 for no arrays."""
    if not grads:
        return 0.0
    if norm_type == float("inf"):
        peaks = [float(np.max(np.abs(gr), initial=0.0)) for gr in grads]
        return float("nan") if any(v != v for v in peaks) else max(peaks)  # NaN wins
    if norm_type == 2.0:
        acc = sum(float(np.dot(r, r)) for r in (gr.ravel().astype(np.float64) for gr in grads))
        return acc ** 0.5
    acc = sum(float(np.sum(np.abs(gr.astype(np.float64)) ** norm_type)) for gr in grads)
    return acc ** (1.0 / norm_type)


class ClipGradMixin:
    """Graph methods: ``clip_grad_norm``, ``clip_grad_value``."""

    def clip_grad_norm(self, nodes, max_norm: float, norm_type: float = 2.0) -> float:
        """Scale the grads of ``nodes`` so their joint norm is at most ``max_norm``.

        Returns the total norm before clipping (as torch.nn.utils.clip_grad_norm_).
        A node bound to a Parameter (``g.param(p)``) contributes ``p.grad``,
        the gradient an optimizer reads, and both ``p.grad`` and the graph's
        stored copy are scaled.
        """
        check_clip_args("clip_grad_norm", "max_norm", max_norm, norm_type)
        idx, params = self._clip_targets(nodes)
        grads = [self._grads.get(i) if p is None else p.grad for i, p in zip(idx, params)]
        total = total_grad_norm([gr for gr in grads if gr is not None], norm_type)
        coef = max_norm / (total + 1e-6)
        if not coef >= 1.0:  # also a NaN coefficient, as PyTorch
            for i, p in zip(idx, params):
                cur = self._grads.get(i)
                if cur is not None:
                    self._grads[i] = cur * cur.dtype.type(coef)
                if p is not None and p.grad is not None:
                    p.grad = p.grad * p.grad.dtype.type(coef)
        return total

    def clip_grad_value(self, nodes, max_value: float) -> None:
        """Clamp the grads of ``nodes`` to [-max_value, max_value] (for a node
        bound to a Parameter, ``p.grad`` as well)."""
        check_clip_args("clip_grad_value", "max_value", max_value)
        idx, params = self._clip_targets(nodes)
        for i, p in zip(idx, params):
            cur = self._grads.get(i)
            if cur is not None:
                self._grads[i] = np.clip(cur, -max_value, max_value).astype(self.dtype)
            if p is not None and p.grad is not None:
                p.grad = np.clip(p.grad, -max_value, max_value).astype(p.grad.dtype)

    def _clip_targets(self, nodes):
        """Distinct indices of ``nodes`` (a NodeId or an iterable) and the
        Parameter bound to each (or None)."""
        nodes = (nodes,) if type(nodes) is NodeId else nodes
        idx = list(dict.fromkeys(self._index(n) for n in nodes))
        return idx, [self._param_of.get(i) for i in idx]
