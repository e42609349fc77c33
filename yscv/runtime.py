"""Process-wide settings: threads, the GEMM policy, allocator tuning.

This is the one module that reads the environment (once, at import); every
other part of yscv asks it. The settings and their variables:

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

import os
import sys
import threading

from .blas_gate import GATE

__all__ = ["get_num_threads", "set_num_threads", "get_gemm", "set_gemm", "malloc_tuning",
           "tune_malloc_once", "usable_cores", "launcher_world_size", "set_blas_threads",
           "blas_threads", "kernel_cache_dir", "set_flush_denormal", "flush_denormal"]

#: the variables yscv reads, as they were at import
_ENV = {k: os.environ.get(k, "").strip() for k in (
    "YSCV_NUM_THREADS", "YSCV_GEMM", "YSCV_MALLOC_TUNING",
    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE",
    "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
    "MPI_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_SIZE",
    "XDG_CACHE_HOME", "HOME", "NUMBA_CACHE_DIR")}

_GEMM_POLICIES = ("auto", "fastest", "tiles", "blas")
_lock = threading.Lock()
_single_depth = 0          # hold_single_threaded_kernels(True) calls not yet undone
_blas_depth = 0            # holds of OpenBLAS at one thread not yet undone (both kinds)
_blas_saved = None         # OpenBLAS's thread count to restore
_one_holds = 0             # hold_one_blas_thread(True) calls not yet undone
_thread_state = threading.local()   # .alone: see _alone_stack


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
    where the serial walk runs it on the count (yscv/blas_gate.py)."""
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
    one runs alone (yscv/blas_gate.py)."""
    stack = getattr(_thread_state, "alone", None)
    if stack is None:
        stack = _thread_state.alone = []
    return stack


def enter_walk_node() -> None:
    """A parallel walk's thread starts a backward rule (yscv/blas_gate.py)."""
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
    yscv/blas_gate.py's gate; ``False`` undoes one ``True``. The parallel
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


def get_gemm() -> str:
    """The GEMM policy: "auto", "fastest", "tiles" or "blas" (see the module
    docstring)."""
    return _gemm


def set_gemm(policy: str) -> None:
    """Set the GEMM policy for 2-d matrix products (matmul and its
    gradients):

    * ``"auto"`` (default): per shape class, the fastest of the ways that
      give the same bits as NumPy's BLAS, measured once on this machine and
      cached beside the kernel cache (yscv/compute/gemm_choice.py);
    * ``"fastest"``: the same measurement over every way, yscv's GEMM tiles
      included, which may round differently (last bits);
    * ``"tiles"``: yscv's tiles for float32 products of at least 2^18
      multiply-adds, unmeasured;
    * ``"blas"``: NumPy's BLAS by a fixed rule, unmeasured.
    """
    global _gemm
    if policy not in _GEMM_POLICIES:
        raise ValueError(f"set_gemm: policy must be one of {_GEMM_POLICIES}, got {policy!r}")
    _gemm = policy


def _gemm_from_env() -> str:
    raw = _ENV["YSCV_GEMM"]
    policy = {"0": "blas", "1": "tiles", "": "auto"}.get(raw, raw)
    if policy in _GEMM_POLICIES:
        return policy
    import warnings

    warnings.warn(f"YSCV_GEMM={raw!r} is not a GEMM policy {_GEMM_POLICIES} (or 0 / 1); "
                  "ignored", RuntimeWarning, stacklevel=3)
    return "auto"


_gemm = _gemm_from_env()

# ------------------------------------------------------------------ allocator
_malloc_enabled = _ENV["YSCV_MALLOC_TUNING"] != "0"
_malloc_done = False
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def malloc_tuning(enabled: bool) -> None:
    """Allow (True) or forbid (False) the allocator tuning of the first Graph."""
    global _malloc_enabled
    _malloc_enabled = bool(enabled)


def malloc_tuned() -> bool:
    """Whether `tune_malloc_once` has already run in this process."""
    return _malloc_done


def tune_malloc_once() -> bool:
    """Apply the glibc thresholds once (Linux glibc only); True if applied."""
    global _malloc_done
    if _malloc_done:
        return False
    _malloc_done = True
    if not _malloc_enabled or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 64 << 20) == 1
        ok = (libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20) == 1) and ok
        return ok
    except (OSError, AttributeError):
        return False  # not glibc (musl, ...): nothing to tune


# --------------------------------------------------------------------- BLAS
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


def cpu_info() -> dict:
    """``{"model": ..., "isa": "avx512f avx2 fma"}`` from /proc/cpuinfo (the
    SIMD extensions that matter to the kernels and to BLAS), or what the
    platform module knows elsewhere."""
    import platform

    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = val.strip()
                elif key == "flags" and not flags:
                    flags = set(val.split())
    except OSError:
        pass
    isa = " ".join(f for f in ("avx512f", "avx512_bf16", "amx_tile", "avx2", "fma", "neon", "asimd")
                   if f in flags)
    return {"model": model, "isa": isa}


def machine_line() -> str:
    """One line naming the machine a figure was measured on: CPU model and
    ISA, cores, NumPy's BLAS and the kernels it runs (and whether
    ``OPENBLAS_CORETYPE`` forces them), BLAS and yscv threads."""
    cpu, blas = cpu_info(), blas_info()
    forced = _ENV["OPENBLAS_CORETYPE"]
    config = blas["config"].split()
    name = " ".join(config[:2]) if config else "BLAS unknown"
    core = blas["core"] + (f" (forced by OPENBLAS_CORETYPE={forced})" if forced else "")
    return (f"{cpu['model']} [{cpu['isa']}], {usable_cores()} cores; NumPy {_numpy_version()} "
            f"with {name}, {core or 'core unknown'} kernels, {blas_threads()} BLAS threads; "
            f"yscv {get_num_threads()} threads")


_X86_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "hygon",
                "CentaurHauls": "centaur"}
#: ARM's "CPU implementer" codes, and a few of Arm's own "CPU part" codes
_ARM_IMPLEMENTERS = {0x41: "arm", 0x42: "broadcom", 0x43: "cavium", 0x46: "fujitsu",
                     0x48: "hisilicon", 0x4E: "nvidia", 0x50: "apm", 0x51: "qualcomm",
                     0x61: "apple", 0x6D: "microsoft", 0xC0: "ampere"}
_ARM_PARTS = {0xD0C: "neoverse-n1", 0xD40: "neoverse-v1", 0xD49: "neoverse-n2",
              0xD4F: "neoverse-v2", 0xD8E: "neoverse-n3", 0xD84: "neoverse-v3"}
#: words of a model name that name no family (vendors, marks, hypervisors)
_NOT_A_FAMILY = {"intel", "amd", "gen", "cpu", "processor", "common", "kvm", "qemu", "virtual",
                 "version", "genuine", "authentic", "hygon", "centaur", "with", "radeon",
                 "graphics", "mobile"}


def _first_cpu_fields(text: str) -> dict:
    """``key -> value`` of the first processor's lines of a /proc/cpuinfo text
    (later processors repeat them)."""
    fields: dict = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        key = key.strip()
        if not line.strip():
            if "processor" in fields and len(fields) > 1:
                break
            continue
        if sep and key not in fields:
            fields[key] = val.strip()
    return fields


def _isa_level(flags: set) -> str:
    """The widest SIMD level the kernels and BLAS can use, from the CPU's
    flags (x86 ``flags`` or ARM ``Features``)."""
    for flag, level in (("avx512f", "avx512"), ("avx2", "avx2"), ("avx", "avx"),
                        ("sse4_2", "sse4"), ("sve2", "sve2"), ("sve", "sve"),
                        ("asimd", "neon"), ("neon", "neon")):
        if flag in flags:
            return level
    return ""


def _slug(*words: str) -> str:
    import re

    text = "-".join(w for w in words if w).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def machine_family(cpuinfo: str | None = None) -> str:
    """A short name for the kind of machine a benchmark ran on: vendor,
    model family and SIMD level, e.g. ``"amd-epyc-avx512"``,
    ``"intel-xeon-avx512"``, ``"intel-core-avx2"``,
    ``"arm-neoverse-v1-sve"`` (lower case letters, digits and hyphens).

    ``cpuinfo`` is the text of /proc/cpuinfo (read when None); only the
    first processor's lines count. Where there is none (macOS, Windows)
    the name is the platform's system and machine, e.g. ``"darwin-arm64"``."""
    import platform
    import re

    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    fields = _first_cpu_fields(cpuinfo)
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    if "CPU implementer" in fields:
        try:
            implementer = int(fields["CPU implementer"], 16)
            part = int(fields.get("CPU part", "0"), 16)
        except ValueError:
            implementer, part = -1, 0
        vendor = _ARM_IMPLEMENTERS.get(implementer, f"implementer-{implementer:x}")
        family = _ARM_PARTS.get(part, f"part-{part:x}") if implementer == 0x41 else f"part-{part:x}"
        return _slug(vendor, family, _isa_level(flags))
    if "vendor_id" in fields or "model name" in fields:
        vendor_id = fields.get("vendor_id", "")
        vendor = _X86_VENDORS.get(vendor_id, vendor_id)
        model = re.sub(r"\((r|tm)\)", " ", fields.get("model name", ""), flags=re.IGNORECASE)
        words = [w for w in re.split(r"[^A-Za-z0-9]+", model.lower())
                 if w.isalpha() and w not in _NOT_A_FAMILY]
        return _slug(vendor or "cpu", words[0] if words else "cpu", _isa_level(flags))
    return _slug(platform.system() or "unknown", platform.machine())


def _numpy_version() -> str:
    import numpy as np

    return np.__version__


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


# --------------------------------------------------- denormals (FTZ / DAZ)
#: MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) bits
_FTZ_DAZ = 0x8040
#: fenv_t of glibc on x86-64: the x87 environment (28 bytes), then MXCSR
_FENV_BYTES, _MXCSR_OFFSET = 32, 28
_fenv_fns = None
_flush = False
_fp_generation = 0           # counts set_flush_denormal calls: helpers compare it


def _fenv():
    """(fegetenv, fesetenv) of glibc's libm on x86-64 Linux, or None."""
    global _fenv_fns
    if _fenv_fns is None:
        _fenv_fns = ()
        import platform
        if sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64"):
            import ctypes
            try:
                libm = ctypes.CDLL("libm.so.6")
                get_fn, set_fn = libm.fegetenv, libm.fesetenv
            except (OSError, AttributeError):
                pass
            else:
                get_fn.argtypes = set_fn.argtypes = [ctypes.c_void_p]
                get_fn.restype = set_fn.restype = ctypes.c_int
                _fenv_fns = (get_fn, set_fn)
    return _fenv_fns or None


def mxcsr() -> int | None:
    """The calling thread's MXCSR register (None where `set_flush_denormal`
    is not supported)."""
    fns = _fenv()
    if fns is None:
        return None
    import ctypes
    buf = ctypes.create_string_buffer(_FENV_BYTES)
    fns[0](buf)
    return int.from_bytes(buf.raw[_MXCSR_OFFSET:_MXCSR_OFFSET + 4], "little")


def apply_flush_denormal() -> None:
    """Set the calling thread's FTZ and DAZ bits to the process setting
    (`set_flush_denormal`); yscv's helper threads call it when the
    setting changed since their last region."""
    fns = _fenv()
    if fns is None:
        return
    import ctypes
    buf = ctypes.create_string_buffer(_FENV_BYTES)
    fns[0](buf)
    old = int.from_bytes(buf.raw[_MXCSR_OFFSET:_MXCSR_OFFSET + 4], "little")
    new = (old | _FTZ_DAZ) if _flush else (old & ~_FTZ_DAZ)
    if new != old:
        ctypes.memmove(ctypes.addressof(buf) + _MXCSR_OFFSET, new.to_bytes(4, "little"), 4)
        fns[1](buf)


def fp_generation() -> int:
    """How many times `set_flush_denormal` changed the setting."""
    return _fp_generation


def flush_denormal() -> bool:
    """Whether `set_flush_denormal` turned flushing on."""
    return _flush


def _restart_blas_threads() -> None:
    """Stop NumPy's OpenBLAS worker threads (``blas_thread_shutdown_``, what
    OpenBLAS itself does around ``fork``); OpenBLAS starts new ones at its
    next threaded call, and a new thread starts with the MXCSR of the thread
    that creates it (Linux copies it on ``clone``)."""
    fns = _openblas()
    if fns is not None and fns[2] is not None:
        fns[2]()


def set_flush_denormal(on: bool) -> bool:
    """Flush subnormal floats to zero (``True``) or not (``False``, the
    default), as ``torch.set_flush_denormal``: sets the FTZ and DAZ bits of
    MXCSR, so subnormal results become 0 and subnormal inputs read as 0 in
    every SSE/AVX operation (NumPy, BLAS, yscv's kernels). This changes
    results (values below ~1.2e-38 in float32 become 0) and avoids the
    slow microcode path x86 cores take for each subnormal operand.

    It applies to the calling thread at once, to yscv's region helpers at
    their next region, to threads created afterwards (the parallel
    backward's), and to NumPy's OpenBLAS threads, which are stopped and
    restarted by OpenBLAS at its next threaded product. Other threads of the
    program keep their own setting. Returns whether it is supported (x86-64
    Linux with glibc); elsewhere it does nothing and returns False."""
    global _flush, _fp_generation
    if not isinstance(on, bool):
        raise TypeError(f"set_flush_denormal: on must be a bool, got {type(on).__name__}")
    if _fenv() is None:
        return False
    with _lock:
        _flush = on
        _fp_generation += 1
    apply_flush_denormal()
    _restart_blas_threads()
    return True


# ----------------------------------------------------------------- launcher
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
def _apply_env_threads() -> None:
    """``YSCV_NUM_THREADS=n`` at import does what ``set_num_threads(n)`` does
    (yscv's region kernels and NumPy's OpenBLAS), so the variable and the
    call are one setting."""
    if _num_threads is not None:
        set_num_threads(_num_threads)


_apply_env_threads()
