"""Transformer layers with PyTorch's constructor arguments, semantics and
state-dict keys: TransformerEncoderLayer, TransformerDecoderLayer,
TransformerEncoder, TransformerDecoder, and Transformer (the
encoder-decoder made of them).

Built on `MultiHeadAttention`, `Linear`, `LayerNorm`
and `Dropout`. Their MASK ARGUMENTS KEEP PYTORCH'S MEANING, because
ported code passes them unchanged: a boolean ``src_mask`` / ``tgt_mask`` /
``memory_mask`` or ``*_key_padding_mask`` is True where attention is
BLOCKED (the opposite of ``g.scaled_dot_product_attention``'s and
``MultiHeadAttention(mask=)``'s True = attend); a floating mask is added
to the scores (``-inf`` blocks) in both. The layers convert for the op.
"""
from __future__ import annotations

import copy
import numbers

import numpy as np

from . import init
from .attention import MultiHeadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .norm import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerDecoder", "Transformer"]


def _relu(g, x):
    return g.relu(x)


def _gelu(g, x):
    return g.gelu(x)


def _positive(v, layer: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    return int(v)


def _activation(activation, layer: str):
    if isinstance(activation, str):
        fn = {"relu": _relu, "gelu": _gelu}.get(activation)
        if fn is None:
            raise ValueError(f"{layer}: activation must be 'relu', 'gelu' or a callable "
                             f"fn(g, x), got {activation!r}")
        return fn
    if not callable(activation):
        raise TypeError(f"{layer}: activation must be 'relu', 'gelu' or a callable fn(g, x), "
                        f"got {type(activation).__name__}")
    return activation


def _shape(g, x):
    return tuple(x.shape) if hasattr(x, "index") else np.shape(x)


def _attn_mask(mask, layer: str, arg: str, batch, nhead: int, sq: int, sk: int):
    """PyTorch's ``attn_mask`` ([Sq, Sk] or [``B*nhead``, Sq, Sk], [nhead, Sq, Sk]
    unbatched; bool True =
    blocked, or floating, added) as MultiHeadAttention's mask (bool True =
    attend, or the same floating array), broadcastable to [B, h, Sq, Sk]."""
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.dtype != np.bool_ and m.dtype.kind != "f":
        raise TypeError(f"{layer}: {arg} must be a boolean array (True = blocked, PyTorch's "
                        f"meaning) or a floating one added to the scores, got dtype {m.dtype}")
    shapes = [(sq, sk), ((1 if batch is None else batch) * nhead, sq, sk)]
    if m.shape not in shapes:
        want = " or ".join(str(s) for s in shapes)
        raise ValueError(f"{layer}: {arg} must have shape {want} (PyTorch's attn_mask), "
                         f"got {m.shape}")
    if m.ndim == 3 and batch is not None:
        m = m.reshape(batch, nhead, sq, sk)
    return ~m if m.dtype == np.bool_ else m


def _check_causal(flag, layer: str, arg: str, mask_arg: str, mask):
    if flag is None:
        return False
    if not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{layer}: {arg} must be a bool or None, got {flag!r}")
    if flag and mask is None:
        raise ValueError(f"{layer}: {arg}=True is a hint that {mask_arg} is the causal mask; "
                         f"pass {mask_arg} too (e.g. an upper triangle of -inf, "
                         "np.triu(np.full((S, S), -np.inf, np.float32), 1)), as PyTorch requires")
    return bool(flag)


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: arguments, the feed-forward
    block, the batch_first handling."""

    _name = "TransformerLayer"

    def _setup(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
               batch_first, norm_first, bias, dtype, n_norms):
        name = self._name
        d_model = _positive(d_model, name, "d_model")
        nhead = _positive(nhead, name, "nhead")
        dim_feedforward = _positive(dim_feedforward, name, "dim_feedforward")
        if d_model % nhead:
            raise ValueError(f"{name}: nhead={nhead} must divide d_model={d_model}")
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) \
                or not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"{name}: dropout must be a probability in [0, 1], got {dropout!r}")
        act = _activation(activation, name)
        for arg, v in (("batch_first", batch_first), ("norm_first", norm_first), ("bias", bias)):
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{name}: {arg} must be a bool, got {v!r}")
        self.d_model, self.nhead, self.dim_feedforward = d_model, nhead, dim_feedforward
        self.batch_first, self.norm_first = bool(batch_first), bool(norm_first)
        p = float(dropout)
        # PyTorch's registration order (the order of the state-dict keys)
        self.self_attn = MultiHeadAttention(d_model, nhead, bias=bias, dtype=dtype, dropout=p)
        if n_norms == 3:
            self.multihead_attn = MultiHeadAttention(d_model, nhead, bias=bias, dtype=dtype,
                                                     dropout=p)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(p)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        for i in range(1, n_norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                dtype=dtype))
        for i in range(1, n_norms + 1):
            setattr(self, f"dropout{i}", Dropout(p))
        self.activation = act

    def _input(self, g, x, arg):
        """(batch size or None when unbatched, sequence length) of an input
        [S, B, E] / [B, S, E] / unbatched [S, E], checked before any node is
        added."""
        shape = _shape(g, x)
        order = "[B, S, E]" if self.batch_first else "[S, B, E]"
        if len(shape) not in (2, 3) or shape[-1] != self.d_model:
            raise ValueError(f"{self._name}: {arg} must be {order} or unbatched [S, E] with "
                             f"E = d_model = {self.d_model}, got shape {shape}")
        if len(shape) == 2:
            return None, shape[0]
        return (shape[0], shape[1]) if self.batch_first else (shape[1], shape[0])

    def _to_batch_first(self, g, x):
        if not hasattr(x, "index"):
            x = g.constant(np.asarray(x))
        if not self.batch_first and len(x.shape) == 3:
            x = g.transpose(x, (1, 0, 2))
        return x

    def _from_batch_first(self, g, x):
        if not self.batch_first and len(x.shape) == 3:
            x = g.transpose(x, (1, 0, 2))
        return x

    def _ff_block(self, g, x, out_dropout):
        x = self.linear2(g, self.dropout(g, self.activation(g, self.linear1(g, x))))
        return out_dropout(g, x)

    @staticmethod
    def _attend(g, attn, dropout, q, kv, mask, pad, causal):
        """PyTorch's attention block: the hint ``causal`` replaces the mask
        unless a key padding mask is given (then the mask is used)."""
        if causal and pad is None:
            mask = None
        else:
            causal = False
        if kv is None:
            y = attn(g, q, mask=mask, key_padding_mask=pad, causal=causal)
        else:
            y = attn(g, q, kv, kv, mask=mask, key_padding_mask=pad, causal=causal)
        return dropout(g, y)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, nhead={self.nhead}, "
                f"dim_feedforward={self.dim_feedforward}, batch_first={self.batch_first}, "
                f"norm_first={self.norm_first}")


def _check_pad(pad, layer: str, arg: str, batch, seq):
    if pad is None:
        return None
    p = np.asarray(pad)
    if p.dtype != np.bool_ and p.dtype.kind != "f":
        raise TypeError(f"{layer}: {arg} must be a boolean array (True = padding, ignored) or "
                        f"a floating one (added), got dtype {p.dtype}")
    want = (seq,) if batch is None else (batch, seq)
    if p.shape != want:
        raise ValueError(f"{layer}: {arg} must have shape {want} ([B, S] whatever batch_first, "
                         f"as PyTorch), got {p.shape}")
    return p


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each with a residual and a
    LayerNorm, as ``torch.nn.TransformerEncoderLayer``.

    Args (PyTorch's): d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu" | "gelu" | a callable ``fn(g, x)`` (e.g. a yscv module
    such as ``GELU(approximate="tanh")``), layer_norm_eps=1e-5,
    batch_first=False (input [S, B, E]; True: [B, S, E]; unbatched [S, E]
    either way), norm_first=False (post-norm; True: pre-norm), bias=True
    (the Linear, attention and LayerNorm biases), and dtype.

    Sub-modules (PyTorch's names, so ``state_dict(layout="torch")`` gives
    PyTorch's keys): ``self_attn`` (MultiHeadAttention with ``dropout`` on
    the attention weights), ``linear1``, ``dropout``, ``linear2``, ``norm1``,
    ``norm2``, ``dropout1``, ``dropout2``.

    ``forward(g, src, src_mask=None, src_key_padding_mask=None,
    is_causal=False)``: ``src_mask`` [S, S] or [``B*nhead``, S, S], boolean
    True = BLOCKED (PyTorch's meaning) or floating (added);
    ``src_key_padding_mask`` [B, S] (``[S]`` unbatched), True = padding
    (ignored) or floating (added). ``is_causal=True`` is PyTorch's hint
    that ``src_mask`` is the causal mask (``src_mask`` is still required);
    the layer then applies the causal mask itself. A query whose every key
    is blocked gives a zero row in eval mode (PyTorch gives NaN).
    """

    _name = "TransformerEncoderLayer"

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 dtype=np.float32):
        super().__init__()
        self._setup(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, dtype, 2)

    def forward(self, g, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        name = self._name
        batch, seq = self._input(g, src, "src")
        mask = _attn_mask(src_mask, name, "src_mask", batch, self.nhead, seq, seq)
        pad = _check_pad(src_key_padding_mask, name, "src_key_padding_mask", batch, seq)
        causal = _check_causal(is_causal, name, "is_causal", "src_mask", src_mask)
        x = self._to_batch_first(g, src)
        if self.norm_first:
            x = g.add(x, self._attend(g, self.self_attn, self.dropout1, self.norm1(g, x), None,
                                      mask, pad, causal))
            x = g.add(x, self._ff_block(g, self.norm2(g, x), self.dropout2))
        else:
            x = self.norm1(g, g.add(x, self._attend(g, self.self_attn, self.dropout1, x, None,
                                                    mask, pad, causal)))
            x = self.norm2(g, g.add(x, self._ff_block(g, x, self.dropout2)))
        return self._from_batch_first(g, x)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over ``memory`` and a feed-forward block,
    each with a residual and a LayerNorm, as
    ``torch.nn.TransformerDecoderLayer`` (the same arguments as
    `TransformerEncoderLayer`).

    Sub-modules: ``self_attn``, ``multihead_attn``, ``linear1``, ``dropout``,
    ``linear2``, ``norm1``..``norm3``, ``dropout1``..``dropout3``.

    ``forward(g, tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False)``: ``tgt_mask`` [T, T],
    ``memory_mask`` [T, S] (or [``B*nhead``, ...]); boolean True = BLOCKED or
    floating (added); key padding masks [B, T] / [B, S], True = padding.
    ``tgt_is_causal`` / ``memory_is_causal`` are PyTorch's hints (the mask
    is still required).
    """

    _name = "TransformerDecoderLayer"

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 dtype=np.float32):
        super().__init__()
        self._setup(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, dtype, 3)

    def forward(self, g, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal=False, memory_is_causal=False):
        name = self._name
        batch, t = self._input(g, tgt, "tgt")
        mbatch, s = self._input(g, memory, "memory")
        if mbatch != batch:
            raise ValueError(f"{name}: tgt and memory must have the same batch size (or both "
                             f"be unbatched), got {_shape(g, tgt)} and {_shape(g, memory)}")
        tmask = _attn_mask(tgt_mask, name, "tgt_mask", batch, self.nhead, t, t)
        mmask = _attn_mask(memory_mask, name, "memory_mask", batch, self.nhead, t, s)
        tpad = _check_pad(tgt_key_padding_mask, name, "tgt_key_padding_mask", batch, t)
        mpad = _check_pad(memory_key_padding_mask, name, "memory_key_padding_mask", batch, s)
        tcausal = _check_causal(tgt_is_causal, name, "tgt_is_causal", "tgt_mask", tgt_mask)
        mcausal = _check_causal(memory_is_causal, name, "memory_is_causal", "memory_mask",
                                memory_mask)
        x = self._to_batch_first(g, tgt)
        mem = self._to_batch_first(g, memory)
        if self.norm_first:
            x = g.add(x, self._attend(g, self.self_attn, self.dropout1, self.norm1(g, x), None,
                                      tmask, tpad, tcausal))
            x = g.add(x, self._attend(g, self.multihead_attn, self.dropout2, self.norm2(g, x),
                                      mem, mmask, mpad, mcausal))
            x = g.add(x, self._ff_block(g, self.norm3(g, x), self.dropout3))
        else:
            x = self.norm1(g, g.add(x, self._attend(g, self.self_attn, self.dropout1, x, None,
                                                    tmask, tpad, tcausal)))
            x = self.norm2(g, g.add(x, self._attend(g, self.multihead_attn, self.dropout2, x,
                                                    mem, mmask, mpad, mcausal)))
            x = self.norm3(g, g.add(x, self._ff_block(g, x, self.dropout3)))
        return self._from_batch_first(g, x)


def _clones(layer, num_layers, name):
    if not isinstance(layer, Module):
        raise TypeError(f"{name}: the layer must be a Module, got {type(layer).__name__}")
    n = _positive(num_layers, name, "num_layers")
    return ModuleList(copy.deepcopy(layer) for _ in range(n))


def _check_norm(norm, name):
    if norm is not None and not isinstance(norm, Module):
        raise TypeError(f"{name}: norm must be a Module or None, got {type(norm).__name__}")
    return norm


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (deep copies, as PyTorch's
    ``_get_clones``: independent weights) in ``layers``, then the optional
    ``norm``, as ``torch.nn.TransformerEncoder``.

    ``forward(g, src, mask=None, src_key_padding_mask=None, is_causal=None)``
    passes the masks (PyTorch's meaning: boolean True = blocked) to every
    layer. ``enable_nested_tensor`` and ``mask_check`` are accepted for
    PyTorch's signature and have no effect (no nested tensors: padded
    positions are computed, as PyTorch's path without nested tensors).
    """

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = len(self.layers)
        self.norm = _check_norm(norm, "TransformerEncoder")

    def forward(self, g, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(g, x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(g, x) if self.norm is not None else x


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` in ``layers``, then the
    optional ``norm``, as ``torch.nn.TransformerDecoder``;
    ``forward(g, tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=None, memory_is_causal=False)``."""

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = len(self.layers)
        self.norm = _check_norm(norm, "TransformerDecoder")

    def forward(self, g, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(g, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(g, x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder of "Attention Is All You Need", as
    ``torch.nn.Transformer``: a ``TransformerEncoder`` of
    ``num_encoder_layers`` ``TransformerEncoderLayer`` with a final
    LayerNorm, and a ``TransformerDecoder`` of ``num_decoder_layers``
    ``TransformerDecoderLayer`` with a final LayerNorm.

    Args (PyTorch's): d_model=512, nhead=8, num_encoder_layers=6,
    num_decoder_layers=6, dim_feedforward=2048, dropout=0.1,
    activation="relu", custom_encoder=None / custom_decoder=None (a module
    used instead of the built one), layer_norm_eps=1e-5, batch_first=False,
    norm_first=False, bias=True, dtype. Every weight matrix is initialised
    Xavier-uniform, as PyTorch's ``_reset_parameters``.

    Sub-modules ``encoder`` and ``decoder``: the state-dict keys are
    PyTorch's (``encoder.layers.0.self_attn.in_proj_weight``,
    ``decoder.norm.weight`` ...), so ``load_state_dict(sd, layout="torch")``
    takes a ``torch.nn.Transformer``'s state dict.

    ``forward(g, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
    memory_is_causal=False)``: ``src`` [S, B, E], ``tgt`` [T, B, E] ([B, S, E]
    / [B, T, E] with ``batch_first``; unbatched [S, E] / [T, E]) -> [T, B, E].
    The masks keep PyTorch's meaning (boolean True = BLOCKED, floating
    added; see the module docstring); ``generate_square_subsequent_mask``
    gives the causal ``tgt_mask``.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, dtype=np.float32):
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                  norm_first=norm_first, bias=bias, dtype=dtype)
        for arg, m in (("custom_encoder", custom_encoder), ("custom_decoder", custom_decoder)):
            if m is not None and not isinstance(m, Module):
                raise TypeError(f"Transformer: {arg} must be a Module or None, "
                                f"got {type(m).__name__}")
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for p in self.parameters():
            if p.data.ndim > 1:  # yscv's weights are input-major: [fan_in, fan_out]
                init.xavier_uniform_(p, p.data.shape[0], p.data.shape[1])
        self.d_model, self.nhead = int(d_model), int(nhead)
        self.batch_first = bool(batch_first)

    def forward(self, g, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        ss, ts = _shape(g, src), _shape(g, tgt)
        if len(ss) != len(ts) or (len(ss) == 3 and ss[0 if self.batch_first else 1]
                                  != ts[0 if self.batch_first else 1]):
            raise ValueError(f"Transformer: src and tgt must have the same batch size (or "
                             f"both be unbatched), got shapes {ss} and {ts}")
        if ss[-1:] != (self.d_model,) or ts[-1:] != (self.d_model,):
            raise ValueError(f"Transformer: the feature size of src and tgt must be "
                             f"d_model={self.d_model}, got shapes {ss} and {ts}")
        memory = self.encoder(g, src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(g, tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, dtype=np.float32) -> np.ndarray:
        """The causal mask [sz, sz] for ``tgt_mask``, as PyTorch's: 0.0 on and
        below the diagonal, ``-inf`` above (query i sees keys j <= i), a
        floating NumPy array (added to the scores)."""
        n = _positive(sz, "generate_square_subsequent_mask", "sz")
        return np.triu(np.full((n, n), -np.inf, dtype=dtype), 1)
