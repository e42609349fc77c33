"""Run one kernel over a fixed split of row ranges on two or more cores.

Numba kernels are compiled ``nogil``, so Python threads can run them at once.
A caller splits its rows into ``k`` contiguous chunks with :func:`num_chunks`
and :func:`split` and hands ``fn(i, lo, hi)`` to :func:`run_chunks`, which
runs every chunk exactly once: on the calling thread and, concurrently, on a
small persistent pool of worker threads (created lazily, on first use; never
at ``import yscv``).

Determinism. ``k`` depends only on the work size (never on ``os.cpu_count()``
or on the load), and chunk ``i`` always covers the same rows, so a kernel
whose chunk results are combined in chunk order (partial sums added as
``part[0] + part[1] + ...``, see :func:`combine`) gives the same bits on
every machine and every run, whichever thread ran which chunk. Threads claim
the next unclaimed chunk from a per-call counter, so a busy core (another
process, a spinning BLAS thread) only shifts work to the other threads.

Cost. Handing chunks to a sleeping worker costs ~20 us of wake-up latency,
plus GIL hand-overs when chunks end (~30-50 us per call measured), so callers
split only from a measured size (a ``grain`` of work per chunk, at the call
sites in ``yscv/ops/norm.py``). On a one-core machine, or with
``YSCV_NUM_THREADS=1`` (``WORKERS == 0``), the chunks run in sequence on the
caller, with bit-identical results. The second core is only worth having
when it is idle: right after a multi-threaded NumPy matmul, OpenBLAS's own
worker keeps spinning on it for tens of milliseconds, and a split call then
measured 0-10% slower than a serial one (docs/ops/norm.md).

Thread safety. Each call has its own counter; the pool is shared. Two Python
threads calling ops at once both submit helper tasks to the pool and both
work on their own chunks: if the pool is busy with the other call, a caller
runs all its chunks itself and withdraws its helper task before it starts
(``Future.cancel``), so no call ever waits for a task that has not begun.
Kernels must not call :func:`run_chunks` themselves (they do not).
"""
from __future__ import annotations

import os
import threading

#: at most this many chunks per call (fixed, machine-independent)
MAX_CHUNKS = 4


def _threads() -> int:
    """Threads to use: ``YSCV_NUM_THREADS`` if set, else the usable cores."""
    env = os.environ.get("YSCV_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
            if n >= 1:
                return n
        except ValueError:
            pass
        import warnings

        warnings.warn(f"YSCV_NUM_THREADS={env!r} is not an integer >= 1; ignored",
                      RuntimeWarning, stacklevel=2)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: helper threads besides the caller (``YSCV_NUM_THREADS`` - 1, or the cores
#: - 1, at most MAX_CHUNKS - 1); 0 runs the chunks in sequence on the caller,
#: with the same results. Fixed at import; tests may patch it.
WORKERS = max(0, min(_threads(), MAX_CHUNKS) - 1)

_pool = None
_pool_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _pool, _pool_lock
    _pool = None                      # the parent's threads do not exist in the child
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _get_pool():
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(max_workers=max(1, WORKERS),
                                           thread_name_prefix="yscv-rows")
    return _pool


def num_chunks(rows: int, work: int, grain: int) -> int:
    """Chunks for ``rows`` rows holding ``work`` units in all: one per whole
    ``grain`` of work, at least 1, at most :data:`MAX_CHUNKS` and ``rows``.
    A function of the sizes only."""
    return max(1, min(MAX_CHUNKS, rows, work // grain))


def split(rows: int, chunks: int) -> list:
    """``chunks`` contiguous near-equal ``(lo, hi)`` ranges covering ``range(rows)``."""
    return [(rows * i // chunks, rows * (i + 1) // chunks) for i in range(chunks)]


class _Calls:
    """Per-call state: the next unclaimed chunk, and a stop flag set on error."""

    __slots__ = ("fn", "ranges", "next", "stop", "lock")

    def __init__(self, fn, ranges):
        self.fn = fn
        self.ranges = ranges
        self.next = 0
        self.stop = False
        self.lock = threading.Lock()

    def work(self) -> None:
        """Run unclaimed chunks until none is left (or another thread failed)."""
        ranges = self.ranges
        n = len(ranges)
        while True:
            with self.lock:
                i = self.next
                if self.stop or i >= n:
                    return
                self.next = i + 1
            lo, hi = ranges[i]
            try:
                self.fn(i, lo, hi)
            except BaseException:
                self.stop = True
                raise


def run_chunks(fn, ranges) -> None:
    """Call ``fn(i, lo, hi)`` once for every ``(lo, hi) = ranges[i]``,
    concurrently when there are several chunks and more than one core; returns
    when all are done. The first exception raised by a chunk (the caller's
    own first) propagates after every chunk in flight has finished."""
    k = len(ranges)
    if k <= 1 or WORKERS <= 0:
        for i, (lo, hi) in enumerate(ranges):
            fn(i, lo, hi)
        return
    calls = _Calls(fn, ranges)
    futures = []
    try:
        pool = _get_pool()
        for _ in range(min(WORKERS, k - 1)):
            futures.append(pool.submit(calls.work))
    except RuntimeError:   # interpreter shutting down: no new threads, run here
        pass
    err = None
    try:
        calls.work()
    except BaseException as e:  # noqa: BLE001 -- re-raised below, after the helpers
        err = e
    for f in futures:
        if f.cancel():         # never started: the chunks are all claimed already
            continue
        try:
            f.result()
        except BaseException as e:  # noqa: BLE001
            if err is None:
                err = e
    if err is not None:
        raise err


def combine(parts):
    """Sum of the chunk partials ``parts[0] + parts[1] + ...`` along axis 0,
    added in index order (a fixed order: the same bits on every machine)."""
    if len(parts) == 1:
        return parts[0]
    out = parts[0] + parts[1]
    for p in parts[2:]:
        out += p
    return out
