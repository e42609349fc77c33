"""Weight layouts of imported initializers: the file's, and yscv's.

A layout tag names how a Parameter's array differs from the initializer:
``None`` (the file's layout) or ``"conv"`` (ONNX Conv weight [O, I/g, ``*K``]
held as yscv's [``*K``, I/g, O]). The NumPy functions convert at load and back
(``OnnxModule.initializers``); ``graph_conv_weight`` is the same conversion
recorded on a graph, for a weight that is not stored converted.
"""
from __future__ import annotations

import numpy as np


def _conv_perm(ndim: int) -> tuple:
    """[O, I, ``*K``] -> [``*K``, I, O]."""
    return tuple(range(2, ndim)) + (1, 0)


def to_yscv_layout(arr: np.ndarray, tag) -> np.ndarray:
    if tag == "conv":
        return np.ascontiguousarray(arr.transpose(_conv_perm(arr.ndim)))
    return arr


def to_file_layout(arr: np.ndarray, tag) -> np.ndarray:
    if tag == "conv":
        return np.ascontiguousarray(arr.transpose(np.argsort(_conv_perm(arr.ndim)))).copy()
    return np.array(arr, copy=True)


def graph_conv_weight(g, w, ndim: int):
    """An ONNX-layout conv weight node as yscv's layout (a transpose node)."""
    return g.transpose(w, _conv_perm(ndim))


def channel_last_perm(ndim: int) -> tuple:
    """[N, C, ``*S``] -> [N, ``*S``, C]."""
    return (0,) + tuple(range(2, ndim)) + (1,)


def channel_first_perm(ndim: int) -> tuple:
    """[N, ``*S``, C] -> [N, C, ``*S``]."""
    return (0, ndim - 1) + tuple(range(1, ndim - 1))
