"""Layers that hold parameters across training steps: ``y = layer(g, x)``.

    model = yscv.nn.Sequential(yscv.nn.Linear(64, 32), yscv.nn.ReLU(), yscv.nn.Linear(32, 10))
    g = yscv.Graph()
    logits = model(g, g.constant(x))

Weights are input-major and activations channel-last, like the ops.
Initialisation follows PyTorch's defaults and draws from the library
generator (``yscv.manual_seed``).
"""
from . import init, utils
from ._binding import bind_buffer, bind_param
from .activation import (GELU, Flatten, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU, SiLU, Sigmoid,
                         Softmax, Softplus, Tanh)
from .activation import (CELU, ELU, GLU, SELU, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, ReLU6,
                         Softsign)
from .attention import MultiHeadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose2d, DepthwiseConv2d
from .dropout import Dropout
from .embedding import Embedding
from .linear import Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CosineSimilarity, CrossEntropyLoss, CTCLoss,
                   GaussianNLLLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                   NLLLoss, PairwiseDistance, PoissonNLLLoss, SmoothL1Loss, TripletMarginLoss)
from .module import IncompatibleKeys, Module, StateDictError
from .norm import (BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm,
                   LayerNorm)
from .parameter import Parameter
from .pixel_shuffle import PixelShuffle
from .sampling import Fold, Unfold, Upsample
from .pooling import AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool2d, GlobalAvgPool2d, MaxPool2d
from .recurrent import GRU, LSTM, RNN
from .conv import ConvTranspose1d, ConvTranspose3d
from .pooling import AdaptiveAvgPool1d, AvgPool1d, AvgPool3d, MaxPool1d, MaxPool3d
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from . import torch_layout  # PyTorch weights: load_state_dict(sd, layout="torch")

__all__ = [
    "Parameter", "Module", "StateDictError", "IncompatibleKeys", "init", "utils",
    "Sequential", "ModuleList", "ModuleDict",
    "Linear", "Identity", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "DepthwiseConv2d",
    "BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm",
    "InstanceNorm", "Embedding", "RNN", "LSTM", "GRU", "MultiHeadAttention", "Dropout",
    "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "GlobalAvgPool2d",
    "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Mish", "Softplus", "PReLU",
    "Softmax", "LogSoftmax", "Flatten", "bind_buffer", "bind_param",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerDecoder", "PixelShuffle",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "HuberLoss", "BCEWithLogitsLoss",
]
__all__ += ["ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish", "Softsign",
            "LogSigmoid", "GLU"]
__all__ += ["ConvTranspose1d", "ConvTranspose3d", "MaxPool1d", "MaxPool3d", "AvgPool1d",
            "AvgPool3d", "AdaptiveAvgPool1d"]
__all__ += ["Upsample", "Unfold", "Fold", "SmoothL1Loss", "KLDivLoss", "BCELoss", "CosineSimilarity",
            "PairwiseDistance", "TripletMarginLoss", "MarginRankingLoss", "GaussianNLLLoss",
            "PoissonNLLLoss", "CTCLoss"]
__all__ += ["torch_layout", "Transformer"]
