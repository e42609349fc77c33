"""Drivers of scaled dot-product attention: the score products and the
fused softmax kernels (yscv/kernels/attention.py).

The products are NumPy batched matmuls (BLAS) over the leading (batch,
head) axes; the second operand of ``q @ k^T`` and ``g @ v^T`` is first
copied contiguous, because OpenBLAS runs these small batched products
faster without the transpose flag, more than paying for the copy
(docs/ops/attention.md). The kernels see the scores as [N, Sq, Sk]
(N = prod(lead)), and a mask as a read-only [N, Sq, Sk] array: bool
(True = attend) or the graph dtype (added to the scaled scores).

The output and the gradients of q, k and v are laid out in memory as the
input they correspond to (`product_like`), as PyTorch's
``empty_like`` keeps a dense input's strides: heads split from
``[B, S, heads * D]`` rows by a reshape and a transpose come back in that
order, so merging them again (transpose, reshape) is a view, not a copy.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..kernels import lazy
from .recurrent import scratch

K = lazy("attention")

#: placeholder passed to the kernel when there is no mask (read-only, like
#: stored masks, so the kernel sees one array type)
_NO_MASK = np.ones((1, 1, 1), dtype=bool)
_NO_MASK.flags.writeable = False


def _transposed(a):
    """``swapaxes(a, -1, -2)`` as a C-contiguous copy (see the module docstring)."""
    return np.ascontiguousarray(np.swapaxes(a, -1, -2))


def empty_like_layout(ref, shape, dtype):
    """``np.empty(shape, dtype)`` whose axes lie in memory in the order of
    ``ref``'s strides when ``ref`` has that shape and is a dense (gap-free)
    permutation of a C-contiguous array, e.g. ``x.transpose(0, 2, 1, 3)``
    of a contiguous ``x``; C order otherwise. Same values, another stride
    order: a product written into it gives the same bits."""
    if ref.shape != shape or ref.ndim < 3 or ref.flags.c_contiguous:
        return np.empty(shape, dtype)
    plan = _dense_order(shape, ref.strides, ref.itemsize)
    if plan is None:
        return np.empty(shape, dtype)
    stored, inverse = plan
    return np.empty(stored, dtype).transpose(inverse)


@functools.lru_cache(maxsize=256)
def _dense_order(shape: tuple, strides: tuple, itemsize: int):
    """``(stored shape, inverse permutation)`` of an array of ``shape`` and
    ``strides`` that is a dense permutation of a C-contiguous one, else None."""
    perm = sorted(range(len(shape)), key=lambda a: -strides[a])  # stable on ties
    step = itemsize
    for a in reversed(perm):
        if shape[a] != 1 and strides[a] != step:   # a gap, an overlap or a negative stride
            return None
        step *= shape[a]
    inverse = [0] * len(shape)
    for pos, a in enumerate(perm):
        inverse[a] = pos
    return tuple(shape[a] for a in perm), tuple(inverse)


def product_like(a, b, ref):
    """``np.matmul(a, b)`` written into `empty_like_layout` of ``ref``
    (the input whose gradient, or whose layout, the product is)."""
    lead = a.shape[:-2]
    if lead != b.shape[:-2]:
        lead = np.broadcast_shapes(lead, b.shape[:-2])
    shape = lead + (a.shape[-2], b.shape[-1])
    return np.matmul(a, b, out=empty_like_layout(ref, shape, a.dtype))


def score_mask(mask, dtype, n):
    """``mask`` (already broadcast to [..., Sq, Sk]) as the kernels' read-only
    C-contiguous [n, Sq, Sk] array of ``dtype`` (bool, or the graph dtype
    for a floating mask): a copy, never a view of the user's array."""
    Sq, Sk = mask.shape[-2:]
    m3 = np.array(mask, dtype=dtype, order="C").reshape(n, Sq, Sk)
    m3.flags.writeable = False
    return m3


def attention_probs(q, k, mask, causal, scale, lead):
    """softmax(scale * q @ k^T [+ float mask]) over the allowed keys:
    [``*lead``, Sq, Sk], a fresh C-contiguous array (zeros where masked, False or
    -inf, and in rows with nothing to attend). ``mask``: None or a
    `score_mask` array; ``lead``: the broadcast leading shape."""
    s = np.matmul(q, _transposed(k))
    Sq, Sk = s.shape[-2:]
    full = lead + (Sq, Sk)
    if s.shape != full:  # v has more leading axes than q and k
        s = np.array(np.broadcast_to(s, full), order="C")
    s3 = s.reshape(math.prod(lead), Sq, Sk)
    sc = s.dtype.type(scale)
    if mask is not None and mask.dtype != np.bool_:
        K.additive_softmax_forward(s3, mask, causal, sc)
    else:
        K.masked_softmax_forward(s3, _NO_MASK if mask is None else mask, mask is not None,
                                 causal, sc)
    return s


def score_grad(g, v, p, causal, scale):
    """The gradient of the scaled scores, ``dS = scale * P * (dP - rowsum(dP * P))``
    with ``dP = g @ v^T``, at ``p``'s shape [..., Sq, Sk]. Masked entries and
    empty rows have P = 0, so dS = 0 there. The result is a per-thread
    scratch buffer (`yscv.compute.recurrent.scratch`), valid until the
    thread's next call: use it before returning."""
    ds = np.matmul(g, _transposed(v), out=scratch("sdpa_ds", p.shape, p.dtype))
    Sq, Sk = p.shape[-2:]
    n = math.prod(p.shape[:-2])
    K.masked_softmax_backward(p.reshape(n, Sq, Sk), ds.reshape(n, Sq, Sk),
                              p.dtype.type(scale), causal)
    return ds
