"""Forward side of every op, one module per category (shape in two: the
reshapes, views, joins and slicing; the padding, resampling and window ops;
loss in three: the core losses, the other functional losses, ctc_loss).

Each module defines a mixin class of Graph methods (argument validation, then
``self._apply``) and registers pure forward functions in `yscv.registry`.
"""
from .elementwise import ElementwiseOps
from .activation import ActivationOps
from .reduce import ReduceOps
from .reduce_sum_to import ReduceSumToOps
from .linalg import LinalgOps
from .shape import ShapeOps
from .shape_windows import ShapeWindowOps
from .indexing import IndexingOps
from .conv import ConvOps
from .pool import PoolOps
from .norm import NormOps
from .recurrent import RecurrentOps
from .attention import AttentionOps
from .loss import LossOps
from .loss_functional import FunctionalLossOps
from .loss_ctc import CtcLossOps
from . import custom as _custom  # noqa: F401  (Op.CUSTOM's forward)

OP_MIXINS = (
    ElementwiseOps,
    ActivationOps,
    ReduceOps,
    ReduceSumToOps,
    LinalgOps,
    ShapeOps,
    ShapeWindowOps,
    IndexingOps,
    ConvOps,
    PoolOps,
    NormOps,
    RecurrentOps,
    AttentionOps,
    LossOps,
    FunctionalLossOps,
    CtcLossOps,
)
