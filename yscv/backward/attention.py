"""Attention ops (backward).

With P the saved probabilities and G the output gradient:
``dV = P^T G``, ``dP = G V^T``, ``dS = scale * P * (dP - rowsum(dP * P))``
(one fused Numba pass, in place on dP), ``dQ = dS K``, ``dK = dS^T Q``.
Masked entries (False, or -inf in a floating mask) and rows with nothing
to attend have P = 0, hence dS = 0. A floating mask is a constant added to
the scaled scores, so the rule is the same for both mask kinds (the mask
has no gradient). Attributes (by name): ``causal``, ``scale`` (see
yscv/ops/attention.py).
Gradients are returned at the broadcast leading shape; the walk sums them
back to each input's own shape.
"""
from __future__ import annotations

import numpy as np

from ..compute import attention as C
from ..node import Op
from ..registry import register_backward


@register_backward(Op.SCALED_DOT_PRODUCT_ATTENTION)
def sdpa_backward(g, inputs, out, attrs, saved, needs):
    q, k, v = inputs
    p = saved
    dq = dk = dv = None
    if needs[2]:
        dv = np.matmul(np.swapaxes(p, -1, -2), g)
    if needs[0] or needs[1]:
        ds = C.score_grad(g, v, p, attrs.causal, attrs.scale)  # a scratch buffer
        if needs[0]:
            dq = np.matmul(ds, k)
        if needs[1]:
            dk = np.matmul(np.swapaxes(ds, -1, -2), q)
    return dq, dk, dv
