"""Attention ops (backward).

With P the saved probabilities and G the output gradient:
``dV = P^T G``, ``dP = G V^T``, ``dS = scale * P * (dP - rowsum(dP * P))``
(one fused Numba pass, in place on dP), ``dQ = dS K``, ``dK = dS^T Q``.
Masked entries (False, or -inf in a floating mask) and rows with nothing
to attend have P = 0, hence dS = 0. A floating mask is a constant added to
the scaled scores, so the rule is the same for both mask kinds (the mask
has no gradient).
Gradients are returned at the broadcast leading shape; the walk sums them
back to each input's own shape.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernels import lazy
from ..node import Op
from ..registry import register_backward
from .recurrent import scratch

K = lazy("attention")


@register_backward(Op.SCALED_DOT_PRODUCT_ATTENTION)
def sdpa_backward(g, inputs, out, attrs, saved, needs):
    q, k, v = inputs
    p = saved
    dq = dk = dv = None
    if needs[2]:
        dv = np.matmul(np.swapaxes(p, -1, -2), g)
    if needs[0] or needs[1]:
        # dP (then dS, in place) is a temporary: a reused scratch buffer
        # v^T copied contiguous first: faster small GEMMs (see attention_probs)
        vt = np.ascontiguousarray(np.swapaxes(v, -1, -2))
        ds = np.matmul(g, vt, out=scratch("sdpa_ds", p.shape, p.dtype))
        Sq, Sk = p.shape[-2:]
        n = math.prod(p.shape[:-2])
        K.masked_softmax_backward(p.reshape(n, Sq, Sk), ds.reshape(n, Sq, Sk),
                                  p.dtype.type(attrs.scale), attrs.causal)
        if needs[0]:
            dq = np.matmul(ds, k)
        if needs[1]:
            dk = np.matmul(np.swapaxes(ds, -1, -2), q)
    return dq, dk, dv
