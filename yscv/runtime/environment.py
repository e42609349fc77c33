"""The environment as yscv read it at import, and facts about this machine's
resources: the one place of the package that reads ``os.environ``."""
from __future__ import annotations

import os

#: the variables yscv reads, as they were at import
_ENV = {k: os.environ.get(k, "").strip() for k in (
    "YSCV_NUM_THREADS", "YSCV_GEMM", "YSCV_MALLOC_TUNING",
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE",
    "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
    "MPI_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_SIZE",
    "XDG_CACHE_HOME", "HOME", "NUMBA_CACHE_DIR")}


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def kernel_cache_dir() -> str:
    """The per-user kernel cache used when the package folder is read-only:
    ``$XDG_CACHE_HOME/yscv/numba`` (an absolute ``XDG_CACHE_HOME``), else
    ``~/.cache/yscv/numba`` (``HOME``, else the password database's home)."""
    base = _ENV["XDG_CACHE_HOME"]
    if not os.path.isabs(base):
        home = _ENV["HOME"] or os.path.expanduser("~")
        base = os.path.join(home, ".cache")
    return os.path.join(base, "yscv", "numba")


def env(name: str) -> str:
    """The value a yscv environment variable had at import ('' when unset)."""
    return _ENV.get(name, "")
