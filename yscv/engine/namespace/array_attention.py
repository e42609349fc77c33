"""The attention names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node."""
from __future__ import annotations


class ArrayAttention:
    """Attention ops on arrays, for the rules of backward/. No names:
    the rule of scaled_dot_product_attention is the array rule of a composite op
    (yscv/backward/attention.py) and calls the fused kernels, not ``ns``."""

    __slots__ = ()
