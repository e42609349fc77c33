"""The pool names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node."""
from __future__ import annotations


class ArrayPool:
    """Pool ops on arrays, for the rules of backward/."""

    __slots__ = ()

    pass
