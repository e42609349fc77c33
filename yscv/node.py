"""``Op``, the enum of every operation, and ``NodeId``, the handle to a node.

A node is one plain tuple, its record (``Graph._nodes[i]``, fields below),
beside its value and uid: appending a node is one tuple and three list
appends, and the backward walk reads a node with one list index and an
unpack. A ``NodeId`` names one arena slot of one graph at one generation.
"""
from __future__ import annotations

import enum
import itertools

from .node_methods import TensorMethods


class Op(enum.IntEnum):
    """One member per operation. Aliases (``conv2d_nhwc`` ...) share the member
    of the op they name. Values are grouped by category and never reused."""

    LEAF = 0

    # elementwise
    ADD = 10
    SUB = 11
    MUL = 12
    DIV = 13
    POW = 14
    NEG = 15
    ABS = 16
    EXP = 17
    LOG = 18
    SQRT = 19
    CLAMP = 20
    MAXIMUM = 21
    MINIMUM = 22
    WHERE = 23
    SIN = 24
    COS = 25
    TAN = 26
    ASIN = 27
    ACOS = 28
    ATAN = 29
    ATAN2 = 30
    SINH = 31
    COSH = 32
    ERF = 33
    ERFC = 34
    SIGN = 35
    FLOOR = 36
    CEIL = 37
    ROUND = 38
    TRUNC = 39
    # elementwise, continued (10-39 is full)
    RECIPROCAL = 300
    RSQRT = 301
    SQUARE = 302
    LOG1P = 303
    EXPM1 = 304
    LOG2 = 305
    LOG10 = 306
    REMAINDER = 307

    # activations
    RELU = 40
    LEAKY_RELU = 41
    SIGMOID = 42
    TANH = 43
    GELU = 44
    SILU = 45
    MISH = 46
    SOFTPLUS = 47
    PRELU = 48
    SOFTMAX = 49
    LOG_SOFTMAX = 50
    DROPOUT = 51
    GELU_BACKWARD = 52   # gelu's input gradient as an op: its own rules give gelu's higher derivatives
    TANH_BACKWARD = 53      # tanh's input gradient from its output, as an op (create_graph)
    SIGMOID_BACKWARD = 54   # sigmoid's input gradient from its output, as an op (create_graph)
    ELU = 60
    SELU = 61
    CELU = 62
    HARDTANH = 63
    RELU6 = 64
    HARDSIGMOID = 65
    HARDSWISH = 66
    SOFTSIGN = 67
    LOGSIGMOID = 68
    GLU = 69

    # reductions
    SUM = 70
    MEAN = 71
    MAX = 72
    MIN = 73
    VAR = 74
    LOGSUMEXP = 75
    SUM_TO = 76          # torch's sum_to_size: the sum over the axes a shape broadcasts along
    PROD = 83
    STD = 84
    NORM = 85
    CUMSUM = 86
    CUMPROD = 87
    TOPK = 88
    SORT = 89

    # linear algebra
    MATMUL = 90
    TRANSPOSE = 91
    EINSUM = 92
    INV = 100
    SOLVE = 101
    DET = 102
    SLOGDET = 103        # the value is logabsdet; the sign is an array beside it
    CHOLESKY = 104
    EIGH = 105           # the value packs eigenvalues (row 0) and eigenvectors (rows 1..n)

    # shape
    RESHAPE = 110
    FLATTEN = 111
    UNSQUEEZE = 112
    SQUEEZE = 113
    EXPAND = 114
    CAT = 115
    STACK = 116
    SELECT = 117
    NARROW = 118
    GETITEM = 119
    FLIP = 120
    PAD = 121
    REPEAT = 122
    PIXEL_SHUFFLE = 123
    UPSAMPLE_NEAREST = 124
    TRIL = 130
    TRIU = 131
    ROLL = 132
    DIAGONAL = 133
    OUTER = 134
    UNFOLD = 135
    FOLD = 136
    INTERPOLATE = 137

    # indexing
    GATHER = 140
    SCATTER_ADD = 141
    SCATTER = 142
    EMBEDDING = 143
    MASKED_FILL = 150
    INDEX_SELECT = 151

    # convolution
    CONV1D = 160
    CONV2D = 161
    CONV3D = 162
    DEPTHWISE_CONV2D = 163
    CONV_TRANSPOSE2D = 164
    DEFORMABLE_CONV2D = 165
    CONV_TRANSPOSE1D = 176
    CONV_TRANSPOSE3D = 177
    CONV_GRAD_INPUT = 178    # conv1d/2d/3d's input gradient as an op (create_graph)
    CONV_GRAD_WEIGHT = 179   # conv1d/2d/3d's weight gradient as an op (create_graph)

    # pooling
    MAX_POOL2D = 180
    AVG_POOL2D = 181
    ADAPTIVE_AVG_POOL2D = 182
    ADAPTIVE_MAX_POOL2D = 183
    GLOBAL_AVG_POOL2D = 184
    MAX_POOL1D = 193
    AVG_POOL1D = 194
    MAX_POOL3D = 195
    AVG_POOL3D = 196
    ADAPTIVE_AVG_POOL1D = 197

    # normalization
    BATCH_NORM = 200
    LAYER_NORM = 201
    GROUP_NORM = 202
    INSTANCE_NORM = 203

    # recurrent
    RNN = 220
    LSTM = 221
    GRU = 222

    # attention
    SCALED_DOT_PRODUCT_ATTENTION = 240

    # losses
    MSE_LOSS = 260
    L1_LOSS = 261
    HUBER_LOSS = 262
    CROSS_ENTROPY = 263
    NLL_LOSS = 264
    BCE_WITH_LOGITS = 265
    SMOOTH_L1_LOSS = 270
    KL_DIV = 271
    BINARY_CROSS_ENTROPY = 272
    COSINE_SIMILARITY = 273
    PAIRWISE_DISTANCE = 274
    TRIPLET_MARGIN_LOSS = 275
    MARGIN_RANKING_LOSS = 276
    GAUSSIAN_NLL_LOSS = 277
    POISSON_NLL_LOSS = 278
    CTC_LOSS = 279

    # the engine's own
    VJP = 400       # one input's gradient of a fused op, as a node (create_graph=True)
    CUSTOM = 401    # an op a user defines (yscv.custom_op): its functions are its attributes


#: the members that are not operations of the catalogue: a leaf, a fused
#: op's recorded gradient (create_graph=True) and a user-defined op
ENGINE_OPS = frozenset({Op.LEAF, Op.VJP, Op.CUSTOM})


#: Fields of a node record ``(op, inputs, attrs, saved, rg, needs, plain,
#: shape)``, a tuple built once at the append (only checkpointing replaces
#: one, to drop or restore its ``saved``):
#:
#: ``op`` int(Op); ``inputs`` tuple of input arena indices (empty for
#: leaves); ``attrs`` the static attributes given to forward and backward;
#: ``saved`` what forward saved for backward (None when the node does not
#: require grad, or released); ``rg`` requires_grad; ``needs`` per input,
#: whether it requires grad (the rules skip the others); ``plain`` the walk
#: need not conform the node's input gradients (``Graph._apply2``);
#: ``shape`` the value's shape (a value is only ever replaced by one of
#: the same shape), which the append compares instead of reading the
#: operands' shapes.
N_OP, N_INPUTS, N_ATTRS, N_SAVED, N_RG, N_NEEDS, N_PLAIN, N_SHAPE = range(8)


def with_saved(record: tuple, saved) -> tuple:
    """``record`` with its ``saved`` field replaced (release, recompute)."""
    return record[:N_SAVED] + (saved,) + record[N_SAVED + 1:]


_next_uid = itertools.count(1).__next__

# Plain module constants: attribute access on an Enum class costs ~90 ns on
# Python 3.11, which matters on the per-node hot path.
_ADD, _SUB, _MUL, _DIV, _POW = Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW


class _NodeIdFields:
    """The three slots a NodeId holds (shared layout with its builder twin)."""

    __slots__ = ("graph", "index", "uid")


class NodeId(_NodeIdFields, TensorMethods):
    """Immutable, hashable handle to one node of one graph.

    Attributes:
        graph: the owning `yscv.Graph`.
        index: the node's arena position.
        uid: a process-wide unique number; a NodeId whose uid no longer matches
            the slot (the node was truncated and the index reused) is stale.

    Supports ``+ - * / ** @``, unary ``-`` and ``x[key]`` (basic slicing),
    which record nodes on the owning graph. Comparisons are not overloaded.
    ``shape`` and ``dtype`` describe the node's value (read without
    recomputing a released value). A NodeId is not a sequence: ``iter``,
    ``list(n)`` and unpacking raise ``TypeError`` (otherwise Python would
    fall back to ``n[0], n[1], ...`` and append getitem nodes).

    PyTorch's tensor methods (``loss.backward()``, ``loss.item()``,
    ``x.sum(dim=1)``, ``x.reshape(2, 3)``, ``x.T`` ...) are one call each of
    the owning graph's op (``yscv.node_methods``); any other missing name
    raises ``AttributeError`` giving the graph's spelling where there is one.
    """

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError("NodeId is immutable")

    def __delattr__(self, name):
        raise AttributeError("NodeId is immutable")

    def __repr__(self) -> str:
        return f"NodeId({self.index})"

    def __hash__(self) -> int:
        return hash(self.uid)

    def __eq__(self, other) -> bool:
        return type(other) is NodeId and other.uid == self.uid

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __reduce__(self):
        raise TypeError("NodeId cannot be pickled: it is only meaningful inside its Graph")

    @property
    def shape(self) -> tuple:
        """The shape of the node's value (a tuple)."""
        g = self.graph
        return g._shape(g._index(self))

    @property
    def dtype(self):
        """The dtype of the node's value (``np.dtype``; the graph's dtype)."""
        g = self.graph
        v = g._values[g._index(self)]
        return g.dtype if v is None else v.dtype

    def __iter__(self):
        raise TypeError(
            f"NodeId({self.index}) is not iterable: a node is not a sequence; index it "
            "explicitly (n[0]) or use g.value(n) for the array")

    # arithmetic records nodes on the owning graph; the binary dunders call
    # the graph's two-operand fast path directly (the per-node hot path).
    # yscv.engine.graph replaces __add__, __sub__, __mul__, __truediv__ and __pow__
    # with forms that hold that path themselves (one frame fewer per node)
    def __add__(self, other):
        return self.graph._apply2(_ADD, self, other)

    def __radd__(self, other):
        return self.graph._apply2(_ADD, other, self)

    def __sub__(self, other):
        return self.graph._apply2(_SUB, self, other)

    def __rsub__(self, other):
        return self.graph._apply2(_SUB, other, self)

    def __mul__(self, other):
        return self.graph._apply2(_MUL, self, other)

    def __rmul__(self, other):
        return self.graph._apply2(_MUL, other, self)

    def __truediv__(self, other):
        return self.graph._apply2(_DIV, self, other)

    def __rtruediv__(self, other):
        return self.graph._apply2(_DIV, other, self)

    def __pow__(self, other):
        return self.graph._apply2(_POW, self, other)

    def __rpow__(self, other):
        return self.graph._apply2(_POW, other, self)

    def __matmul__(self, other):
        return self.graph.matmul(self, other)

    def __rmatmul__(self, other):
        return self.graph.matmul(other, self)

    def __neg__(self):
        return self.graph.neg(self)

    def __getitem__(self, key):
        return self.graph.getitem(self, key)

    # NumPy must not treat a NodeId as an array-like scalar and broadcast over it
    __array_ufunc__ = None


class _NodeIdBuilder(_NodeIdFields):
    """Mutable twin of NodeId: filled with plain attribute stores, then its
    ``__class__`` is switched to NodeId (cheaper than the three slot
    descriptor calls of `make_node_id`). Only the graph's node append
    (the per-node hot path, ``Graph._append`` and its inline copies) uses it,
    as ``_NodeIdBuilder()``: calling the class (no ``__init__``) measured
    ~30 ns cheaper than ``object.__new__(_NodeIdBuilder)``."""

    __slots__ = ()


_new_object = object.__new__
_set_graph = _NodeIdFields.graph.__set__
_set_index = _NodeIdFields.index.__set__
_set_uid = _NodeIdFields.uid.__set__


def make_node_id(graph, index: int, uid: int) -> NodeId:
    """A NodeId for an existing node (internal: the slots are set through
    their descriptors, bypassing the immutability guard)."""
    nid = _new_object(NodeId)
    _set_graph(nid, graph)
    _set_index(nid, index)
    _set_uid(nid, uid)
    return nid


def next_uid() -> int:
    """A fresh process-wide unique node number (thread-safe under the GIL)."""
    return _next_uid()
