"""Recurrent ops (forward): single-layer, unidirectional RNN, LSTM and GRU.

Layout is time-major: ``x`` is [T, B, I] (or unbatched [T, I]); weights are
input-major, the transpose of PyTorch's (``w_ih`` [I, ``G*H``], ``w_hh``
[H, ``G*H``], G = 1, 4, 3 gates); every op returns all hidden states [T, B, H]
(or [T, H]). ``h0`` / ``c0`` are optional inputs ([B, H] or [H]; zeros when
None): the node's inputs are ``(x, w_ih, w_hh, bias..., [h0], [c0])`` and
the attributes record which of the optional ones are present. The LSTM can
also return its final cell state: its node's value is then [T+1, B, H],
the hidden states and c_n packed (``lstm(return_cell=True)``).

Each op runs the whole sequence in the kernels of
yscv/kernels/recurrent_seq.py (per step the input projection
``x_t @ w_ih``, the recurrent product ``h_{t-1} @ w_hh``, the fused gate
math); how (blocks of batch rows, on several cores) is decided in
yscv/compute/recurrent.py. The attributes are `RNNAttrs`,
`LSTMAttrs`, `GRUAttrs`.

Saved for backward: LSTM the gate activations [T, B, 4H] and the cell
states [T+1, B, H] (c0 first); GRU r, z, n and ``h W_hn + b_hn``
[T, B, 4H]; RNN nothing (the output is the activation).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..compute import recurrent as C
from ..node import Op
from ..registry import register_forward
from ._common import shape_error


# ------------------------------------------------------------ attributes
class RNNAttrs(NamedTuple):
    """Attributes of an RNN node: ``batched`` (x is [T, B, I], not [T, I]),
    ``has_h0`` (h0 is the node's 5th input), ``relu`` (nonlinearity "relu",
    else "tanh")."""
    batched: bool
    has_h0: bool
    relu: bool


class LSTMAttrs(NamedTuple):
    """Attributes of an LSTM node: ``batched``, ``has_h0``, ``has_c0`` (the
    optional inputs after the bias, in that order) and ``with_cell`` (the
    value is [T+1, B, H]: the hidden states, then c_n as row T)."""
    batched: bool
    has_h0: bool
    has_c0: bool
    with_cell: bool


class GRUAttrs(NamedTuple):
    """Attributes of a GRU node: ``batched``, ``has_h0`` (h0 is the 6th input)."""
    batched: bool
    has_h0: bool


# -------------------------------------------------------------- forwards
@register_forward(Op.RNN)
def rnn_op_forward(attrs, x, w_ih, w_hh, bias, *rest):
    """h_t = act(x_t w_ih + bias + h_{t-1} w_hh). Nothing saved."""
    (h0,) = C.optional_states((attrs.has_h0,), rest)
    x3 = C.seq3(x, attrs.batched)
    T, B, _ = x3.shape
    H = w_hh.shape[0]
    out = np.empty((T, B, H), dtype=x.dtype)
    C.rnn_forward(x3, w_ih, w_hh, bias, h0, attrs.relu, out)
    return (out if attrs.batched else out.reshape(T, H)), None


@register_forward(Op.LSTM)
def lstm_op_forward(attrs, x, w_ih, w_hh, bias, *rest):
    """LSTM, gates (i, f, g, o). Saves (gates [T,B,4H], cells [T+1,B,H]).

    With ``with_cell`` (``g.lstm(..., return_cell=True)``) the value is
    [T+1, B, H] (or [T+1, H]): the T hidden states, then the final cell
    state c_{T-1} as row T; otherwise the hidden states [T, B, H] alone.
    """
    h0, c0 = C.optional_states((attrs.has_h0, attrs.has_c0), rest)
    x3 = C.seq3(x, attrs.batched)
    T, B, _ = x3.shape
    H = w_hh.shape[0]
    gates = np.empty((T, B, 4 * H), dtype=x.dtype)
    value = np.empty((T + 1 if attrs.with_cell else T, B, H), dtype=x.dtype)
    out = value[:T] if attrs.with_cell else value  # a leading-axis slice stays C-contiguous
    cells = np.empty((T + 1, B, H), dtype=x.dtype)
    if c0 is None:
        cells[0] = 0
    else:
        cells[0] = c0.reshape(B, H)
    C.lstm_forward(x3, w_ih, w_hh, bias, h0, gates, cells, out)
    if attrs.with_cell:
        value[T] = cells[T]
    return (value if attrs.batched else value.reshape(value.shape[0], H)), (gates, cells)


@register_forward(Op.GRU)
def gru_op_forward(attrs, x, w_ih, w_hh, bias_ih, bias_hh, *rest):
    """GRU, gates (r, z, n) as PyTorch. Saves [T,B,4H]: r, z, n, h W_hn + b_hn."""
    (h0,) = C.optional_states((attrs.has_h0,), rest)
    x3 = C.seq3(x, attrs.batched)
    T, B, _ = x3.shape
    H = w_hh.shape[0]
    saved = np.empty((T, B, 4 * H), dtype=x.dtype)
    out = np.empty((T, B, H), dtype=x.dtype)
    C.gru_forward(x3, w_ih, w_hh, bias_ih, bias_hh, h0, saved, out)
    return (out if attrs.batched else out.reshape(T, H)), saved


# ------------------------------------------------------------ validation
def _shape_of(graph, v, op, arg):
    """Shape of a NodeId or array-like operand (raises naming op and arg)."""
    return graph._operand(v, op, arg)[1].shape


def _check_recurrent(graph, op, gates, x, w_ih, w_hh, biases, h0, c0=None):
    """Validate shapes; return (batched, has_h0, has_c0). Raises ShapeError."""
    xs = _shape_of(graph, x, op, "x")
    if len(xs) not in (2, 3):
        raise shape_error(op, f"x must be [T, B, I] or unbatched [T, I] (time-major), "
                              f"got shape {xs}", expected="[T, B, I] or [T, I]", got=xs)
    batched = len(xs) == 3
    if xs[0] < 1:
        raise ValueError(f"{op}: x has sequence length T={xs[0]}; expected T >= 1")
    I = xs[-1]
    whs = _shape_of(graph, w_hh, op, "w_hh")
    if len(whs) != 2 or whs[0] < 1 or whs[1] != gates * whs[0]:
        raise shape_error(op, f"w_hh must have shape (H, {gates}*H) with H >= 1 "
                              f"(input-major, the transpose of PyTorch's), got {whs}",
                          expected=f"(H, {gates}*H)", got=whs)
    H = whs[0]
    wis = _shape_of(graph, w_ih, op, "w_ih")
    if wis != (I, gates * H):
        raise shape_error(op, f"w_ih must have shape (I, {gates}*H) = {(I, gates * H)} for "
                              f"x of shape {xs} and w_hh of shape {whs}, got {wis}",
                          expected=(I, gates * H), got=wis)
    for name, b in biases:
        bs = _shape_of(graph, b, op, name)
        if bs != (gates * H,):
            raise shape_error(op, f"{name} must have shape ({gates}*H,) = ({gates * H},), "
                                  f"got {bs}", expected=(gates * H,), got=bs)
    want = (xs[1], H) if batched else (H,)
    for name, s in (("h0", h0), ("c0", c0)):
        if s is None:
            continue
        ss = _shape_of(graph, s, op, name)
        if ss != want:
            lay = "[B, H]" if batched else "[H] (x is unbatched)"
            raise shape_error(op, f"{name} must have shape {lay} = {want}, got {ss}",
                              expected=want, got=ss)
    return batched, h0 is not None, c0 is not None


class RecurrentOps:
    """Graph methods of the recurrent category."""

    def rnn(self, x, w_ih, w_hh, bias, h0=None, nonlinearity="tanh"):
        """Elman RNN: ``h_t = act(x_t @ w_ih + bias + h_{t-1} @ w_hh)``.

        Args:
            x: [T, B, I] or unbatched [T, I], time-major.
            w_ih: [I, H]; w_hh: [H, H]; bias: [H] (PyTorch's b_ih + b_hh).
            h0: [B, H] (or [H]); zeros when None.
            nonlinearity: "tanh" or "relu".
        Returns all hidden states [T, B, H] (or [T, H]). Nothing is saved
        for backward (the derivative comes from the output).
        """
        if not isinstance(nonlinearity, str) or nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"rnn: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        batched, has_h0, _ = _check_recurrent(self, "rnn", 1, x, w_ih, w_hh,
                                              [("bias", bias)], h0)
        ins = (x, w_ih, w_hh, bias) + ((h0,) if has_h0 else ())
        return self._apply(Op.RNN, ins, RNNAttrs(batched, has_h0, nonlinearity == "relu"))

    def lstm(self, x, w_ih, w_hh, bias, h0=None, c0=None, return_cell=False):
        """LSTM, gate columns (i, f, g, o) as PyTorch:
        ``c_t = f*c_{t-1} + i*g``, ``h_t = o*tanh(c_t)``.

        Args:
            x: [T, B, I] or unbatched [T, I], time-major.
            w_ih: [I, 4H]; w_hh: [H, 4H]; bias: [4H] (PyTorch's b_ih + b_hh).
            h0: [B, H] (or [H]); zeros when None.
            c0: [B, H] (or [H]); zeros when None.
            return_cell: also return the final cell state.
        Returns all hidden states [T, B, H] (or [T, H]); with
        ``return_cell=True`` the pair ``(hs, c_n)``, c_n the final cell
        state [B, H] (or [H]), differentiable: a gradient reaching c_n (a
        loss on it, or the next truncated-BPTT chunk's c0) flows back to x,
        the weights, the bias, h0 and c0. Saves the gate activations
        [T, B, 4H] and the cell states [T+1, B, H].

        With ``return_cell=True`` the LSTM node's value packs both outputs,
        [T+1, B, H] (hidden states, then c_n as row T), and two cheap nodes
        select them (``narrow`` for hs, ``select`` for c_n): three nodes in
        all. Without it the op appends one node whose value is hs.
        """
        if not isinstance(return_cell, (bool, np.bool_)):
            raise TypeError(f"lstm: return_cell must be a bool, got {return_cell!r}")
        batched, has_h0, has_c0 = _check_recurrent(self, "lstm", 4, x, w_ih, w_hh,
                                                   [("bias", bias)], h0, c0)
        ins = (x, w_ih, w_hh, bias) + ((h0,) if has_h0 else ()) + ((c0,) if has_c0 else ())
        if not return_cell:
            return self._apply(Op.LSTM, ins, LSTMAttrs(batched, has_h0, has_c0, False))
        packed = self._apply(Op.LSTM, ins, LSTMAttrs(batched, has_h0, has_c0, True))
        steps = packed.shape[0] - 1
        return self.narrow(packed, 0, 0, steps), self.select(packed, 0, steps)

    def gru(self, x, w_ih, w_hh, bias_ih, bias_hh, h0=None):
        """GRU, gate columns (r, z, n) as PyTorch:
        ``n = tanh(x W_in + b_in + r*(h W_hn + b_hn))``, ``h' = (1-z)*n + z*h``.

        Args:
            x: [T, B, I] or unbatched [T, I], time-major.
            w_ih: [I, 3H]; w_hh: [H, 3H]; bias_ih, bias_hh: [3H].
            h0: [B, H] (or [H]); zeros when None.
        Returns all hidden states [T, B, H] (or [T, H]). Saves r, z, n and
        ``h W_hn + b_hn`` per step ([T, B, 4H]).
        """
        batched, has_h0, _ = _check_recurrent(self, "gru", 3, x, w_ih, w_hh,
                                              [("bias_ih", bias_ih), ("bias_hh", bias_hh)], h0)
        ins = (x, w_ih, w_hh, bias_ih, bias_hh) + ((h0,) if has_h0 else ())
        return self._apply(Op.GRU, ins, GRUAttrs(batched, has_h0))

    # aliases (same op, same arguments)
    def rnn_forward(self, x, w_ih, w_hh, bias, h0=None, nonlinearity="tanh"):
        """Alias of `rnn` (same op, same arguments)."""
        return self.rnn(x, w_ih, w_hh, bias, h0, nonlinearity)

    def lstm_forward(self, x, w_ih, w_hh, bias, h0=None, c0=None, return_cell=False):
        """Alias of `lstm` (same op, same arguments)."""
        return self.lstm(x, w_ih, w_hh, bias, h0, c0, return_cell)

    def gru_forward(self, x, w_ih, w_hh, bias_ih, bias_hh, h0=None):
        """Alias of `gru` (same op, same arguments)."""
        return self.gru(x, w_ih, w_hh, bias_ih, bias_hh, h0)
