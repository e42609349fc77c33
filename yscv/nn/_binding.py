"""Binding layer state into a graph without copying, through public Graph
methods only.

- `bind_buffer` binds a buffer (batch-norm running statistics) with
  ``g.buffer``: a constant leaf whose value is a VIEW of the layer's array,
  once per graph; ``g.batch_norm(training=True)`` updates it in place, so the
  update lands in the layer's buffer.
- `bind_param` binds a Parameter: trainable ones with ``g.param``,
  frozen ones (``requires_grad=False``) with ``g.buffer``, so no gradient flows.
"""
from __future__ import annotations

import numpy as np

__all__ = ["bind_buffer", "bind_param"]


def bind_buffer(g, arr: np.ndarray, name: str = "buffer"):
    """A constant leaf sharing memory with ``arr`` (bound once per graph)."""
    return g.buffer(arr, name)


def bind_param(g, p):
    """``g.param(p)`` for trainable parameters; a no-grad view leaf for frozen ones."""
    if p.requires_grad:
        return g.param(p)
    return g.buffer(p.data, "param")
