"""The activation names of the array interpreter (yscv/engine/namespace/__init__.py):
each computes on arrays exactly what the Graph op of that name computes (the
same forward or compute driver), without a node. The rules of
yscv/backward/activation.py use sigmoid, tanh, tanh_backward,
sigmoid_backward and gelu_backward; the others serve rules elsewhere."""
from __future__ import annotations

from ... import registry
from ...compute import activation as act
from ...node import Op

_GELU_KINDS = act.GELU_KINDS


def _axis(axis, ndim):
    return axis + ndim if axis < 0 else axis


class ArrayActivation:
    """Activation ops on arrays, for the rules of backward/."""

    __slots__ = ()

    relu = staticmethod(act.relu)
    sigmoid = staticmethod(act.sigmoid)
    tanh = staticmethod(act.tanh)
    #: ``grad * (1 - y**2)`` (the forward of Op.TANH_BACKWARD)
    tanh_backward = staticmethod(act.tanh_grad)
    #: ``grad * y * (1 - y)`` (the forward of Op.SIGMOID_BACKWARD)
    sigmoid_backward = staticmethod(act.sigmoid_grad)

    @staticmethod
    def gelu_backward(grad, x, approximate="none"):
        """``grad * gelu'(x)``, recomputed from x (the forward of Op.GELU_BACKWARD)."""
        return act.unary_backward(grad, x, x, _GELU_KINDS[approximate])

    @staticmethod
    def gelu(x, approximate="none"):
        return act.unary_forward(x, _GELU_KINDS[approximate])

    @staticmethod
    def silu(x):
        return act.unary_forward(x, act.SILU)

    @staticmethod
    def softplus(x, beta=1.0, threshold=20.0):
        return act.unary_forward(x, act.SOFTPLUS, float(beta), float(threshold))

    @staticmethod
    def logsigmoid(x):
        return registry.FORWARD[int(Op.LOGSIGMOID)](None, x)[0]

    @staticmethod
    def softmax(x, axis=-1):
        return act.softmax(x, _axis(axis, x.ndim), False)

    @staticmethod
    def log_softmax(x, axis=-1):
        return act.softmax(x, _axis(axis, x.ndim), True)
