"""Run a kernel's chunks on two or more cores: *regions*.

A caller splits its rows into ``k`` contiguous chunks (`num_chunks`,
`split`, `bounds`) and calls `run_region` with
``call(state)``, a call of a ``*region`` ``kernel*``: a Numba kernel that claims chunk
indices from ``state`` (yscv/kernels/sync.py) and runs each one, until none
is left. The caller runs ``call`` itself and, at the same time, so do the
pool's helper threads (created lazily, on first use; never at ``import
yscv``); every chunk runs exactly once, whichever thread claims it.

Determinism. ``k`` depends only on the work size (never on ``os.cpu_count()``
or on the load), and chunk ``i`` always covers the same rows, so a kernel
whose chunk results are combined in chunk order (partial sums added as
``part[0] + part[1] + ...``, see `combine`) gives the same bits on
every machine and every run, whichever thread ran which chunk.

Cost. Idle virtual CPUs halt at once, so a thread that sleeps, even briefly
(a blocking queue, a GIL it waits for), is slow to wake, and a pool of
sleeping Python threads cost more per call than a norm kernel's chunk is
worth (figures in docs/engine.md, "Two cores"). A region is cheap: a
helper spins (politely: ``pause``, and ``sched_yield`` every 32 rounds, so an
OpenBLAS worker or another process gets the core at once) for about
`SPIN_ROUNDS` after its last region before it sleeps; it takes the GIL
only once the caller is inside its kernel (so it never waits for it); the
caller waits for the helpers in nogil code and takes the GIL back only when
they are all back in theirs. Details in yscv/kernels/sync.py.

On a one-core machine, or with one thread (``yscv.set_num_threads(1)`` or
``YSCV_NUM_THREADS=1``: `workers` is 0),
regions run on the caller alone, with bit-identical results.

Thread safety. One region runs in the pool at a time; a second Python
thread that starts a region meanwhile runs all of its chunks itself (with
its own state array). Kernels must not start regions themselves (they do
not).

Fork. The child starts with no pool (its threads are not copied) and makes
a new one on first use. Another thread of the parent may have held one of
the pool's locks at the moment of the fork (every region takes the
condition briefly); the child inherits that lock held, with no thread to
release it. So the child replaces every lock of the module and of the
parent's pool (`_reset_after_fork`), drops the parent's pool from its
exit hooks, and `_Pool.close` returns at once in a process other than
the one that made the pool, and otherwise waits for the condition at most
`CLOSE_TIMEOUT` seconds: exit never blocks forever on a lock.
"""
from __future__ import annotations

import atexit
import os
import threading

import numpy as np

from .. import runtime
from ..kernels import lazy

S = lazy("sync")

#: at most this many chunks per call (fixed, machine-independent)
MAX_CHUNKS = 4
#: multiply-adds from which a region stops OpenBLAS's spinning workers
#: first: ~0.3 ms on one core, several times what stopping a worker
#: (~30-50 us) and starting it again at the next threaded product cost
STOP_BLAS_WORK = 1 << 23
#: spin rounds of an idle helper before it sleeps (about a millisecond; yscv/kernels/sync.py)
SPIN_ROUNDS = 20_000
#: seconds the exit hook waits for the pool's condition (another thread may
#: hold it) and for each helper to stop; then it gives up (they are daemons)
CLOSE_TIMEOUT = 1.0


def workers() -> int:
    """Helper threads besides the caller: ``runtime.kernel_threads() - 1``,
    at most ``MAX_CHUNKS - 1``; 0 runs the chunks in sequence on the caller,
    with the same results."""
    return max(0, min(runtime.kernel_threads(), MAX_CHUNKS) - 1)


class _Pool:
    """Helper threads sharing one region state array (see yscv/kernels/sync.py)."""

    def __init__(self, helpers: int):
        self.pid = os.getpid()              # the process whose threads these are
        self.state = np.zeros(S.STATE_LEN, dtype=np.int64)
        self.lock = threading.Lock()        # one region at a time
        self.cond = threading.Condition()   # sleeping helpers wait here for a region
        self.sig = 0                        # last region published (guarded by cond)
        self.sleeping = 0
        self.call = None
        self.errors = []
        self.closing = False
        self.threads = []
        for n in range(helpers):
            t = threading.Thread(target=self._helper, name=f"yscv-helper-{n}", daemon=True)
            t.start()
            self.threads.append(t)

    def _helper(self) -> None:
        st = self.state
        last, joined = 0, False
        fp_seen = 0                     # runtime.set_flush_denormal calls applied here
        while not self.closing:
            last, joined = S.region_step(st, S.OP_WAIT, last, joined, SPIN_ROUNDS)
            if joined:
                if fp_seen != runtime.fp_generation():
                    fp_seen = runtime.fp_generation()
                    runtime.apply_flush_denormal()
                try:
                    self.call(st)
                except BaseException as e:  # noqa: BLE001 -- raised by the caller
                    self.errors.append(e)
                continue
            with self.cond:                 # nothing for a while: sleep until a newer region
                self.sleeping += 1
                while self.sig <= last and not self.closing:
                    # a timeout, so a helper asleep when close() could not
                    # take the condition (no notify) still sees `closing`
                    self.cond.wait(CLOSE_TIMEOUT)
                self.sleeping -= 1

    def close(self) -> None:
        """Stop the helpers (at interpreter exit): none may still be running
        compiled code when the interpreter tears Numba down.

        Never blocks forever: in a forked child (another pid) the helpers do
        not exist and there is nothing to do; otherwise the condition is
        waited for at most `CLOSE_TIMEOUT` seconds, and each helper as
        long. The flags are set before the condition is taken, so a helper
        that checks them under the condition either sees them or is already
        waiting when ``notify_all`` comes; if the condition cannot be had,
        ``EXIT`` still ends every spin, and a helper asleep in ``wait`` runs
        no compiled code and wakes within `CLOSE_TIMEOUT` to see
        ``closing``."""
        if self.pid != os.getpid():
            return
        self.closing = True
        self.state[S.EXIT] = 1
        if self.cond.acquire(timeout=CLOSE_TIMEOUT):
            try:
                self.cond.notify_all()
            finally:
                self.cond.release()
        for t in self.threads:
            if t is not threading.current_thread():
                t.join(timeout=CLOSE_TIMEOUT)

    def run(self, call) -> None:
        st = self.state
        with self.cond:
            self.sig += 1
            self.call = call
            S.region_step(st, S.OP_OPEN, self.sig, False, 0)
            if self.sleeping:
                self.cond.notify_all()
        try:
            call(st)
        finally:
            S.region_step(st, S.OP_CLOSE, 0, False, 0)
            self.call = None
        if self.errors:
            err = self.errors[0]
            self.errors.clear()
            raise err


_pool = None
_pool_lock = threading.Lock()


def _reset_after_fork() -> None:
    """In a forked child: forget the parent's pool (its threads do not
    exist here) and replace every lock the child may have inherited held by
    a thread of the parent that is not copied."""
    global _pool, _pool_lock
    old, _pool = _pool, None
    _pool_lock = threading.Lock()
    if old is not None:
        old.lock = threading.Lock()
        old.cond = threading.Condition()
        old.closing = True
        old.threads = []
        try:
            atexit.unregister(old.close)  # the child's own pool registers its own hook
        except Exception:  # noqa: BLE001 -- a fork hook must not fail
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _get_pool(helpers: int):
    """The pool, made (or remade after a thread-count change) with ``helpers``."""
    global _pool
    pool = _pool
    if pool is None or len(pool.threads) != helpers:
        with _pool_lock:
            pool = _pool
            if pool is None or len(pool.threads) != helpers:
                if pool is not None:
                    with pool.lock:       # no region of the old pool is running
                        pool.close()
                    atexit.unregister(pool.close)
                pool = _Pool(helpers)
                atexit.register(pool.close)
                _pool = pool
    return pool


def num_chunks(rows: int, work: int, grain: int) -> int:
    """Chunks for ``rows`` rows holding ``work`` units in all: one per whole
    ``grain`` of work, at least 1, at most `MAX_CHUNKS` and ``rows``.
    A function of the sizes only."""
    return max(1, min(MAX_CHUNKS, rows, work // grain))


def split(rows: int, chunks: int) -> list:
    """``chunks`` contiguous near-equal ``(lo, hi)`` ranges covering ``range(rows)``."""
    return [(rows * i // chunks, rows * (i + 1) // chunks) for i in range(chunks)]


def bounds(ranges) -> np.ndarray:
    """Contiguous ``(lo, hi)`` ranges as the int64 array the region kernels
    take: chunk ``i`` is ``[b[i], b[i + 1])``."""
    return np.array([lo for lo, _ in ranges] + [ranges[-1][1]], dtype=np.int64)


def new_state() -> np.ndarray:
    """A private region state (one thread runs every chunk)."""
    return np.zeros(S.STATE_LEN, dtype=np.int64)


def run_region(call, chunks: int, work: int = 0) -> None:
    """Run ``call(state)`` -- a region kernel over ``chunks`` chunks -- on the
    caller and, concurrently, on the pool's helpers; return when every chunk
    is done. An exception raised by ``call`` in a helper is raised here.

    ``work``: the region's multiply-adds, given by the convolutions and the
    products of yscv/compute/gemm.py; from `STOP_BLAS_WORK` on, OpenBLAS's
    spinning workers are stopped first (`_only_own_threads`; docs/engine.md,
    "Two cores")."""
    helpers = workers()
    if chunks <= 1 or helpers <= 0:
        call(new_state())
        return
    try:
        pool = _get_pool(helpers)
    except RuntimeError:              # interpreter shutting down: no new threads
        call(new_state())
        return
    if not pool.lock.acquire(blocking=False):
        call(new_state())             # the pool runs another thread's region
        return
    try:
        if work >= STOP_BLAS_WORK and runtime.blas_workers_running() and _only_own_threads(pool):
            runtime.stop_blas_workers()   # spinning, they would take the helpers' cores
        pool.run(call)
    finally:
        pool.lock.release()


def run_chunks(fn, chunks: int, work: int = 0) -> None:
    """Run ``fn(i)`` for every ``i`` in ``range(chunks)``, on the caller and,
    concurrently, on the pool's helpers: a region whose chunks are Python
    calls of work that releases the GIL while it computes (a NumPy product
    on one OpenBLAS thread, yscv/compute/gemm.py's `split_dot`). Each
    participant claims chunk indices as a region kernel does, so chunk
    ``i`` is the same work whichever thread runs it. ``work``: as
    `run_region`'s."""
    def call(st):
        while True:
            i = S.region_step(st, S.OP_CLAIM, 0, False, 0)[0]
            if i >= chunks:
                return
            fn(i)

    run_region(call, chunks, work)


def _only_own_threads(pool) -> bool:
    """Whether every thread of the process besides the caller is one of
    yscv's (the pool's helpers; a parallel backward's threads, which run no
    region and no product while a region with helpers runs): then no other
    thread can be inside an OpenBLAS call, and `runtime.stop_blas_workers`
    is safe. A program with threads of its own keeps OpenBLAS's workers."""
    if threading.active_count() == 1 + len(pool.threads):
        return True
    me = threading.current_thread()
    return all(t is me or t.name.startswith(_OWN_THREADS) for t in threading.enumerate())


#: the names of yscv's own threads (this module's helpers, walk_parallel's)
_OWN_THREADS = ("yscv-helper-", "yscv-backward")


def combine(parts):
    """Sum of the chunk partials ``parts[0] + parts[1] + ...`` along axis 0,
    added in index order (a fixed order: the same bits on every machine)."""
    if len(parts) == 1:
        return parts[0]
    out = parts[0] + parts[1]
    for p in parts[2:]:
        out += p
    return out
