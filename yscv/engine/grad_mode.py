"""``yscv.no_grad()``: the no-grad mode of every graph, for the calling thread.

``g.no_grad()`` turns recording off on one graph (its ``_grad_enabled``
flag, read by the node append). ``yscv.no_grad()`` is the top-level form a
PyTorch user types (``with torch.no_grad():``) where no graph is at hand:
while the calling thread is inside it, every graph records nodes that do
not require grad, in that thread only; other threads record as usual.

It is checked by the same code path as ``g.no_grad()``: the append reads
``self._grad_enabled``. That read is a plain instance attribute, the per-node
hot path. While some thread is inside ``yscv.no_grad()``, a data descriptor
stands in for the attribute on the graph class: it answers the graph's own
flag AND "the calling thread is not inside yscv.no_grad()". When the last
thread leaves, the descriptor is removed and the read is plain again, so
the mode costs nothing when unused.
"""
from __future__ import annotations

import contextlib
import threading

from .storage import _GraphCore

_ATTR = "_grad_enabled"
_local = threading.local()      # .depth: nesting of yscv.no_grad() in this thread
_lock = threading.Lock()
_active = 0                     # threads (with nesting) inside yscv.no_grad(), all threads


class _ThreadGradEnabled:
    """``Graph._grad_enabled`` while some thread is inside ``yscv.no_grad()``:
    the graph's own flag (kept in its ``__dict__``) and this thread's mode."""

    def __get__(self, graph, cls=None):
        if graph is None:
            return self
        return graph.__dict__[_ATTR] and not getattr(_local, "depth", 0)

    def __set__(self, graph, value) -> None:
        graph.__dict__[_ATTR] = value


_DESCRIPTOR = _ThreadGradEnabled()


def is_grad_enabled() -> bool:
    """False while the calling thread is inside ``yscv.no_grad()``."""
    return not getattr(_local, "depth", 0)


@contextlib.contextmanager
def no_grad():
    """Within the block, every graph records, from this thread, nodes that do
    not require grad (``torch.no_grad``): values are computed, nothing is
    kept for backward. Nests, and combines with ``g.no_grad()``; other threads
    are not affected. Also usable as a decorator, ``@yscv.no_grad()``."""
    global _active
    with _lock:
        if _active == 0:
            setattr(_GraphCore, _ATTR, _DESCRIPTOR)
        _active += 1
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1
        with _lock:
            _active -= 1
            if _active == 0:
                delattr(_GraphCore, _ATTR)
