"""yscv: reverse-mode automatic differentiation on an arena graph, NumPy + Numba.

    import numpy as np, yscv
    g = yscv.Graph()
    w = g.variable(np.random.randn(3, 2))
    loss = g.mean(g.relu(g.matmul(g.constant(np.ones((4, 3))), w)))
    g.backward(loss)
    g.grad(w)
"""
from . import errors as _errors
from .errors import (
    AnomalyError,
    AutogradError,
    BackwardError,
    BatchingError,
    CheckpointError,
    CompileError,
    CompileMismatchError,
    DistributedError,
    GradcheckError,
    NodeNotFoundError,
    NonScalarTargetError,
    ShapeError,
    WorkerError,
)
from .engine.recompute import CheckpointConfig, CheckpointSegment
from .custom_op import CustomOp, custom_op
from .gradcheck import gradcheck, gradgradcheck
from .engine.graph import Graph
from .compile import Compiled, compile  # noqa: A004  (yscv.compile, the function)
from .engine.grad_mode import is_grad_enabled, no_grad
from .node import NodeId, Op
from .random import manual_seed
from ._version import __version__
from .runtime import get_gemm, get_num_threads, set_flush_denormal, set_gemm, set_num_threads

# Training-side modules load on first use so that ``import yscv`` stays cheap.
_LAZY_MODULES = {"nn", "optim", "train", "testing", "kernels", "data", "distributed", "onnx", "func"}
_LAZY_NAMES = {"save_checkpoint": "state", "load_checkpoint": "state"}


def __getattr__(name):
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module 'yscv' has no attribute {name!r}")

__all__ = [
    "Graph",
    "compile",
    "Compiled",
    "no_grad",
    "is_grad_enabled",
    "NodeId",
    "Op",
    "gradcheck",
    "gradgradcheck",
    "custom_op",
    "CustomOp",
    "CheckpointConfig",
    "CheckpointSegment",
    "manual_seed",
    "set_num_threads",
    "get_num_threads",
    "set_flush_denormal",
    "set_gemm",
    "get_gemm",
    "runtime",
    *_errors.__all__,
    "__version__",
    "nn",
    "optim",
    "train",
    "data",
    "testing",
    "distributed",
    "onnx",
    "func",
    "save_checkpoint",
    "load_checkpoint",
]
