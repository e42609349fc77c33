"""Batching rules of the elementwise and activation ops: the op once on
operands aligned to a common per-sample rank; an axis attribute moves by
one; dropout draws its masks as ``randomness`` says."""
from __future__ import annotations

import numpy as np

from ..errors import BatchingError
from ..op import Op
from ..registry import register_batching
from ._rules import batched, elementwise, loop, register_all, same

_BINARY = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAXIMUM, Op.MINIMUM, Op.ATAN2,
           Op.REMAINDER)
_UNARY = (Op.NEG, Op.ABS, Op.EXP, Op.LOG, Op.SQRT, Op.CLAMP, Op.SIN, Op.COS, Op.TAN, Op.ASIN,
          Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.ERF, Op.ERFC, Op.SIGN, Op.FLOOR, Op.CEIL,
          Op.ROUND, Op.TRUNC, Op.RECIPROCAL, Op.RSQRT, Op.SQUARE, Op.LOG1P, Op.EXPM1, Op.LOG2,
          Op.LOG10, Op.RELU, Op.LEAKY_RELU, Op.SIGMOID, Op.TANH, Op.GELU, Op.SILU, Op.MISH,
          Op.SOFTPLUS, Op.ELU, Op.SELU, Op.CELU, Op.HARDTANH, Op.RELU6, Op.HARDSIGMOID,
          Op.HARDSWISH, Op.SOFTSIGN, Op.LOGSIGMOID)
_BACKWARD_PAIRS = (Op.GELU_BACKWARD, Op.TANH_BACKWARD, Op.SIGMOID_BACKWARD)

register_all(_UNARY, same)
register_all(_BINARY, elementwise)


def _same_shapes(g, op, xs, bat, attrs, e):
    """Ops whose operands have one shape (the fused backward pairs): shared
    operands expanded to the batch."""
    return g._apply(op, [batched(g, x, b, e.size) for x, b in zip(xs, bat)], attrs)


register_all(_BACKWARD_PAIRS, _same_shapes)


@register_batching(Op.PRELU)
def _prelu(g, op, xs, bat, attrs, e):
    """One slope per channel (the last axis) or one for all: a shared slope
    broadcasts over the batch; a batched one (an ensemble) loops."""
    if bat[1]:
        return loop(g, op, xs, bat, attrs, e)
    return g._apply(op, xs, attrs)


@register_batching(Op.WHERE)
def _where(g, op, xs, bat, attrs, e):
    # attrs: the boolean condition, per-sample shape
    return elementwise(g, op, xs, bat, attrs, e, extra_rank=np.ndim(attrs))


@register_batching(Op.MASKED_FILL)
def _masked_fill(g, op, xs, bat, attrs, e):
    return elementwise(g, op, xs, bat, attrs, e, extra_rank=np.ndim(attrs.mask))


def _axis_plus_one(g, op, xs, bat, attrs, e):
    """softmax, log_softmax, cumsum, cumprod, glu: the attribute is the axis
    (a 0-d sample has none to move: one call per sample)."""
    if len(xs[0].shape) == 1:
        return loop(g, op, xs, bat, attrs, e)
    return g._apply(op, xs, int(attrs) + 1)


register_all((Op.SOFTMAX, Op.LOG_SOFTMAX, Op.CUMSUM, Op.CUMPROD, Op.GLU), _axis_plus_one)


@register_batching(Op.DROPOUT)
def _dropout(g, op, xs, bat, attrs, e):
    """'different': one mask over the whole batch (a mask per sample);
    'same': one per-sample-shaped mask for every sample; 'error' refuses."""
    if e.randomness == "error" and attrs.training and attrs.p > 0:
        raise BatchingError("vmap: dropout draws random numbers; pass randomness='different' "
                            "(a mask per sample) or 'same' (one mask) to vmap", op="dropout")
    if e.randomness == "same" and attrs.training and attrs.p > 0:
        (x,) = xs
        shape = tuple(x.shape)[1:]
        mask = g._apply(op, (np.ones(shape, dtype=g.dtype),), attrs)
        return g.mul(x, mask)
    return g._apply(op, xs, attrs)

