"""NumPy's BLAS: which OpenBLAS it loaded and the kernels it runs, and its
thread count."""
from __future__ import annotations

import os

from .environment import _ENV

_blas_fns = None


def _server_vars(lib, ctypes):
    """OpenBLAS's thread server variables ``(blas_server_avail,
    blas_num_threads, blas_cpu_number)`` as ctypes ints, or None when the
    library does not export all three: whether its worker threads exist, how
    many it starts (with the caller), and the count its calls use."""
    try:
        return tuple(ctypes.c_int.in_dll(lib, name) for name in
                     ("blas_server_avail", "blas_num_threads", "blas_cpu_number"))
    except ValueError:
        return None


def _openblas():
    """(set, get) thread-count functions of the OpenBLAS NumPy loaded, its
    ``blas_thread_shutdown_`` (or None) and its server variables
    (`_server_vars`, or None), or None."""
    global _blas_fns
    if _blas_fns is not None:
        return _blas_fns or None
    import ctypes
    import glob

    import numpy as np

    root = os.path.dirname(os.path.dirname(np.__file__))
    found = ()
    for pat in ("numpy.libs/*openblas*", "numpy/.dylibs/*openblas*", "numpy.libs/*blas*"):
        for path in sorted(glob.glob(os.path.join(root, pat))):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""),
                                   ("openblas", "64_"), ("openblas", "")):
                try:
                    set_fn = getattr(lib, f"{prefix}_set_num_threads{suffix}")
                    get_fn = getattr(lib, f"{prefix}_get_num_threads{suffix}")
                except AttributeError:
                    continue
                set_fn.argtypes, set_fn.restype = [ctypes.c_int], None
                get_fn.argtypes, get_fn.restype = [], ctypes.c_int
                stop_fn = getattr(lib, "blas_thread_shutdown_", None)  # see _restart_blas_threads
                if stop_fn is not None:
                    stop_fn.argtypes, stop_fn.restype = [], ctypes.c_int
                found = (set_fn, get_fn, stop_fn, _server_vars(lib, ctypes) if stop_fn else None)
                break
            if found:
                break
        if found:
            break
    _blas_fns = found
    return found or None


def blas_info() -> dict:
    """NumPy's BLAS as OpenBLAS reports it: ``{"config": "OpenBLAS 0.3.31
    ... SkylakeX ...", "core": "SkylakeX"}`` (the kernels it runs, which
    ``OPENBLAS_CORETYPE`` can force), or empty strings when NumPy's BLAS is
    not an OpenBLAS found by `_openblas`."""
    import ctypes
    import glob

    import numpy as np

    root = os.path.dirname(os.path.dirname(np.__file__))
    out = {"config": "", "core": ""}
    for path in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for key, stem in (("config", "get_config"), ("core", "get_corename")):
            for name in (f"scipy_openblas_{stem}64_", f"scipy_openblas_{stem}",
                         f"openblas_{stem}64_", f"openblas_{stem}"):
                fn = getattr(lib, name, None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    out[key] = fn().decode(errors="replace").strip()
                    break
        if out["config"]:
            break
    return out


def set_blas_threads(n: int) -> bool:
    """Set NumPy's OpenBLAS thread count (through ctypes); False when NumPy
    does not ship OpenBLAS (set that BLAS's variable before NumPy loads)."""
    fns = _openblas()
    if fns is None:
        return False
    server = fns[3]
    if server is not None and not server[0].value and 1 <= int(n) <= server[1].value:
        # no workers now (`stop_blas_workers`): OpenBLAS's setter would start
        # them, and a new worker spins ~0.1 s; the count alone is what a
        # call reads, and the next threaded call starts the workers itself
        server[2].value = int(n)
        return True
    fns[0](int(n))
    return True


def blas_threads() -> int | None:
    """NumPy's OpenBLAS thread count (None when no OpenBLAS was found)."""
    fns = _openblas()
    return None if fns is None else int(fns[1]())


def blas_threads_set_by_user() -> bool:
    """Whether ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` was set."""
    return bool(_ENV["OPENBLAS_NUM_THREADS"] or _ENV["OMP_NUM_THREADS"])


def _restart_blas_threads() -> None:
    """Stop NumPy's OpenBLAS worker threads (``blas_thread_shutdown_``, what
    OpenBLAS itself does around ``fork``); OpenBLAS starts new ones at its
    next threaded call, and a new thread starts with the MXCSR of the thread
    that creates it (Linux copies it on ``clone``)."""
    fns = _openblas()
    if fns is not None and fns[2] is not None:
        fns[2]()


def blas_workers_running() -> bool:
    """Whether NumPy's OpenBLAS has worker threads now (False when it has
    none, or when its server cannot be seen)."""
    fns = _openblas()
    return bool(fns is not None and fns[3] is not None and fns[3][0].value)


def stop_blas_workers() -> bool:
    """Stop NumPy's OpenBLAS worker threads if it has any; True if it did.

    After a product on two threads or more, OpenBLAS's workers spin (with
    ``sched_yield``) for up to ~0.1 s, waiting for the next product, on the
    cores yscv's region helpers need (docs/engine.md, "Two cores"); a
    stopped worker takes no core, and OpenBLAS starts new ones at its next
    threaded call (~60 us). Results never change: the thread count stays
    as it is. The caller must know that no other thread is inside an
    OpenBLAS call (a worker stopped mid-call would never be joined):
    yscv/compute/regions.py calls it only when its own threads are the only
    other threads of the process."""
    fns = _openblas()
    if fns is None or fns[2] is None or fns[3] is None or not fns[3][0].value:
        return False
    fns[2]()
    return True
