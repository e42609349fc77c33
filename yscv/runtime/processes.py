"""Processes: the world size an MPI launcher announced, and the start method
and preloads of worker processes."""
from __future__ import annotations

import os
import sys

from .environment import _ENV

_WORLD_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_LOCAL_VARS = ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", "MPI_LOCAL_SIZE",
               "OMPI_COMM_WORLD_LOCAL_SIZE")


def _first_int(names) -> int | None:
    for var in names:
        raw = _ENV.get(var, "")
        if raw:
            try:
                return int(raw)
            except ValueError:
                continue
    return None


def launcher_world_size() -> int:
    """Processes an MPI launcher started (from its environment), 1 without one."""
    n = _first_int(_WORLD_VARS)
    return n if n and n > 0 else 1


def launcher_local_size() -> int | None:
    """Processes the launcher started on this machine, when it says so."""
    return _first_int(_LOCAL_VARS)


# ----------------------------------------------------------------- worker processes
def worker_context():
    """The multiprocessing context ``DataLoader`` workers start with by
    default: "forkserver" where the platform has it (POSIX), else the
    platform's default ("spawn" on Windows). Not "fork": forking while
    another thread of the program is inside OpenBLAS can deadlock the child
    or leave the parent's BLAS threads dead (docs/data.md, "Start method").
    """
    import multiprocessing
    if "forkserver" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context()


def add_forkserver_preload(*modules: str) -> None:
    """Have the multiprocessing forkserver import ``modules`` when it starts,
    besides the modules it preloads already (``"__main__"`` by default), so
    that each process forked from it has them without importing them again.

    The forkserver is a new interpreter that imports by the default search
    path (Python 3.11 ignores the ``sys.path`` changes of this process), so a
    module is added only when a new interpreter finds its package where this
    process did (else a worker would run another copy of yscv, or NumPy).
    Does nothing once the forkserver runs.
    """
    from multiprocessing import forkserver
    server = getattr(forkserver, "_forkserver", None)
    current = getattr(server, "_preload_modules", None)
    if getattr(server, "_forkserver_pid", None) is not None or not isinstance(current, list):
        return
    extra = _found_alike([m for m in modules if m not in current])
    if extra:
        forkserver.set_forkserver_preload(current + extra)


_FIND_SPECS = ("import importlib.util, sys\n"
               "for name in sys.argv[1:]:\n"
               "    spec = importlib.util.find_spec(name)\n"
               "    print(getattr(spec, 'origin', None) or '')\n")


def _found_alike(modules: list) -> list:
    """The modules whose top-level package a new interpreter (same
    executable, environment and directory) finds in the file this process
    imported it from."""
    import subprocess
    tops = sorted({m.split(".")[0] for m in modules})
    if not tops:
        return []
    try:
        out = subprocess.run([sys.executable, "-c", _FIND_SPECS, *tops], capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return []

    def where(path):
        return os.path.realpath(os.path.abspath(path)) if path else None
    same = {t for t, origin in zip(tops, out)
            if where(origin) is not None
            and where(origin) == where(getattr(sys.modules.get(t), "__file__", None))}
    return [m for m in modules if m.split(".")[0] in same]


# ------------------------------------------------------------ at import
