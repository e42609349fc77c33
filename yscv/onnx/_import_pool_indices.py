"""MaxPool's output 1 (Indices): for each output element, the index of its
window's first maximum in the input flattened in NCHW order (``storage_order``
0: row-major ``((n * C + c) * H + h) * W + w``; 1: column-major spatial
``(n * C + c) * H * W + h + w * H``), as ONNX's reference. An integer value,
computed with NumPy from the input's values (no gradient).
"""
from __future__ import annotations

import numpy as np


def max_pool_indices(x, kernel, strides, pads, storage_order):
    """x [N, C, ``*S``] (1-D or 2-D spatial, by value); ``pads`` (begin, end)
    per spatial axis (-inf padding). Returns int64 [N, C, ``*OS``]."""
    x = np.asarray(x, np.float64)
    one_d = x.ndim == 3
    if one_d:
        x, kernel, strides, pads = x[:, :, :, None], tuple(kernel) + (1,), \
            tuple(strides) + (1,), list(pads) + [(0, 0)]
    n, c, h, w = x.shape
    xp = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads], constant_values=-np.inf)
    (kh, kw), (sh, sw) = kernel, strides
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw]
    oh, ow = win.shape[2], win.shape[3]
    arg = np.argmax(win.reshape(n, c, oh, ow, kh * kw), axis=-1)
    hh = np.arange(oh)[:, None] * sh + arg // kw - pads[0][0]
    ww = np.arange(ow)[None, :] * sw + arg % kw - pads[1][0]
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :])[:, :, None, None] * (h * w)
    idx = base + (hh * w + ww if storage_order == 0 else hh + ww * h)
    idx = idx.astype(np.int64)
    return idx[..., 0] if one_d else idx
