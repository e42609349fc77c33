"""Recurrent layers: RNN, LSTM, GRU (time-major like PyTorch's default).

Input [T, B, I] (or [B, T, I] with ``batch_first=True``, or unbatched
[T, I]). Each layer/direction is one recurrent op (``g.rnn`` / ``g.lstm`` /
``g.gru``); reverse directions run the op on the time-flipped sequence.
Stacked layers feed each other, with dropout between layers when training.

Parameters use PyTorch's names (``weight_ih_l0``, ``weight_hh_l0``,
``bias_ih_l0``, ``bias_hh_l0``, ``..._reverse``) but are INPUT-MAJOR, the
transpose of PyTorch's: weight_ih [I, G*H], weight_hh [H, G*H], biases
[G*H], with G = 1 (RNN), 4 (LSTM, gates i f g o), 3 (GRU, gates r z n).
All are initialised U(-1/sqrt(H), 1/sqrt(H)) as PyTorch. RNN and LSTM
keep PyTorch's two biases and pass their sum to the op (which takes one).

``forward`` returns ``(output, h_n)``: output [T, B, D*H] (D = 2 when
bidirectional), h_n [num_layers*D, B, H], the last hidden state of each
layer/direction. The LSTM op returns hidden states only, so the final cell
state c_n is not available; LSTM returns ``(output, h_n)`` too.
"""
from __future__ import annotations

import math

import numpy as np

from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["RNN", "LSTM", "GRU"]


def _count(v, layer: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    return int(v)


class _RNNBase(Module):
    _gates = 1
    _op = ""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype=np.float32):
        super().__init__()
        name = type(self).__name__
        self.input_size = _count(input_size, name, "input_size")
        self.hidden_size = _count(hidden_size, name, "hidden_size")
        self.num_layers = _count(num_layers, name, "num_layers")
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        if not 0.0 <= self.dropout <= 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        self.bidirectional = bool(bidirectional)
        self._dtype = np.dtype(dtype)
        h, gh = self.hidden_size, self._gates * self.hidden_size
        dirs = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            in_size = self.input_size if layer == 0 else h * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                setattr(self, "weight_ih" + sfx, Parameter(np.zeros((in_size, gh)), dtype))
                setattr(self, "weight_hh" + sfx, Parameter(np.zeros((h, gh)), dtype))
                if self.bias:
                    setattr(self, "bias_ih" + sfx, Parameter(np.zeros(gh), dtype))
                    setattr(self, "bias_hh" + sfx, Parameter(np.zeros(gh), dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _run(self, g, x, sfx, h0, c0):
        """One layer, one direction, time-major x -> [T, (B,) H]."""
        w_ih, w_hh = self.param(g, "weight_ih" + sfx), self.param(g, "weight_hh" + sfx)
        if self.bias:
            b_ih, b_hh = self.param(g, "bias_ih" + sfx), self.param(g, "bias_hh" + sfx)
        else:
            zeros = np.zeros(self._gates * self.hidden_size, g.dtype)
            b_ih = b_hh = g.constant(zeros)
        return self._cell(g, x, w_ih, w_hh, b_ih, b_hh, h0, c0)

    def _initial(self, g, state, idx, batched):
        if state is None:
            return None
        if not hasattr(state, "index"):
            state = g.constant(state)
        return g.select(state, 0, idx)

    def forward(self, g, x, hx=None):
        """``x`` [T, B, I] (``batch_first``: [B, T, I]; unbatched [T, I]);
        ``hx``: h0 [num_layers*D, B, H] (LSTM: a tuple (h0, c0)), arrays or
        nodes, zeros when None. Returns ``(output, h_n)``."""
        if not hasattr(x, "index"):
            x = g.constant(x)
        ndim = len(g.value(x).shape)
        if ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: input must be [T, B, I] or [T, I], "
                             f"got shape {g.value(x).shape}")
        batched = ndim == 3
        steps = g.value(x).shape[1 if batched and self.batch_first else 0]
        if batched and self.batch_first:
            x = g.transpose(x, (1, 0, 2))
        h0_all, c0_all = (hx if isinstance(hx, tuple) else (hx, None))
        dirs = 2 if self.bidirectional else 1
        last = []
        inp = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                h0 = self._initial(g, h0_all, idx, batched)
                c0 = self._initial(g, c0_all, idx, batched)
                seq = g.flip(inp, (0,)) if d else inp
                out = self._run(g, seq, sfx, h0, c0)
                last.append(g.select(out, 0, steps - 1))  # reverse: before flipping back
                outs.append(g.flip(out, (0,)) if d else out)
            inp = outs[0] if dirs == 1 else g.cat(outs, -1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                inp = g.dropout(inp, self.dropout, training=True, seed=None)
        h_n = g.stack(last, 0)
        out = inp
        if batched and self.batch_first:
            out = g.transpose(out, (1, 0, 2))
        return out, h_n

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN: h_t = act(x_t W_ih + b_ih + h_{t-1} W_hh + b_hh), act tanh or relu."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, dtype=np.float32):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.__dict__["nonlinearity"] = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, dtype)

    def _cell(self, g, x, w_ih, w_hh, b_ih, b_hh, h0, c0):
        return g.rnn(x, w_ih, w_hh, g.add(b_ih, b_hh), h0, nonlinearity=self.nonlinearity)


class LSTM(_RNNBase):
    """LSTM with gates (i, f, g, o) as PyTorch. ``hx`` is ``(h0, c0)``."""

    _gates = 4

    def _cell(self, g, x, w_ih, w_hh, b_ih, b_hh, h0, c0):
        return g.lstm(x, w_ih, w_hh, g.add(b_ih, b_hh), h0, c0)


class GRU(_RNNBase):
    """GRU with gates (r, z, n), n = tanh(x W_in + b_in + r * (h W_hn + b_hn))."""

    _gates = 3

    def _cell(self, g, x, w_ih, w_hh, b_ih, b_hh, h0, c0):
        return g.gru(x, w_ih, w_hh, b_ih, b_hh, h0)
