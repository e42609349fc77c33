"""Multi-head attention over ``g.scaled_dot_product_attention``."""
from __future__ import annotations

import numpy as np

from . import init
from .linear import Linear
from .module import Module
from .parameter import Parameter

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(Module):
    """Multi-head attention, batch-first: query [B, Sq, E], key/value [B, Sk, E]
    (or unbatched [S, E]) -> [B, Sq, E].

    Args:
        embed_dim: E. num_heads: h (must divide E); head size d = E / h.
        bias: learn ``in_proj_bias`` and the output projection's bias.
        dropout: probability of zeroing an attention weight while training
            (PyTorch's ``dropout``; 0 by default). In training mode with
            ``dropout > 0`` the attention is computed from its parts
            (softmax of the masked scores, dropout, matmul) instead of the
            fused op, so a query row with every key blocked gives NaN there,
            as in PyTorch; in eval mode, or with ``dropout=0``, the fused op
            runs.

    Parameters (PyTorch's names, input-major): ``in_proj_weight`` [E, 3E]
    (q | k | v column blocks; xavier_uniform with PyTorch's fans),
    ``in_proj_bias`` [3E] (zeros), ``out_proj`` a `Linear` (E, E)
    (weight kaiming default, bias zeros) — PyTorch's initialisation.

    ``forward(g, query, key=None, value=None, mask=None, causal=False,
    key_padding_mask=None)``: key and value default to query (self-attention;
    one fused projection). ``mask``, broadcast to [B, h, Sq, Sk], is passed
    to the op unchanged: boolean means True = attend (the op's and
    ``F.scaled_dot_product_attention``'s convention, the OPPOSITE of
    ``nn.MultiheadAttention``'s boolean ``attn_mask``); floating is added to
    the scores (PyTorch's convention for both, e.g. ``triu(-inf, 1)`` is a
    causal mask). ``key_padding_mask`` [B, Sk] is boolean, True at padding
    keys (PyTorch's convention: those keys are ignored), or floating
    (added); mixed with a floating ``mask`` both are summed as additive
    masks. Returns the output only (the fused op does not form attention
    weights).
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dtype=np.float32,
                 dropout: float = 0.0):
        super().__init__()
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float, np.floating)) \
                or not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be a probability in [0, 1], "
                             f"got {dropout!r}")
        self.dropout = float(dropout)
        for arg, v in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"MultiHeadAttention: {arg} must be a positive int, got {v!r}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: num_heads={num_heads} must divide "
                             f"embed_dim={embed_dim}")
        self.embed_dim = int(embed_dim)
        self.num_heads = int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        e = self.embed_dim
        self.in_proj_weight = Parameter(np.zeros((e, 3 * e)), dtype)
        self.in_proj_bias = Parameter(np.zeros(3 * e), dtype) if bias else None
        self.out_proj = Linear(e, e, bias=bias, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        e = self.embed_dim
        # torch: xavier_uniform_ on in_proj_weight [3E, E] -> fan_in E, fan_out 3E
        init.xavier_uniform_(self.in_proj_weight, e, 3 * e)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _project(self, g, x, w, b, block):
        e = self.embed_dim
        wb = g.narrow(w, 1, block * e, e)
        y = g.matmul(x, wb)
        if b is not None:
            y = g.add(y, g.narrow(b, 0, block * e, e))
        return y

    def _heads(self, g, y, batched):
        """[B, S, E] -> [B, h, S, d] (unbatched [S, E] -> [h, S, d])."""
        shape = tuple(y.shape)
        h, d = self.num_heads, self.head_dim
        if batched:
            return g.transpose(g.reshape(y, (shape[0], shape[1], h, d)), (0, 2, 1, 3))
        return g.transpose(g.reshape(y, (shape[0], h, d)), (1, 0, 2))

    def forward(self, g, query, key=None, value=None, mask=None, causal: bool = False,
                key_padding_mask=None):
        qshape = tuple(query.shape) if hasattr(query, "index") else np.shape(query)
        if len(qshape) not in (2, 3) or qshape[-1] != self.embed_dim:
            raise ValueError(f"MultiHeadAttention: query must be [B, S, {self.embed_dim}] or "
                             f"[S, {self.embed_dim}], got {qshape}")
        batched = len(qshape) == 3
        attend = _combine_masks(mask, key_padding_mask, batched)  # before any node is added
        if not hasattr(query, "index"):
            query = g.constant(query)
        w = self.param(g, "in_proj_weight")
        b = self.param(g, "in_proj_bias") if self.in_proj_bias is not None else None
        self_attn = key is None and value is None
        if self_attn:
            qkv = g.matmul(query, w)
            if b is not None:
                qkv = g.add(qkv, b)
            e = self.embed_dim
            q, k, v = (g.narrow(qkv, -1, i * e, e) for i in range(3))
        else:
            key = query if key is None else key
            value = key if value is None else value
            key = key if hasattr(key, "index") else g.constant(key)
            value = value if hasattr(value, "index") else g.constant(value)
            q = self._project(g, query, w, b, 0)
            k = self._project(g, key, w, b, 1)
            v = self._project(g, value, w, b, 2)
        q, k, v = (self._heads(g, t, batched) for t in (q, k, v))
        if self.training and self.dropout > 0.0:
            o = self._attention_with_dropout(g, q, k, v, attend, causal)
        else:
            o = g.scaled_dot_product_attention(q, k, v, mask=attend, causal=causal)
        sq = qshape[-2]
        if batched:
            o = g.reshape(g.transpose(o, (0, 2, 1, 3)), (qshape[0], sq, self.embed_dim))
        else:
            o = g.reshape(g.transpose(o, (1, 0, 2)), (sq, self.embed_dim))
        return self.out_proj(g, o)

    def _attention_with_dropout(self, g, q, k, v, attend, causal):
        """softmax(q k^T / sqrt(d) + mask) with dropout on the weights, @ v."""
        nd = len(q.shape)
        axes = tuple(range(nd - 2)) + (nd - 1, nd - 2)
        s = g.mul(g.matmul(q, g.transpose(k, axes)), 1.0 / np.sqrt(self.head_dim))
        sq, sk = tuple(s.shape)[-2:]
        ft = s.dtype
        add = None
        if attend is not None:
            a = np.asarray(attend)
            add = np.where(a, ft.type(0), ft.type(-np.inf)) if a.dtype == np.bool_ \
                else a.astype(ft)
        if causal:
            tri = np.triu(np.full((sq, sk), -np.inf, ft), 1)
            add = tri if add is None else add + tri
        if add is not None:
            s = g.add(s, g.constant(np.ascontiguousarray(add)))
        p = g.dropout(g.softmax(s, axis=-1), self.dropout, training=True, seed=None)
        return g.matmul(p, v)

    def extra_repr(self) -> str:
        extra = f", dropout={self.dropout}" if self.dropout else ""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}{extra}"


def _combine_masks(mask, key_padding_mask, batched):
    """The op's mask from the layer's two. ``mask`` passes through unchanged
    (bool, True = attend, or floating, added; never cast; the op checks its
    shape). ``key_padding_mask`` [B, Sk] ([Sk] unbatched) is bool,
    True = padding key, or floating, added (PyTorch's conventions); it is
    broadcast as [B, 1, 1, Sk]. Two boolean masks combine by AND; otherwise
    both become additive (a boolean one as 0 where attended, -inf where
    blocked) and are summed, as nn.MultiheadAttention merges them."""
    m = None if mask is None else np.asarray(mask)
    if m is not None and m.dtype != np.bool_ and m.dtype.kind != "f":
        raise TypeError("MultiHeadAttention: mask must be a boolean array (True = attend) or a "
                        f"floating one added to the scores (-inf blocks), got dtype {m.dtype}")
    if key_padding_mask is None:
        return mask
    pad = np.asarray(key_padding_mask)
    if pad.dtype != np.bool_ and pad.dtype.kind != "f":
        raise TypeError("MultiHeadAttention: key_padding_mask must be a boolean array (True = "
                        f"padding key, ignored) or a floating one (added), got dtype {pad.dtype}")
    if pad.ndim != (2 if batched else 1):
        raise ValueError("MultiHeadAttention: key_padding_mask must be [B, Sk] (or [Sk] "
                         f"unbatched), got shape {pad.shape}")
    pad = pad[:, None, None, :] if batched else pad[None, None, :]
    if m is None:
        return ~pad if pad.dtype == np.bool_ else pad
    if m.dtype == np.bool_ and pad.dtype == np.bool_:
        return np.logical_and(m, ~pad)
    ft = np.result_type(*(a.dtype for a in (m, pad) if a.dtype.kind == "f"))
    ninf = ft.type(-np.inf)
    madd = np.where(m, ft.type(0), ninf) if m.dtype == np.bool_ else m
    padd = np.where(pad, ninf, ft.type(0)) if pad.dtype == np.bool_ else pad
    return madd + padd
