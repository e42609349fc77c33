"""Recurrent ops (backward): full backpropagation through time.

The batch is split into the same row blocks as the forward
(``yscv.ops.recurrent.row_blocks``); each block runs, in one call on its own
thread, the whole backward loop from T-1 down to 0 (per step the carried
hidden-state gradient ``g[t] + dG[t+1] @ w_hh.T``, then the fused gate
backward into ``dG[t]``; an LSTM whose final cell state is an output
starts the carried cell gradient from that output's gradient instead of
zeros), then its share of the input and parameter gradients: its rows of
``dx = dG @ w_ih.T`` and its partial sums of ``dW_ih = X^T dG``,
``dW_hh = H_prev^T dG`` (H_prev = [h0, h_0, ..., h_{T-2}]) and
``dbias = sum(dG)``. The partials are added in block order
(yscv/kernels/recurrent_seq.py).
"""
from __future__ import annotations

import threading

import numpy as np

from ..kernels import lazy
from ..node import Op
from ..compute import regions as par
from ..ops.recurrent import _optional_states, readonly, row_blocks, run_blocks, seq3
from ..registry import register_backward

KS = lazy("recurrent_seq")
KG = lazy("gemm")

_local = threading.local()
_SCRATCH_SLOTS = 6
_SCRATCH_MAX_BYTES = 64 << 20


def scratch(slot: str, shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array for a temporary that never leaves one backward
    call (e.g. the gate gradients of every step), reused across calls.

    A fresh multi-megabyte array costs its page faults on every call (glibc
    hands large blocks back to the OS when they are freed): on the LSTM
    bench the gate-gradient buffer alone cost ~0.8 ms of a ~5 ms step.
    Buffers are per thread (so concurrent backward passes in other threads
    never share one), keyed by ``slot`` (distinct temporaries of one call
    use distinct slots), shape and dtype; at most ``_SCRATCH_SLOTS`` are kept,
    least recently used dropped first, and arrays over 64 MB are not kept.
    """
    cache = getattr(_local, "buffers", None)
    if cache is None:
        cache = _local.buffers = {}
    key = (slot, shape, np.dtype(dtype))
    buf = cache.pop(key, None)
    if buf is None:
        buf = np.empty(shape, dtype=dtype)
    if buf.nbytes <= _SCRATCH_MAX_BYTES:
        cache[key] = buf  # dicts keep insertion order: most recent last
        while len(cache) > _SCRATCH_SLOTS:
            del cache[next(iter(cache))]
    return buf


def _transposed(w):
    """``w.T`` as a read-only C-contiguous copy (the kernels' GEMM tiles read
    the second operand by rows; yscv.kernels.gemm.transpose_into is ~15x
    faster than NumPy's copy of the transposed view here)."""
    out = np.empty(w.shape[::-1], dtype=w.dtype)
    KG.transpose_into(readonly(w), out)
    return readonly(out)


def _empty(ndim, dtype):
    """A read-only empty placeholder of ``ndim`` dimensions (a skipped output)."""
    return readonly(np.empty((0,) * ndim, dtype=dtype))


class _Grads:
    """The outputs shared by the three ops: dx [T, B, I] and the per-block
    partials of dW_ih, dW_hh and the biases, allocated only when needed
    (otherwise empty placeholders the kernel skips)."""

    def __init__(self, k, T, B, I, H, GH, dtype, need_dx, need_wih, need_whh, need_bih,
                 need_bhh=False):
        def parts(need, shape):
            return np.zeros((k,) + (shape if need else (0,) * len(shape)), dtype=dtype)

        self.dx = np.empty((T, B, I), dtype=dtype) if need_dx else np.empty((0, 0, 0), dtype=dtype)
        self.dw_ih = parts(need_wih, (I, GH))
        self.dw_hh = parts(need_whh, (H, GH))
        self.db_ih = parts(need_bih, (GH,))
        self.db_hh = parts(need_bhh, (GH,))
        self.flags = (need_dx, need_wih, need_whh, need_bih, need_bhh)


    def results(self, x_shape):
        need_dx, need_wih, need_whh, need_bih, need_bhh = self.flags
        return ((self.dx.reshape(x_shape) if need_dx else None),
                (par.combine(self.dw_ih) if need_wih else None),
                (par.combine(self.dw_hh) if need_whh else None),
                (par.combine(self.db_ih) if need_bih else None),
                (par.combine(self.db_hh) if need_bhh else None))


def _prepare(x, out, g, h0, batched, gates):
    """Shapes and the kernels' read-only views shared by the three ops
    (``gates`` = G, the gate blocks of the op)."""
    T = x.shape[0]
    B = x.shape[1] if batched else 1
    I, H = x.shape[-1], out.shape[-1]
    x3 = seq3(x, batched)
    out3 = readonly(out.reshape(T, B, H))
    g3 = readonly(g.reshape(T, B, H))
    h0_seq = readonly(h0.reshape(1, B, H)) if h0 is not None else _empty(3, out.dtype)
    blocks = row_blocks(B, T * B * gates * H * (I + H))
    return T, B, I, H, x3, out3, g3, h0_seq, blocks


@register_backward(Op.RNN)
def rnn_op_backward(g, inputs, out, attrs, saved, needs):
    batched, has_h0, relu = attrs
    x, w_ih, w_hh, bias = inputs[:4]
    (h0,) = _optional_states((has_h0,), inputs[4:])
    T, B, I, H, x3, out3, g3, h0_seq, blocks = _prepare(x, out, g, h0, batched, 1)
    need_h0 = has_h0 and needs[4]
    dpre = scratch("rnn_dpre", (T, B, H), out.dtype)
    dh = np.empty((B, H), dtype=out.dtype)
    w_hh_t = _transposed(w_hh)
    w_ih_t = _transposed(w_ih) if needs[0] else _empty(2, out.dtype)
    grads = _Grads(len(blocks), T, B, I, H, H, out.dtype, needs[0], needs[1], needs[2], needs[3])

    run_blocks(KS.rnn_backward_region,
               (out3, g3, w_hh_t, relu, dpre, readonly(dpre), dh, need_h0, x3, h0_seq, has_h0,
                w_ih_t, grads.dx, grads.dw_ih, grads.dw_hh, grads.db_ih, grads.flags), blocks)
    dx, dw_ih, dw_hh, db, _ = grads.results(x.shape)
    result = (dx, dw_ih, dw_hh, db)
    if has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
    return result


@register_backward(Op.LSTM)
def lstm_op_backward(g, inputs, out, attrs, saved, needs):
    batched, has_h0, has_c0, with_cell = attrs
    x, w_ih, w_hh, bias = inputs[:4]
    h0, c0 = _optional_states((has_h0, has_c0), inputs[4:])
    gates, cells = saved
    steps = x.shape[0]
    if with_cell:  # value [T+1, (B,) H]: row T is c_n, its gradient seeds dc
        dc = g[steps].reshape(-1, out.shape[-1]).copy()  # carried in place by the kernel
        g, out = g[:steps], out[:steps]
    T, B, I, H, x3, out3, g3, h0_seq, blocks = _prepare(x, out, g, h0, batched, 4)
    if not with_cell:
        dc = np.zeros((B, H), dtype=out.dtype)
    need_h0 = has_h0 and needs[4]
    dg = scratch("lstm_dgates", (T, B, 4 * H), out.dtype)
    dh = np.empty((B, H), dtype=out.dtype)
    tc = np.empty((B, H), dtype=out.dtype)
    w_hh_t = _transposed(w_hh)
    w_ih_t = _transposed(w_ih) if needs[0] else _empty(2, out.dtype)
    grads = _Grads(len(blocks), T, B, I, H, 4 * H, out.dtype, needs[0], needs[1], needs[2], needs[3])

    run_blocks(KS.lstm_backward_region,
               (gates, cells, g3, w_hh_t, dg, readonly(dg), dh, dc, tc, need_h0, x3, out3,
                h0_seq, has_h0, w_ih_t, grads.dx, grads.dw_ih, grads.dw_hh, grads.db_ih,
                grads.flags), blocks)
    dx, dw_ih, dw_hh, db, _ = grads.results(x.shape)
    result = (dx, dw_ih, dw_hh, db)
    k = 4
    if has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
        k += 1
    if has_c0:
        result += ((dc.reshape(c0.shape) if needs[k] else None),)
    return result


@register_backward(Op.GRU)
def gru_op_backward(g, inputs, out, attrs, saved, needs):
    batched, has_h0 = attrs
    x, w_ih, w_hh, bias_ih, bias_hh = inputs[:5]
    (h0,) = _optional_states((has_h0,), inputs[5:])
    T, B, I, H, x3, out3, g3, h0_seq, blocks = _prepare(x, out, g, h0, batched, 3)
    need_h0 = has_h0 and needs[5]
    h_first = readonly(np.zeros((B, H), dtype=out.dtype) if h0 is None else h0.reshape(B, H))
    dxp = scratch("gru_dx_gates", (T, B, 3 * H), out.dtype)
    dhp = scratch("gru_dh_gates", (T, B, 3 * H), out.dtype)
    dh = np.empty((B, H), dtype=out.dtype)
    dd = np.zeros((B, H), dtype=out.dtype)
    w_hh_t = _transposed(w_hh)
    w_ih_t = _transposed(w_ih) if needs[0] else _empty(2, out.dtype)
    grads = _Grads(len(blocks), T, B, I, H, 3 * H, out.dtype, needs[0], needs[1], needs[2],
                   needs[3], needs[4])

    run_blocks(KS.gru_backward_region,
               (saved, out3, h_first, g3, w_hh_t, dxp, dhp, readonly(dxp), readonly(dhp), dh, dd,
                need_h0, x3, h0_seq, has_h0, w_ih_t, grads.dx, grads.dw_ih, grads.dw_hh,
                grads.db_ih, grads.db_hh, grads.flags), blocks)
    result = grads.results(x.shape)
    if has_h0:
        result += ((dh.reshape(h0.shape) if need_h0 else None),)
    return result
