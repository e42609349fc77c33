"""Recurrent layers: RNN, LSTM, GRU (time-major like PyTorch's default).

Input [T, B, I] (or [B, T, I] with ``batch_first=True``, or unbatched
[T, I]). Each layer/direction is one recurrent op (``g.rnn`` / ``g.lstm`` /
``g.gru``); reverse directions run the op on the time-flipped sequence.
Stacked layers feed each other, with dropout between layers when training.

Parameters use PyTorch's names (``weight_ih_l0``, ``weight_hh_l0``,
``bias_ih_l0``, ``bias_hh_l0``, ``..._reverse``) but are INPUT-MAJOR, the
transpose of PyTorch's: weight_ih [I, ``G*H``], weight_hh [H, ``G*H``], biases
``[G*H]``, with G = 1 (RNN), 4 (LSTM, gates i f g o), 3 (GRU, gates r z n).
All are initialised U(-1/sqrt(H), 1/sqrt(H)) as PyTorch. RNN and LSTM
keep PyTorch's two biases and pass their sum to the op (which takes one).

``forward(g, x, hx=None)`` returns what PyTorch's does: RNN and GRU
``(output, h_n)``, LSTM ``(output, (h_n, c_n))``; output is [T, B, ``D*H``]
(D = 2 when bidirectional), h_n and c_n are [``num_layers*D``, B, H] (unbatched:
[``num_layers*D``, H]), the last hidden / cell state of each layer and
direction, all NodeIds. ``hx`` is h0 (RNN, GRU) or the pair ``(h0, c0)``
(LSTM) of that shape, NodeIds or arrays, zeros when None; passing the
previous chunk's ``(h_n, c_n)`` (as values, ``g.value(...)``, to detach them
in a fresh graph) carries the state across truncated-BPTT chunks.
"""
from __future__ import annotations

import math

import numpy as np

from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["RNN", "LSTM", "GRU"]


def _shape(g, v) -> tuple:
    """Shape of a NodeId or array-like (no node appended)."""
    return tuple(v.shape) if hasattr(v, "index") else np.shape(v)


def _count(v, layer: str, arg: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {arg} must be a positive int, got {v!r}")
    return int(v)


class _RNNBase(Module):
    _gates = 1
    _has_cell = False

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
        """One layer, one direction, time-major x -> [T, (B,) H] (LSTM: the
        pair (hs, c_n))."""
        w_ih, w_hh = self.param(g, "weight_ih" + sfx), self.param(g, "weight_hh" + sfx)
        if self.bias:
            b_ih, b_hh = self.param(g, "bias_ih" + sfx), self.param(g, "bias_hh" + sfx)
        else:
            zeros = np.zeros(self._gates * self.hidden_size, g.dtype)
            b_ih = b_hh = g.constant(zeros)
        return self._cell(g, x, w_ih, w_hh, b_ih, b_hh, h0, c0)

    def _check_state(self, g, state, arg, batched, batch) -> None:
        """``state`` must be [``L*D``, B, H] (unbatched [``L*D``, H]) or None."""
        if state is None:
            return
        dirs = 2 if self.bidirectional else 1
        want = (self.num_layers * dirs,) + ((batch,) if batched else ()) + (self.hidden_size,)
        got = _shape(g, state)
        if got != want:
            lay = "[num_layers*D, B, H]" if batched else "[num_layers*D, H] (x is unbatched)"
            raise ValueError(f"{type(self).__name__}: {arg} must have shape {lay} = {want}, "
                             f"got {got}")

    def _split_hx(self, hx):
        """(h0, c0) from the ``hx`` argument (c0 always None but for LSTM)."""
        name = type(self).__name__
        if not self._has_cell:
            if isinstance(hx, (tuple, list)):
                raise TypeError(f"{name}: hx is the initial hidden state h0 (one array or "
                                f"node), got a {type(hx).__name__}; only LSTM takes (h0, c0)")
            return hx, None
        if hx is None:
            return None, None
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"{name}: hx must be a pair (h0, c0) as in PyTorch, got "
                            f"{type(hx).__name__}")
        return hx[0], hx[1]

    def forward(self, g, x, hx=None):
        """``x`` [T, B, I] (``batch_first``: [B, T, I]; unbatched [T, I]);
        ``hx``: h0 [``num_layers*D``, B, H] (LSTM: a pair (h0, c0)), arrays or
        nodes, zeros when None. Returns ``(output, h_n)`` (RNN, GRU) or
        ``(output, (h_n, c_n))`` (LSTM)."""
        xs = _shape(g, x)
        if len(xs) not in (2, 3):
            raise ValueError(f"{type(self).__name__}: input must be [T, B, I] or [T, I], "
                             f"got shape {xs}")
        batched = len(xs) == 3
        steps = xs[1 if batched and self.batch_first else 0]
        batch = xs[0 if self.batch_first else 1] if batched else 1
        h0_all, c0_all = self._split_hx(hx)
        self._check_state(g, h0_all, "h0", batched, batch)
        self._check_state(g, c0_all, "c0", batched, batch)
        # validated: nodes from here on
        x, h0_all, c0_all = (v if v is None or hasattr(v, "index") else g.constant(v)
                             for v in (x, h0_all, c0_all))
        if batched and self.batch_first:
            x = g.transpose(x, (1, 0, 2))
        dirs = 2 if self.bidirectional else 1
        last, cells = [], []
        inp = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                h0 = None if h0_all is None else g.select(h0_all, 0, idx)
                c0 = None if c0_all is None else g.select(c0_all, 0, idx)
                seq = g.flip(inp, (0,)) if d else inp
                out = self._run(g, seq, sfx, h0, c0)
                if self._has_cell:
                    out, c_n = out
                    cells.append(c_n)
                last.append(g.select(out, 0, steps - 1))  # reverse: before flipping back
                outs.append(g.flip(out, (0,)) if d else out)
            inp = outs[0] if dirs == 1 else g.cat(outs, -1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                inp = g.dropout(inp, self.dropout, training=True, seed=None)
        h_n = g.stack(last, 0)
        out = inp
        if batched and self.batch_first:
            out = g.transpose(out, (1, 0, 2))
        if self._has_cell:
            return out, (h_n, g.stack(cells, 0))
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
    """LSTM with gates (i, f, g, o) as PyTorch. ``hx`` is ``(h0, c0)``;
    returns ``(output, (h_n, c_n))``."""

    _gates = 4
    _has_cell = True

    def _cell(self, g, x, w_ih, w_hh, b_ih, b_hh, h0, c0):
        return g.lstm(x, w_ih, w_hh, g.add(b_ih, b_hh), h0, c0, return_cell=True)


class GRU(_RNNBase):
    """GRU with gates (r, z, n), n = tanh(x W_in + b_in + r * (h W_hn + b_hn))."""

    _gates = 3

    def _cell(self, g, x, w_ih, w_hh, b_ih, b_hh, h0, c0):
        return g.gru(x, w_ih, w_hh, b_ih, b_hh, h0)
