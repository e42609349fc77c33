"""The loss names of the array interpreter (yscv/engine/namespace/__init__.py).

None are needed by the built-in rules: every loss is a fused op whose rule
(yscv/backward/loss*.py) computes its gradient with NumPy and the loss
compute drivers directly, and whose ``create_graph=True`` gradients are
``Op.VJP`` nodes differentiated through its composite, so no loss rule runs
a loss op through ``ns``. A user rule that calls ``ns.<loss>`` takes the
scratch-graph way (the same forward, so the same bits)."""
from __future__ import annotations


class ArrayLoss:
    """Loss ops on arrays, for the rules of backward/ (none yet)."""

    __slots__ = ()
