"""Denormals: the FTZ and DAZ bits of MXCSR (`set_flush_denormal`)."""
from __future__ import annotations

import sys
import threading

from .blas import _restart_blas_threads

_lock = threading.Lock()
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
