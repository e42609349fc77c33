"""The ``Graph`` class: the arena's storage (yscv/engine/storage.py) composed
with the other parts of the engine, one file each:

==============================  ============================================
`yscv.engine.leaves`            variable, constant, param, buffer, set_value
`yscv.engine.walk`              backward, gradients, hooks (the schedule's
                                runners: yscv/engine/schedule.py)
`yscv.engine.recompute`         release and recompute of values (checkpointing)
`yscv.engine.clipping`          clip_grad_norm, clip_grad_value
`yscv.engine.introspect`        to_dot, memory, summary
`yscv.ops`                      one mixin per op category (g.conv2d, g.relu ...)
==============================  ============================================

Importing it fills the rule tables (yscv/backward/) and checks that every
``Op`` member has a forward and a rule.
"""
from __future__ import annotations

from .. import backward as _backward_rules  # noqa: F401  (fills registry.RULES)
from .. import batching as _batching_rules  # noqa: F401  (fills registry.BATCHING)
from .. import registry
from ..op import Op
from ..ops import OP_MIXINS
from ..ops.activation import ActivationOps
from ..ops.elementwise import ElementwiseOps
from . import namespace as _namespace
from .clipping import ClipGradMixin
from .introspect import IntrospectionMixin
from .leaves import LeavesMixin
from .recompute import CheckpointMixin
from .storage import _GraphCore, unary_ufunc_method
from .walk import WalkMixin

# Every Op member must have a forward and a rule, or importing fails.
registry.check_complete()


class Graph(_GraphCore, LeavesMixin, WalkMixin, IntrospectionMixin, CheckpointMixin,
            ClipGradMixin, *OP_MIXINS):
    """An append-only arena of nodes with eager forward and reverse-walk backward.

    Args:
        dtype: np.float32 (default) or np.float64; every value and grad has it.
        detect_anomaly: raise `AnomalyError` at the first NaN/Inf.
    """

    # the one-input ops with a ufunc form: `_GraphCore._apply1`'s path
    # written into the method (one frame fewer per node)
    neg = unary_ufunc_method(Op.NEG, ElementwiseOps.neg)
    abs = unary_ufunc_method(Op.ABS, ElementwiseOps.abs)
    tanh = unary_ufunc_method(Op.TANH, ActivationOps.tanh)


# the interpreters' scratch graphs are Graphs (yscv/engine/namespace/__init__.py)
_namespace.GRAPH_CLASS = Graph
