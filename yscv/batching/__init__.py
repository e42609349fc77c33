"""Batching rules, one per op (`yscv.registry.BATCHING`), by category: the
third interpreter of the ops after the forward and the backward rule
(yscv/engine/batching.py runs them; `yscv.func.vmap` is the transform).

Importing the package fills the table; every op not named by a category
module is batched by the loop of last resort, except `Op.CUSTOM` (a user
op: its batching is not known, so vmap raises `yscv.BatchingError` naming
it) and `Op.LEAF` (leaves are made, never applied)."""
from __future__ import annotations

from ..errors import BatchingError
from ..op import Op
from ..registry import BATCHING, register_batching
from . import elementwise, layers, linalg, loss, reduce, shape  # noqa: F401  (fill the table)
from ._rules import BatchedInts, loop

__all__ = ["BatchedInts"]


@register_batching(Op.CUSTOM, "refused")
def _custom(g, op, xs, bat, attrs, e):
    name = getattr(getattr(attrs, "op", None), "name", "custom")
    raise BatchingError(f"vmap: custom op {name!r} has no batching rule", op=name)


for _op in Op:
    if _op not in (Op.LEAF,) and BATCHING[int(_op)] is None:
        register_batching(_op, "loop")(loop)
