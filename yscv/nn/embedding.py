"""Embedding lookup table."""
from __future__ import annotations

import weakref

import numpy as np

from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """``weight[indices]``: [V, D] table, any-shape int indices -> [..., D].

    Args:
        num_embeddings: V. embedding_dim: D.
        padding_idx: if given, that row starts at zero and receives no
            gradient (a hook on the bound leaf zeroes its row), as PyTorch.

    ``weight`` is initialised N(0, 1) (PyTorch's default). Indices are a
    NumPy integer array (not a node); out-of-range ones raise IndexError.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, dtype=np.float32):
        super().__init__()
        for arg, v in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"Embedding: {arg} must be a positive int, got {v!r}")
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= int(padding_idx) < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx={padding_idx} out of range for "
                                 f"num_embeddings={self.num_embeddings}")
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        self.weight = Parameter(np.zeros((self.num_embeddings, self.embedding_dim)), dtype)
        self._hooked = None  # (weakref to graph, leaf uid) the padding hook is on
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight, 0.0, 1.0)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, g, indices):
        w = self.param(g, "weight")
        if self.padding_idx is not None and self.weight.requires_grad:
            h = self.__dict__["_hooked"]
            if h is None or h[0]() is not g or h[1] != w.uid:
                row = self.padding_idx

                def zero_padding_row(grad):
                    grad = grad.copy()
                    grad[row] = 0
                    return grad

                g.register_hook(w, zero_padding_row)
                self.__dict__["_hooked"] = (weakref.ref(g), w.uid)
        return g.embedding(w, indices)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
