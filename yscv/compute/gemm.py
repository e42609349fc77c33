"""2-D matrix products: NumPy's BLAS chosen by measurement, or yscv's GEMM tiles.

`dot` computes ``a @ b`` for the matmul op and its gradients. Products
below `BLAS_THREADED` multiply-adds (the per-node path of small layers)
go straight to ``np.dot`` after one size test. Larger ones follow the GEMM
policy (`yscv.runtime.set_gemm`):

* ``"auto"`` (default) and ``"fastest"``: the way chosen for the product's
  shape class by measurement on this machine (yscv/compute/gemm_choice.py:
  NumPy's BLAS on the operands as they are, or with a transposed operand
  copied to C order first, on the BLAS's threads or one; ``"fastest"``
  adds the tiles and roundings other than BLAS's);
* ``"blas"``: ``np.dot``, by the fixed thread rule below;
* ``"tiles"``: yscv's register-blocked tiles (yscv/kernels/gemm.py, the
  kernels the recurrent ops run inside their sequence loops), split over
  the cores as a region (yscv/compute/regions.py), for float32 operands,
  each C-contiguous or the transpose of a C-contiguous array (``x.T @ g``
  and ``g @ w.T`` of a backward), from `MIN_WORK` multiply-adds.
  Results narrower than `PAD_COLS` columns are computed on a
  zero-padded ``b`` and sliced (`tiles_dot`).

The thread rule: products of `BLAS_THREADED` up to `SMALL_WORK`
multiply-adds run on one OpenBLAS thread (see `SMALL_WORK`); "auto"
keeps it and measures only the layout.

Tile results differ from ``np.dot``'s in the last bits (another summation
order, fused multiply-adds); every element is summed by one thread in a
fixed order, so they are the same bits with one thread or two. Measured
with the BLAS a user has (docs/ops/linalg.md), the tiles lose to OpenBLAS
on the MLP and transformer shapes; they won only against OpenBLAS forced
onto its AVX2 kernels.
"""
from __future__ import annotations

import math

import numpy as np

from .. import runtime
from ..kernels import lazy
from . import gemm_choice
from . import regions as par
from .arrays import readonly

KG = lazy("gemm")

#: products below this many multiply-adds stay on np.dot (OpenBLAS runs
#: those on one thread; see the module docstring)
MIN_WORK = 1 << 18
#: narrower results are computed this many columns wide (zero-padded ``b``)
#: and sliced: a tile column needs a whole vector
PAD_COLS = 16
#: row blocks of a product split over the cores
BLOCKS = 4
#: OpenBLAS runs products from this many multiply-adds on on its threads
BLAS_THREADED = 1 << 18
#: NumPy products from BLAS_THREADED up to this many multiply-adds run on
#: one OpenBLAS thread: its threads gain little that small, and its woken
#: worker then spins on the second core for up to ~0.1 s, against yscv's
#: region helpers (the CNN step's linear layer, 32x2048 @ 2048x10, cost its
#: convolutions ~0.4 ms per step that way; docs/ops/conv.md). Smaller
#: products never wake a worker and skip the switch (the per-node path).
SMALL_WORK = 1 << 21
#: dtypes whose products are chosen by measurement (gemm_choice)
_MEASURED = (np.dtype(np.float32), np.dtype(np.float64))


def tiles_enabled() -> bool:
    """Whether `dot` may use the tiles: only under the "tiles" policy
    ("auto" and "blas" use NumPy's BLAS; see the module docstring)."""
    return runtime.get_gemm() == "tiles"


def _row_bounds(rows: int) -> np.ndarray:
    """`BLOCKS` blocks of rows, each a multiple of 4 but the last."""
    tiles = rows // 4
    k = max(1, min(BLOCKS, tiles))
    bounds = [4 * (tiles * i // k) for i in range(k)] + [rows]
    return np.array(bounds, dtype=np.int64)


def _c_operand(m: np.ndarray):
    """``m`` as a C-contiguous array: itself, or a copy of its transpose made
    with the in-register transpose; None if neither layout applies."""
    if m.flags.c_contiguous:
        return readonly(m)
    if m.T.flags.c_contiguous:
        out = np.empty(m.shape, dtype=m.dtype)
        KG.transpose_into(readonly(m.T), out)
        return readonly(out)
    return None


def _tiles_into(a: np.ndarray, bm: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ bm`` on the tiles, row blocks over the cores (a, bm,
    out C-contiguous float32)."""
    ar = readonly(a)
    bounds = _row_bounds(a.shape[0])
    par.run_region(lambda st: KG.matmul_region(ar, bm, out, bounds, st), len(bounds) - 1)


def _tiles_tn_add(x: np.ndarray, gm: np.ndarray, out: np.ndarray) -> None:
    """``out += x[:, :M].T @ gm`` on the tiles (x, gm, out C-contiguous float32)."""
    xr = readonly(x)
    bounds = _row_bounds(out.shape[0])
    par.run_region(lambda st: KG.matmul_tn_region(xr, gm, out, bounds, st), len(bounds) - 1)


def one_thread_work(work: int) -> bool:
    """Whether a product of ``work`` multiply-adds runs on one OpenBLAS
    thread: from `BLAS_THREADED` (below it OpenBLAS uses one anyway) up to
    `SMALL_WORK`. `dot` and the convolutions' im2col products
    (yscv/compute/conv.py) share the rule."""
    return BLAS_THREADED <= work < SMALL_WORK


#: multiply-adds per column block of `split_dot` (~0.1 ms on one core)
SPLIT_GRAIN = 1 << 22
#: column blocks of `split_dot` start at multiples of this (whole vectors)
SPLIT_ALIGN = 64


def split_dot(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = a @ b`` for 2-d ``a[M, K]``, ``b[K, N]`` (any strides
    BLAS takes), on one OpenBLAS thread per block of ``b``'s columns, the
    blocks split over yscv's region helpers (`regions.run_chunks`).

    For a product with few rows and many columns that would otherwise run on
    one thread: the data gradient ``g @ W^T`` of a convolution on a small
    map (yscv/compute/conv.py), whose two OpenBLAS threads would leave a
    worker spinning where the next region kernel runs. Each block packs its
    own columns of ``b`` (a disjoint part) and all of the small ``a``. The
    blocks depend on the shapes only (`regions.num_chunks` of
    `SPLIT_GRAIN`), so the bits are the same with one thread or two."""
    M, K = a.shape
    N = b.shape[1]
    blocks = par.num_chunks(max(1, N // SPLIT_ALIGN), M * K * N, SPLIT_GRAIN)
    runtime.hold_one_blas_thread(True)
    try:
        if blocks == 1 or par.workers() == 0:
            for i in range(blocks):
                _column_block(a, b, out, N, blocks, i)
            return
        par.run_chunks(lambda i: _column_block(a, b, out, N, blocks, i), blocks, M * K * N)
    finally:
        runtime.hold_one_blas_thread(False)


def stacked_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)`` for stacks ``(..., M, K) @ (..., K, N)`` of one
    batch shape. When every element's product is below `BLAS_THREADED`
    (OpenBLAS runs each on one thread) and the stack holds at least two
    `SPLIT_GRAIN` of work, chunks of the batch run over yscv's region
    helpers (`regions.run_chunks`; NumPy's matmul releases the GIL over its
    loop): vmap's per-sample products, ``[64, 72, 196] @ [64, 196, 16]``,
    ran on one core. Each element is NumPy's same product either way: the
    same bits."""
    lead = a.shape[:-2]
    if len(lead) == 0 or lead != b.shape[:-2] or a.dtype != b.dtype:
        return np.matmul(a, b)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    rows = math.prod(lead)
    each = m * k * n
    chunks = par.num_chunks(rows, rows * each, SPLIT_GRAIN)
    if chunks == 1 or each >= BLAS_THREADED or par.workers() == 0:
        return np.matmul(a, b)
    a3 = a.reshape((rows, m, k))
    b3 = b.reshape((rows, k, n))
    out = np.empty(lead + (m, n), dtype=np.result_type(a, b))
    o3 = out.reshape((rows, m, n))
    cuts = [rows * i // chunks for i in range(chunks + 1)]

    def chunk(i):
        lo, hi = cuts[i], cuts[i + 1]
        np.matmul(a3[lo:hi], b3[lo:hi], out=o3[lo:hi])

    par.run_chunks(chunk, chunks, rows * each)
    return out


def _column_block(a, b, out, n: int, blocks: int, i: int) -> None:
    """Block ``i`` of `split_dot`: columns ``[c0, c1)``, ``c0`` a multiple of
    `SPLIT_ALIGN` (the last block takes the rest)."""
    units = n // SPLIT_ALIGN
    c0 = SPLIT_ALIGN * (units * i // blocks)
    c1 = n if i == blocks - 1 else SPLIT_ALIGN * (units * (i + 1) // blocks)
    np.matmul(a, b[:, c0:c1], out=out[:, c0:c1])


def _small_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.dot(a, b)`` on one OpenBLAS thread (see `SMALL_WORK`)."""
    runtime.hold_one_blas_thread(True)
    try:
        return np.dot(a, b)
    finally:
        runtime.hold_one_blas_thread(False)


def tiles_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` on yscv's tiles for float32 operands, each C-contiguous or
    the transpose of a C-contiguous array (``np.dot`` otherwise); results
    narrower than `PAD_COLS` columns via a zero-padded ``b``."""
    M, K = a.shape
    N = b.shape[1]
    if not (a.dtype == np.float32 and b.dtype == np.float32) or M * K * N == 0:
        return np.dot(a, b)
    if N < PAD_COLS:                   # a narrow result: pad b to one vector of columns
        bp = np.zeros((K, PAD_COLS), dtype=np.float32)
        bp[:, :N] = b
        return tiles_dot(a, bp)[:, :N].copy()
    if a.flags.c_contiguous:
        bm = _c_operand(b)
        if bm is not None:
            c = np.empty((M, N), dtype=np.float32)
            _tiles_into(a, bm, c)
            return c
    elif a.T.flags.c_contiguous:       # a = x.T: the weight-gradient form x.T @ g
        gm = _c_operand(b)
        if gm is not None:
            c = np.zeros((M, N), dtype=np.float32)
            _tiles_tn_add(a.T, gm, c)
            return c
    return np.dot(a, b)


gemm_choice.register("tiles", tiles_dot)


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for 2-d ``a[M, K]``, ``b[K, N]`` (see the module docstring)."""
    if not (a.ndim == 2 and b.ndim == 2):
        return np.dot(a, b)
    M, K = a.shape
    N = b.shape[1]
    work = M * K * N
    if work < BLAS_THREADED and work < MIN_WORK:  # small: np.dot, the per-node path
        return np.dot(a, b)
    policy = runtime.get_gemm()
    if policy == "tiles":
        if work >= MIN_WORK and a.dtype == np.float32 and b.dtype == np.float32:
            return tiles_dot(a, b)
    elif (policy != "blas" and work >= BLAS_THREADED and a.dtype == b.dtype
          and a.dtype in _MEASURED):
        return gemm_choice.choose(a, b, work < SMALL_WORK)(a, b)
    if one_thread_work(work):
        return _small_dot(a, b)
    return np.dot(a, b)
