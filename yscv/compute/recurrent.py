"""Drivers of the recurrent ops (RNN, LSTM, GRU): how their sequence kernels run.

What the forwards (yscv/ops/recurrent.py) and the backward rules
(yscv/backward/recurrent.py) both need lives here: the kernels' layouts
(time-major [T, B, ...] read-only arrays, empty placeholders for skipped
operands), the split of the batch into row blocks and the region that runs
them, the per-thread scratch buffers of a backward call, and the calls of
the whole-sequence kernels (yscv/kernels/recurrent_seq.py) with their
workspaces.

Algorithm: batch rows never interact, so the batch is split into blocks of
rows (`row_blocks`, a function of the sizes only); each block runs the
whole sequence in ONE kernel call, the blocks on the calling thread and the
pool's helpers at once (a region, yscv/compute/regions.py). Backward runs
the same blocks; each adds its share of the weight and bias gradients into
its own partial arrays, summed in block order (`yscv.compute.regions.combine`),
so results are the same bits on one thread or several.
"""
from __future__ import annotations

import threading

import numpy as np

from ..kernels import lazy
from . import regions as par
from .arrays import readonly

KS = lazy("recurrent_seq")
KG = lazy("gemm")

#: multiply-adds a row block must hold before the batch is split (a block
#: handed to a helper thread pays the helper's wake-up; docs/ops/recurrent.md)
BLOCK_WORK = 4_000_000
#: batch rows per block at least: the GEMM tiles are 4 rows high, and each
#: block reads all of w_hh from cache at every step
MIN_BLOCK_ROWS = 8

_local = threading.local()
_SCRATCH_SLOTS = 6
_SCRATCH_MAX_BYTES = 64 << 20


# ------------------------------------------------------------ row blocks
def row_blocks(B: int, work: int) -> list:
    """Batch-row ranges ``[(b0, b1), ...]`` for the sequence kernels, each a
    multiple of 4 rows but the last: a function of ``B`` and ``work`` (the
    op's multiply-adds) only, so results never depend on the machine."""
    k = par.num_chunks(B // MIN_BLOCK_ROWS, work, BLOCK_WORK) if B >= 2 * MIN_BLOCK_ROWS else 1
    if k == 1:
        return [(0, B)]
    tiles = B // 4
    ranges = [(4 * lo, 4 * hi) for lo, hi in par.split(tiles, k)]
    ranges[-1] = (ranges[-1][0], B)
    return ranges


def _blocks_for(T: int, B: int, I: int, H: int, gates: int) -> list:
    """The row blocks of an op with ``gates`` gate blocks (1, 4, 3) on these sizes."""
    return row_blocks(B, T * B * gates * H * (I + H))


def run_blocks(kernel, args, blocks) -> None:
    """Run a region kernel of yscv/kernels/recurrent_seq.py over the batch
    row ``blocks`` on the caller and the pool's helpers."""
    b = par.bounds(blocks)
    par.run_region(lambda st: kernel(*args, b, st), len(blocks))


# --------------------------------------------------------------- layouts
def optional_states(flags, rest) -> list:
    """Split the trailing optional inputs ``rest`` (h0, c0, ... when present)
    by their presence ``flags``: one entry per flag, None where absent."""
    out = []
    k = 0
    for present in flags:
        if present:
            out.append(rest[k])
            k += 1
        else:
            out.append(None)
    return out


def seq3(x, batched):
    """x as a read-only C-contiguous [T, B, I] array (unbatched [T, I] -> [T, 1, I])."""
    if not batched:
        x = x.reshape(x.shape[0], 1, x.shape[1])
    return readonly(x)


def _state2(s, B, H, dtype):
    """h0 / c0 as a read-only [B, H] array (unbatched [H] -> [1, H]); an
    empty [0, 0] placeholder when ``s`` is None (the kernel's flag skips it)."""
    if s is None:
        return readonly(np.empty((0, 0), dtype=dtype))
    return readonly(s.reshape(B, H))


def _first_state(h0, B, H, dtype):
    """The GRU kernels' h_{-1}: h0 as a read-only [B, H] array, zeros when None."""
    return readonly(np.zeros((B, H), dtype=dtype) if h0 is None else h0.reshape(B, H))


def _empty(ndim, dtype):
    """A read-only empty placeholder of ``ndim`` dimensions (a skipped operand)."""
    return readonly(np.empty((0,) * ndim, dtype=dtype))


def _transposed(w):
    """``w.T`` as a read-only C-contiguous copy: the kernels' GEMM tiles read
    the second operand by rows, and the in-register transpose
    (yscv.kernels.gemm.transpose_into) is much faster than NumPy's copy of
    the transposed view (docs/ops/recurrent.md)."""
    out = np.empty(w.shape[::-1], dtype=w.dtype)
    KG.transpose_into(readonly(w), out)
    return readonly(out)


def scratch(slot: str, shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array for a temporary that never leaves one backward
    call (e.g. the gate gradients of every step), reused across calls.

    A fresh multi-megabyte array costs its page faults on every call (glibc
    hands large blocks back to the OS when they are freed; the cost is in
    docs/ops/recurrent.md). Buffers are per thread (so concurrent backward
    passes in other threads never share one), keyed by ``slot`` (distinct
    temporaries of one call use distinct slots), shape and dtype; at most
    ``_SCRATCH_SLOTS`` are kept, least recently used dropped first, and
    arrays over 64 MB are not kept.
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


# --------------------------------------------------------------- forwards
def rnn_forward(x3, w_ih, w_hh, bias, h0, relu, out) -> None:
    """Fill ``out`` [T, B, H] with the Elman RNN's hidden states for
    ``x3`` [T, B, I] (`seq3`); ``h0`` [B, H] (or [H]) or None."""
    T, B, I = x3.shape
    H = w_hh.shape[0]
    args = (x3, readonly(w_ih), readonly(w_hh), readonly(bias),
            _state2(h0, B, H, x3.dtype), h0 is not None, relu, out, readonly(out))
    run_blocks(KS.rnn_forward_region, args, _blocks_for(T, B, I, H, 1))


def lstm_forward(x3, w_ih, w_hh, bias, h0, gates, cells, out) -> None:
    """Fill ``out`` [T, B, H] with the LSTM's hidden states, ``gates``
    [T, B, 4H] with the gate activations and ``cells[1:]`` with the cell
    states (``cells[0]``, c_{-1}, set by the caller)."""
    T, B, I = x3.shape
    H = w_hh.shape[0]
    args = (x3, readonly(w_ih), readonly(w_hh), readonly(bias),
            _state2(h0, B, H, x3.dtype), h0 is not None, gates, cells, out, readonly(out))
    run_blocks(KS.lstm_forward_region, args, _blocks_for(T, B, I, H, 4))


def gru_forward(x3, w_ih, w_hh, bias_ih, bias_hh, h0, saved, out) -> None:
    """Fill ``out`` [T, B, H] with the GRU's hidden states and ``saved``
    [T, B, 4H] with r, z, n and ``h W_hn + b_hn`` per step."""
    T, B, I = x3.shape
    H = w_hh.shape[0]
    hw = np.empty((B, 3 * H), dtype=x3.dtype)
    args = (x3, readonly(w_ih), readonly(w_hh), readonly(bias_ih), readonly(bias_hh),
            _first_state(h0, B, H, x3.dtype), h0 is not None, hw, saved, out, readonly(out))
    run_blocks(KS.gru_forward_region, args, _blocks_for(T, B, I, H, 3))


# -------------------------------------------------------------- backwards
class _BPTT:
    """What the three backwards share: the shapes; the kernels' read-only
    views ``x3``, ``out3``, ``g3`` [T, B, .] and ``h0_seq`` [1, B, H] (an
    empty placeholder without h0); the row ``blocks``; the transposed
    weights; ``dh`` [B, H] (the carried hidden-state gradient, dh0 at the
    end); and the gradient outputs: ``dx`` [T, B, I] and the per-block
    partials of dW_ih, dW_hh and the biases, allocated only when needed
    (otherwise empty placeholders the kernel skips)."""

    def __init__(self, g, x, out, w_ih, w_hh, h0, batched, gates, needs, need_bhh=False):
        dtype = out.dtype
        T = x.shape[0]
        B = x.shape[1] if batched else 1
        I, H = x.shape[-1], out.shape[-1]
        self.T, self.B, self.H, self.x_shape = T, B, H, x.shape
        self.x3 = seq3(x, batched)
        self.out3 = readonly(out.reshape(T, B, H))
        self.g3 = readonly(g.reshape(T, B, H))
        self.h0_seq = readonly(h0.reshape(1, B, H)) if h0 is not None else _empty(3, dtype)
        self.blocks = _blocks_for(T, B, I, H, gates)
        self.dh = np.empty((B, H), dtype=dtype)
        self.w_hh_t = _transposed(w_hh)
        self.w_ih_t = _transposed(w_ih) if needs[0] else _empty(2, dtype)

        k, GH = len(self.blocks), gates * H

        def parts(need, shape):
            return np.zeros((k,) + (shape if need else (0,) * len(shape)), dtype=dtype)

        self.dx = np.empty((T, B, I), dtype=dtype) if needs[0] else np.empty((0, 0, 0), dtype=dtype)
        self.dw_ih = parts(needs[1], (I, GH))
        self.dw_hh = parts(needs[2], (H, GH))
        self.db_ih = parts(needs[3], (GH,))
        self.db_hh = parts(need_bhh, (GH,))
        self.flags = (needs[0], needs[1], needs[2], needs[3], need_bhh)

    def run(self, kernel, args) -> None:
        """Run a backward region kernel over the row blocks."""
        run_blocks(kernel, args, self.blocks)

    def results(self):
        """(dx at x's shape, dW_ih, dW_hh, db_ih, db_hh), None where not
        needed; the partials summed in block order."""
        need_dx, need_wih, need_whh, need_bih, need_bhh = self.flags
        return ((self.dx.reshape(self.x_shape) if need_dx else None),
                (par.combine(self.dw_ih) if need_wih else None),
                (par.combine(self.dw_hh) if need_whh else None),
                (par.combine(self.db_ih) if need_bih else None),
                (par.combine(self.db_hh) if need_bhh else None))


def rnn_backward(g, x, out, w_ih, w_hh, h0, batched, relu, needs, need_h0):
    """Backpropagation through time of the RNN: ``(dx, dW_ih, dW_hh, dbias,
    dh0)``, None where ``needs`` (x, w_ih, w_hh, bias) is False; ``dh0``
    [B, H] is filled when ``need_h0``."""
    s = _BPTT(g, x, out, w_ih, w_hh, h0, batched, 1, needs)
    dpre = scratch("rnn_dpre", (s.T, s.B, s.H), out.dtype)
    s.run(KS.rnn_backward_region,
          (s.out3, s.g3, s.w_hh_t, relu, dpre, readonly(dpre), s.dh, need_h0, s.x3, s.h0_seq,
           h0 is not None, s.w_ih_t, s.dx, s.dw_ih, s.dw_hh, s.db_ih, s.flags))
    return s.results()[:4] + (s.dh,)


def lstm_backward(g, x, out, w_ih, w_hh, h0, gates, cells, dc_n, batched, needs, need_h0):
    """Backpropagation through time of the LSTM: ``(dx, dW_ih, dW_hh, dbias,
    dh0, dc0)``, None where ``needs`` (x, w_ih, w_hh, bias) is False; ``dh0``
    [B, H] is filled when ``need_h0``, ``dc0`` [B, H] always. ``dc_n``: the
    gradient of the final cell state (an output), or None (zeros)."""
    s = _BPTT(g, x, out, w_ih, w_hh, h0, batched, 4, needs)
    if dc_n is None:
        dc = np.zeros((s.B, s.H), dtype=out.dtype)
    else:
        dc = dc_n.reshape(-1, s.H).copy()  # carried in place by the kernel
    dg = scratch("lstm_dgates", (s.T, s.B, 4 * s.H), out.dtype)
    tc = np.empty((s.B, s.H), dtype=out.dtype)
    s.run(KS.lstm_backward_region,
          (gates, cells, s.g3, s.w_hh_t, dg, readonly(dg), s.dh, dc, tc, need_h0, s.x3, s.out3,
           s.h0_seq, h0 is not None, s.w_ih_t, s.dx, s.dw_ih, s.dw_hh, s.db_ih, s.flags))
    return s.results()[:4] + (s.dh, dc)


def gru_backward(g, x, out, w_ih, w_hh, h0, saved, batched, needs, need_h0):
    """Backpropagation through time of the GRU: ``(dx, dW_ih, dW_hh,
    dbias_ih, dbias_hh, dh0)``, None where ``needs`` (x, w_ih, w_hh, bias_ih,
    bias_hh) is False; ``dh0`` [B, H] is filled when ``need_h0``."""
    s = _BPTT(g, x, out, w_ih, w_hh, h0, batched, 3, needs, need_bhh=needs[4])
    h_first = _first_state(h0, s.B, s.H, out.dtype)
    dxp = scratch("gru_dx_gates", (s.T, s.B, 3 * s.H), out.dtype)
    dhp = scratch("gru_dh_gates", (s.T, s.B, 3 * s.H), out.dtype)
    dd = np.zeros((s.B, s.H), dtype=out.dtype)
    s.run(KS.gru_backward_region,
          (saved, s.out3, h_first, s.g3, s.w_hh_t, dxp, dhp, readonly(dxp), readonly(dhp), s.dh,
           dd, need_h0, s.x3, s.h0_seq, h0 is not None, s.w_ih_t, s.dx, s.dw_ih, s.dw_hh,
           s.db_ih, s.db_hh, s.flags))
    return s.results() + (s.dh,)
