"""Attention ops (forward): scaled dot-product attention.

``out = softmax(scale * q @ k^T  restricted to allowed keys) @ v`` over any
leading (batch, head) axes, which broadcast between q, k and v as NumPy's
matmul does. The products are NumPy batched matmuls (BLAS); scaling,
masking (a boolean mask, True = attend, or a floating mask added to the
scaled scores, as PyTorch), the softmax and its normalisation are one fused
Numba pass (yscv/kernels/attention.py), driven by yscv/compute/attention.py.
The output has q's memory order when q is a dense permutation of a
contiguous array (heads split by a reshape and a transpose), so merging the
heads again is a view. Saved for backward: the attention probabilities P [..., Sq, Sk]
(recomputing them costs a Q K^T product and the softmax again; see
docs/ops/attention.md). The attributes are `SDPAAttrs`.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Optional

import numpy as np

from ..compute import attention as C
from ..node import Op
from ..registry import register_forward
from ._common import shape_error

_OP = "scaled_dot_product_attention"


class SDPAAttrs(NamedTuple):
    """Static attributes of one attention node.

    mask: None or a read-only array [N, Sq, Sk] (the user's mask broadcast
    to the full score shape, N = prod(lead)): bool (True = attend) or, for a
    floating mask, the graph dtype (added to the scaled scores; a constant,
    no gradient); causal: bool; scale: float; lead: the broadcast leading
    shape of the scores.
    """

    mask: Optional[np.ndarray]
    causal: bool
    scale: float
    lead: tuple

    def __repr__(self) -> str:
        m = None if self.mask is None else f"{self.mask.dtype}{self.mask.shape}"
        return f"SDPAAttrs(mask={m}, causal={self.causal}, scale={self.scale}, lead={self.lead})"


@register_forward(Op.SCALED_DOT_PRODUCT_ATTENTION)
def sdpa_forward(attrs, q, k, v):
    """out = P v with P = softmax(scale * q k^T [+ mask]); saves P."""
    p = C.attention_probs(q, k, attrs.mask, attrs.causal, attrs.scale, attrs.lead)
    return C.product_like(p, v, q), p   # laid out as q (yscv/compute/attention.py)


def _lead_shape(shapes, names):
    try:
        return tuple(np.broadcast_shapes(*(s[:-2] for s in shapes)))
    except ValueError:
        desc = ", ".join(f"{n} {s}" for n, s in zip(names, shapes))
        raise shape_error(_OP, f"leading (batch/head) axes of {desc} do not broadcast",
                          got=tuple(shapes)) from None


class AttentionOps:
    """Graph methods of the attention category."""

    def scaled_dot_product_attention(self, q, k, v, mask=None, causal=False, scale=None):
        """Scaled dot-product attention, as torch.nn.functional.scaled_dot_product_attention.

        Args:
            q: [..., Sq, D]; k: [..., Sk, D]; v: [..., Sk, Dv]. The leading
                axes broadcast against each other (NumPy matmul rules).
            mask: None, a boolean array (True = may attend) or a floating
                array ADDED to the scaled scores (PyTorch's ``attn_mask``
                semantics: -inf blocks a key), broadcastable to
                [..., Sq, Sk] (the output's leading axes). A floating mask is
                converted to the graph dtype and is a constant (no
                gradient); the two kinds are never cast into each other.
            causal: query i attends keys j <= i (top-left aligned, as
                PyTorch, also when Sq != Sk). Combined with ``mask``: keys
                beyond the diagonal are blocked whatever the mask says.
            scale: multiplies q @ k^T; default 1/sqrt(D).
        Returns [..., Sq, Dv]. A query row with no key to attend (all False,
        all -inf, or causal) gives a zero output row and zero gradients
        (PyTorch gives NaN there). A -inf mask entry blocks its key whatever
        the score (as a False one); +inf or NaN mask entries give NaN rows.
        Saves the attention probabilities [..., Sq, Sk] for backward.
        """
        qs = self._operand(q, _OP, "q")[1].shape
        ks = self._operand(k, _OP, "k")[1].shape
        vs = self._operand(v, _OP, "v")[1].shape
        for name, s, lay in (("q", qs, "[..., Sq, D]"), ("k", ks, "[..., Sk, D]"),
                             ("v", vs, "[..., Sk, Dv]")):
            if len(s) < 2:
                raise shape_error(_OP, f"{name} must be at least 2-d {lay}, got shape {s}",
                                  expected=lay, got=s)
        if ks[-1] != qs[-1]:
            raise shape_error(_OP, f"q and k must have the same depth D (last axis), got "
                                   f"q {qs} and k {ks}", expected=qs[-1], got=ks[-1])
        if vs[-2] != ks[-2]:
            raise shape_error(_OP, f"k and v must have the same length Sk (axis -2), got "
                                   f"k {ks} and v {vs}", expected=ks[-2], got=vs[-2])
        if qs[-1] < 1 and scale is None:
            raise shape_error(_OP, f"q has depth D=0 (shape {qs}); the default scale "
                                   "1/sqrt(D) is undefined: pass scale=", got=qs)
        lead = _lead_shape((qs, ks, vs), ("q", "k", "v"))
        if not isinstance(causal, (bool, np.bool_)):
            raise TypeError(f"{_OP}: causal must be a bool, got {causal!r}")
        if scale is None:
            scale = 1.0 / math.sqrt(qs[-1])
        elif isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
            raise TypeError(f"{_OP}: scale must be a real number or None, got {scale!r}")
        elif not math.isfinite(scale):
            raise ValueError(f"{_OP}: scale must be finite, got {scale!r}")
        full = lead + (qs[-2], ks[-2])
        m3 = None
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != np.bool_ and m.dtype.kind != "f":
                raise TypeError(f"{_OP}: mask must be a boolean array (True = attend) or a "
                                f"floating array added to the scores (-inf blocks), got "
                                f"dtype {m.dtype}")
            try:
                mb = np.broadcast_to(m, full)
            except ValueError:
                raise shape_error(_OP, f"mask of shape {m.shape} does not broadcast to the "
                                       f"score shape [..., Sq, Sk] = {full}",
                                  expected=full, got=m.shape) from None
            mdtype = np.bool_ if m.dtype == np.bool_ else self.dtype
            m3 = C.score_mask(mb, mdtype, math.prod(lead))
        attrs = SDPAAttrs(m3, bool(causal), float(scale), lead)
        return self._apply(Op.SCALED_DOT_PRODUCT_ATTENTION, (q, k, v), attrs)
