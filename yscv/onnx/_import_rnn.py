"""Handlers of ONNX's LSTM, GRU and RNN on yscv's recurrent ops.

ONNX holds W [D, ``G*H``, I], R [D, ``G*H``, H], B [D, ``2*G*H``] (input then recurrent
bias) with gate orders LSTM (i, o, f, c) and GRU (z, r, h); yscv's ops take
input-major weights [I, ``G*H``] with gates (i, f, g, o) and (r, z, n). The
conversion is recorded in the graph (narrow, cat, transpose of the weight
nodes), so gradients reach the Parameters in the file's layout. A reverse
direction runs on the time-flipped sequence; ``bidirectional`` runs both.
GRU with ``linear_before_reset=0`` (``_import_gru``) and LSTM with peepholes
(``_import_lstm``) are composed per step.
Outputs: Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H] (``layout=1``:
batch-major [B, T, D, H], [B, D, H]).
"""
from __future__ import annotations

import numpy as np

from ._import_gru import gru_reset_first
from ._import_lstm import lstm_peephole
from ._import_registry import handler

#: ONNX gate blocks in yscv's gate order
_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}


def _gates(g, w, order, hidden):
    """Rows of ``w`` [``G*H``, ...] regrouped into yscv's gate order."""
    if len(order) == 1:
        return w
    return g.cat([g.narrow(w, 0, k * hidden, hidden) for k in order], axis=0)


def _direction_weights(run, node, d, hidden):
    g = run.g
    order = _ORDER[node.op]
    ng = len(order)
    w = _gates(g, g.select(run.node(node.inputs[1]), 0, d), order, hidden)
    r = _gates(g, g.select(run.node(node.inputs[2]), 0, d), order, hidden)
    w_ih, w_hh = g.transpose(w), g.transpose(r)
    if run.has(node, 3):
        b = g.select(run.node(node.inputs[3]), 0, d)
        b_in = _gates(g, g.narrow(b, 0, 0, ng * hidden), order, hidden)
        b_rec = _gates(g, g.narrow(b, 0, ng * hidden, ng * hidden), order, hidden)
    else:
        b_in = b_rec = g.constant(np.zeros(ng * hidden, g.dtype))
    return w_ih, w_hh, b_in, b_rec


def _initial(run, node, slot, d):
    """Direction d's initial state [B, H] from [D, B, H] (``layout=1``: [B, D, H])."""
    if not run.has(node, slot):
        return None
    name = node.inputs[slot]
    axis = 1 if node.attrs.get("layout", 0) else 0
    if run.is_static(name):
        a = np.take(run.arr(name), d, axis=axis)
        return None if not a.any() else run.g.constant(a.astype(run.g.dtype))
    return run.g.select(run.node(name), axis, d)


def _check_lengths(run, node, steps, batch):
    if not run.has(node, 4):
        return
    lens = run.arr(node.inputs[4]).reshape(-1)
    if lens.shape != (batch,) or np.any(lens != steps):
        raise ValueError(f"onnx {node.op} (node {node.name!r}): sequence_lens {lens.tolist()} "
                         f"differ from the sequence length {steps}; only full-length "
                         "sequences are supported")


@handler("LSTM", "GRU", "RNN")
def _recurrent(run, node):
    g = run.g
    at = node.attrs
    hidden = int(at["hidden_size"])
    batch_major = bool(at.get("layout", 0))
    x = run.node(node.inputs[0])
    if batch_major:
        x = g.transpose(x, (1, 0, 2))
    steps, batch = x.shape[0], x.shape[1]
    _check_lengths(run, node, steps, batch)
    direction = at.get("direction", "forward")
    dirs = [0, 1] if direction == "bidirectional" else [0]
    ys, hs, cs = [], [], []
    for d in dirs:
        reverse = direction == "reverse" or d == 1
        xs = g.flip(x, 0) if reverse else x
        w_ih, w_hh, b_in, b_rec = _direction_weights(run, node, d, hidden)
        h0 = _initial(run, node, 5, d)
        if node.op == "LSTM" and run.has(node, 7):
            p = g.select(run.node(node.inputs[7]), 0, d)
            seq, c_n = lstm_peephole(g, xs, w_ih, w_hh, b_in + b_rec, h0,
                                     _initial(run, node, 6, d), p)
            cs.append(c_n)
        elif node.op == "LSTM":
            seq, c_n = g.lstm(xs, w_ih, w_hh, b_in + b_rec, h0, _initial(run, node, 6, d),
                              return_cell=True)
            cs.append(c_n)
        elif node.op == "GRU" and not at.get("linear_before_reset", 0):
            seq = gru_reset_first(g, xs, w_ih, w_hh, b_in, b_rec, h0)
        elif node.op == "GRU":
            seq = g.gru(xs, w_ih, w_hh, b_in, b_rec, h0)
        else:
            act = (at.get("activations") or ["Tanh"])[0].lower()
            seq = g.rnn(xs, w_ih, w_hh, b_in + b_rec, h0, nonlinearity=act)
        hs.append(g.select(seq, 0, steps - 1))
        ys.append(g.flip(seq, 0) if reverse else seq)
    y = g.stack(ys, axis=1)                       # [T, D, B, H]
    y_h = g.stack(hs, axis=0)                     # [D, B, H]
    y_c = g.stack(cs, axis=0) if cs else None
    if batch_major:
        y = g.transpose(y, (2, 0, 1, 3))
        y_h = g.transpose(y_h, (1, 0, 2))
        y_c = g.transpose(y_c, (1, 0, 2)) if y_c is not None else None
    return [y, y_h, y_c]
