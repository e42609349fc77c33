"""Ops that users define (forward): ``Op.CUSTOM`` runs the user's forward on
the input values (yscv/custom_op.py makes the op and appends the node).
Attributes: the op and the call's keyword attributes."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..node import Op
from ..registry import register_forward


class CustomAttrs(NamedTuple):
    """The attributes of an ``Op.CUSTOM`` node: the op and the call's keyword
    attributes (sorted ``(name, value)`` pairs)."""

    op: object   # the yscv.custom_op.CustomOp
    items: tuple

    @property
    def kwargs(self) -> dict:
        return dict(self.items)


@register_forward(Op.CUSTOM)
def custom_forward(attrs: CustomAttrs, *xs):
    op = attrs.op
    out = op.forward(*xs, **attrs.kwargs)
    saved = None
    if op.saves:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"{op.name}: forward must return (value, saved) when saves=True")
        out, saved = out
    if not isinstance(out, np.ndarray):
        out = np.asarray(out)
    want = xs[0].dtype
    if out.dtype != want:
        raise TypeError(f"{op.name}: forward returned a {out.dtype} array for {want} inputs; "
                        "return the inputs' dtype (no silent promotion)")
    return out, saved
