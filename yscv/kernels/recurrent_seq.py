"""Whole-sequence recurrent kernels over a block of batch rows.

Batch rows never interact in an RNN, LSTM or GRU: each row's recurrence
depends only on its own input and state. The ops layer therefore splits the
batch into row blocks ``[b0, b1)`` and runs one call of these kernels per
block, on separate threads (yscv/compute/regions.py): the whole time loop runs
inside one nogil call per block, with no synchronisation between steps and
no data shared between threads but the (read-only) weights.

Per step, for the rows of the block: the input projection ``x_t @ w_ih`` and
the recurrent product ``h_{t-1} @ w_hh`` with the register-blocked GEMM tiles
of yscv/kernels/gemm.py, then the gate math row by row
(yscv/kernels/recurrent.py). Backward runs the same loop from ``T - 1`` down
to 0 with ``dG_{t+1} @ w_hh^T`` (``w_hh^T`` passed transposed), then
`param_grads_rows` adds the block's share of the weight and bias
gradients into its own partial arrays (the caller sums the blocks' partials
in block order) and writes the block's rows of ``dx``.

Shapes: ``x[T, B, I]``, hidden states ``out[T, B, H]``, ``w_ih[I, G*H]``,
``w_hh[H, G*H]``; ``h0[B, H]`` is read only when ``has_h0``. Every array is
C-contiguous and of one float dtype. Every operand a kernel only reads is a
read-only array (arrays it also writes come twice: writeable, and as a
read-only ``*_ro`` view of the same memory for the reads), so each GEMM
tile compiles for one set of argument types. Results are the same bits whatever the
row blocks and the threads that run them (the GEMM tiles sum in a fixed
order; partial sums are per block, and the blocks depend only on the sizes).
"""
from __future__ import annotations

from ._jit import jit
from .gemm import matmul_add_rows, matmul_rows, matmul_tn_steps
from .sync import region_chunks
from .recurrent import (gru_cell_backward, gru_cell_forward, lstm_cell_backward,
                        lstm_cell_forward, rnn_cell_backward, rnn_cell_forward)


# -------------------------------------------------------------- forwards
@jit(inline="always")
def _step_products(x, w_ih, w_hh, h0, has_h0, out_ro, t, dest, b0, b1):
    """Rows ``[b0, b1)`` of ``dest = x_t @ w_ih + h_{t-1} @ w_hh`` (the
    recurrent term from ``out_ro[t-1]``, or ``h0`` at step 0 when there is one)."""
    matmul_rows(x[t], w_ih, dest, b0, b1)
    if t > 0:
        matmul_add_rows(out_ro[t - 1], w_hh, dest, b0, b1)
    elif has_h0:
        matmul_add_rows(h0, w_hh, dest, b0, b1)


@jit
def rnn_forward_rows(x, w_ih, w_hh, bias, h0, has_h0, relu, out, out_ro, b0, b1):
    """Rows ``[b0, b1)`` of ``out[t] = act(x_t w_ih + bias + h_{t-1} w_hh)``."""
    for t in range(x.shape[0]):
        ot = out[t]
        _step_products(x, w_ih, w_hh, h0, has_h0, out_ro, t, ot, b0, b1)
        for b in range(b0, b1):
            rnn_cell_forward(ot[b], bias, relu)


@jit
def lstm_forward_rows(x, w_ih, w_hh, bias, h0, has_h0, gates, cells, out, out_ro, b0, b1):
    """Rows ``[b0, b1)`` of an LSTM. ``cells[0]`` holds c_{-1} (c0 or zeros)
    on entry; writes the gate activations ``gates[T, B, 4H]``, the cell
    states ``cells[1:]`` and the hidden states ``out``."""
    for t in range(x.shape[0]):
        gt = gates[t]
        _step_products(x, w_ih, w_hh, h0, has_h0, out_ro, t, gt, b0, b1)
        ct, cn, ot = cells[t], cells[t + 1], out[t]
        for b in range(b0, b1):
            lstm_cell_forward(gt[b], bias, ct[b], cn[b], ot[b])


@jit
def gru_forward_rows(x, w_ih, w_hh, b_ih, b_hh, h_first, has_h0, hw, saved, out, out_ro,
                     b0, b1):
    """Rows ``[b0, b1)`` of a GRU. ``h_first[B, H]`` is h0 (zeros when there
    is none: ``has_h0`` False skips its product); ``hw[B, 3H]`` is scratch for
    ``h_{t-1} w_hh``. Writes ``saved[T, B, 4H]`` (r, z, n, ``h W_hn + b_hn``)
    and the hidden states ``out``."""
    G3 = hw.shape[1]
    zero = hw.dtype.type(0)
    for t in range(x.shape[0]):
        st = saved[t]
        _project_into(x[t], w_ih, st, hw, b0, b1)   # x_t w_ih into the first 3H columns
        hp = out_ro[t - 1] if t > 0 else h_first
        if t > 0 or has_h0:
            matmul_rows(hp, w_hh, hw, b0, b1)
        else:
            for b in range(b0, b1):
                for j in range(G3):
                    hw[b, j] = zero
        ot = out[t]
        for b in range(b0, b1):
            gru_cell_forward(st[b], hw[b], b_ih, b_hh, hp[b], ot[b])


@jit(inline="always")
def _project_into(xt, w_ih, st, buf, b0, b1):
    """``st[b, :3H] = xt[b] @ w_ih`` for the rows ``[b0, b1)``, through
    ``buf[B, 3H]`` (the GEMM writes whole rows; ``st`` rows are 4H long)."""
    matmul_rows(xt, w_ih, buf, b0, b1)
    G3 = buf.shape[1]
    for b in range(b0, b1):
        s = st[b]
        r = buf[b]
        for j in range(G3):
            s[j] = r[j]


# ------------------------------------------------------------- backwards
@jit(inline="always")
def _seed_dh(gout_t, dh, b0, b1):
    """``dh[b] = gout_t[b]`` for the rows of the block."""
    for b in range(b0, b1):
        src = gout_t[b]
        dst = dh[b]
        for j in range(dst.shape[0]):
            dst[j] = src[j]


@jit(inline="always")
def rnn_backward_rows(out, gout, w_hh_t, relu, dpre, dpre_ro, dh, b0, b1, need_dh0):
    """Rows ``[b0, b1)`` of the RNN's BPTT: writes the pre-activation
    gradients ``dpre[T, B, H]`` (``dpre_ro`` a read-only view of it); with
    ``need_dh0``, ``dh`` holds dL/dh0 on return (else it is scratch).
    ``w_hh_t`` is ``w_hh.T`` ([H, H])."""
    T = out.shape[0]
    for t in range(T - 1, -1, -1):
        _seed_dh(gout[t], dh, b0, b1)
        if t < T - 1:
            matmul_add_rows(dpre_ro[t + 1], w_hh_t, dh, b0, b1)
        ot, dt = out[t], dpre[t]
        for b in range(b0, b1):
            rnn_cell_backward(ot[b], dh[b], relu, dt[b])
    if need_dh0:
        matmul_rows(dpre_ro[0], w_hh_t, dh, b0, b1)


@jit(inline="always")
def lstm_backward_rows(gates, cells, gout, w_hh_t, dgates, dgates_ro, dh, dc, tc, b0, b1,
                       need_dh0):
    """Rows ``[b0, b1)`` of the LSTM's BPTT: writes the pre-activation gate
    gradients ``dgates[T, B, 4H]`` (``dgates_ro`` a read-only view of it).
    ``dc[B, H]`` holds on entry the gradient that reaches the final cell
    state c_{T-1} from outside the op (zeros unless the final cell is an
    output, ``g.lstm(..., return_cell=True)``): the last step adds it to the
    cell gradient coming through h_{T-1}. On return ``dc`` holds dL/dc0.
    With ``need_dh0``, ``dh`` holds dL/dh0 (else it is scratch); ``tc[B, H]``
    is scratch. ``w_hh_t`` is ``w_hh.T`` ([4H, H])."""
    T = gates.shape[0]
    for t in range(T - 1, -1, -1):
        _seed_dh(gout[t], dh, b0, b1)
        if t < T - 1:
            matmul_add_rows(dgates_ro[t + 1], w_hh_t, dh, b0, b1)
        gt, ct, cn, dg = gates[t], cells[t], cells[t + 1], dgates[t]
        for b in range(b0, b1):
            lstm_cell_backward(gt[b], ct[b], cn[b], dh[b], dc[b], tc[b], dg[b])
    if need_dh0:
        matmul_rows(dgates_ro[0], w_hh_t, dh, b0, b1)


@jit(inline="always")
def gru_backward_rows(saved, out, h_first, gout, w_hh_t, dxp, dhp, dhp_ro, dh, dd, b0, b1,
                      need_dh0):
    """Rows ``[b0, b1)`` of the GRU's BPTT: writes the input-side gate
    gradients ``dxp[T, B, 3H]`` and the recurrent-side ones ``dhp``
    (``dhp_ro`` a read-only view of it).
    ``dd[B, H]`` (the direct path h_{t-1} -> h_t) must be zero on entry;
    with ``need_dh0``, ``dh`` holds dL/dh0 on return (else it is scratch).
    ``w_hh_t`` is ``w_hh.T`` ([3H, H])."""
    T = saved.shape[0]
    for t in range(T - 1, -1, -1):
        _seed_dh(gout[t], dh, b0, b1)
        if t < T - 1:
            matmul_add_rows(dhp_ro[t + 1], w_hh_t, dh, b0, b1)
        hp = out[t - 1] if t > 0 else h_first
        st, dx, dr = saved[t], dxp[t], dhp[t]
        for b in range(b0, b1):
            gru_cell_backward(st[b], hp[b], dh[b], dd[b], dx[b], dr[b])
    if need_dh0:
        matmul_rows(dhp_ro[0], w_hh_t, dh, b0, b1)
        for b in range(b0, b1):
            for j in range(dh.shape[1]):
                dh[b, j] = dh[b, j] + dd[b, j]


@jit
def _column_sums(d, acc, b0, b1):
    """``acc += sum_t sum_{b in [b0, b1)} d[t, b]``, in (t, b) order."""
    for t in range(d.shape[0]):
        for b in range(b0, b1):
            row = d[t, b]
            for j in range(acc.shape[0]):
                acc[j] = acc[j] + row[j]


@jit(inline="always")
def param_grads_rows(x, out, h0_seq, has_h0, dxp, dhp, w_ih_t, dx, dw_ih, dw_hh,
                     db_ih, db_hh, b0, b1, need_dx, need_dw_ih, need_dw_hh,
                     need_db_ih, need_db_hh):
    """The block's share of the input and parameter gradients.

    ``dxp[T, B, G*H]`` are the input-side pre-activation gradients (they feed
    ``dx``, ``dw_ih``, ``db_ih``), ``dhp`` the recurrent-side ones (``dw_hh``,
    ``db_hh``; the same array as ``dxp`` for RNN and LSTM), both read-only. ``h0_seq`` is h0
    as ``[1, B, H]`` (read only when ``has_h0``); ``w_ih_t`` is ``w_ih.T``.
    Writes rows ``[b0, b1)`` of ``dx[T, B, I]`` and ADDS the block's terms
    to the zero-initialised partials ``dw_ih[I, G*H]``, ``dw_hh[H, G*H]``,
    ``db_ih[G*H]``, ``db_hh[G*H]``.
    """
    T = x.shape[0]
    # Numba types a constant argument by its value and compiles the callee
    # once per value (0 and 1 would be separate specialisations of
    # matmul_tn_steps, each a long compile): the step offsets are
    # run-time integers instead.
    zero = b0 - b0
    one = zero + 1
    if need_dx:
        for t in range(T):
            matmul_rows(dxp[t], w_ih_t, dx[t], b0, b1)
    if need_dw_ih:
        matmul_tn_steps(x, dxp, dw_ih, zero, T, zero, b0, b1, zero, dw_ih.shape[0])
    if need_dw_hh:
        if has_h0:
            matmul_tn_steps(h0_seq, dhp, dw_hh, zero, one, zero, b0, b1, zero, dw_hh.shape[0])
        matmul_tn_steps(out, dhp, dw_hh, one, T, one, b0, b1, zero, dw_hh.shape[0])
    if need_db_ih:
        _column_sums(dxp, db_ih, b0, b1)
    if need_db_hh:
        _column_sums(dhp, db_hh, b0, b1)


# ------------------------------------------------------- region kernels
# The backward rows and param_grads_rows are inlined into the backward
# region kernels: as called functions each compiled on its own and then again
# inside the region kernel, which links and re-optimises its callees (~0.45 s
# of an LSTM program's cold start, run time unchanged). The forward rows stay
# called functions: inlined, the recurrent layers ran ~3% slower (the merged
# step loop optimised worse); docs/engine.md, "Cold start".
# One call per thread (yscv/compute/regions.py): each claims blocks of batch
# rows (block c is rows [bounds[c], bounds[c + 1])) until none is left. The
# backward regions also add each block's parameter-gradient terms to the
# block's own partials (index c).
@jit
def rnn_forward_region(x, w_ih, w_hh, bias, h0, has_h0, relu, out, out_ro, bounds, st):
    for c in region_chunks(st, bounds.shape[0] - 1):
        rnn_forward_rows(x, w_ih, w_hh, bias, h0, has_h0, relu, out, out_ro,
                         bounds[c], bounds[c + 1])


@jit
def lstm_forward_region(x, w_ih, w_hh, bias, h0, has_h0, gates, cells, out, out_ro, bounds, st):
    for c in region_chunks(st, bounds.shape[0] - 1):
        lstm_forward_rows(x, w_ih, w_hh, bias, h0, has_h0, gates, cells, out, out_ro,
                          bounds[c], bounds[c + 1])


@jit
def gru_forward_region(x, w_ih, w_hh, b_ih, b_hh, h_first, has_h0, hw, saved, out, out_ro,
                       bounds, st):
    for c in region_chunks(st, bounds.shape[0] - 1):
        gru_forward_rows(x, w_ih, w_hh, b_ih, b_hh, h_first, has_h0, hw, saved, out, out_ro,
                         bounds[c], bounds[c + 1])


@jit
def rnn_backward_region(out, gout, w_hh_t, relu, dpre, dpre_ro, dh, need_dh0,
                        x, h0_seq, has_h0, w_ih_t, dx, dw_ih, dw_hh, db, flags, bounds, st):
    for c in region_chunks(st, bounds.shape[0] - 1):
        b0, b1 = bounds[c], bounds[c + 1]
        rnn_backward_rows(out, gout, w_hh_t, relu, dpre, dpre_ro, dh, b0, b1, need_dh0)
        param_grads_rows(x, out, h0_seq, has_h0, dpre_ro, dpre_ro, w_ih_t, dx, dw_ih[c],
                         dw_hh[c], db[c], db[c], b0, b1, flags[0], flags[1], flags[2],
                         flags[3], flags[4])


@jit
def lstm_backward_region(gates, cells, gout, w_hh_t, dgates, dgates_ro, dh, dc, tc, need_dh0,
                         x, out, h0_seq, has_h0, w_ih_t, dx, dw_ih, dw_hh, db, flags,
                         bounds, st):
    for c in region_chunks(st, bounds.shape[0] - 1):
        b0, b1 = bounds[c], bounds[c + 1]
        lstm_backward_rows(gates, cells, gout, w_hh_t, dgates, dgates_ro, dh, dc, tc, b0, b1,
                           need_dh0)
        param_grads_rows(x, out, h0_seq, has_h0, dgates_ro, dgates_ro, w_ih_t, dx, dw_ih[c],
                         dw_hh[c], db[c], db[c], b0, b1, flags[0], flags[1], flags[2],
                         flags[3], flags[4])


@jit
def gru_backward_region(saved, out, h_first, gout, w_hh_t, dxp, dhp, dxp_ro, dhp_ro, dh, dd,
                        need_dh0, x, h0_seq, has_h0, w_ih_t, dx, dw_ih, dw_hh, db_ih, db_hh,
                        flags, bounds, st):
    for c in region_chunks(st, bounds.shape[0] - 1):
        b0, b1 = bounds[c], bounds[c + 1]
        gru_backward_rows(saved, out, h_first, gout, w_hh_t, dxp, dhp, dhp_ro, dh, dd, b0, b1,
                          need_dh0)
        param_grads_rows(x, out, h0_seq, has_h0, dxp_ro, dhp_ro, w_ih_t, dx, dw_ih[c],
                         dw_hh[c], db_ih[c], db_hh[c], b0, b1, flags[0], flags[1], flags[2],
                         flags[3], flags[4])
