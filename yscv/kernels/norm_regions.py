"""Region kernels of the normalization ops: each runs the row-range kernel
of yscv/kernels/norm.py on every chunk it claims (chunk ``c`` covers rows
``[bounds[c], bounds[c + 1])``), until none is left; the ops layer runs one
call per thread (yscv/ops/_parallel.py). A chunk's partial results go to
index ``c`` of the ``out`` arrays, whichever thread claims it.
"""
from __future__ import annotations

from ._jit import jit
from .norm import (group_apply, group_grad_apply, group_grad_sums, group_stats,
                   layer_norm_backward, layer_norm_forward)
from .sync import region_claim, region_enter


@jit
def group_stats_region(x, C, K, out, bounds, st):
    """:func:`yscv.kernels.norm.group_stats` over the claimed chunks."""
    region_enter(st)
    c = region_claim(st)
    while c < bounds.shape[0] - 1:
        group_stats(x, C, K, bounds[c], bounds[c + 1], out, c)
        c = region_claim(st)


@jit
def group_apply_region(x, coef, y, bounds, st):
    """:func:`yscv.kernels.norm.group_apply` over the claimed chunks."""
    region_enter(st)
    c = region_claim(st)
    while c < bounds.shape[0] - 1:
        group_apply(x, coef, y, bounds[c], bounds[c + 1])
        c = region_claim(st)


@jit
def group_grad_sums_region(g, x, mean, C, out, bounds, st):
    """:func:`yscv.kernels.norm.group_grad_sums` over the claimed chunks."""
    region_enter(st)
    c = region_claim(st)
    while c < bounds.shape[0] - 1:
        group_grad_sums(g, x, mean, C, bounds[c], bounds[c + 1], out, c)
        c = region_claim(st)


@jit
def group_grad_apply_region(g, x, coef, dx, bounds, st):
    """:func:`yscv.kernels.norm.group_grad_apply` over the claimed chunks."""
    region_enter(st)
    c = region_claim(st)
    while c < bounds.shape[0] - 1:
        group_grad_apply(g, x, coef, dx, bounds[c], bounds[c + 1])
        c = region_claim(st)


@jit
def layer_norm_forward_region(x, gamma, beta, eps, y, mean, var, bounds, st):
    """:func:`yscv.kernels.norm.layer_norm_forward` over the claimed chunks."""
    region_enter(st)
    c = region_claim(st)
    while c < bounds.shape[0] - 1:
        layer_norm_forward(x, gamma, beta, eps, y, mean, var, bounds[c], bounds[c + 1])
        c = region_claim(st)


@jit
def layer_norm_backward_region(g, x, mean, inv, gamma, gamma64, dx, dgamma_out, dbeta_out,
                               need_x, need_affine, bounds, st):
    """:func:`yscv.kernels.norm.layer_norm_backward` over the claimed chunks."""
    region_enter(st)
    c = region_claim(st)
    while c < bounds.shape[0] - 1:
        layer_norm_backward(g, x, mean, inv, gamma, gamma64, dx, dgamma_out, dbeta_out, c,
                            bounds[c], bounds[c + 1], need_x, need_affine)
        c = region_claim(st)
