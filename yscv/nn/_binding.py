"""Binding layer state into a graph without copying, through public Graph
methods only.

- `bind_buffer` binds a buffer (batch-norm running statistics) with
  ``g.buffer``: a constant leaf whose value is a VIEW of the layer's array,
  once per graph; ``g.batch_norm(training=True)`` updates it in place, so the
  update lands in the layer's buffer.
- `bind_param` binds a Parameter: trainable ones with ``g.param``,
  frozen ones (``requires_grad=False``) with ``g.buffer``, so no gradient flows.

While `yscv.func.functional_call` runs a module on other values
(`yscv.nn.substitute`), both return the node of the value given for the
parameter or buffer instead; ``Module.param`` and ``Module.buffer`` bind
through them, so every layer is substituted without knowing it.
"""
from __future__ import annotations

import contextvars

__all__ = ["bind_buffer", "bind_param"]

#: id(Parameter or buffer array) -> its `yscv.nn.substitute.Substitute`, while a
#: functional call runs in this context (None otherwise)
SUBSTITUTES: contextvars.ContextVar = contextvars.ContextVar("yscv_nn_substitutes", default=None)


def bind_buffer(g, arr, name: str = "buffer"):
    """A constant leaf sharing memory with ``arr`` (bound once per graph)."""
    subs = SUBSTITUTES.get()
    if subs is not None:
        hit = subs.get(id(arr))
        if hit is not None and hit.owner is arr:
            return hit.bind(g)
    return g.buffer(arr, name)


def bind_param(g, p, name: str = "param"):
    """``g.param(p)`` for trainable parameters; a no-grad view leaf for frozen
    ones (``name`` is the name the graph's errors use for it)."""
    subs = SUBSTITUTES.get()
    if subs is not None:
        hit = subs.get(id(p))
        if hit is not None and hit.owner is p:
            return hit.bind(g)
    if p.requires_grad:
        return g.param(p)
    return g.buffer(p.data, name)
