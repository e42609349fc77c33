"""NumPy's BLAS: which OpenBLAS it loaded and the kernels it runs, and its
thread count."""
from __future__ import annotations

import os

from .environment import _ENV

_blas_fns = None


def _openblas():
    """(set, get) thread-count functions of the OpenBLAS NumPy loaded and its
    ``blas_thread_shutdown_`` (or None), or None."""
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
                found = (set_fn, get_fn, stop_fn)
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
