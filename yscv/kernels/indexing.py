"""Scatter-add kernels for the indexing ops (gather backward, scatter_add
forward, embedding backward).

Both accumulate into a caller-allocated, C-contiguous destination in one
pass over the source, in source order (so results are deterministic). Indices
are bounds-checked by the Graph methods at graph-build time; the kernels do
not check them again. Generic over float32 / float64 (lazy compilation).
"""
from __future__ import annotations

from ._jit import jit


@jit
def scatter_add_axis(dest, index, src):
    """``dest[o, index[o, k, n], n] += src[o, k, n]`` for a 3-d view
    (outer axes, the scatter axis, inner axes) of a torch-style scatter_add."""
    outer, k_len, inner = index.shape
    for o in range(outer):
        for k in range(k_len):
            for n in range(inner):
                dest[o, index[o, k, n], n] += src[o, k, n]


@jit
def index_add_rows(dest, index, src):
    """``dest[index[m], :] += src[m, :]`` (embedding backward: rows of the
    output gradient accumulated into a [V, D] table)."""
    m_len, d_len = src.shape
    for m in range(m_len):
        row = index[m]
        for d in range(d_len):
            dest[row, d] += src[m, d]
