"""The process world: start-up, rank and size, and collectives on NumPy arrays.

Without ``mpiexec`` (or with ``mpiexec -n 1``) the world has one process and
``mpi4py`` is never imported: collectives are identities. Under a launcher
that starts more than one process (detected from its environment:
``PMI_SIZE`` for MPICH / Intel MPI, ``OMPI_COMM_WORLD_SIZE`` for Open MPI,
``MV2_COMM_WORLD_SIZE`` for MVAPICH) `init` imports ``mpi4py`` and uses
``MPI.COMM_WORLD``. Collectives use mpi4py's buffer API, non-blocking
(``Iallreduce``, ``Ibcast``, ``Iallgather``, ``Ibarrier``): arrays travel as
raw memory, never pickled, and each wait is bounded by ``init(timeout=...)``
(yscv/distributed/_wait.py).

At start-up with more than one rank, each rank gets ``cores // ranks on this
machine`` threads (at least one) for yscv's helper pool and for NumPy's
OpenBLAS, unless ``YSCV_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` /
``OMP_NUM_THREADS`` say otherwise: N ranks on N cores then do not fight over
the cores (see docs/scaling_out.md).
"""
from __future__ import annotations

import sys
import traceback

import numpy as np

from .. import runtime
from . import _wait

__all__ = ["init", "timeout", "is_initialized", "rank", "world_size", "local_world_size", "barrier",
           "all_reduce", "broadcast", "all_gather", "launched_world_size", "threads_per_rank"]

_INSTALL_HINT = ('pip install mpi4py mpich, or pip install -e ".[mpi]" from yscv\'s checkout (the mpich '
                 'wheel brings mpiexec; '
                 'no system MPI needed)')

_comm = None          # mpi4py's COMM_WORLD, or None in a world of one without mpi4py
_MPI = None           # the mpi4py.MPI module when in use
_rank = 0
_size = 1
_local_size = 1
_initialized = False
_threads = None       # threads per rank chosen by init (None: left alone)
_timeout = 1800.0     # seconds a collective may wait (None: forever); dist.init(timeout=)
_watch = None         # the deadline machinery (_wait.Watch) in a world of more than one
_seq = 0              # collectives this rank has started (named in timeout errors)

_OPS = ("sum", "mean", "max", "min")
# dtypes MPI reduces natively (mpi4py maps them from the buffer format)
_DTYPE_CHARS = "fdbhilqBHILQ"


def launched_world_size() -> int:
    """The number of processes the launcher started (1 without ``mpiexec``;
    read by `yscv.runtime.launcher_world_size`)."""
    return runtime.launcher_world_size()


DEFAULT_TIMEOUT = 1800.0


def init(timeout=DEFAULT_TIMEOUT) -> None:
    """Join the world (idempotent) and set the collectives' timeout. A world
    of one without ``mpiexec``.

    Args:
        timeout: seconds any collective (``all_reduce``, ``broadcast``,
            ``all_gather``, ``barrier``, the gradient averaging of
            ``DistributedDataParallel``, ``save_checkpoint``) may wait for
            the other ranks; then it raises `yscv.DistributedError`
            naming the collective and the ranks that did not arrive. None:
            wait forever (blocking MPI calls). Each call sets it (the
            accessors join the world without changing it; default 1800 s).

    Raises:
        ImportError: the launcher started more than one process but
            ``mpi4py`` is not installed (the message says how to install it).
        ValueError: ``timeout`` not a positive number or None.
    """
    global _timeout
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer,
                                                                 np.floating)) \
                or not 0 < float(timeout) < float("inf"):
            raise ValueError(f"init: timeout must be a positive number of seconds or None, "
                             f"got {timeout!r}")
        timeout = float(timeout)
    _join()
    _timeout = timeout


def timeout():
    """The collectives' timeout in seconds (None: unbounded); see `init`."""
    return _timeout


def _join() -> None:
    """Join the world once (what `init` does besides the timeout)."""
    global _comm, _MPI, _rank, _size, _local_size, _initialized, _watch
    if _initialized:
        return
    n = launched_world_size()
    if n <= 1 and "mpi4py.MPI" not in sys.modules:
        _initialized = True   # a world of one: mpi4py stays unimported
        return
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError(
            f"yscv.distributed: the launcher started {n} processes, but mpi4py is not "
            f"installed, so they cannot talk to each other. Install it with: {_INSTALL_HINT}"
        ) from exc
    if not MPI.Is_initialized():
        MPI.Init()
    comm = MPI.COMM_WORLD
    _MPI, _comm = MPI, comm
    _rank, _size = comm.Get_rank(), comm.Get_size()
    if _size > 1:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=_rank)
        _local_size = node.Get_size()
        node.Free()
        # arrival queries after a timeout travel on their own communicator
        _watch = _wait.Watch(MPI, comm.Dup(), _rank, _size)
        _install_abort_hook()
        _limit_threads(_local_size)
    _initialized = True


def _install_abort_hook() -> None:
    """An uncaught exception on one rank aborts every rank (the traceback is
    printed first) instead of leaving the others blocked in a collective.
    ``python -m mpi4py script.py`` does the same; this covers plain ``python``.
    As mpi4py's runner, it asks mpi4py to call ``MPI_Abort`` at interpreter
    exit, after the traceback was written and the streams flushed (an
    immediate Abort can lose the traceback on its way through mpiexec)."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
        finally:
            if _comm is not None and _size > 1:
                setter = getattr(_MPI, "_set_abort_status", None)
                if setter is not None:
                    setter(1)
                else:  # an mpi4py without it: abort now
                    sys.stderr.flush()
                    _comm.Abort(1)

    sys.excepthook = hook


# ------------------------------------------------------------------ threads
def threads_per_rank() -> int | None:
    """The thread count `init` chose per rank (cores on this machine //
    ranks on it; None in a world of one). ``YSCV_NUM_THREADS`` (or an earlier
    ``yscv.set_num_threads``) and ``OPENBLAS_NUM_THREADS`` /
    ``OMP_NUM_THREADS``, when set, win over it for yscv's pool and for
    OpenBLAS respectively."""
    return _threads


def _limit_threads(local_ranks: int) -> None:
    """Give each rank ``cores // ranks on this machine`` threads (yscv's
    region helpers and OpenBLAS, through `yscv.runtime`), except where
    the user chose a count."""
    global _threads
    per = max(1, runtime.usable_cores() // max(1, local_ranks))
    _threads = per
    blas = not runtime.blas_threads_set_by_user()
    if not runtime.threads_set_by_user():
        runtime.set_num_threads(per, blas=blas)
    elif blas:
        runtime.set_blas_threads(per)


# --------------------------------------------------------------- accessors
def is_initialized() -> bool:
    """Whether `init` has run."""
    return _initialized


def rank() -> int:
    """This process's rank, 0 .. world_size() - 1 (joins the world if needed)."""
    _join()
    return _rank


def world_size() -> int:
    """The number of processes (joins the world if needed)."""
    _join()
    return _size


def local_world_size() -> int:
    """The number of ranks on this machine."""
    _join()
    return _local_size


def barrier() -> None:
    """Wait until every rank has called it (bounded by ``init(timeout=)``)."""
    _join()
    if _size > 1:
        _run("barrier", lambda: _comm.Ibarrier())


# ------------------------------------------------------------- collectives
def _run(name: str, start) -> None:
    """Start a non-blocking collective (``start()`` returns its request) and
    wait for it with the timeout (yscv/distributed/_wait.py)."""
    global _seq
    _watch.check_usable(name)
    _seq += 1
    _watch.wait(start(), name, _seq, _timeout)


def _allreduce_inplace(buf: np.ndarray, mpi_op, name: str = "all_reduce") -> None:
    _run(name, lambda: _comm.Iallreduce(_MPI.IN_PLACE, buf, op=mpi_op))


def _check_array(fn: str, a, writeable: bool = True) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{fn}: expected a numpy array, got {type(a).__name__}")
    if a.dtype.char not in _DTYPE_CHARS:
        raise TypeError(f"{fn}: dtype {a.dtype} is not supported; use float32, float64 or a "
                        "fixed-size integer dtype")
    if not a.flags.c_contiguous:
        raise ValueError(f"{fn}: the array must be C-contiguous (it is reduced in place); "
                         "pass np.ascontiguousarray(a) and use the result")
    if writeable and not a.flags.writeable:
        raise ValueError(f"{fn}: the array is read-only; collectives work in place")
    return a


def all_reduce(a: np.ndarray, op: str = "sum") -> np.ndarray:
    """Reduce ``a`` over all ranks IN PLACE and return it; every rank gets the
    same bits. ``op``: "sum", "mean" (floating arrays only), "max", "min".
    Every rank must pass an array of the same shape and dtype."""
    if op not in _OPS:
        raise ValueError(f"all_reduce: op must be one of {_OPS}, got {op!r}")
    _check_array("all_reduce", a)
    if op == "mean" and a.dtype.kind != "f":
        raise TypeError(f"all_reduce: op='mean' needs a floating array, got {a.dtype}")
    _join()
    if _size == 1:
        return a
    mpi_op = {"sum": _MPI.SUM, "mean": _MPI.SUM, "max": _MPI.MAX, "min": _MPI.MIN}[op]
    _allreduce_inplace(a, mpi_op)
    if op == "mean":
        a /= a.dtype.type(_size)
    return a


def _check_root(fn: str, root) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)):
        raise TypeError(f"{fn}: root must be an int, got {root!r}")
    if not 0 <= root < _size:
        raise ValueError(f"{fn}: root {root} is not a rank of this world of {_size}")
    return int(root)


def broadcast(a: np.ndarray, root: int = 0) -> np.ndarray:
    """Overwrite ``a`` on every rank with rank ``root``'s array, in place; returns it."""
    _check_array("broadcast", a)
    _join()
    root = _check_root("broadcast", root)
    if _size > 1:
        _run("broadcast", lambda: _comm.Ibcast(a, root=root))
    return a


def all_gather(a: np.ndarray) -> list:
    """Every rank's ``a`` (same shape and dtype on every rank), as a list
    indexed by rank; ``a`` itself is not modified."""
    _check_array("all_gather", a, writeable=False)
    _join()
    if _size == 1:
        return [a.copy()]
    shapes = np.zeros((_size, 34), dtype=np.int64)
    mine = np.full(34, -1, dtype=np.int64)
    if a.ndim > 32:
        raise ValueError(f"all_gather: at most 32 axes, got {a.ndim}")
    mine[0], mine[1] = a.ndim, np.dtype(a.dtype).num
    mine[2:2 + a.ndim] = a.shape
    _run("all_gather", lambda: _comm.Iallgather(mine, shapes))
    if not (shapes == mine).all():
        bad = [(r, tuple(int(s) for s in shapes[r, 2:2 + shapes[r, 0]]))
               for r in range(_size) if not (shapes[r] == shapes[0]).all()]
        raise ValueError(f"all_gather: every rank must pass the same shape and dtype; rank 0 "
                         f"has {tuple(int(s) for s in shapes[0, 2:2 + shapes[0, 0]])}, "
                         f"differing ranks (rank, shape): {bad}")
    out = np.empty((_size,) + a.shape, dtype=a.dtype)
    _run("all_gather", lambda: _comm.Iallgather(a, out))
    return [out[r] for r in range(_size)]


def _all_gather_bytes(data: bytes, name: str = "all_gather") -> list:
    """Every rank's byte string (lengths may differ), over the buffer API."""
    _join()
    if _size == 1:
        return [bytes(data)]
    lens = np.zeros(_size, dtype=np.int64)
    mine = np.array([len(data)], dtype=np.int64)
    _run(name, lambda: _comm.Iallgather(mine, lens))
    width = int(lens.max()) if _size else 0
    buf = np.zeros(max(1, width), dtype=np.uint8)
    buf[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((_size, buf.size), dtype=np.uint8)
    _run(name, lambda: _comm.Iallgather(buf, out))
    return [out[r, :lens[r]].tobytes() for r in range(_size)]


def _broadcast_status(ok: bool, message: str = "", root: int = 0,
                      name: str = "broadcast") -> tuple:
    """Rank ``root``'s (ok, message) on every rank (message cut to 4000 bytes)."""
    if _size == 1:
        return ok, message
    buf = np.zeros(4096, dtype=np.uint8)
    if _rank == root:
        raw = message.encode("utf-8", "replace")[:4000]
        buf[0] = 1 if ok else 0
        buf[1:5] = np.frombuffer(np.array([len(raw)], dtype="<i4").tobytes(), dtype=np.uint8)
        buf[8:8 + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    _run(name, lambda: _comm.Ibcast(buf, root=root))
    n = int(np.frombuffer(buf[1:5].tobytes(), dtype="<i4")[0])
    return bool(buf[0]), buf[8:8 + n].tobytes().decode("utf-8", "replace")


def _format_exc(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()
