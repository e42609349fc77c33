"""The reduce category, continued (forward): ``Graph.sum_to``, PyTorch's
``Tensor.sum_to_size``: the sum of x over the axes along which ``shape``
broadcasts to x's shape. Every walk sums a broadcast gradient back to its
input's shape with this op's forward (the array walks directly, the recorded
walk as a node), so the two sum it bit for bit alike. Its rule is in
yscv/backward/reduce.py."""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from ..compute.arrays import broadcasts_to, sum_to_shape
from ..node import NodeId, Op
from ..registry import register_forward
from ._common import as_graph_array, shape_error


class SumToAttrs(NamedTuple):
    """``sum_to``: the output ``shape`` and the input's (``in_shape``, to
    which the backward broadcasts the cotangent back)."""

    shape: tuple
    in_shape: tuple


@register_forward(Op.SUM_TO)
def sum_to_forward(attrs: SumToAttrs, x):
    """``yscv.compute.arrays.sum_to_shape``: leading axes and the size-1
    axes of ``shape`` summed (one pairwise ``add.reduce``)."""
    return sum_to_shape(x, attrs.shape), None


def _sum_to_shape_arg(shape) -> tuple:
    """``shape`` (an int or a sequence of non-negative ints) as a tuple."""
    def is_int(s):
        return isinstance(s, numbers.Integral) and not isinstance(s, bool)
    if is_int(shape):
        out = (int(shape),)
    elif isinstance(shape, (tuple, list)) or (isinstance(shape, np.ndarray) and shape.ndim == 1):
        if not all(is_int(s) for s in shape):
            raise TypeError(f"sum_to: shape must be an int or a sequence of ints, got {shape!r}")
        out = tuple(int(s) for s in shape)
    else:
        raise TypeError(f"sum_to: shape must be an int or a sequence of ints, got {shape!r}")
    for s in out:
        if s < 0:
            raise ValueError(f"sum_to: shape={out} has a negative size {s}")
    return out


class ReduceSumToOps:
    """The ``sum_to`` method of Graph."""

    def sum_to(self, x, shape):
        """``x`` summed over the axes along which ``shape`` broadcasts to
        ``x``'s shape (PyTorch's ``Tensor.sum_to_size``): its leading axes and
        the axes where ``shape`` has size 1, giving an array of ``shape``. A
        ``shape`` that does not broadcast to ``x``'s shape is a ShapeError (an
        int or a sequence of non-negative ints, else TypeError / ValueError).
        Backward: the cotangent broadcast back to ``x``'s shape (``expand``)."""
        out = _sum_to_shape_arg(shape)
        if type(x) is NodeId:
            in_shape = self._shape(self._index(x))
        else:
            x = as_graph_array(x, self.dtype, "sum_to", "x", copy=True)
            in_shape = x.shape
        if not broadcasts_to(in_shape, out):
            raise shape_error("sum_to", f"shape={out} does not broadcast to the input shape "
                                        f"{in_shape}", expected=in_shape, got=out)
        return self._apply1(Op.SUM_TO, x, SumToAttrs(out, in_shape))
