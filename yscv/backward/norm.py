"""Normalization ops (backward). See yscv/registry.py for the op contract.

Saved data is the float64 ``(mean, var)`` the forward normalised with; the
kernels recompute ``x - mean`` from the input value instead of keeping the
normalised activations. For statistics groups of ``m`` elements with
``xhat = (x - mean) * inv``, ``inv = 1 / sqrt(var + eps)`` and upstream ``g``:

* ``dbeta_c = sum g``, ``dgamma_c = sum g * xhat`` (over everything but c);
* batch statistics: ``dx = inv * (h - mean_group(h) - xhat * mean_group(h * xhat))``
  with ``h = g * gamma_c``;
* fixed statistics (batch norm in eval mode): ``dx = gamma_c * inv * g``.

Running statistics (the last two batch-norm inputs, when tracked) never
receive a gradient. The sums and the input gradient are computed in
yscv/compute/norm.py (row chunks on two threads, partial sums added in
chunk order). Attributes are the named records of yscv/ops/norm.py.

Each norm is a fused op with a composite (its forward in primitive ops, at
the bottom): its rule runs on arrays only (``ns`` is always the array
interpreter and goes unused) and calls the fused kernels; under
``create_graph=True`` each input gradient is one ``Op.VJP`` node whose value
is this rule's and whose derivative is the composite's
(yscv/engine/namespace/vjp.py).
"""
from __future__ import annotations

from ..compute import norm as N
from ..node import Op
from ..registry import register_composite, register_rule


def _affine_grads(grads_x, dgamma, dbeta, has_gamma, has_beta, dtype, extra=0) -> tuple:
    out = [grads_x]
    if has_gamma:
        out.append(None if dgamma is None else dgamma.astype(dtype))
    if has_beta:
        out.append(None if dbeta is None else dbeta.astype(dtype))
    return tuple(out) + (None,) * extra


def _needs(needs, has_gamma, has_beta):
    need_gamma = has_gamma and needs[1]
    need_beta = has_beta and needs[1 + has_gamma]
    return needs[0], need_gamma, need_beta


def _grouped(g, inputs, attrs, saved, needs, per_sample, k, batch_stats, extra=0):
    """The rule of the grouped-column norms: statistics over groups of ``k``
    channels, per sample or over the batch; batch or fixed statistics."""
    x = inputs[0]
    gamma = inputs[1] if attrs.has_gamma else None
    mean, var = saved
    need_x, need_gamma, need_beta = _needs(needs, attrs.has_gamma, attrs.has_beta)
    dx, dgamma, dbeta = N.group_backward(g, x, gamma, mean, var, attrs.eps, per_sample, k,
                                         batch_stats, need_x, need_gamma, need_beta)
    return _affine_grads(dx, dgamma, dbeta, attrs.has_gamma, attrs.has_beta, x.dtype,
                         extra=extra)


@register_rule(Op.BATCH_NORM)
def batch_norm_rule(ns, g, inputs, out, attrs, saved, needs):
    """Statistics over the batch; fixed (running) ones in eval mode."""
    stats = len(inputs) - 1 - attrs.has_gamma - attrs.has_beta  # running statistics: no gradient
    return _grouped(g, inputs, attrs, saved, needs, False, 1, attrs.training, extra=stats)


@register_rule(Op.INSTANCE_NORM)
def instance_norm_rule(ns, g, inputs, out, attrs, saved, needs):
    return _grouped(g, inputs, attrs, saved, needs, True, 1, True)


@register_rule(Op.GROUP_NORM)
def group_norm_rule(ns, g, inputs, out, attrs, saved, needs):
    return _grouped(g, inputs, attrs, saved, needs, True, inputs[0].shape[-1] // attrs.num_groups,
                    True)


@register_rule(Op.LAYER_NORM)
def layer_norm_rule(ns, g, inputs, out, attrs, saved, needs):
    x = inputs[0]
    gamma = inputs[1] if attrs.has_gamma else None
    mean, var = saved
    need_x, need_gamma, need_beta = _needs(needs, attrs.has_gamma, attrs.has_beta)
    dx = dgamma = dbeta = None
    if need_x or need_gamma or need_beta:
        dx, dgamma, dbeta = N.layer_norm_backward(g, x, gamma, mean, var, attrs.eps,
                                                  need_x, need_gamma, need_beta)
    return _affine_grads(dx, dgamma, dbeta, attrs.has_gamma, attrs.has_beta, x.dtype)


# -------------------------------------------------------------- composite
# Each norm said with primitive ops (registry.COMPOSITES): the derivative
# of its recorded gradients (Op.VJP) is that composite's, exact to any
# order. Running statistics are constants: they get no gradient.
def _normalized(G, x, axes, eps):
    mean = G.mean(x, axis=axes, keepdims=True)
    xc = G.sub(x, mean)
    var = G.mean(G.mul(xc, xc), axis=axes, keepdims=True)
    return G.div(xc, G.sqrt(G.add(var, eps)))


def _affine_nodes(G, y, rest, attrs):
    k = 0
    if attrs.has_gamma:
        y = G.mul(y, rest[k])
        k += 1
    if attrs.has_beta:
        y = G.add(y, rest[k])
    return y


def _batch_norm_composite(G, x, *rest):
    *rest, attrs = rest
    nd = len(x.shape)
    if attrs.training:
        xhat = _normalized(G, x, tuple(range(nd - 1)), attrs.eps)
    else:
        k = attrs.has_gamma + attrs.has_beta
        rm, rv = rest[k], rest[k + 1]
        xhat = G.div(G.sub(x, rm), G.sqrt(G.add(rv, attrs.eps)))
    return _affine_nodes(G, xhat, rest, attrs)


def _instance_norm_composite(G, x, *rest):
    *rest, attrs = rest
    nd = len(x.shape)
    return _affine_nodes(G, _normalized(G, x, tuple(range(1, nd - 1)), attrs.eps), rest, attrs)


def _layer_norm_composite(G, x, *rest):
    *rest, attrs = rest
    return _affine_nodes(G, _normalized(G, x, (len(x.shape) - 1,), attrs.eps), rest, attrs)


def _group_norm_composite(G, x, *rest):
    *rest, attrs = rest
    shape = tuple(x.shape)
    groups = attrs.num_groups
    grouped = G.reshape(x, (shape[0], -1, groups, shape[-1] // groups))
    xhat = G.reshape(_normalized(G, grouped, (1, 3), attrs.eps), shape)
    return _affine_nodes(G, xhat, rest, attrs)


register_composite(Op.BATCH_NORM, _batch_norm_composite)
register_composite(Op.INSTANCE_NORM, _instance_norm_composite)
register_composite(Op.LAYER_NORM, _layer_norm_composite)
register_composite(Op.GROUP_NORM, _group_norm_composite)
