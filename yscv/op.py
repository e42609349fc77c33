"""``Op``, the enum of every operation: the vocabulary the node records, the
dispatch tables (yscv/registry.py) and every floor share."""
from __future__ import annotations

import enum


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
    CONV_GRAD_BIAS = 175     # conv1d/2d/3d's bias gradient as an op, summed as conv's backward sums it

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
