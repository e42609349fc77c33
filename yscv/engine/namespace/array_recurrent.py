"""The recurrent names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node."""
from __future__ import annotations


class ArrayRecurrent:
    """Recurrent ops on arrays, for the rules of backward/. No names:
    the rules of RNN, LSTM and GRU are array rules of composite ops
    (yscv/backward/recurrent.py) and call the fused kernels, not ``ns``."""

    __slots__ = ()
