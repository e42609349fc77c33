"""Recurrent ops (backward): full backpropagation through time.

Per step (from T-1 down to 0) one fused Numba kernel turns the incoming
hidden-state gradient into the pre-activation gate gradients ``dG[t]`` and
one GEMM ``dG[t] @ w_hh.T`` carries the gradient to h_{t-1}. After the loop
the parameter and input gradients are whole-sequence GEMMs:
``dW_ih = X.T @ dG``, ``dx = dG @ w_ih.T``, ``dW_hh = H_prev.T @ dG``
(H_prev = [h0, h_0, ..., h_{T-2}] stacked to [T*B, H]), ``dbias = sum(dG)``.
"""
from __future__ import annotations

import threading

import numpy as np

from ..kernels import lazy
from ..node import Op
from ..ops.recurrent import _optional_states
from ..registry import register_backward

K = lazy("recurrent")

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


def _kernel_array(a):
    """``a`` as a C-contiguous writeable array (copied only when it is not):
    kernels then see one array type, so Numba compiles one specialisation."""
    if a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, order="C")


def _as3(a, T, B, H):
    return _kernel_array(a.reshape(T, B, H))


def _state(s, B, H):
    return _kernel_array(s.reshape(B, H))


def _hprev_stack(out3, h0):
    """(H_prev [*, H], start): hidden states feeding steps ``start..T-1``.

    Without h0 the first step's recurrent input is zero, so it is left out.
    """
    T, B, H = out3.shape
    if h0 is None:
        return out3[:-1].reshape((T - 1) * B, H), 1
    hp = np.empty((T * B, H), dtype=out3.dtype)
    hp[:B] = h0
    hp[B:] = out3[:-1].reshape((T - 1) * B, H)
    return hp, 0


def _shared_grads(x, x_shape3, w_ih, w_hh, out3, h0, dxp, dhp, needs):
    """(dx, dw_ih, dw_hh) from the input-side gate gradients ``dxp`` and the
    recurrent-side ones ``dhp`` ([T, B, G*H]; the same array for RNN/LSTM)."""
    T, B, GH = dxp.shape
    dxp2 = dxp.reshape(T * B, GH)
    dx = dw_ih = dw_hh = None
    if needs[0]:
        dx = np.matmul(dxp2, w_ih.T).reshape(x.shape)
    if needs[1]:
        dw_ih = np.matmul(x.reshape(T * B, x_shape3[2]).T, dxp2)
    if needs[2]:
        hp, start = _hprev_stack(out3, h0)
        if hp.shape[0] == 0:
            dw_hh = np.zeros(w_hh.shape, dtype=dxp.dtype)
        else:
            dw_hh = np.matmul(hp.T, dhp[start:].reshape((T - start) * B, GH))
    return dx, dw_ih, dw_hh


def _shapes(x, out, batched):
    T = x.shape[0]
    B = x.shape[1] if batched else 1
    return T, B, x.shape[-1], out.shape[-1]


@register_backward(Op.RNN)
def rnn_op_backward(g, inputs, out, attrs, saved, needs):
    batched, has_h0, relu = attrs
    x, w_ih, w_hh, bias = inputs[:4]
    (h0,) = _optional_states((has_h0,), inputs[4:])
    T, B, I, H = _shapes(x, out, batched)
    out3 = _as3(out, T, B, H)
    g3 = _as3(g, T, B, H)
    h0s = None if h0 is None else h0.reshape(B, H)
    dpre = scratch("rnn_dpre", (T, B, H), out.dtype)
    dh_rec_t = np.zeros((H, B), dtype=out.dtype)
    need_h0 = has_h0 and needs[4]
    for t in range(T - 1, -1, -1):
        K.rnn_step_backward(out3, g3, dh_rec_t, t, relu, dpre)
        if t > 0 or need_h0:
            np.matmul(w_hh, dpre[t].T, out=dh_rec_t)
    dx, dw_ih, dw_hh = _shared_grads(x, (T, B, I), w_ih, w_hh, out3, h0s, dpre, dpre, needs)
    db = dpre.reshape(T * B, H).sum(axis=0) if needs[3] else None
    grads = (dx, dw_ih, dw_hh, db)
    if has_h0:
        grads += ((dh_rec_t.T.reshape(h0.shape) if need_h0 else None),)
    return grads


@register_backward(Op.LSTM)
def lstm_op_backward(g, inputs, out, attrs, saved, needs):
    batched, has_h0, has_c0 = attrs
    x, w_ih, w_hh, bias = inputs[:4]
    h0, c0 = _optional_states((has_h0, has_c0), inputs[4:])
    gates, cells = saved
    T, B, I, H = _shapes(x, out, batched)
    out3 = out.reshape(T, B, H)
    g3 = _as3(g, T, B, H)
    h0s = None if h0 is None else h0.reshape(B, H)
    dg = scratch("lstm_dgates", (T, B, 4 * H), out.dtype)
    dc = np.zeros((B, H), dtype=out.dtype)
    dh_rec_t = np.zeros((H, B), dtype=out.dtype)
    need_h0 = has_h0 and needs[4]
    for t in range(T - 1, -1, -1):
        K.lstm_step_backward(gates, cells, g3, dh_rec_t, t, dc, dg)
        if t > 0 or need_h0:
            np.matmul(w_hh, dg[t].T, out=dh_rec_t)
    dx, dw_ih, dw_hh = _shared_grads(x, (T, B, I), w_ih, w_hh, out3, h0s, dg, dg, needs)
    db = dg.reshape(T * B, 4 * H).sum(axis=0) if needs[3] else None
    grads = (dx, dw_ih, dw_hh, db)
    k = 4
    if has_h0:
        grads += ((dh_rec_t.T.reshape(h0.shape) if need_h0 else None),)
        k += 1
    if has_c0:
        grads += ((dc.reshape(c0.shape) if needs[k] else None),)
    return grads


@register_backward(Op.GRU)
def gru_op_backward(g, inputs, out, attrs, saved, needs):
    batched, has_h0 = attrs
    x, w_ih, w_hh, bias_ih, bias_hh = inputs[:5]
    (h0,) = _optional_states((has_h0,), inputs[5:])
    T, B, I, H = _shapes(x, out, batched)
    out3 = _as3(out, T, B, H)
    g3 = _as3(g, T, B, H)
    h0s = np.zeros((B, H), dtype=out.dtype) if h0 is None else _state(h0, B, H)
    dxp = scratch("gru_dx_gates", (T, B, 3 * H), out.dtype)
    dhp = scratch("gru_dh_gates", (T, B, 3 * H), out.dtype)
    dh_rec_t = np.zeros((H, B), dtype=out.dtype)
    dh_direct = np.zeros((B, H), dtype=out.dtype)
    need_h0 = has_h0 and needs[5]
    for t in range(T - 1, -1, -1):
        h_prev = out3[t - 1] if t > 0 else h0s
        K.gru_step_backward(saved, h_prev, g3, dh_rec_t, t, dh_direct, dxp, dhp)
        if t > 0 or need_h0:
            np.matmul(w_hh, dhp[t].T, out=dh_rec_t)
    dx, dw_ih, dw_hh = _shared_grads(x, (T, B, I), w_ih, w_hh, out3,
                                     None if h0 is None else h0s, dxp, dhp, needs)
    db_ih = dxp.reshape(T * B, 3 * H).sum(axis=0) if needs[3] else None
    db_hh = dhp.reshape(T * B, 3 * H).sum(axis=0) if needs[4] else None
    grads = (dx, dw_ih, dw_hh, db_ih, db_hh)
    if has_h0:
        grads += (((dh_rec_t.T + dh_direct).reshape(h0.shape) if need_h0 else None),)
    return grads
