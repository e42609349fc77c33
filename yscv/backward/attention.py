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
back to each input's own shape. Each is laid out in memory as its input
(heads split by a transpose get gradients that merge back without a copy).

The attention is a fused op with a composite (its forward in primitive ops,
at the bottom): its rule runs on arrays only (``ns`` is always the array
interpreter and goes unused) and calls the fused kernels; under
``create_graph=True`` each input gradient is one ``Op.VJP`` node whose value
is this rule's and whose derivative is the composite's
(yscv/engine/namespace/vjp.py).
"""
from __future__ import annotations

import numpy as np

from ..compute import attention as C
from ..node import Op
from ..registry import register_composite, register_rule


@register_rule(Op.SCALED_DOT_PRODUCT_ATTENTION)
def sdpa_rule(ns, g, inputs, out, attrs, saved, needs):
    q, k, v = inputs
    p = saved
    dq = dk = dv = None
    # each gradient in its input's memory order (yscv/compute/attention.py)
    if needs[2]:
        dv = C.product_like(np.swapaxes(p, -1, -2), g, v)
    if needs[0] or needs[1]:
        ds = C.score_grad(g, v, p, attrs.causal, attrs.scale)  # a scratch buffer
        if needs[0]:
            dq = C.product_like(ds, k, q)
        if needs[1]:
            dk = C.product_like(np.swapaxes(ds, -1, -2), q, k)
    return dq, dk, dv


# -------------------------------------------------------------- composite
def _sdpa_composite(G, q, k, v, attrs):
    """The attention with primitive ops, finite everywhere: blocked scores
    are replaced by a constant (their probability is a constant 0), the
    softmax is shifted by a constant row maximum (softmax is shift-
    invariant, so every derivative is unchanged) and a row with nothing to
    attend divides by 1 (a zero row, as the fused op)."""
    nd = len(q.shape)
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    scores = G.mul(G.matmul(q, G.transpose(k, perm)), attrs.scale)
    shape = tuple(scores.shape)
    sv = np.asarray(G.value(scores))
    allowed = np.ones(shape, dtype=bool)
    if attrs.mask is not None:
        m = attrs.mask.reshape(shape)
        if m.dtype == np.bool_:
            allowed &= m
        else:
            allowed &= ~np.isneginf(m)
            scores = G.add(scores, np.where(np.isneginf(m), 0.0, m).astype(G.dtype))
            sv = np.asarray(G.value(scores))
    if attrs.causal:
        sq, sk = shape[-2], shape[-1]
        allowed &= np.tril(np.ones((sq, sk), dtype=bool))
    any_row = allowed.any(axis=-1, keepdims=True)
    shift = np.where(allowed, sv, -np.inf).max(axis=-1, keepdims=True)
    shift = np.where(any_row, shift, 0.0).astype(G.dtype)
    safe = G.where(allowed, scores, np.broadcast_to(shift, shape))
    e = G.where(allowed, G.exp(G.sub(safe, shift)), 0.0)
    denom = G.where(any_row, G.sum(e, axis=-1, keepdims=True), 1.0)
    return G.matmul(G.div(e, denom), v)


register_composite(Op.SCALED_DOT_PRODUCT_ATTENTION, _sdpa_composite)
