"""yscv's thread count and the holds that change it for a while: region
kernels on one thread, OpenBLAS on one thread, a parallel backward's walk
threads (yscv/runtime/blas_gate.py)."""
from __future__ import annotations

import threading

from .blas import blas_threads, set_blas_threads
from .blas_gate import GATE
from .environment import _ENV, usable_cores

_lock = threading.Lock()
_single_depth = 0          # hold_single_threaded_kernels(True) calls not yet undone
_blas_depth = 0            # holds of OpenBLAS at one thread not yet undone (both kinds)
_blas_saved = None         # OpenBLAS's thread count to restore
_one_holds = 0             # hold_one_blas_thread(True) calls not yet undone
_thread_state = threading.local()   # .alone: see _alone_stack

def _threads_from_env() -> int | None:
    raw = _ENV["YSCV_NUM_THREADS"]
    if not raw:
        return None
    try:
        n = int(raw)
        if n >= 1:
            return n
    except ValueError:
        pass
    import warnings

    warnings.warn(f"YSCV_NUM_THREADS={raw!r} is not an integer >= 1; ignored",
                  RuntimeWarning, stacklevel=3)
    return None


_num_threads = _threads_from_env()
_threads_from_user = _num_threads is not None


def get_num_threads() -> int:
    """Threads yscv uses for its region kernels (the caller and helpers)."""
    return _num_threads if _num_threads is not None else usable_cores()


def kernel_threads() -> int:
    """Threads a region kernel may use now: `get_num_threads`, or 1
    while a parallel backward runs its branches on threads (see
    `hold_walk_threads`) or `hold_single_threaded_kernels` holds."""
    return 1 if _single_depth else get_num_threads()


def hold_single_threaded_kernels(hold: bool) -> None:
    """``True``: from now on yscv's region kernels and NumPy's OpenBLAS run
    on the calling thread only; ``False`` undoes one ``True`` (the last one
    restores OpenBLAS's thread count). For a caller whose own threads are
    the parallelism. The parallel backward does not use it: it holds
    `hold_walk_threads`, which leaves OpenBLAS's count alone, because
    the bits of a product can depend on that count."""
    with _lock:
        if _step_single_depth(hold):
            _hold_blas(hold)


def hold_one_blas_thread(hold: bool) -> None:
    """``True``: from now on NumPy's OpenBLAS runs on one thread, while
    yscv's region kernels keep theirs; ``False`` undoes one ``True`` (the
    last hold of either kind restores OpenBLAS's thread count). The fit loop
    holds it for models whose convolutions split over the cores
    (yscv/train/trainer.py): after a product on two threads OpenBLAS's
    worker spins on the second core for up to ~0.1 s, where the region
    helper needs it (docs/engine.md, "Two cores").

    Inside a backward rule of a parallel walk, a hold that lowers the count
    runs alone: it waits until the walk's other rules are done and they wait
    until it is undone, so no product of another branch starts on one thread
    where the serial walk runs it on the count (yscv/runtime/blas_gate.py)."""
    global _one_holds
    if hold:
        alone = (GATE.in_node() and _blas_depth == 0 and (blas_threads() or 1) > 1
                 and GATE.begin_exclusive())
        with _lock:
            _hold_blas(True)
            _one_holds += 1
        _alone_stack().append(alone)
        return
    with _lock:
        if _one_holds == 0:
            return
        _one_holds -= 1
        _hold_blas(False)
    stack = _alone_stack()
    if stack and stack.pop():
        GATE.end_exclusive()


def _alone_stack() -> list:
    """The calling thread's holds of OpenBLAS at one thread: whether each
    one runs alone (yscv/runtime/blas_gate.py)."""
    stack = getattr(_thread_state, "alone", None)
    if stack is None:
        stack = _thread_state.alone = []
    return stack


def enter_walk_node() -> None:
    """A parallel walk's thread starts a backward rule (yscv/runtime/blas_gate.py)."""
    GATE.enter()


def leave_walk_node() -> None:
    """... and is done with it."""
    GATE.leave()


def begin_alone() -> bool:
    """Inside a backward rule of a parallel walk: wait until the walk's other
    rules are done and keep them waiting until `end_alone` (True);
    elsewhere False at once. For work that takes a lock a rule may wait for
    while it changes OpenBLAS's count (the GEMM calibration)."""
    return GATE.begin_exclusive()


def end_alone() -> None:
    """End the section a True `begin_alone` started."""
    GATE.end_exclusive()


def hold_walk_threads(hold: bool) -> None:
    """``True``: from now on yscv's region kernels run on the calling thread
    only, and each backward rule on a walk thread counts as a node of
    yscv/runtime/blas_gate.py's gate; ``False`` undoes one ``True``. The parallel
    backward holds it while its own threads are the parallelism. It leaves
    OpenBLAS's thread count as it is: the bits of a product can depend on
    that count (OpenBLAS's AVX2 kernels), and the walk gives the serial
    walk's bits."""
    with _lock:
        if _step_single_depth(hold):
            GATE.open(hold)


def _step_single_depth(hold: bool) -> bool:
    """One more (``hold``) or one less hold of the region kernels at one
    thread; False when there is none to undo. Under ``_lock``."""
    global _single_depth
    if hold:
        _single_depth += 1
    elif _single_depth > 0:
        _single_depth -= 1
    else:
        return False
    return True


def _hold_blas(hold: bool) -> None:
    """One more (``hold``) or one less hold of OpenBLAS at one thread; the
    first saves and lowers the count, the last restores it. Under ``_lock``."""
    global _blas_depth, _blas_saved
    if hold:
        _blas_depth += 1
        if _blas_depth == 1:
            n = blas_threads()
            _blas_saved = n if n is not None and n > 1 else None
            if _blas_saved is not None:
                set_blas_threads(1)
    elif _blas_depth > 0:
        _blas_depth -= 1
        if _blas_depth == 0 and _blas_saved is not None:
            set_blas_threads(_blas_saved)
            _blas_saved = None


def threads_set_by_user() -> bool:
    """Whether ``YSCV_NUM_THREADS`` or `set_num_threads` chose the count."""
    return _threads_from_user


def set_num_threads(n: int, blas: bool = True) -> None:
    """Use ``n`` threads (``n >= 1``) for yscv's kernels and, with ``blas``,
    for NumPy's OpenBLAS. Results are the same bits for any ``n``."""
    global _num_threads, _threads_from_user
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: n must be an int >= 1, got {n!r}")
    with _lock:
        _num_threads = n
        _threads_from_user = True
    if blas:
        set_blas_threads(n)


def _apply_env_threads() -> None:
    """``YSCV_NUM_THREADS=n`` at import does what ``set_num_threads(n)`` does
    (yscv's region kernels and NumPy's OpenBLAS), so the variable and the
    call are one setting."""
    if _num_threads is not None:
        set_num_threads(_num_threads)

_apply_env_threads()
