"""Process-wide settings: threads, the GEMM policy, allocator tuning.

This is the one package that reads the environment (once, at import:
`environment`); every other part of yscv asks it. One module per concept:
``threads``, ``gemm``, ``blas`` (and ``blas_gate``), ``cpu``, ``fpu``,
``memory``, ``processes``. The settings and their variables:

===================  ======================  =====================================
setting              environment             API
===================  ======================  =====================================
threads              ``YSCV_NUM_THREADS``    `set_num_threads`,
                                             `get_num_threads`
GEMM policy          ``YSCV_GEMM``           `set_gemm`, `get_gemm`
allocator tuning     ``YSCV_MALLOC_TUNING``  `malloc_tuning`,
                                             `tune_malloc_once`
denormals (FTZ/DAZ)  --                      `set_flush_denormal`,
                                             `flush_denormal`
launcher world size  ``PMI_SIZE``,           `launcher_world_size`
                     ``OMPI_COMM_WORLD_SIZE``,
                     ...
kernel cache         ``XDG_CACHE_HOME``,     `kernel_cache_dir`
fallback             ``HOME``
===================  ======================  =====================================

Kernel cache: Numba keeps compiled kernels next to their module
(``yscv/kernels/__pycache__``), or under ``NUMBA_CACHE_DIR`` when that is
set (Numba reads it). When the package folder is read-only (a system-wide
or container installation) yscv/kernels/_jit.py caches in the per-user
directory `kernel_cache_dir` instead; when that is not writable
either, kernels compile in every process (with one warning).

Threads: yscv's region helpers (yscv/compute/regions.py) use
``get_num_threads() - 1`` helper threads (at most 3). `set_num_threads`
also sets NumPy's OpenBLAS thread count when NumPy ships OpenBLAS, so one
call makes a process single-threaded (what ``mpiexec`` ranks want);
``YSCV_NUM_THREADS=n`` at import is that call with ``n``.
`hold_one_blas_thread` puts OpenBLAS alone on one thread for a while
(the fit loop does for models with convolutions; docs/training.md, "Threads").

GEMM policy (``YSCV_GEMM``: a policy name, or ``0`` for ``"blas"`` and
``1`` for ``"tiles"``): ``"auto"`` (the default) computes each 2-d product
the fastest way among those with NumPy's BLAS's bits, measured once per
shape class on this machine (yscv/compute/gemm_choice.py); ``"fastest"``
measures yscv's register-blocked tiles and other roundings too; ``"tiles"``
and ``"blas"`` fix the choice without measuring (see `set_gemm`).

Allocator: glibc returns freed blocks above its mmap threshold to the OS, so
a step that allocates fresh activation arrays page-faults them in again
every step. The first ``Graph()`` raises glibc's mmap threshold to 64 MiB
and its trim threshold to 256 MiB (the cost: up to 256 MiB of freed memory
may stay mapped); ``YSCV_MALLOC_TUNING=0`` or ``malloc_tuning(False)``
before it opts out.
"""
from __future__ import annotations

# the settings' API, and the names the rest of yscv asks for (one import
# each: ``runtime.get_num_threads()``)
from .blas import (blas_info, blas_threads, blas_threads_set_by_user, blas_workers_running,  # noqa: F401
                   set_blas_threads, stop_blas_workers)
from .cpu import cpu_info, machine_family, machine_line  # noqa: F401
from .environment import _ENV, env, kernel_cache_dir, physical_memory, usable_cores  # noqa: F401
from .fpu import (apply_flush_denormal, flush_denormal, fp_generation, mxcsr,  # noqa: F401
                  set_flush_denormal)
from .gemm import get_gemm, set_gemm  # noqa: F401
from .memory import malloc_tuned, malloc_tuning, tune_malloc_once  # noqa: F401
from .processes import (_found_alike, add_forkserver_preload, launcher_local_size,  # noqa: F401
                        launcher_world_size, worker_context)
from .threads import (begin_alone, end_alone, enter_walk_node, get_num_threads,  # noqa: F401
                      hold_one_blas_thread, hold_single_threaded_kernels, hold_walk_threads,
                      kernel_threads, leave_walk_node, set_num_threads, threads_set_by_user)

__all__ = ["get_num_threads", "set_num_threads", "get_gemm", "set_gemm", "malloc_tuning",
           "tune_malloc_once", "usable_cores", "launcher_world_size", "set_blas_threads",
           "blas_threads", "kernel_cache_dir", "set_flush_denormal", "flush_denormal"]
