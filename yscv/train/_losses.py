"""Losses and metrics by name for the fit loop, and the default forward call.

``loss_fn`` and ``metrics`` of `yscv.train.Trainer` accept names
("cross_entropy", "accuracy", ...) or callables; this module turns them into
``loss_fn(g, output, target) -> NodeId`` and ``(name, fn(output, target))``.
"""
from __future__ import annotations

import numpy as np

_LOSSES = {
    "cross_entropy": "cross_entropy", "mse": "mse_loss", "mse_loss": "mse_loss",
    "l1": "l1_loss", "l1_loss": "l1_loss", "huber": "huber_loss", "huber_loss": "huber_loss",
    "nll": "nll_loss", "nll_loss": "nll_loss",
    "bce_with_logits": "binary_cross_entropy_with_logits",
    "binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits",
}


def accuracy(output: np.ndarray, target: np.ndarray) -> float:
    """Fraction of correct predictions: argmax over the last axis for [N, C]
    outputs (C > 1), ``output > 0`` against 0/1 targets for [N] / [N, 1] logits."""
    out = np.asarray(output)
    tgt = np.asarray(target)
    if out.ndim >= 2 and out.shape[-1] > 1:
        pred = out.argmax(axis=-1)
    else:
        pred = (out.reshape(tgt.shape) > 0).astype(tgt.dtype)
    return float(np.mean(pred == tgt))


def resolve_loss(loss_fn):
    if isinstance(loss_fn, str):
        if loss_fn not in _LOSSES:
            raise ValueError(f"Trainer: unknown loss {loss_fn!r}; use one of {sorted(_LOSSES)} "
                             "or a callable loss_fn(g, output, target) -> NodeId")
        name = _LOSSES[loss_fn]
        return lambda g, out, y: getattr(g, name)(out, y)
    if not callable(loss_fn):
        raise TypeError("Trainer: loss_fn must be a loss name or a callable "
                        "loss_fn(g, output, target) -> NodeId")
    return loss_fn


def resolve_metrics(metrics) -> list:
    out = []
    for m in metrics or ():
        if m == "accuracy" or m == "acc":
            out.append(("accuracy", accuracy))
        elif callable(m):
            out.append((getattr(m, "__name__", "metric"), m))
        else:
            raise ValueError(f"Trainer: unknown metric {m!r}; use 'accuracy' or a callable "
                             "metric(output_array, target_array) -> float")
    return out


def default_forward(g, model, xb):
    # integer inputs (token indices for an Embedding) go to the model as arrays
    return model(g, xb if xb.dtype.kind in "iub" else g.constant(xb))
